"""Running a loop body's carry-independent work once, batched over all steps.

A reverse scan (the pullback of a loop) recomputes, at every step, what the forward
step derived from the stored carry — in an HMM, the softmax of `alpha[:, None] + log_A`.
None of that depends on the backward carry, only on the sequences the loop walks
over, so it can run *before* the loop, once, on the stacked sequences: one softmax
over a (T, K, K) array instead of T softmaxes over (K, K) arrays.  On small states
the per-call cost of NumPy (about a microsecond) is the whole cost, so this removes
most of a step's time.

`hoist` takes an optimized body and returns two programs: the `prologue`, the
hoisted part rewritten for a leading step axis, and the `step`, the body with the
hoisted values arriving as extra sequences (per-step values) or extra implicit
inputs (values the same at every step).  A node is hoisted when none of its inputs depends on a carry
and its op has a batching rule below; everything else stays in the loop unchanged.
The rules cover elementwise ops and ops that act on some `axes` of one operand;
that is where the pullbacks of the stable family spend their time.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..graph.basic import Apply, Constant, Op, Variable, substitute, toposort
from ..graph.types import TensorType
from ..ops.base import Elementwise
from ..ops.reduction import ArgExtremum, Reduction
from ..ops.shape import ExpandDims, Squeeze, Transpose
from ..ops.stable import LogSoftmax, LogSumExp, Softmax
from ..ops.stable.logsumexp import LogSumExpGrad
from .numpy_program import Program

#: op classes that act on `axes` of their single operand: batched by shifting the axes by one
_AXES_OPS = (Reduction, Softmax, LogSoftmax, LogSumExp, LogSumExpGrad, Squeeze)


@dataclass
class HoistedLoop:
    """A loop body split into a batched prologue and the per-step remainder.

    `prologue` maps (stacked sequences, implicit inputs) to (`n_batched` stacked
    hoisted values, then the hoisted invariants); `step` takes (carries, slices of
    the sequences, slices of the stacked hoisted values, implicit inputs, hoisted
    invariants) and returns the body's outputs.  The prologue holds about
    `bytes_per_step` bytes a step of the loop.
    """

    prologue: Program
    step: Program
    n_batched: int
    bytes_per_step: int


def hoist(
    carries: list[Variable], slices: list[Variable], consts: list[Variable], outputs: list[Variable]
) -> HoistedLoop | None:
    """Split off the carry-independent work that can run batched; None when there is none."""
    stacked = [Variable(TensorType(s.dtype, (None, *s.type.shape)), name=s.name) for s in slices]
    # value in the prologue's graph, and whether it carries a leading step axis
    hoisted: dict[int, tuple[Variable, bool]] = {s.id: (b, True) for s, b in zip(slices, stacked)}
    hoisted.update((k.id, (k, False)) for k in consts)
    in_loop = {c.id for c in carries}
    bytes_per_step = 0
    any_hoisted = False
    nodes = toposort(outputs, stop=carries + slices + consts)
    for node in nodes:
        if any(v.id in in_loop for v in node.inputs):
            in_loop.update(o.id for o in node.outputs)
            continue
        operands = [hoisted.get(v.id, (v, False)) for v in node.inputs]  # a Constant is the same every step
        if not any(batched for _, batched in operands):  # the same at every step: computed once, as it is
            pairs = [(o, False) for o in node.outputs]
        else:
            batched_outputs = _batch(node, operands)
            if batched_outputs is None:
                in_loop.update(o.id for o in node.outputs)
                continue
            pairs = [(r, True) for r in batched_outputs]
            bytes_per_step += sum(o.dtype.itemsize * math.prod(n or 1 for n in o.type.shape) for o in node.outputs)
        any_hoisted = True
        hoisted.update((o.id, p) for o, p in zip(node.outputs, pairs))
    if not any_hoisted:
        return None

    # the hoisted values the loop still reads: inputs of in-loop nodes and the body's own outputs
    boundary: dict[int, Variable] = {}
    placeholders = {v.id for v in carries + slices + consts}
    for node in nodes:
        if node.outputs[0].id in in_loop:
            for v in node.inputs:
                if v.id in hoisted and v.id not in placeholders and not isinstance(v, Constant):
                    boundary.setdefault(v.id, v)
    for o in outputs:
        if o.id in hoisted and o.id not in placeholders and not isinstance(o, Constant):
            boundary.setdefault(o.id, o)
    per_step = [v for v in boundary.values() if hoisted[v.id][1]]
    invariant = [v for v in boundary.values() if not hoisted[v.id][1]]
    new_slices = [Variable(v.type, name=f"hoisted{i}") for i, v in enumerate(per_step)]
    new_consts = [Variable(v.type, name=f"invariant{i}") for i, v in enumerate(invariant)]
    replacements = {v.id: p for v, p in zip(per_step + invariant, new_slices + new_consts)}
    return HoistedLoop(
        prologue=Program(stacked + consts, [hoisted[v.id][0] for v in per_step + invariant]),
        step=Program(carries + slices + new_slices + consts + new_consts, substitute(outputs, replacements)),
        n_batched=len(new_slices),
        bytes_per_step=bytes_per_step,
    )


def _batch(node: Apply, operands: list[tuple[Variable, bool]]) -> list[Variable] | None:
    """`node` applied to operands with a leading step axis (where batched); None without a rule."""
    op: Op = node.op
    if isinstance(op, Elementwise):
        rank = node.outputs[0].ndim
        aligned = [_lift(v, rank - step.ndim) if batched else v for (v, batched), step in zip(operands, node.inputs)]
        return [op(*aligned)]
    if len(operands) != 1 or isinstance(op, ArgExtremum):  # (a weighted or masked op has more operands)
        return None
    (x, _), step_ndim = operands[0], node.inputs[0].ndim
    batched_op: Op
    if isinstance(op, _AXES_OPS):
        batched_op = dataclasses.replace(op, axes=tuple(a % step_ndim + 1 for a in op.axes))  # type: ignore[type-var]
    elif isinstance(op, ExpandDims):
        batched_op = ExpandDims(tuple(a + 1 for a in op.axes))
    elif isinstance(op, Transpose):
        batched_op = Transpose((0, *(a + 1 for a in op.axes)))
    else:
        return None
    results = batched_op(x)
    return list(results) if batched_op.nout > 1 else [results]


def _lift(v: Variable, missing: int) -> Variable:
    """A stacked operand with `missing` length-1 axes after the step axis, so that it
    broadcasts against the other operands exactly as its per-step slice did."""
    return ExpandDims(tuple(range(1, 1 + missing)))(v) if missing else v
