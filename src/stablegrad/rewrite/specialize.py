"""Specialize: late inlining of composites, so backends see plain ops to fuse and run,
and cheap speed-ups that need static shapes (shape lookups and broadcasts that fold away).

Runs after recognition, and recognition never runs again afterwards: that is what
keeps the max-shifted body of `LogSumExp`, once inlined, from being recognised as
`LogSumExp` again.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable

import numpy as np

from ..graph.basic import Constant, Op, Variable, substitute, toposort
from ..graph.types import is_floating
from ..ops.base import Elementwise
from ..ops.composite import OpFromGraph, SymbolicOp, inline
from ..ops.elementwise import Multiply
from ..ops.reduction import Sum
from ..ops.shape import BroadcastTo, ExpandDims, ReduceTo, Reshape, ShapeDim, Squeeze
from .engine import Kind, Phase, rewrite
from .extents import broadcast_extent, extent_source, extent_sources

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


@rewrite(Phase.SPECIALIZE, Kind.ALGEBRA, ShapeDim)
def extent_from_operand(node):
    """op(x, ...).shape[i] → the extent of the operands it comes from.

    Pullbacks read the shapes of forward values; with unknown shapes a forward value
    can be computed for nothing else (the Hessian-vector product of logsumexp needs
    only the shape of logsumexp's result).  Asking the operands instead lets the value
    go.  Elementwise ops: where a single operand can carry extent i (`extents.extent_source`).
    Reductions map i to the operand's axis; the stable ops without a mask keep their
    operand's shape.
    """
    v, axis, moved = node.inputs[0], node.op.axis, False
    while (source := extent_source(v, axis)) is not None:  # up a whole chain in one rewrite
        (v, axis), moved = source, True
    return ShapeDim(axis)(v) if moved else None


def lift_shape_only(outputs: list[Variable], keep: Iterable[Variable]) -> list[Variable] | None:
    """The graph with the shape lookups of broadcasts that nothing else reads taken from
    their operands (`where(a == 1, b, a)` where two operands could set the extent), so the
    broadcast is not computed; None if there is none.

    `extent_from_operand` cannot do this: it sees one node, not whether the value it
    would spare is needed anyway.  A weighted loss's gradient is the case: `w * f(x)`
    is read only for the shape of the seed, and `f(x)` only through it.
    """
    kept = list(keep)
    nodes = toposort(outputs, stop=kept)
    needed = {v.id for v in outputs} | {v.id for v in kept}
    for node in nodes:
        if not isinstance(node.op, ShapeDim):
            needed.update(v.id for v in node.inputs)
    replacements: dict[int, Variable] = {}
    for node in nodes:
        op = node.op
        if not isinstance(op, ShapeDim):
            continue
        v = node.inputs[0]
        if v.id in needed or v.owner is None or not isinstance(v.owner.op, Elementwise):
            continue
        sources = extent_sources(v.owner.inputs, v.ndim, op.axis % v.ndim)
        if len(sources) < 2:
            continue  # one source: `extent_from_operand` already asked it; none: a static 1
        replacements[node.outputs[0].id] = broadcast_extent(sources)
    return substitute(outputs, replacements) if replacements else None


@rewrite(Phase.SPECIALIZE, Kind.ALGEBRA, ReduceTo, BroadcastTo)
def needless_broadcast(node):
    """reduce_to / broadcast_to a static shape the operand already has → the operand."""
    x, dims = node.inputs[0], node.inputs[1:]
    target = _static(dims)
    return x if target is not None and x.type.shape == target else None


@rewrite(Phase.SPECIALIZE, Kind.ALGEBRA, Elementwise)
def filled_operand(node):
    """An entrywise op's operand that is one number broadcast (`broadcast_to`, `expand_dims`,
    `reshape` of a one-entry constant) → that number, where the other operands already give
    the result its static shape.

    A gradient's seed is such a fill (the ones that `sum`'s pullback broadcasts), and a
    product over it stays a product by 1 (a `Monomial` takes it as one more factor).  As
    the number it is, a compiled loop reads no array of ones, and a product by 1 is its
    other operand.
    """
    out = node.outputs[0].type
    if None in out.shape:
        return None
    changed, operands = False, list(node.inputs)
    for i, v in enumerate(operands):
        value = _filled(v)
        if value is not None and v.owner is not None:
            others = [u.type.shape for j, u in enumerate(operands) if j != i]  # (as replaced so far)
            if all(None not in s for s in others) and np.broadcast_shapes((), *others) == out.shape:
                operands[i], changed = Constant(value.reshape(())), True
    if not changed:
        return None
    if isinstance(node.op, Multiply):
        for one, other in (operands, operands[::-1]):
            if isinstance(one, Constant) and one.data.size == 1 and one.data.item() == 1 and other.type == out:
                return other
    return node.op(*operands)


def _filled(v: Variable) -> np.ndarray | None:
    """The one-entry constant that `v` broadcasts or reshapes, else None."""
    while v.owner is not None and isinstance(v.owner.op, BroadcastTo | ExpandDims | Reshape):
        v = v.owner.inputs[0]
    return v.data if isinstance(v, Constant) and v.data.size == 1 else None


@rewrite(Phase.SPECIALIZE, Kind.ALGEBRA, ReduceTo)
def static_reduce_to(node):
    """reduce_to a static shape from a static shape → a plain sum over the broadcast axes.

    `ReduceTo` works out at run time which axes to sum; in a loop's body, where it
    runs at every step, that bookkeeping costs more than the sum of a small array.
    """
    g, dims = node.inputs[0], node.inputs[1:]
    target, shape = _static(dims), g.type.shape
    # (a float cotangent: Sum of a small integer type would widen it, as np.sum does)
    if target is None or None in shape or len(shape) < len(target) or not is_floating(g.dtype):
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


RULES = (
    inline_composite,
    static_extent,
    extent_from_operand,
    needless_broadcast,
    filled_operand,
    static_reduce_to,
    squeezed_sum,
)
