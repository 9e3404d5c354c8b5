"""What the stable family shares: dtype promotion, argument checks, and the max shift.

Every public function promotes its operands the same way: integers (and bools)
compute in float64, float16 and bfloat16 compute in float32 and are cast back, so the
accumulation of a float16 softmax never runs in 11 bits (nor a bfloat16 one in 8), as
JAX accumulates them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

import numpy as np

from ...errors import DTypeError, ShapeError
from ...graph.basic import Variable
from ...graph.types import broadcast_shapes, is_floating, is_numeric, narrow_compute_dtype, normalize_axis
from ..base import as_operands
from ..elementwise import astype, equal, isinf, logical_and, where
from ..math import log1p
from ..reduction import Sum, _Extremum
from ..shape import ExpandDims, Squeeze

NEG_INF = -np.inf
POS_INF = np.inf


def promote(op: str, *args) -> tuple[list[Variable], np.dtype]:
    """(operands in the compute dtype, result dtype) for floating-point ops.

    Integers and bools give float64; float16 and bfloat16 are computed in float32 and
    the result is returned in the narrow dtype (rounded once); complex is refused.
    """
    xs = as_operands(*args)
    dtype = np.result_type(*(x.dtype for x in xs))
    if dtype.kind == "c":
        raise DTypeError(f"{op}: complex inputs are not supported, got {dtype.name}")
    if not is_floating(dtype):
        dtype = np.dtype(np.float64)
    compute = narrow_compute_dtype(dtype)
    return [astype(x, compute) for x in xs], dtype


def restore(out: Variable, dtype: np.dtype) -> Variable:
    """The result in the user's dtype (float16 and bfloat16 results were computed in float32)."""
    return astype(out, dtype)


def as_mask(op: str, where) -> Variable:
    """The `where=` argument as a boolean tensor: numbers cast as NumPy casts them to bool
    (nonzero, NaN included, is True), as JAX accepts float 0/1 masks."""
    (mask,) = as_operands(where)
    if mask.dtype != np.bool_:
        if not is_numeric(mask.dtype):
            raise DTypeError(f"{op}: where must be boolean or numeric, got {mask.type}")
        mask = astype(mask, np.bool_)
    return mask


def check_broadcast(op: str, argument: str, x: Variable, other: Variable) -> tuple:
    """The broadcast shape of x and `argument`; a ShapeError naming both otherwise."""
    try:
        return broadcast_shapes(x.type.shape, other.type.shape, op=op)
    except ShapeError:
        shown = [str(tuple(s)).replace("None", "?") for s in (other.type.shape, x.type.shape)]
        raise ShapeError(
            f"{op}: {argument} of shape {shown[0]} is not broadcastable to x of shape {shown[1]}"
        ) from None


def axes_of(op: str, axis, ndim: int) -> tuple[int, ...]:
    """Sorted non-negative axes; errors (out of range, repeated) name the op and `axis`."""
    return normalize_axis(axis, ndim, op)


def log_tied_plus_rest(ties: Variable, rest: Variable) -> Variable:
    """log(ties + rest) for `ties` entries at the max (each exp(0) = 1) and the sum `rest`
    of the others: `log1p(rest)` when the max is unique, so a tail far below it is not
    rounded away against the 1 (logsumexp([0, -40]) = 4.2e-18, not 0).  (An empty or
    NaN row has no ties: log1p(-1 + rest) is -inf or NaN, as it should be.)"""
    return log1p(rest + (ties - 1))


def keep(v: Variable, axes: tuple[int, ...], keepdims: bool) -> Variable:
    """An output with reduced axes as length-1 axes (a no-op under keepdims)."""
    return v if keepdims or not axes else ExpandDims(axes)(v)


def drop(v: Variable, axes: tuple[int, ...], keepdims: bool) -> Variable:
    """A keepdims result without its reduced axes unless keepdims."""
    return v if keepdims or not axes else Squeeze(axes)(v)


@final
@dataclass(frozen=True)
class MaxShift(_Extremum):
    """Maximum over axes, -inf over an empty axis: the shift of the max-shifted formulas.

    Only the `initial=-inf` differs from `max`, so that an empty axis reduces to
    the log-semiring zero instead of raising.  Its gradient is max's (shared at
    ties), so a body that uses it differentiates correctly too.
    """

    def perform(self, x):
        return np.maximum.reduce(x, axis=self.axes, keepdims=self.keepdims, initial=-np.inf)


def softmax_vjp(axes: tuple[int, ...], p: Variable, g: Variable) -> Variable:
    """The softmax Jacobian (diag p - p pᵀ) applied to g: p · (g - Σ p·g), taken around c.

    With c the mean of g where p is largest, `p · ((g - c) - Σ p·(g - c))` is the same
    (Σ p = 1).  Where p concentrates on one entry (a saturated softmax) its largest terms
    `g - c` are then exactly 0, and the result keeps its relative accuracy where the plain
    form cancels O(1) terms down to 1e-5 (9e3 ulps at logits [700, 710, -800]) or to 0.
    """
    top = equal(p, MaxShift(axes, keepdims=True)(p))
    c = Sum(axes, keepdims=True)(where(top, g, 0)) / Sum(axes, keepdims=True)(astype(top, g.dtype))
    # an entry of probability 0 (a -inf logit) takes no part, also where its cotangent is
    # infinite: the label gradient -log_softmax of an entropy or a cross-entropy with the
    # softmax as labels is +inf there, and 0 · inf would make the whole row NaN
    d = where(logical_and(equal(p, 0), isinf(g)), 0, g - c)
    return p * (d - Sum(axes, keepdims=True)(p * d))
