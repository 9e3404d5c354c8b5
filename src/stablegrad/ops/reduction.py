"""Reductions over axes: sum, prod, max, min, arg-reductions, any/all, and mean/var/std on top.

`axis` is an int, a tuple or None (all axes), `keepdims` as in NumPy.  A pullback
re-inserts the reduced axes and broadcasts back to the operand's shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any as _Any
from typing import ClassVar, final

import numpy as np

from ..errors import ShapeError
from ..graph.basic import READS_NOTHING, Op, Reads, Variable
from ..graph.types import TensorType, is_bfloat16, normalize_axis
from . import dims
from .base import Linear, as_operands, zero_grad
from .elementwise import astype, equal, isnan, logical_and, logical_not, logical_or, maximum, sqrt, square, where
from .indexing import getitem, sort
from .shape import ExpandDims, broadcast_to, expand_dims, reshape, shape_tuple, transpose


@dataclass(frozen=True)
class Reduction(Op):
    """Abstract: reduces `axes` (sorted, non-negative) of its operand."""

    axes: tuple[int, ...] = ()
    keepdims: bool = False

    def infer(self, x):
        shape = tuple((1 if self.keepdims else -1) if i in self.axes else n for i, n in enumerate(x.type.shape))
        dtype = np.asarray(self.perform(np.ones((1,) * x.ndim, x.dtype))).dtype
        return [TensorType(dtype, tuple(n for n in shape if n != -1))]

    def _restore(self, g: Variable, x: Variable) -> Variable:
        """An output-shaped g broadcast back to x's shape."""
        if not self.keepdims and self.axes:
            g = ExpandDims(self.axes)(g)
        return broadcast_to(g, shape_tuple(x))

    @property
    def name(self) -> str:
        return type(self).__name__.lower()


@final
@dataclass(frozen=True)
class Sum(Linear, Reduction):
    """Sum over axes.  A bfloat16 sum accumulates in float32 and is rounded once, as JAX's
    (8 bits of mantissa would stop a running sum of ones at 256)."""

    reads = READS_NOTHING

    def perform(self, x):
        if isinstance(x, np.ndarray) and x.dtype.kind == "f":  # the ufunc itself: np.sum's wrapper costs µs
            return np.add.reduce(x, axis=self.axes, keepdims=self.keepdims)
        if is_bfloat16(np.asarray(x).dtype):
            wide = np.add.reduce(np.asarray(x, np.float32), axis=self.axes, keepdims=self.keepdims)
            return np.asarray(wide).astype(np.asarray(x).dtype)
        return np.sum(x, axis=self.axes, keepdims=self.keepdims)

    def pullback(self, inputs, outputs, grads):
        return [self._restore(grads[0], inputs[0])]


@final
@dataclass(frozen=True)
class Prod(Reduction):
    """Product over axes.

    The gradient of entry i is the product of the *other* entries; dividing the
    total by x_i would give 0/0 at zeros, so zeros are handled apart — and so that
    the gradient's own derivative (the Hessian) is right at zeros too, the zero
    entries stay in the formula as values (`zero_prod`, `other_zeros`) rather than
    being replaced by the constants they equal.
    """

    reads = Reads(inputs=(0,))

    def perform(self, x):
        return np.prod(x, axis=self.axes, keepdims=self.keepdims)

    def pullback(self, inputs, outputs, grads):
        (x,), (g,) = inputs, grads
        is_zero = equal(x, 0)
        zeros = Sum(self.axes, keepdims=True)(astype(is_zero, x.dtype))
        nonzero_prod = Prod(self.axes, keepdims=True)(where(is_zero, 1, x))
        zero_prod = Prod(self.axes, keepdims=True)(where(is_zero, x, 1))  # 0 where a zero is, 1 elsewhere
        # at a zero entry: the product of the *other* zeros (1, the other one, or 0)
        zero_sum = Sum(self.axes, keepdims=True)(where(is_zero, x, 0))
        other_zeros = where(equal(zeros, 1), 1, where(equal(zeros, 2), zero_sum - x, 0))
        others = where(is_zero, nonzero_prod * other_zeros, nonzero_prod * zero_prod / where(is_zero, 1, x))
        return [self._restore(g, x) * others]


@dataclass(frozen=True)
class _Extremum(Reduction):
    """Abstract max/min: the gradient is shared equally among the entries that attain it."""

    reads = Reads(inputs=(0,), outputs=(0,))

    def pullback(self, inputs, outputs, grads):
        (x,), (out,), (g,) = inputs, outputs, grads
        hit = equal(x, self._restore(out, x))
        count = Sum(self.axes, keepdims=True)(astype(hit, x.dtype))
        return [where(hit, self._restore(g, x), 0) / broadcast_to(count, shape_tuple(x))]


@final
@dataclass(frozen=True)
class Max(_Extremum):
    """Maximum over axes."""

    def perform(self, x):
        return np.max(x, axis=self.axes, keepdims=self.keepdims)


@final
@dataclass(frozen=True)
class Min(_Extremum):
    """Minimum over axes."""

    def perform(self, x):
        return np.min(x, axis=self.axes, keepdims=self.keepdims)


@dataclass(frozen=True)
class _NoGradReduction(Reduction):
    reads = READS_NOTHING

    def pullback(self, inputs, outputs, grads):
        return [zero_grad(inputs[0])]


@final
@dataclass(frozen=True)
class Any(_NoGradReduction):
    """Whether any entry is true."""

    def perform(self, x):
        return np.any(x, axis=self.axes, keepdims=self.keepdims)


@final
@dataclass(frozen=True)
class All(_NoGradReduction):
    """Whether every entry is true."""

    def perform(self, x):
        return np.all(x, axis=self.axes, keepdims=self.keepdims)


@final
@dataclass(frozen=True)
class ArgExtremum(_NoGradReduction):
    """Index of the first max (or min) along one axis, or of the flattened array."""

    kind: str = "argmax"

    def perform(self, x):
        axis = self.axes[0] if len(self.axes) == 1 and np.ndim(x) > 0 else None
        fn = np.argmax if self.kind == "argmax" else np.argmin
        if axis is None:
            out = fn(x)
            return np.reshape(out, (1,) * np.ndim(x)) if self.keepdims else out
        return fn(x, axis=axis, keepdims=self.keepdims)

    @property
    def name(self) -> str:
        return self.kind


# -- user-facing -------------------------------------------------------------------------------
def _reduce(cls, x, axis, keepdims, op: str):
    (x,) = as_operands(x)
    axes = normalize_axis(axis, x.ndim, op)
    return cls(axes, bool(keepdims))(x)


@dims.reduction
def sum(x, axis=None, keepdims=False):
    """Sum of entries over `axis` (int, tuple or None for all)."""
    return _reduce(Sum, x, axis, keepdims, "sum")


@dims.reduction
def prod(x, axis=None, keepdims=False):
    """Product of entries over `axis`."""
    return _reduce(Prod, x, axis, keepdims, "prod")


@dims.reduction
def max(x, axis=None, keepdims=False):
    """Maximum over `axis`; errors at run time on an empty axis, as NumPy."""
    return _reduce(Max, x, axis, keepdims, "max")


@dims.reduction
def min(x, axis=None, keepdims=False):
    """Minimum over `axis`."""
    return _reduce(Min, x, axis, keepdims, "min")


amax, amin = max, min


@dims.reduction
def any(x, axis=None, keepdims=False):
    """Whether any entry over `axis` is true."""
    return _reduce(Any, x, axis, keepdims, "any")


@dims.reduction
def all(x, axis=None, keepdims=False):
    """Whether every entry over `axis` is true."""
    return _reduce(All, x, axis, keepdims, "all")


def _arg(kind, x, axis, keepdims):
    (x,) = as_operands(x)
    if axis is not None and not isinstance(axis, int | np.integer):
        raise ShapeError(f"{kind}: axis must be an int or None, got {axis!r}")
    axes = normalize_axis(axis, x.ndim, kind)
    return ArgExtremum(axes, bool(keepdims), kind)(x)


@dims.reduction
def argmax(x, axis=None, keepdims=False):
    """Index of the first maximum along `axis` (of the flattened array when None)."""
    return _arg("argmax", x, axis, keepdims)


@dims.reduction
def argmin(x, axis=None, keepdims=False):
    """Index of the first minimum along `axis`."""
    return _arg("argmin", x, axis, keepdims)


def count(x: Variable, axes: tuple[int, ...], dtype) -> _Any:
    """Number of entries in the reduced axes: a Python int when known, else a 0-d tensor."""
    dims = [shape_tuple(x)[a] for a in axes]
    n: _Any = math.prod(d for d in dims if isinstance(d, int))
    for d in dims:
        if not isinstance(d, int):
            n = d if isinstance(n, int) and n == 1 else n * d
    return n if isinstance(n, int) else astype(n, dtype)


@dims.reduction
def mean(x, axis=None, keepdims=False):
    """Arithmetic mean over `axis` (integers give float64, as NumPy; bfloat16 is summed and
    divided in float32 and rounded once, as JAX)."""
    (x,) = as_operands(x)
    axes = normalize_axis(axis, x.ndim, "mean")
    if is_bfloat16(x.dtype):
        return astype(mean(astype(x, np.float32), axes, keepdims), x.dtype)
    total = Sum(axes, bool(keepdims))(x if x.type.is_float() else astype(x, np.float64))
    return total / count(x, axes, total.dtype)


@dims.reduction
def median(x, axis=None, keepdims=False):
    """Median over `axis`, as numpy.median: the mean of the two middle entries for an even
    count, NaN where the entries hold a NaN (or none), integers in float64.

    The reduced axes' extents must be known statically (they say which entries are in the
    middle).  The entries are sorted, so the gradient goes to the middle one or two.

    >>> import stablegrad as sg
    >>> sg.median(sg.constant([[4.0, 1.0, 3.0], [2.0, 8.0, 6.0]]), axis=1).eval()
    array([3., 6.])
    """
    (x,) = as_operands(x)
    axes = normalize_axis(axis, x.ndim, "median")
    extents = [x.type.shape[a] for a in axes]
    if None in extents:
        raise ShapeError(f"median: needs the extents of axes {axes} known statically (shape {x.type.shape})")
    n = math.prod(extents)
    kept = [a for a in range(x.ndim) if a not in axes]
    rows = reshape(transpose(x, (*kept, *axes)), (*(shape_tuple(x)[a] for a in kept), n))
    if not rows.type.is_float():
        rows = astype(rows, np.float64)
    middle = getitem(sort(rows, axis=-1), (Ellipsis, slice((n - 1) // 2, n // 2 + 1)))
    result = where(any(isnan(rows), axis=-1), np.nan, mean(middle, axis=-1))  # (no entries: mean is 0/0)
    return expand_dims(result, axes) if keepdims and axes else result


@dims.reduction
def var(x, axis=None, ddof: int = 0, keepdims=False):
    """Variance over `axis` with `ddof` delta degrees of freedom."""
    (x,) = as_operands(x)
    axes = normalize_axis(axis, x.ndim, "var")
    if not x.type.is_float():
        x = astype(x, np.float64)
    centred = x - mean(x, axes, keepdims=True)
    dof = count(x, axes, x.dtype) - ddof  # NumPy clamps at 0: too few entries give 0/0 = nan
    dof = (dof if dof > 0 else 0) if isinstance(dof, int | float) else maximum(dof, 0)
    return Sum(axes, bool(keepdims))(square(centred)) / dof


@dims.reduction
def std(x, axis=None, ddof: int = 0, keepdims=False):
    """Standard deviation over `axis`."""
    (x,) = as_operands(x)
    normalize_axis(axis, x.ndim, "std")  # so that a bad axis is reported as std's, not var's
    v = var(x, axis=axis, ddof=ddof, keepdims=keepdims)
    # at zero variance (one entry, or all equal) sqrt's infinite slope meets var's zero one: inf·0 is NaN.
    # std is flat or kinked there, and its gradient is 0, as abs's at 0; a NaN variance stays NaN
    zero = equal(v, 0)
    return where(zero, 0, sqrt(where(zero, 1, v)))


@dims.reduction
def count_nonzero(x, axis=None):
    """Number of non-zero entries over `axis`."""
    (x,) = as_operands(x)
    return sum(astype(logical_not(equal(x, 0)), np.int64), axis=axis)


# -- running sums and products ---------------------------------------------------------------------
@dataclass(frozen=True)
class _Cumulative(Op):
    """Abstract: a running reduction along one (non-negative) axis; the output is shaped like x."""

    axis: int = 0

    def infer(self, x):
        # NumPy's accumulation dtype (int32 and bool accumulate in int64, as sum does), read off NumPy
        dtype = np.asarray(self.perform(np.ones((1,) * x.ndim, x.dtype))).dtype
        return [TensorType(dtype, x.type.shape)]

    def _reversed_cumsum(self, g: Variable) -> Variable:
        """Σ_{i>=j} g[i] along the axis: a running sum from the far end."""
        flip = (slice(None),) * self.axis + (slice(None, None, -1),)
        return getitem(CumSum(self.axis)(getitem(g, flip)), flip)


@final
@dataclass(frozen=True)
class CumSum(Linear, _Cumulative):
    """Running sum along `axis`; its pullback is the running sum of g taken from the far end."""

    public_name: ClassVar[str] = "cumsum"
    reads = READS_NOTHING

    def perform(self, x):
        return np.cumsum(x, axis=self.axis)

    def pullback(self, inputs, outputs, grads):
        (x,), (g,) = inputs, grads
        if not x.type.is_float():
            return [zero_grad(x)]
        return [self._reversed_cumsum(g)]


@final
@dataclass(frozen=True)
class CumProd(_Cumulative):
    """Running product along `axis`.

    d out[i] / d x[j] is the product of x[:i+1] without x[j], summed against g over i >= j:

    - before the first zero, reversed-cumsum(g·out) / x;
    - at the first zero, the same sum with that zero replaced by 1 (`tail`: no division by it);
    - between the first and the second zero, the zero times `tail` / x; at the second zero,
      the first zero times the sum with both replaced by 1.  Both are 0, but, as Prod's
      pullback does, they keep the zero in the formula as a value, so that the second
      derivative (the Hessian) is right at zeros too;
    - past the second zero, 0 with zero derivative (every product there holds two zeros).
    """

    public_name: ClassVar[str] = "cumprod"
    reads = Reads(inputs=(0,), outputs=(0,))

    def perform(self, x):
        return np.cumprod(x, axis=self.axis)

    def pullback(self, inputs, outputs, grads):
        (x,), (out,), (g,) = inputs, outputs, grads
        if not x.type.is_float():
            return [zero_grad(x)]
        is_zero = equal(x, 0)
        zeros_so_far = CumSum(self.axis)(astype(is_zero, np.int64))  # zeros in x[:j+1]
        before = equal(zeros_so_far, 0)
        first_zero = logical_and(is_zero, equal(zeros_so_far, 1))
        between = logical_and(logical_not(is_zero), equal(zeros_so_far, 1))
        second_zero = logical_and(is_zero, equal(zeros_so_far, 2))
        tail = self._reversed_cumsum(g * CumProd(self.axis)(where(first_zero, 1, x)))
        tail2 = self._reversed_cumsum(g * CumProd(self.axis)(where(logical_or(first_zero, second_zero), 1, x)))
        the_zero = Sum((self.axis,), keepdims=True)(where(first_zero, x, 0))  # 0, as a value of x
        safe = where(logical_or(before, between), x, 1)
        # a sum of one-level wheres (each position is in exactly one part), not nested ones: the
        # rewrite that masks the gradients of unselected branches walks nested wheres for minutes
        grad = (
            where(before, self._reversed_cumsum(g * out) / safe, 0)
            + where(first_zero, tail, 0)
            + the_zero * (where(between, tail / safe, 0) + where(second_zero, tail2, 0))
        )
        return [grad]


def _cumulative(cls, op: str, x, axis, dtype):
    (x,) = as_operands(x)
    if dtype is not None:  # NumPy accumulates in `dtype`: the same as casting first
        x = astype(x, dtype)
    if axis is None:  # NumPy runs over the flattened array
        x, axis = reshape(x, (-1,)), 0
    if not isinstance(axis, int | np.integer):
        raise ShapeError(f"{op}: axis must be an int or None, got {axis!r}")
    return cls(normalize_axis(axis, x.ndim, op)[0])(x)


@dims.along_axis
def cumsum(x, axis=None, dtype=None):
    """Running sum along `axis` (of the flattened array when None), as numpy.cumsum.

    >>> import stablegrad as sg
    >>> sg.cumsum(sg.constant([[1, 2], [3, 4]]), axis=0).eval()
    array([[1, 2],
           [4, 6]])
    """
    return _cumulative(CumSum, "cumsum", x, axis, dtype)


@dims.along_axis
def cumprod(x, axis=None, dtype=None):
    """Running product along `axis` (of the flattened array when None), as numpy.cumprod.

    >>> import stablegrad as sg
    >>> sg.cumprod(sg.constant([1.0, 2.0, 3.0])).eval()
    array([1., 2., 6.])
    """
    return _cumulative(CumProd, "cumprod", x, axis, dtype)
