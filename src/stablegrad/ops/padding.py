"""Padding, numpy.pad: every mode but "empty", with NumPy's forms of the per-axis arguments.

Axes are padded one after the other, as NumPy pads them, so a corner takes the value the
last axis padded gives it (and the statistics of a later axis see the padding of earlier
ones).  Each mode is written with ordinary ops: a constant block, a gather of x
("edge", "reflect", "symmetric", "wrap"), a ramp from x's edge ("linear_ramp"), or a
statistic of x's first or last entries ("maximum", "minimum", "mean", "median"), so
every gradient follows from theirs.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..graph.basic import Constant, Variable
from . import reduction
from .base import as_operands
from .elementwise import astype, floor, round
from .indexing import getitem
from .shape import broadcast_to, concatenate, shape_tuple

#: the modes whose padding copies entries of x: each output entry is x at a position np.pad finds
_COPYING_MODES = ("edge", "reflect", "symmetric", "wrap")
#: the modes that pad with a statistic of the entries next to the edge
_STATISTICS = {"maximum": reduction.max, "minimum": reduction.min, "mean": reduction.mean, "median": reduction.median}
#: each mode's keyword arguments (NumPy refuses the others)
_KEYWORDS = {
    "constant": {"constant_values"},
    "linear_ramp": {"end_values"},
    **{mode: {"stat_length"} for mode in _STATISTICS},
    **{mode: set() for mode in _COPYING_MODES},
}


def pad(x, pad_width, mode: str = "constant", **kwargs):
    """x padded along each axis, as numpy.pad with any mode but "empty".

    `pad_width`, `constant_values`, `end_values` and `stat_length` take NumPy's forms: a
    scalar, (before, after), or one pair per axis.  Constant padding and "linear_ramp" work
    with unknown extents; the other modes need the padded axes' extents statically.  For
    integer x a mean or median is rounded half to even and a ramp floored, as NumPy does.

    >>> import stablegrad as sg
    >>> sg.pad(sg.constant([1.0, 2.0]), (1, 2), constant_values=9.0).eval()
    array([9., 1., 2., 9., 9.])
    >>> sg.pad(sg.constant([1.0, 2.0, 3.0]), 2, mode="reflect").eval()
    array([3., 2., 1., 2., 3., 2., 1.])
    >>> sg.pad(sg.constant([1.0, 5.0]), (2, 1), mode="linear_ramp", end_values=(-3.0, 0.0)).eval()
    array([-3., -1.,  1.,  5.,  0.])
    >>> sg.pad(sg.constant([1.0, 2.0, 6.0]), 1, mode="mean", stat_length=2).eval()
    array([1.5, 1. , 2. , 6. , 4. ])
    """
    (x,) = as_operands(x)
    if mode not in _KEYWORDS:
        raise ShapeError(f"pad: mode {mode!r} is not supported (one of {', '.join(map(repr, _KEYWORDS))})")
    unknown = set(kwargs) - _KEYWORDS[mode]
    if unknown:
        raise ShapeError(f"pad: unsupported keyword arguments for mode {mode!r}: {', '.join(sorted(unknown))}")
    widths = _pairs(pad_width, x.ndim, "pad_width")
    if widths.dtype.kind not in "iu" or np.any(widths < 0):
        raise ShapeError(f"pad: pad_width must be non-negative ints, got {pad_width!r}")
    (argument,) = _KEYWORDS[mode] or {"values"}  # the mode's one keyword (the copying modes have none)
    values = _pairs(kwargs.get(argument, None if argument == "stat_length" else 0), x.ndim, argument)
    if argument == "stat_length":
        values = _stat_lengths(values, mode)
    for axis in range(x.ndim):
        before, after = (int(w) for w in widths[axis])
        if before == after == 0:
            continue
        if mode == "constant":
            sides = [_block(x, axis, w, values[axis, side]) for side, w in enumerate((before, after))]
        elif mode == "linear_ramp":
            sides = [_ramp(x, axis, w, values[axis, side], side) for side, w in enumerate((before, after))]
        elif mode in _STATISTICS:
            sides = [_statistic(x, axis, w, values[axis, side], mode, side) for side, w in enumerate((before, after))]
        else:
            x = getitem(x, (slice(None),) * axis + (_copied_positions(x, axis, before, after, mode),))
            continue
        x = concatenate([p for p in (sides[0], x, sides[1]) if p is not None], axis=axis)
    return x


def _pairs(value, ndim: int, what: str) -> np.ndarray:
    """NumPy's forms of a per-axis (before, after) argument (n, (n,), (b, a), ((b, a), ...)) as (ndim, 2)."""
    try:
        return np.broadcast_to(np.asarray(value), (ndim, 2))
    except ValueError:
        raise ShapeError(
            f"pad: {what} {value!r} cannot be broadcast to ({ndim}, 2), a (before, after) per axis"
        ) from None


def _stat_lengths(lengths: np.ndarray, mode: str) -> np.ndarray:
    """stat_length as NumPy reads it: None (the whole axis), else rounded to non-negative ints."""
    if lengths.dtype == object and all(v is None for v in lengths.flat):
        return lengths
    if lengths.dtype.kind not in "iuf":
        raise ShapeError(f"pad: stat_length must be None or non-negative numbers, got {lengths.tolist()!r}")
    rounded = np.round(lengths).astype(np.intp)
    if np.any(rounded < 0):
        raise ShapeError(f"pad: stat_length must be non-negative, got {lengths.tolist()!r}")
    if mode in ("maximum", "minimum") and np.any(rounded == 0):
        raise ShapeError(f"pad: stat_length of 0 yields no value for padding (mode {mode!r})")
    return rounded.astype(object)


def _block(x: Variable, axis: int, width: int, value) -> Variable | None:
    """A block shaped like x but `width` long along `axis`, filled with `value` cast to x's dtype (as NumPy)."""
    if width == 0:
        return None
    return _widened(Constant(np.asarray(value).astype(x.dtype)), x, axis, width)


def _widened(block: Variable, x: Variable, axis: int, width: int) -> Variable:
    """`block` broadcast to x's shape with `width` along `axis`."""
    extent = list(shape_tuple(x))
    extent[axis] = width
    return broadcast_to(block, extent)


def _edge(x: Variable, axis: int, side: int, length: int = 1) -> Variable:
    """The first (side 0) or last `length` entries of x along `axis`, the axis kept."""
    window = slice(0, length) if side == 0 else slice(-length, None) if length else slice(0, 0)
    return getitem(x, (slice(None),) * axis + (window,))


def _ramp(x: Variable, axis: int, width: int, end, side: int) -> Variable | None:
    """The `width` entries from `end` towards x's edge, not reaching it: numpy.linspace's
    `k · ((edge - end) / width) + end`, in linspace's dtype, floored for integer x."""
    if width == 0:
        return None
    _check_extendable(x, axis)
    # numpy.linspace's dtype: the end value times 1.0 (float64 from a Python or integer end), with x's
    compute = np.result_type(np.result_type(np.asarray(end).dtype, 1.0), x.dtype)
    k = np.arange(width, dtype=compute)[:: 1 if side == 0 else -1]  # the right side runs back to its end
    k = k.reshape((width,) + (1,) * (x.ndim - axis - 1))
    start = Constant(np.asarray(end).astype(compute))
    ramp = Constant(k) * ((astype(_edge(x, axis, side), compute) - start) / width) + start
    return astype(floor(ramp) if x.dtype.kind in "iu" else ramp, x.dtype)


def _statistic(x: Variable, axis: int, width: int, length, mode: str, side: int) -> Variable | None:
    """`width` copies of the statistic of x's first (side 0) or last `length` entries along `axis`."""
    if width == 0:
        return None
    n = _static_extent(x, axis, mode)
    stat = _STATISTICS[mode](_edge(x, axis, side, n if length is None else min(length, n)), axis=axis, keepdims=True)
    if x.dtype.kind in "iu" and mode in ("mean", "median"):
        stat = round(stat)
    return _widened(astype(stat, x.dtype), x, axis, width)


def _static_extent(x: Variable, axis: int, mode: str) -> int:
    """The extent of the padded axis, which `mode` needs known."""
    n = x.type.shape[axis]
    if n is None:
        raise ShapeError(f"pad: mode {mode!r} needs the extent of axis {axis} known statically (shape {x.type.shape})")
    _check_extendable(x, axis)
    return n


def _check_extendable(x: Variable, axis: int) -> None:
    """Only constant padding can extend an axis with no entries (nothing to copy or compute from)."""
    if x.type.shape[axis] == 0:
        raise ShapeError(f"pad: can't extend empty axis {axis} using modes other than 'constant'")


def _copied_positions(x: Variable, axis: int, before: int, after: int, mode: str) -> np.ndarray:
    """Which entry of the axis each padded position copies: NumPy's own answer, for an arange."""
    n = _static_extent(x, axis, mode)
    return np.pad(np.arange(n), (before, after), mode=mode)  # type: ignore[call-overload]  # (a checked mode name)
