"""TensorType: the static dtype and (partly known) shape of a graph variable."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# imported at module level: a function-level import costs microseconds, and every node built
# broadcasts its operands' shapes
from ..errors import DTypeError, ShapeError

Shape = tuple[int | None, ...]


@dataclass(frozen=True, slots=True)
class TensorType:
    """dtype and shape; a shape entry is an int or None (unknown until run time)."""

    dtype: np.dtype
    shape: Shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def is_float(self) -> bool:
        return is_inexact(self.dtype)

    def accepts(self, shape: tuple[int, ...]) -> bool:
        """Whether a run-time shape fits this static shape."""
        return len(shape) == len(self.shape) and all(s is None or s == n for s, n in zip(self.shape, shape))

    def __str__(self) -> str:
        dims = ", ".join("?" if s is None else str(s) for s in self.shape)
        return f"{self.dtype.name}[{dims}]"


def as_dtype(dtype, op: str = "dtype") -> np.dtype:
    """A NumPy dtype from anything NumPy reads as one, and from "bfloat16" (ml_dtypes' type).

    >>> as_dtype("float32")
    dtype('float32')
    >>> as_dtype("bfloat16")
    dtype(bfloat16)
    """
    if isinstance(dtype, str) and dtype == "bfloat16":
        return bfloat16()
    try:
        return np.dtype(dtype)
    except TypeError:
        raise DTypeError(f"{op}: {dtype!r} is not a dtype NumPy knows (e.g. 'float64', 'float32', 'int64')") from None


def bfloat16() -> np.dtype:
    """bfloat16 as a NumPy dtype.  NumPy has none of its own: `ml_dtypes` (what JAX uses) adds it,
    and is an optional dependency (`pip install stablegrad[bfloat16]`, or any JAX install)."""
    try:
        import ml_dtypes
    except ImportError:
        raise DTypeError(
            "bfloat16 needs the ml_dtypes package (NumPy has no bfloat16 of its own): "
            "pip install ml_dtypes, or stablegrad[bfloat16]"
        ) from None
    return np.dtype(ml_dtypes.bfloat16)


# -- what a dtype is: the one place that decides ------------------------------------------------------
# bfloat16 is a NumPy "void"-kind ('V') dtype registered by ml_dtypes, so `dtype.kind == "f"` misses
# it; every check that means "floating point" asks these instead.  It is told by name, so that no
# check has to import ml_dtypes (ml_dtypes' float8 types are not floats here: nothing computes in them).
def is_bfloat16(dtype: np.dtype) -> bool:
    """Whether dtype is ml_dtypes' bfloat16."""
    return dtype.kind == "V" and dtype.name == "bfloat16"


def is_floating(dtype: np.dtype) -> bool:
    """A real floating-point dtype: float16/32/64 (and longdouble) and bfloat16.

    >>> is_floating(np.dtype("float16")), is_floating(np.dtype("complex64")), is_floating(np.dtype("int8"))
    (True, False, False)
    >>> is_floating(as_dtype("bfloat16"))
    True
    """
    return dtype.kind == "f" or is_bfloat16(dtype)


def is_inexact(dtype: np.dtype) -> bool:
    """A floating-point dtype, real or complex: the dtypes a gradient flows through."""
    return dtype.kind in "fc" or is_bfloat16(dtype)


def narrow_compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a float16 or bfloat16 computation accumulates in (float32, as JAX does); others as they are."""
    return np.dtype(np.float32) if dtype == np.float16 or is_bfloat16(dtype) else dtype


def is_numeric(dtype: np.dtype) -> bool:
    """A boolean, integer, floating or complex dtype (not strings, objects, dates, records)."""
    return dtype.kind in "biufc" or is_bfloat16(dtype)


def broadcast_shapes(*shapes: Shape, op: str = "broadcast") -> Shape:
    """NumPy broadcasting of static shapes; None stays None unless the other side decides it."""
    # fast path, taken by most nodes built: one shape, two equal ones, or one of them 0-d
    if len(shapes) == 1:
        return tuple(shapes[0])
    if len(shapes) == 2:
        a, b = shapes
        if a == b or not b:
            return tuple(a)
        if not a:
            return tuple(b)
    ndim = max((len(s) for s in shapes), default=0)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    out: list[int | None] = []
    for dims in zip(*padded):
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            listed = " and ".join(str(tuple(s)).replace("None", "?") for s in shapes)
            raise ShapeError(f"{op}: operands could not be broadcast together with shapes {listed}")
        if known:
            out.append(known.pop())
        elif any(d is None for d in dims):
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def normalize_axis(axis, ndim: int, op: str, argument: str = "axis") -> tuple[int, ...]:
    """axis as int, tuple or None -> sorted tuple of non-negative ints; errors name the op."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int | np.integer):
        axes: tuple = (axis,)
    elif isinstance(axis, tuple | list):
        axes = tuple(axis)
    else:
        raise ShapeError(f"{op}: {argument} must be an int, a tuple of ints or None, got {axis!r}")
    result = []
    for a in axes:
        if not isinstance(a, int | np.integer):
            raise ShapeError(f"{op}: {argument} must be an int, a tuple of ints or None, got {axis!r}")
        if not -ndim <= a < ndim:
            raise ShapeError(f"{op}: {argument} {a} is out of range for an array of {ndim} dimensions")
        result.append(int(a) % ndim)
    if len(set(result)) != len(result):
        raise ShapeError(f"{op}: repeated {argument} in {axis!r}")
    return tuple(sorted(result))
