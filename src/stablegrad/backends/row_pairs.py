"""logsumexp's pullback and its forward as one node: the row ops the NumPy and Numba backends share.

The chain rule always writes logsumexp's pullback as `g[..., None] * logsumexp_grad(x)`, and
a function that returns a loss and its gradient computes `logsumexp(x)` beside it.  As
written that is three passes of max-and-exp over x and a product over the whole array; a
backend that implements these ops does one max and one exp pass per row and scales as it
divides.  Both nodes are backend-private (they exist only inside a compiled program) and are
made only where the row implementations apply (float32/float64 rows over the last axis);
`perform` is the graph they replace, for reference.  This module needs nothing but NumPy.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import cast, final

import numpy as np

from ..graph.basic import Apply, Constant, Op, Variable, substitute, toposort
from ..graph.fgraph import FunctionGraph
from ..graph.types import TensorType
from ..ops.base import Elementwise
from ..ops.elementwise import Multiply
from ..ops.shape import ShapeDim
from ..ops.stable import LogSumExp
from ..ops.stable.logsumexp import LogSumExpGrad
from ..rewrite.extents import broadcast_extent, extent_source, extent_sources

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@final
@dataclass(frozen=True)
class ScaledSoftmax(Op):
    """scale · logsumexp_grad(x) over the last axis, scale constant along it."""

    def infer(self, x, scale):
        return [TensorType(x.dtype, x.type.shape)]

    def perform(self, x, scale):
        return scale * LogSumExpGrad((x.ndim - 1,)).perform(x)


@final
@dataclass(frozen=True)
class LogSumExpAndScaledSoftmax(Op):
    """(logsumexp(x), scale · logsumexp_grad(x)) over the last axis, from the same passes."""

    keepdims: bool = False
    nout = 2  # type: ignore[assignment]

    def infer(self, x, scale):
        reduced = x.type.shape[:-1] + ((1,) if self.keepdims else ())
        return [TensorType(x.dtype, reduced), TensorType(x.dtype, x.type.shape)]

    def perform(self, x, scale):
        last = (x.ndim - 1,)
        return LogSumExp(last, self.keepdims).perform(x), ScaledSoftmax().perform(x, scale)


def over_rows(x: Variable, axes) -> bool:
    """Whether a reduction over `axes` of x is one the row kernels run: float x, its last axis."""
    return x.dtype in FLOATS and x.ndim > 0 and tuple(a % x.ndim for a in axes) == (x.ndim - 1,)


def fused(graph: FunctionGraph) -> list[Variable]:
    """The graph's outputs with logsumexp's pullbacks (and the logsumexp beside each) fused."""
    return _fused(list(graph.outputs), list(graph.inputs), apart=True)


def _fused(outputs: list[Variable], inputs: list[Variable], apart: bool) -> list[Variable]:
    nodes = toposort(outputs, stop=inputs)
    readers = Counter(v.id for node in nodes for v in node.inputs)
    readers.update(v.id for v in outputs)
    pullbacks: dict[int, tuple] = {}  # x's id → (the variable replaced, x, scale)
    for node in nodes:
        if isinstance(node.op, LogSumExpGrad) and over_rows(node.inputs[0], node.op.axes):
            pullbacks[node.inputs[0].id] = (node.outputs[0], node.inputs[0], None)
    for node in nodes:
        if isinstance(node.op, Multiply):
            for scale, p in (node.inputs, node.inputs[::-1]):
                grad = p.owner
                if grad is None or not isinstance(grad.op, LogSumExpGrad) or readers[p.id] != 1:
                    continue
                x = grad.inputs[0]
                if x.id in pullbacks and _row_factor(scale, x) and node.outputs[0].type == x.type:
                    pullbacks[x.id] = (node.outputs[0], x, scale)
                    break
    forwards = {
        node.inputs[0].id: node
        for node in nodes
        if isinstance(node.op, LogSumExp) and node.op.plain and over_rows(node.inputs[0], node.op.axes)
    }
    joining = [forwards[x_id] for x_id in pullbacks if x_id in forwards]
    computed_from = _sources(nodes, [forward.outputs[0] for forward in joining])
    if apart and any(
        computed_from(scale, forwards[x_id].outputs[0])
        for x_id, (_, _, scale) in pullbacks.items()
        if x_id in forwards and scale is not None
    ):
        detached = _shapes_from_operands(outputs, nodes, joining, computed_from)
        if detached is not None:
            return _fused(detached, inputs, apart=False)
    replacements: dict[int, Variable] = {}
    for x_id, (replaced, x, scale) in pullbacks.items():
        if scale is None:
            scale = Constant(np.ones((1,) * x.ndim, dtype=x.dtype))
        forward = forwards.get(x_id)
        # (the forward joins unless the scale is computed from it: g = 2 · lse for a cost lse²;
        # a shape read from it is taken from the operands first, `_shapes_from_operands`)
        if forward is not None and not computed_from(scale, forward.outputs[0]):
            lse, grad = LogSumExpAndScaledSoftmax(cast(LogSumExp, forward.op).keepdims)(x, scale)
            replacements[forward.outputs[0].id] = lse
            replacements[replaced.id] = grad
        else:
            replacements[replaced.id] = ScaledSoftmax()(x, scale)
    return substitute(outputs, replacements) if replacements else outputs


def _shapes_from_operands(outputs: list[Variable], nodes: list[Apply], forwards: list[Apply], computed_from):
    """The outputs with each shape lookup of a value computed from one of these logsumexps
    taken from the operands that set that extent instead (`where(a == 1, b, a)` of theirs);
    None if there is none.  A weighted loss's seed reads the shape of `w * lse`, which
    would otherwise keep the logsumexp out of the node its pullback's scale feeds."""

    def late(v: Variable) -> bool:
        return any(computed_from(v, forward.outputs[0]) for forward in forwards)

    def leaves(v: Variable, axis: int) -> list | None:
        if not late(v):
            return [(v, axis)]
        owner = cast(Apply, v.owner)
        if isinstance(owner.op, Elementwise):
            found: list = extent_sources(owner.inputs, v.ndim, axis % v.ndim) or [1]
        else:
            source = extent_source(v, axis)
            if source is None:
                return None
            found = [source]
        out: list = []
        for s in found:
            more = [s] if isinstance(s, int) else leaves(*s)
            if more is None:
                return None
            out += more
        return out

    replacements: dict[int, Variable] = {}
    for node in nodes:
        if isinstance(node.op, ShapeDim) and late(node.inputs[0]):
            found = leaves(node.inputs[0], node.op.axis)
            if found is not None:
                replacements[node.outputs[0].id] = broadcast_extent(found)
    return substitute(outputs, replacements) if replacements else None


def _sources(nodes: list[Apply], sources: list[Variable]):
    """`computed_from(v, s)`: whether variable v is computed from source s (one of `sources`).

    One pass over the nodes in order, each variable's sources as the bits of one integer:
    a walk up from every scale would make a graph of n logsumexps cost n² (unrolled loops).
    """
    bit = {s.id: 1 << i for i, s in enumerate(sources)}
    masks: dict[int, int] = {}
    for node in nodes:
        mask = 0
        for v in node.inputs:
            mask |= masks.get(v.id, 0)
        for out in node.outputs:
            masks[out.id] = mask | bit.get(out.id, 0)

    def computed_from(v: Variable, source: Variable) -> bool:
        return bool(masks.get(v.id, 0) & bit[source.id])

    return computed_from


def _row_factor(scale: Variable, x: Variable) -> bool:
    """Whether `scale` multiplies each row of x by one number: x's dtype and rank, extent 1 last."""
    shape = scale.type.shape
    return scale.dtype == x.dtype and scale.ndim == x.ndim and shape[-1] == 1
