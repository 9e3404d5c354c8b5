"""Tensors made from a shape and a fill value: zeros, ones, full, arange, linspace, eye, the *_like forms,
and the triangle masks tril/triu."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import final

import numpy as np

from ..errors import ShapeError
from ..graph.basic import READS_NOTHING, Constant, Op, Variable
from ..graph.types import TensorType, as_dtype
from .base import as_operands, as_tensor, zero_grad
from .elementwise import astype, floor, greater_equal, less_equal, where
from .shape import as_shape_inputs, reduce_to, reshape, shape_tuple, static_dim


@final
@dataclass(frozen=True)
class Alloc(Op):
    """A tensor of the shape given by the remaining inputs, filled with `value` (broadcast)."""

    reads = READS_NOTHING

    def infer(self, value, *dims):
        if value.ndim > len(dims):
            raise ShapeError(f"full: fill value of shape {value.type.shape} has more dimensions than the shape")
        return [TensorType(value.dtype, tuple(static_dim(d) for d in dims))]

    def perform(self, value, *dims):
        return np.full(tuple(int(d) for d in dims), value, dtype=np.asarray(value).dtype)

    def pullback(self, inputs, outputs, grads):
        value = inputs[0]
        return [reduce_to(grads[0], shape_tuple(value))] + [zero_grad(d) for d in inputs[1:]]


#: entries above which a filled tensor is allocated when the function runs rather than held as a
#: constant: gradients of indexing start from zeros the indexed array's size, one per indexing,
#: and T constants of a (T, K) array would hold T²·K numbers for the life of the graph
LARGEST_CONSTANT = 4096


def full(shape, fill_value, dtype=None):
    """A tensor of `shape` filled with `fill_value` (numpy.full)."""
    if dtype is None and not isinstance(fill_value, Variable):
        dtype = np.asarray(fill_value).dtype
    value = as_tensor(fill_value, dtype=dtype)
    if dtype is not None and value.dtype != as_dtype(dtype):
        value = value.astype(dtype)
    dims = as_shape_inputs(shape, "full")
    if isinstance(value, Constant) and all(isinstance(d, Constant) for d in dims):
        extents = tuple(int(d.data) for d in dims)
        if math.prod(extents) <= LARGEST_CONSTANT:
            return Constant(np.full(extents, value.data))
    return Alloc()(value, *dims)


def zeros(shape, dtype="float64"):
    """A tensor of zeros (numpy.zeros)."""
    return full(shape, np.zeros((), dtype))


def ones(shape, dtype="float64"):
    """A tensor of ones (numpy.ones)."""
    return full(shape, np.ones((), dtype))


def full_like(x, fill_value, dtype=None):
    """A tensor shaped like x, filled with `fill_value` (dtype defaults to x's)."""
    (x,) = as_operands(x)
    return full(shape_tuple(x), fill_value, dtype=x.dtype if dtype is None else dtype)


def zeros_like(x, dtype=None):
    """Zeros shaped like x."""
    (x,) = as_operands(x)
    return full_like(x, 0, dtype)


def ones_like(x, dtype=None):
    """Ones shaped like x."""
    (x,) = as_operands(x)
    return full_like(x, 1, dtype)


@final
@dataclass(frozen=True)
class Arange(Op):
    """Evenly spaced values in [start, stop) by step (numpy.arange)."""

    dtype: np.dtype = np.dtype(np.int64)
    reads = READS_NOTHING

    def infer(self, start, stop, step):
        ends = [static_value(v) for v in (start, stop, step)]
        length = None if None in ends else _arange_length(*ends)
        return [TensorType(self.dtype, (length,))]

    def perform(self, start, stop, step):
        return np.arange(start, stop, step, dtype=self.dtype)

    def pullback(self, inputs, outputs, grads):
        return [zero_grad(v) for v in inputs]


def static_value(v: Variable):
    return v.data.item() if isinstance(v, Constant) else None


def _arange_length(start, stop, step) -> int:
    return max(0, math.ceil((stop - start) / step))


def arange(start, stop=None, step=1, dtype=None):
    """Evenly spaced values (numpy.arange); `stop` may be a symbolic integer such as x.shape[0]."""
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ShapeError("arange: step must not be zero")
    bounds = as_operands(start, stop, step)
    out_dtype = as_dtype(dtype) if dtype is not None else np.result_type(*(b.dtype for b in bounds))
    if all(isinstance(b, Constant) for b in bounds):
        return Constant(np.arange(*(b.data.item() for b in bounds), dtype=out_dtype))
    return Arange(out_dtype)(*bounds)


def eye(N: int, M: int | None = None, k: int = 0, dtype="float64"):
    """Identity-like 2-D tensor with ones on the k-th diagonal (numpy.eye); static sizes."""
    return Constant(np.eye(N, M, k, dtype=dtype))


def identity(n: int, dtype="float64"):
    return eye(n, dtype=dtype)


def linspace(start, stop, num: int = 50, endpoint: bool = True, retstep: bool = False, dtype=None, axis: int = 0):
    """`num` evenly spaced values from start to stop (numpy.linspace); start and stop may be
    0-d tensors, then the result is differentiable in them.  `retstep=True` returns
    (values, step) as NumPy does; `axis` places the samples for array-valued constant ends
    (symbolic ends are 0-d, so their result has the one axis 0, or -1).

    >>> import stablegrad as sg
    >>> sg.linspace(0.0, 1.0, 5).eval()
    array([0.  , 0.25, 0.5 , 0.75, 1.  ])
    >>> [v.eval().tolist() for v in sg.linspace(0.0, 1.0, 3, retstep=True)]
    [[0.0, 0.5, 1.0], 0.5]
    """
    if not isinstance(num, int | np.integer) or num < 0:
        raise ShapeError(f"linspace: num must be a non-negative int, got {num!r}")
    num = int(num)
    if not isinstance(start, Variable) and not isinstance(stop, Variable):
        if retstep:
            samples, spacing = np.linspace(start, stop, num, endpoint=endpoint, retstep=True, dtype=dtype, axis=axis)
            return Constant(samples), Constant(np.asarray(spacing))
        return Constant(np.linspace(start, stop, num, endpoint=endpoint, dtype=dtype, axis=axis))
    lo, hi = as_operands(start, stop)
    if lo.ndim or hi.ndim:
        raise ShapeError(f"linspace: symbolic start and stop must be 0-d, got {lo.type} and {hi.type}")
    if axis not in (0, -1):
        raise ShapeError(f"linspace: axis {axis} is out of bounds for the 1-d result of 0-d ends")
    float_dtype = np.result_type(lo.dtype, hi.dtype, float(num))
    lo, hi = astype(lo, float_dtype), astype(hi, float_dtype)
    div = (num - 1) if endpoint else num
    # NumPy's own formula, so the values agree to the last bit: start + i * (delta / div), then
    # the last entry set to stop exactly; with div == 0 the step is nan (only i = 0 exists)
    steps = Constant(np.arange(num, dtype=float_dtype))
    step = (hi - lo) / div if div > 0 else (hi - lo) * np.nan
    values = steps * step + lo if div > 0 else steps * (hi - lo) + lo
    if endpoint and num > 1:
        values = values.at[-1].set(hi)
    if dtype is not None:
        dtype = as_dtype(dtype)
        values = astype(floor(values) if dtype.kind in "iu" else values, dtype)  # NumPy floors for integer dtypes
    return (values, step) if retstep else values


def _triangle(x, k: int, op: str, lower: bool) -> Variable:
    (x,) = as_operands(x)
    if x.ndim == 0:
        raise ShapeError(f"{op}: input must be at least 1-d, got a 0-d tensor")
    if not isinstance(k, int | np.integer):
        raise ShapeError(f"{op}: k must be an int, got {k!r}")
    # NumPy's mask tri(*x.shape[-2:]): a 1-d x is broadcast against its own square mask
    rows, cols = shape_tuple(x)[-2:] if x.ndim >= 2 else shape_tuple(x) * 2
    offset = reshape(arange(cols), (1, -1)) - reshape(arange(rows), (-1, 1))
    keep = less_equal(offset, int(k)) if lower else greater_equal(offset, int(k))
    return where(keep, x, np.zeros((), x.dtype))


def tril(x, k: int = 0):
    """x with the entries above the k-th diagonal zeroed (numpy.tril; on the last two axes).

    >>> import stablegrad as sg
    >>> sg.tril(sg.constant([[1, 2], [3, 4]])).eval()
    array([[1, 0],
           [3, 4]])
    """
    return _triangle(x, k, "tril", lower=True)


def triu(x, k: int = 0):
    """x with the entries below the k-th diagonal zeroed (numpy.triu; on the last two axes).

    >>> import stablegrad as sg
    >>> sg.triu(sg.constant([[1, 2], [3, 4]])).eval()
    array([[1, 2],
           [0, 4]])
    """
    return _triangle(x, k, "triu", lower=False)
