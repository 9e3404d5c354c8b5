"""Vector and matrix norms, numpy.linalg.norm: the 2-norm without overflow, and a gradient at 0.

`sqrt(sum(x²))`, as NumPy computes the 2-norm, overflows once |x| passes 1e154 (float64;
1.8e19 in float32) and underflows to 0 below 1e-154, and its gradient `x / ‖x‖` is
0 / 0 = NaN at x = 0.  `VectorNorm` divides by max |x| where the squares would leave the
range, and its pullback gives 0 at x = 0 (the minimal subgradient, as PyTorch does).
The other orders are compositions of `abs`, `max`, `min`, `sum` and `power`, as NumPy
writes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, final

import numpy as np

from ..errors import ShapeError
from ..graph.basic import Reads, Variable
from ..graph.types import normalize_axis
from . import dims
from .composite import SymbolicOp
from .elementwise import abs, astype, equal, logical_and, not_equal, sqrt, square, where
from .math import power
from .reduction import Sum, max, min, sum
from .stable._common import MaxShift, drop, keep, promote, restore


def _squares_in_range(dtype: np.dtype) -> tuple[float, float]:
    """(low, high): for max |x| between them, Σ x² neither underflows nor overflows
    (with room for 2**40 terms above, and full precision below)."""
    info = np.finfo(dtype)
    return float(2.0 ** ((info.minexp + info.nmant) // 2 + 2)), float(2.0 ** ((info.maxexp - 40) // 2))


@final
@dataclass(frozen=True)
class VectorNorm(SymbolicOp):
    """The Euclidean norm ‖x‖ = √Σ x² over `axes`.

    Naive: `sqrt(sum(x**2))` is inf for |x| ≥ 1.4e154 (float64) and 0 for |x| ≤ 1e-162,
    and its gradient is NaN at x = 0.
    Stable: with s = max |x|, `s · √Σ (x/s)²` where s is outside the range in which the
    squares stay normal and finite, NumPy's `√Σ x²` inside it; 0 for
    s = 0, inf for s = inf, NaN for a NaN.
    Pullback (reads x and the norm r): `g · x / r`, with r replaced by 1 where r = 0,
    so the gradient at 0 is 0.  Its own derivative is (I - x xᵀ/r²)/r, as it should be.
    """

    axes: tuple[int, ...]
    keepdims: bool = False

    public_name: ClassVar[str] = "norm"

    reads = Reads(inputs="all", outputs="all")

    def build(self, x):
        low, high = _squares_in_range(x.dtype)
        s = MaxShift(self.axes, keepdims=True)(abs(x))  # (-inf over an empty axis, whose norm is 0)
        # s itself where the squares would leave the range; 1 for 0, ±inf and NaN, whose sums say it all
        scale = where(logical_and(s >= low, s <= high) | ~(s > 0) | ~(s < np.inf), 1, s)
        r = scale * sqrt(Sum(self.axes, keepdims=True)(square(x / scale)))
        return drop(r, self.axes, self.keepdims)

    def pullback(self, inputs, outputs, grads):
        (x,), (r,), (g,) = inputs, outputs, grads
        r, g = keep(r, self.axes, self.keepdims), keep(g, self.axes, self.keepdims)
        return [g * (x / where(equal(r, 0), 1, r))]


@dims.reduction
def norm(x, ord=None, axis=None, keepdims: bool = False):
    """Matrix or vector norm, numpy.linalg.norm: the same orders, axes and result dtypes.

    Vector orders (`axis` an int, or x 1-d): None or 2 (Euclidean), inf, -inf, 0 (the
    count of nonzero entries) and any other number p, (Σ |x|ᵖ)^(1/p).  Matrix orders
    (`axis` a pair, or x 2-d): None or "fro", 1, -1, inf, -inf; "nuc", 2 and -2 need
    singular values, which stablegrad does not compute, and are an error.  With `ord`
    and `axis` both None, the 2-norm of all entries.  Integers compute in float64.

    The 2-norm and the Frobenius norm do not overflow or underflow where the norm itself
    is representable (NumPy's is inf for the example below), and their gradient at 0 is 0
    (NumPy's formula gives 0/0).

    >>> import numpy as np, stablegrad as sg
    >>> x = sg.vector("x")
    >>> big = 2.0**700  # (so that 3·big and 4·big are exact: the norm is 5·big exactly)
    >>> sg.function([x], sg.linalg.norm(x))(np.array([3.0, 4.0]) * big).item() / big
    5.0
    >>> sg.function([x], sg.grad(sg.linalg.norm(x), x))(np.zeros(2)).tolist()
    [0.0, 0.0]
    """
    (x,), dtype = promote("norm", x)
    if axis is None and ord is None:
        return restore(euclidean(x, tuple(range(x.ndim)), keepdims), dtype)
    if axis is None:
        if x.ndim not in (1, 2):
            raise ShapeError(f"norm: ord={ord!r} needs a 1-d or 2-d x, or an axis; got shape {x.type.shape}")
        axis = 0 if x.ndim == 1 else (0, 1)
    if isinstance(axis, int | np.integer):
        result = _vector_norm(x, ord, normalize_axis(axis, x.ndim, "norm"), keepdims)
    elif isinstance(axis, tuple | list) and len(axis) == 2:
        row, col = (normalize_axis(a, x.ndim, "norm")[0] for a in axis)
        if row == col:
            raise ShapeError(f"norm: repeated axis in {axis!r}")
        result = _matrix_norm(x, ord, row, col, keepdims)
    else:
        raise ShapeError(f"norm: axis must be an int or a pair of ints, got {axis!r}")
    return restore(result, dtype)


def euclidean(x: Variable, axes: tuple[int, ...], keepdims: bool) -> Variable:
    """‖x‖₂ over `axes` (sorted, non-negative), in x's floating dtype."""
    return VectorNorm(axes, bool(keepdims))(x)


def _vector_norm(x: Variable, ord, axes: tuple[int, ...], keepdims: bool) -> Variable:
    if ord is None or (_is_number(ord) and ord == 2):
        return euclidean(x, axes, keepdims)
    if not _is_number(ord):
        raise ShapeError(f"norm: invalid order {ord!r} for a vector norm (a number, inf or -inf)")
    if ord == np.inf:
        return max(abs(x), axes, keepdims)
    if ord == -np.inf:
        return min(abs(x), axes, keepdims)
    if ord == 0:
        return sum(astype(not_equal(x, 0), x.dtype), axes, keepdims)
    if ord == 1:
        return sum(abs(x), axes, keepdims)
    p = np.asarray(ord, dtype=x.dtype)
    return power(sum(power(abs(x), p), axes, keepdims), np.reciprocal(p))


def _matrix_norm(x: Variable, ord, row: int, col: int, keepdims: bool) -> Variable:
    axes = tuple(sorted((row, col)))
    if ord is None or ord == "fro":
        return euclidean(x, axes, keepdims)
    if ord in ("nuc", 2, -2):
        raise ShapeError(f"norm: ord={ord!r} needs singular values, which stablegrad does not compute")
    if ord not in (1, -1, np.inf, -np.inf):
        raise ShapeError(f"norm: invalid order {ord!r} for a matrix norm")
    summed, extreme = (row, col) if ord in (1, -1) else (col, row)  # 1: columns' sums; inf: rows'
    best = max if ord > 0 else min
    return drop(best(sum(abs(x), summed, keepdims=True), extreme, keepdims=True), axes, keepdims)


def _is_number(ord) -> bool:
    return isinstance(ord, int | float | np.integer | np.floating) and not isinstance(ord, bool)
