"""Shapes as graph, and the ops that only move data: reshape, transpose, broadcast, concatenate.

Symbolic extents are 0-d int64 variables (`ShapeDim`), so `x.shape[1]` is an int
when it is known statically and a graph scalar otherwise.  Ops that take a shape
(reshape, broadcast_to, zeros, ...) take its entries as extra inputs.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import final

import numpy as np

from ..errors import ShapeError
from ..graph.basic import READS_NOTHING, Constant, Op, Variable
from ..graph.types import TensorType, broadcast_shapes, normalize_axis
from .base import Linear, as_operands, zero_grad
from .elementwise import add

_INT = np.dtype(np.int64)


# -- symbolic extents ---------------------------------------------------------------------------
@final
@dataclass(frozen=True)
class ShapeDim(Op):
    """x.shape[axis] as a 0-d int64 tensor (reads only x's shape)."""

    axis: int = 0
    reads = READS_NOTHING

    def infer(self, x):
        return [TensorType(_INT, ())]

    def perform(self, x):
        return np.int64(np.shape(x)[self.axis])

    def pullback(self, inputs, outputs, grads):
        return [zero_grad(inputs[0])]


def shape_tuple(x: Variable) -> tuple:
    """x's shape: ints where known statically, 0-d int64 variables elsewhere."""
    return tuple(n if n is not None else ShapeDim(i)(x) for i, n in enumerate(x.type.shape))


def size(x: Variable):
    """Number of entries: an int when known, else a 0-d int64 variable."""
    total: object = 1
    for n in shape_tuple(x):
        total = total * n
    return total


def as_shape_inputs(shape, op: str) -> list[Variable]:
    """A shape (ints and integer scalars) as 0-d int64 inputs of an op; errors name `op`."""
    if isinstance(shape, int | np.integer | Variable):
        shape = (shape,)
    dims = []
    for n in shape:
        if isinstance(n, Variable):
            if n.ndim != 0 or n.dtype.kind not in "iu":
                raise ShapeError(f"{op}: shape entries must be integer scalars, got {n.type}")
            dims.append(n if n.dtype == _INT else n.astype(_INT))
        elif isinstance(n, int | np.integer):
            dims.append(Constant(np.int64(n)))
        else:
            raise ShapeError(f"{op}: shape entries must be ints or integer scalars, got {n!r}")
    return dims


def static_dim(dim: Variable) -> int | None:
    return int(dim.data) if isinstance(dim, Constant) else None


def _run_shape(dims) -> tuple[int, ...]:
    return tuple(int(d) for d in dims)


# -- reshape ---------------------------------------------------------------------------------------
@final
@dataclass(frozen=True)
class Reshape(Linear, Op):
    """x reshaped to the shape given by the remaining inputs (one entry may be -1)."""

    reads = READS_NOTHING

    def infer(self, x, *dims):
        target = [static_dim(d) for d in dims]
        if target.count(-1) > 1:
            raise ShapeError(f"reshape: can only specify one unknown dimension, got {tuple(target)}")
        total = None if None in x.type.shape else math.prod(x.type.shape)
        if -1 in target:
            known = [t for t in target if t != -1]
            if None not in known and total is not None:
                rest = math.prod(known)  # type: ignore[arg-type]
                if rest == 0 or total % rest:
                    raise ShapeError(f"reshape: cannot reshape array of shape {x.type.shape} into {tuple(target)}")
                target[target.index(-1)] = total // rest
            else:
                target[target.index(-1)] = None
        elif None not in target and total is not None and math.prod(target) != total:  # type: ignore[arg-type]
            raise ShapeError(f"reshape: cannot reshape array of shape {x.type.shape} into {tuple(target)}")
        return [TensorType(x.dtype, tuple(target))]

    def perform(self, x, *dims):
        return np.reshape(x, _run_shape(dims))

    def pullback(self, inputs, outputs, grads):
        x = inputs[0]
        return [reshape(grads[0], shape_tuple(x))] + [zero_grad(d) for d in inputs[1:]]


def reshape(x, shape):
    """x with a new shape (NumPy's reshape; one entry may be -1)."""
    (x,) = as_operands(x)
    dims = as_shape_inputs(shape, "reshape")
    if all(isinstance(d, Constant) for d in dims) and tuple(static_dim(d) for d in dims) == x.type.shape:
        return x
    return Reshape()(x, *dims)


def ravel(x):
    """x flattened to one dimension, in C order.

    >>> import stablegrad as sg
    >>> sg.ravel(sg.constant([[1, 2], [3, 4]])).eval()
    array([1, 2, 3, 4])
    """
    return reshape(x, (-1,))


#: ndarray.flatten (a copy in NumPy; graph values are never mutated, so the same as ravel here)
flatten = ravel


# -- transpose ------------------------------------------------------------------------------------
@final
@dataclass(frozen=True)
class Transpose(Linear, Op):
    """x with its axes permuted."""

    axes: tuple[int, ...] = ()
    reads = READS_NOTHING

    def infer(self, x):
        return [TensorType(x.dtype, tuple(x.type.shape[a] for a in self.axes))]

    def perform(self, x):
        return np.transpose(x, self.axes)

    def pullback(self, inputs, outputs, grads):
        return [Transpose(tuple(int(i) for i in np.argsort(self.axes)))(grads[0])]


def transpose(x, axes=None):
    """Permute the axes (reverse them by default), as numpy.transpose."""
    (x,) = as_operands(x)
    if axes is None:
        axes = tuple(reversed(range(x.ndim)))
    axes = tuple(axes)
    if sorted(normalize_axis(axes, x.ndim, "transpose", "axes")) != list(range(x.ndim)) or len(axes) != x.ndim:
        raise ShapeError(f"transpose: axes {axes} are not a permutation of {x.ndim} axes")
    axes = tuple(a % x.ndim for a in axes)
    return x if axes == tuple(range(x.ndim)) else Transpose(axes)(x)


def moveaxis(x, source, destination):
    """Move axes to new positions, others keep their order (numpy.moveaxis)."""
    (x,) = as_operands(x)
    src = [source] if isinstance(source, int | np.integer) else list(source)
    dst = [destination] if isinstance(destination, int | np.integer) else list(destination)
    # validate before wrapping: `a % ndim` would silently accept an axis out of range
    normalize_axis(tuple(src), x.ndim, "moveaxis", "source")
    normalize_axis(tuple(dst), x.ndim, "moveaxis", "destination")
    if len(src) != len(dst):
        raise ShapeError(f"moveaxis: source {source!r} and destination {destination!r} differ in length")
    src, dst = [int(a) % x.ndim for a in src], [int(a) % x.ndim for a in dst]
    order = [a for a in range(x.ndim) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(x, order)


def swapaxes(x, axis1: int, axis2: int):
    """Interchange two axes."""
    (x,) = as_operands(x)
    order = list(range(x.ndim))
    a, b = (
        normalize_axis(axis1, x.ndim, "swapaxes", "axis1")[0],
        normalize_axis(axis2, x.ndim, "swapaxes", "axis2")[0],
    )
    order[a], order[b] = order[b], order[a]
    return transpose(x, order)


# -- expand_dims / squeeze ---------------------------------------------------------------------------
@final
@dataclass(frozen=True)
class ExpandDims(Linear, Op):
    """x with new length-1 axes at the given (sorted, output) positions."""

    axes: tuple[int, ...] = ()
    reads = READS_NOTHING

    def infer(self, x):
        shape = list(x.type.shape)
        for a in self.axes:
            shape.insert(a, 1)
        return [TensorType(x.dtype, tuple(shape))]

    def perform(self, x):
        # indexing with None inserts the axes without np.expand_dims's argument checks (~5 µs a call)
        x = np.asarray(x)
        return x[_new_axes_index(self.axes, x.ndim + len(self.axes))]

    def pullback(self, inputs, outputs, grads):
        return [Squeeze(self.axes)(grads[0])]


@functools.cache
def _new_axes_index(axes: tuple[int, ...], ndim: int) -> tuple:
    return tuple(None if i in axes else slice(None) for i in range(ndim))


@final
@dataclass(frozen=True)
class Squeeze(Linear, Op):
    """x without the given length-1 axes."""

    axes: tuple[int, ...] = ()
    reads = READS_NOTHING

    def infer(self, x):
        for a in self.axes:
            if x.type.shape[a] not in (1, None):
                raise ShapeError(f"squeeze: cannot squeeze axis {a} of extent {x.type.shape[a]} (shape {x.type.shape})")
        return [TensorType(x.dtype, tuple(n for i, n in enumerate(x.type.shape) if i not in self.axes))]

    def perform(self, x):
        return np.squeeze(x, self.axes)

    def pullback(self, inputs, outputs, grads):
        return [ExpandDims(self.axes)(grads[0])]


def expand_dims(x, axis):
    """Insert length-1 axes at `axis` (int or tuple), as numpy.expand_dims."""
    (x,) = as_operands(x)
    count = 1 if isinstance(axis, int | np.integer) else len(axis)
    axes = normalize_axis(axis, x.ndim + count, "expand_dims")
    return ExpandDims(axes)(x) if axes else x


def squeeze(x, axis=None):
    """Remove length-1 axes (all statically known ones when axis is None)."""
    (x,) = as_operands(x)
    if axis is None:
        axes = tuple(i for i, n in enumerate(x.type.shape) if n == 1)
    else:
        axes = normalize_axis(axis, x.ndim, "squeeze")
    return Squeeze(axes)(x) if axes else x


# -- broadcasting and its adjoint ---------------------------------------------------------------------
@final
@dataclass(frozen=True)
class BroadcastTo(Linear, Op):
    """x broadcast to the shape given by the remaining inputs (a read-only view)."""

    reads = READS_NOTHING

    def infer(self, x, *dims):
        target = tuple(static_dim(d) for d in dims)
        if x.ndim > len(target):
            raise ShapeError(f"broadcast_to: cannot broadcast shape {x.type.shape} to fewer dimensions {target}")
        padded = (1,) * (len(target) - x.ndim) + x.type.shape
        for have, want in zip(padded, target):
            if have not in (1, None) and want is not None and have != want:
                raise ShapeError(f"broadcast_to: cannot broadcast shape {x.type.shape} to {target}")
        shape = tuple(w if w is not None else (h if h not in (1, None) else None) for h, w in zip(padded, target))
        return [TensorType(x.dtype, shape)]

    def perform(self, x, *dims):
        return np.broadcast_to(x, _run_shape(dims))

    def pullback(self, inputs, outputs, grads):
        x = inputs[0]
        return [reduce_to(grads[0], shape_tuple(x))] + [zero_grad(d) for d in inputs[1:]]


@final
@dataclass(frozen=True)
class ReduceTo(Linear, Op):
    """g summed down to a shape it was broadcast from: the adjoint of broadcasting.

    `grad` applies it wherever an operand was broadcast; at run time it is free
    when the shapes already agree, so it is safe to insert when shapes are unknown.
    """

    reads = READS_NOTHING

    def infer(self, g, *dims):
        return [TensorType(g.dtype, tuple(static_dim(d) for d in dims))]

    def perform(self, g, *dims):
        target = _run_shape(dims)
        shape = np.shape(g)
        if shape == target:
            return g
        return np.add.reduce(np.asarray(g), axis=reduced_axes(shape, target), keepdims=True).reshape(target)

    def pullback(self, inputs, outputs, grads):
        g = inputs[0]
        return [BroadcastTo()(grads[0], *as_shape_inputs(shape_tuple(g), "broadcast_to"))] + [
            zero_grad(d) for d in inputs[1:]
        ]


def reduced_axes(shape: tuple[int, ...], target: tuple[int, ...]) -> tuple[int, ...]:
    """The axes to sum so that a cotangent of `shape` becomes `target`, which it must broadcast from.

    (A cotangent that does not is the trace of forward operands that did not broadcast
    either, whose op was never run: a value read only for its shape is not computed.)
    """
    extra = len(shape) - len(target)
    if extra < 0 or any(n not in (1, shape[extra + i]) for i, n in enumerate(target)):
        raise ValueError(f"operands could not be broadcast together with shapes {target} {shape}")
    return tuple(range(extra)) + tuple(extra + i for i, n in enumerate(target) if n == 1 and shape[extra + i] != 1)


def broadcast_to(x, shape):
    """x broadcast to `shape` (numpy.broadcast_to)."""
    (x,) = as_operands(x)
    dims = as_shape_inputs(shape, "broadcast_to")
    if all(isinstance(d, Constant) for d in dims) and tuple(static_dim(d) for d in dims) == x.type.shape:
        return x
    return BroadcastTo()(x, *dims)


def zeros_shaped_like(x: Variable, dtype=None) -> Variable:
    """Zeros with x's shape, as a broadcast of one zero: `creation.zeros_like` imports this module,
    so the shape family's own pullbacks use this instead."""
    return broadcast_to(Constant(np.zeros((), dtype or x.dtype)), shape_tuple(x))


def reduce_to(g: Variable, shape: Sequence) -> Variable:
    """g summed over the axes along which `shape` was broadcast to g's shape."""
    dims = as_shape_inputs(tuple(shape), "reduce_to")
    if all(isinstance(d, Constant) for d in dims) and tuple(static_dim(d) for d in dims) == g.type.shape:
        return g
    return ReduceTo()(g, *dims)


def broadcast_arrays(*xs):
    """Every operand broadcast to their common shape."""
    xs = as_operands(*xs)
    shape = broadcast_shapes(*(x.type.shape for x in xs), op="broadcast_arrays")
    if None in shape:
        common = xs[0]
        for x in xs[1:]:  # the common extents at run time, from a sum of zeros shaped like the operands
            common = add(zeros_shaped_like(common, np.bool_), zeros_shaped_like(x, np.bool_))
        return [broadcast_to(x, shape_tuple(common)) for x in xs]
    return [broadcast_to(x, shape) for x in xs]


# -- concatenate / split --------------------------------------------------------------------------------
@final
@dataclass(frozen=True)
class Concatenate(Op):
    """Operands joined along an existing axis."""

    axis: int = 0
    reads = READS_NOTHING

    def infer(self, *xs):
        first = xs[0]
        for i, x in enumerate(xs[1:], 1):
            if x.ndim != first.ndim:
                raise ShapeError(
                    f"concatenate: all inputs must have the same number of dimensions, "
                    f"input 0 has shape {first.type.shape} and input {i} has {x.type.shape}"
                )
        shape = []
        for d in range(first.ndim):
            dims = [x.type.shape[d] for x in xs]
            if d == self.axis:
                shape.append(None if None in dims else sum(dims))  # type: ignore[arg-type]
                continue
            known = {n for n in dims if n is not None}
            if len(known) > 1:
                listed = ", ".join(str(x.type.shape) for x in xs)
                raise ShapeError(f"concatenate: shapes {listed} differ off the concatenation axis {self.axis}")
            shape.append(known.pop() if known else None)
        dtype = np.result_type(*(x.dtype for x in xs))
        return [TensorType(dtype, tuple(shape))]

    def perform(self, *xs):
        return np.concatenate(xs, axis=self.axis)

    def pullback(self, inputs, outputs, grads):
        return list(SplitLike(self.axis, len(inputs))(grads[0], *inputs))

    def pushforward(self, inputs, outputs, tangents):
        """The tangents joined as the operands are (zeros for an operand without one)."""
        return [self(*(zeros_shaped_like(x) if t is None else t for x, t in zip(inputs, tangents)))]


@final
@dataclass(frozen=True)
class SplitLike(Op):
    """g cut along `axis` into pieces as long as the reference operands (reads their shapes only)."""

    axis: int = 0
    parts: int = 1
    reads = READS_NOTHING

    @property
    def nout(self) -> int:  # type: ignore[override]
        return self.parts

    def infer(self, g, *refs):
        return [
            TensorType(g.dtype, tuple(r.type.shape[d] if d == self.axis else g.type.shape[d] for d in range(g.ndim)))
            for r in refs
        ]

    def perform(self, g, *refs):
        cuts = np.cumsum([np.shape(r)[self.axis] for r in refs])[:-1]
        return tuple(np.split(g, cuts, axis=self.axis))

    def pullback(self, inputs, outputs, grads):
        pieces = [g if not _is_zero(g) else zeros_shaped_like(o) for g, o in zip(grads, outputs)]
        return [concatenate(pieces, axis=self.axis)] + [zero_grad(r) for r in inputs[1:]]


def _is_zero(g) -> bool:
    return not isinstance(g, Variable)


def concatenate(arrays, axis: int = 0):
    """Join tensors along an existing axis (numpy.concatenate)."""
    xs = as_operands(*arrays)
    if not xs:
        raise ShapeError("concatenate: need at least one array to concatenate")
    if xs[0].ndim == 0:
        raise ShapeError("concatenate: zero-dimensional arrays cannot be concatenated")
    axis = normalize_axis(axis, xs[0].ndim, "concatenate")[0]
    dtype = np.result_type(*(x.dtype for x in xs))
    xs = [x if x.dtype == dtype else x.astype(dtype) for x in xs]
    return xs[0] if len(xs) == 1 else Concatenate(axis)(*xs)


def stack(arrays, axis: int = 0):
    """Join tensors along a new axis (numpy.stack)."""
    xs = as_operands(*arrays)
    if not xs:
        raise ShapeError("stack: need at least one array to stack")
    axis = normalize_axis(axis, xs[0].ndim + 1, "stack")[0]
    for i, x in enumerate(xs[1:], 1):
        broadcast_shapes(xs[0].type.shape, x.type.shape, op="stack")
        if x.ndim != xs[0].ndim:
            raise ShapeError(
                f"stack: all input arrays must have the same shape, input 0 is {xs[0].type.shape}, "
                f"input {i} is {x.type.shape}"
            )
    return concatenate([expand_dims(x, axis) for x in xs], axis=axis)


def atleast_1d(x):
    (x,) = as_operands(x)
    return reshape(x, (1,)) if x.ndim == 0 else x


# -- tiling and padding ----------------------------------------------------------------------------
def tile(x, reps):
    """x repeated `reps` times along each axis, as numpy.tile (reps: an int or a tuple of ints).

    A broadcast along new axes interleaved with x's, then merged into them: no copy loop.

    >>> import stablegrad as sg
    >>> sg.tile(sg.constant([1, 2]), (2, 2)).eval()
    array([[1, 2, 1, 2],
           [1, 2, 1, 2]])
    """
    (x,) = as_operands(x)
    reps = (reps,) if isinstance(reps, int | np.integer) else tuple(reps)
    if not all(isinstance(r, int | np.integer) and r >= 0 for r in reps):
        raise ShapeError(f"tile: reps must be non-negative ints, got {reps!r}")
    ndim = max(x.ndim, len(reps))
    reps = (1,) * (ndim - len(reps)) + tuple(int(r) for r in reps)
    dims = (1,) * (ndim - x.ndim) + shape_tuple(x)  # NumPy gives x leading unit axes first
    interleaved = reshape(x, [d for n in dims for d in (1, n)])
    wide = broadcast_to(interleaved, [d for r, n in zip(reps, dims) for d in (r, n)])
    return reshape(wide, [r * n for r, n in zip(reps, dims)])
