"""Specialize: late inlining of composites, so backends see plain ops to fuse and run,
and cheap speed-ups that need static shapes (shape lookups and broadcasts that fold away).

Runs after recognition, and recognition never runs again afterwards: that is what
keeps the max-shifted body of `LogSumExp`, once inlined, from being recognised as
`LogSumExp` again.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable

import numpy as np

from ..graph.basic import Constant, Op
from ..ops.composite import OpFromGraph, SymbolicOp, inline
from ..ops.reduction import Sum
from ..ops.shape import BroadcastTo, ReduceTo, ShapeDim, Squeeze
from .engine import Kind, Phase, rewrite

#: which composites the target backend runs whole (not inlined); set by `pipeline.optimize`
KEEP_WHOLE: contextvars.ContextVar[Callable[[Op], bool] | None] = contextvars.ContextVar("keep_whole", default=None)


@rewrite(Phase.SPECIALIZE, Kind.INLINING, SymbolicOp, OpFromGraph)
def inline_composite(node):
    """A composite op → its body, rebuilt on the node's inputs (unless the backend runs it whole)."""
    op = node.op
    keep_whole = KEEP_WHOLE.get()
    if isinstance(op, SymbolicOp) and (not op.inline or (keep_whole is not None and keep_whole(op))):
        return None
    return inline(op, node.inputs)


def _static(dims) -> tuple[int, ...] | None:
    values = tuple(int(d.data) if isinstance(d, Constant) else None for d in dims)
    return None if None in values else values  # type: ignore[return-value]


@rewrite(Phase.SPECIALIZE, Kind.ALGEBRA, ShapeDim)
def static_extent(node):
    """x.shape[i] → a constant where the extent is known statically."""
    n = node.inputs[0].type.shape[node.op.axis]
    return Constant(np.int64(n)) if n is not None else None


@rewrite(Phase.SPECIALIZE, Kind.ALGEBRA, ReduceTo, BroadcastTo)
def needless_broadcast(node):
    """reduce_to / broadcast_to a static shape the operand already has → the operand."""
    x, dims = node.inputs[0], node.inputs[1:]
    target = _static(dims)
    return x if target is not None and x.type.shape == target else None


@rewrite(Phase.SPECIALIZE, Kind.ALGEBRA, ReduceTo)
def static_reduce_to(node):
    """reduce_to a static shape from a static shape → a plain sum over the broadcast axes.

    `ReduceTo` works out at run time which axes to sum; in a loop's body, where it
    runs at every step, that bookkeeping costs more than the sum of a small array.
    """
    g, dims = node.inputs[0], node.inputs[1:]
    target, shape = _static(dims), g.type.shape
    # (a float cotangent: Sum of a small integer type would widen it, as np.sum does)
    if target is None or None in shape or len(shape) < len(target) or g.dtype.kind != "f":
        return None
    extra = len(shape) - len(target)
    kept = tuple(extra + i for i, n in enumerate(target) if n == 1 and shape[extra + i] != 1)
    if not kept:
        return Sum(tuple(range(extra)))(g) if extra else g
    summed = Sum(tuple(range(extra)) + kept, keepdims=True)(g)
    return Squeeze(tuple(range(extra)))(summed) if extra else summed


@rewrite(Phase.SPECIALIZE, Kind.ALGEBRA, Squeeze)
def squeezed_sum(node):
    """squeeze(sum(x, axes, keepdims=True), axes) → sum(x, axes): one node instead of two."""
    owner = node.inputs[0].owner
    if owner is None or not isinstance(owner.op, Sum) or not owner.op.keepdims or owner.op.axes != node.op.axes:
        return None
    return Sum(owner.op.axes)(owner.inputs[0])


RULES = (inline_composite, static_extent, needless_broadcast, static_reduce_to, squeezed_sum)
