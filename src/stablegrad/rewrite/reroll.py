"""Re-rolling: a loop the user unrolled in Python becomes a `scan` again.

    alpha = log_pi + log_B[0]
    for t in range(1, T):
        alpha = logsumexp(alpha[:, None] + log_A, axis=0) + log_B[t]

builds T - 1 copies of one step.  Unrolled, every stage pays for every copy: `grad`
walks and differentiates each, the optimiser rewrites each, a compiler (XLA above
all) compiles each, and a run dispatches each node of each step.  As a loop, the step
is differentiated, optimised and compiled once, and the compiled backends run it as
one loop (`scan_loop`, `lax.scan`).  The values are the same: the loop runs the same
ops on the same operands in the same order.

Finding the copies takes one pass over the nodes in the order they were made (a
loop makes them step by step), each computed once and loop-invariant values set
aside (`_Graph`).  Each node gets a *key*: its op, and each operand as a leaf, a
small constant (by value), a loop-invariant value (by identity) or as "the node r
places back".  A step reads its own nodes and the step before at the same distances
as every other step does, so node i and node i + p of a loop of p-node steps have
equal keys, and a run of nodes whose key last occurred p places back is a loop.
`x[t]` and `x[:, t]` (one int index after full slices) are keyed without their t:
those become the loop's sequences, `x[first::±1]`, where t moves by one a step.  What
the next step reads of a step is a carry; what the rest of the graph reads of a step
(a value at each step, or the last) is the loop's stacked output or its final carry.
The steps are cut where they carry the fewest entries (`_rotated`).

It runs before recognition (`pipeline.run_phases`), so the loop's step is recognised
as a loop body is, and before differentiation (`grad`'s recognition), so the
gradient is the loop's: a reverse loop, not T pullbacks of `x[t]` each scattered
into a copy of x.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

from ..graph.basic import Apply, Constant, Variable, substitute, toposort
from ..ops.indexing import ARRAY, Index
from ..ops.scan import scan
from ..ops.shape import moveaxis
from .engine import Change, ChangeLog, Kind

#: the fewest repeats that are rolled into a loop (two or three copies are cheaper as they are)
MIN_STEPS = 4
#: a `:` in an index spec
FULL_SLICE = (None, None, None)
#: constants of at most this many entries are told apart by value, not identity
SMALL_CONSTANT = 16
#: an unknown extent, as `_rotated` weighs a carry
UNKNOWN_EXTENT = 1 << 10
#: loops rolled per graph at most, and candidates tried for each (each a linear pass)
MAX_LOOPS = 8
TRIES = 4


@dataclass(frozen=True)
class _Loop:
    """`steps` steps of `period` nodes each, the first at position `start` of `_Graph.nodes`;
    the nodes repeat up to `end` (a step may begin at any of the first `period` of them)."""

    start: int
    period: int
    steps: int
    end: int


def reroll(outputs: Sequence[Variable], keep: Iterable[Variable] = (), log: ChangeLog | None = None) -> list[Variable]:
    """`outputs` with each run of at least `MIN_STEPS` copies of one step rolled into a `scan`
    (each logged in `log`, for `explain`).

    A `keep` variable computed inside such a run (an intermediate that is differentiated
    with respect to) keeps its run unrolled.
    """
    kept = {v.id for v in keep if v.owner is not None}
    result = list(outputs)
    for _ in range(MAX_LOOPS):
        # in the order the nodes were made (ids only grow): the order the user's loop made them, step
        # by step, where a walk from the outputs can visit a step's nodes in a different order at each
        graph = _Graph(sorted(toposort(result), key=lambda node: node.outputs[0].id))
        rolled = None
        for loop in _loops(graph)[:TRIES]:
            rolled = _rolled(result, graph, loop, kept, log)
            if rolled is not None:
                break
        if rolled is None:
            return result
        result = rolled
    return result


class _Graph:
    """The nodes of a graph that a loop's steps could hold, in the order they were made, each
    computed once.

    A graph as the user built it may compute the same thing twice (`x[t]` written twice
    in a step, `log(A)` written in every step); a duplicate node is left out of `nodes`
    and its outputs read as the first one's (`canonical`).  A loop-invariant value
    (computed from leaves and constants alone, without a step index) is left out too: a
    loop reads it as it is.  So every step has the same nodes, the first included."""

    def __init__(self, order: list[Apply]):
        self.nodes: list[Apply] = []
        self.place: dict[int, int] = {}  # id of a value the steps could compute -> its node's place
        self.alias: dict[int, Variable] = {}  # id of a duplicate's output -> the first node's
        seen: dict[tuple, Apply] = {}
        for node in order:
            inputs = tuple(self.operand_key(v) for v in node.inputs)
            try:
                first = seen.setdefault((node.op, inputs), node)
            except TypeError:  # an op that cannot be hashed: never merged (nor part of a loop)
                first = node
            if first is not node:
                for o, f in zip(node.outputs, first.outputs):
                    self.alias[o.id] = f
                    if f.id in self.place:
                        self.place[o.id] = self.place[f.id]
            elif _step_index(node) is not None or any(v.id in self.place for v in node.inputs):
                self.place.update((o.id, len(self.nodes)) for o in node.outputs)
                self.nodes.append(node)

    def canonical(self, v: Variable) -> Variable:
        return self.alias.get(v.id, v)

    def operand_key(self, v: Variable):
        """A constant by value (`h * 0.5` makes a new one at every step), anything else by identity."""
        if isinstance(v, Constant) and v.data.size <= SMALL_CONSTANT:
            return ("constant", v.data.dtype.str, v.data.shape, v.data.tobytes())
        return self.canonical(v).id

    def at(self, v: Variable) -> int | None:
        """The place of v's node; None for a leaf or a loop-invariant value (a loop reads it as it is)."""
        return self.place.get(v.id)


def _step_index(node: Apply) -> tuple[int, int] | None:
    """(axis, t) for `x[:, ..., t, ...]`: one int index (t >= 0), after full slices only, and no
    index arrays; else None."""
    op = node.op
    if not isinstance(op, Index) or ARRAY in op.spec:
        return None
    ints = [a for a, entry in enumerate(op.spec) if type(entry) is int]
    if len(ints) != 1 or any(entry != FULL_SLICE for entry in op.spec[: ints[0]]):
        return None
    axis = ints[0]
    t = op.spec[axis]
    if t < 0:
        extent = node.inputs[0].type.shape[axis]
        return None if extent is None else (axis, t + extent)
    return axis, t


def _after_step(node: Apply, axis: int) -> tuple:
    """The rest of `x[:, ..., t, ...]`'s index, without t (at `axis`, as `_step_index` found it)."""
    spec = cast(Index, node.op).spec
    return spec[:axis] + spec[axis + 1 :]


def _loops(graph: _Graph) -> list[_Loop]:
    """The candidate loops among the graph's nodes, most nodes first."""
    last: dict[tuple, int] = {}
    runs: list[_Loop] = []
    period, run_start = 0, 0
    for i, node in enumerate(graph.nodes):
        operands: list = []
        for v in node.inputs:
            place = graph.at(v)
            operands.append(graph.operand_key(v) if place is None else (i - place, v.index))
        step = _step_index(node)
        key: tuple
        if step is not None and not _varies(operands[0]):  # x[t] of an invariant x: keyed without t
            key = (("x[t]", step[0], _after_step(node, step[0])), tuple(operands))
        else:
            key = (node.op, tuple(operands))
        try:
            seen = last.get(key)
            last[key] = i
        except TypeError:  # an op that cannot be hashed is never part of a loop
            seen = None
        p = 0 if seen is None else i - seen
        if p != period:
            runs.append(_run(run_start, i, period))
            period, run_start = p, i
    runs.append(_run(run_start, len(graph.nodes), period))
    return sorted((r for r in runs if r.steps >= MIN_STEPS), key=lambda r: -r.steps * r.period)


def _varies(operand_key) -> bool:
    """Whether an operand (as `_loops` keys it) is a value the steps compute."""
    return type(operand_key) is tuple and operand_key[0] != "constant"


def _run(start: int, end: int, period: int) -> _Loop:
    """Nodes [start, end) repeat the nodes `period` places before: a loop from start - period."""
    if period == 0:
        return _Loop(start, 0, 0, end)
    first = start - period
    return _Loop(first, period, (end - first) // period, end)


def _rolled(
    outputs: list[Variable], graph: _Graph, loop: _Loop, kept: set[int], log: ChangeLog | None
) -> list[Variable] | None:
    """`outputs` with the loop rolled into a `scan`, or None where it cannot be."""
    nodes, at = graph.nodes, graph.at
    loop, carries = _rotated(graph, loop)
    start, p, n = loop.start, loop.period, loop.steps
    end = start + n * p
    first_step = nodes[start : start + p]
    # the steps' indices t, t ± 1, ...: one sequence per x[t] of the step
    sequences: dict[int, tuple[Variable, int, int, int]] = {}  # position -> (x, axis, first t, ±1)
    for j, node in enumerate(first_step):
        first = _step_index(node)
        if first is None or at(node.inputs[0]) is not None:
            continue  # (x[t] of a value the steps compute is part of the step)
        axis, t0 = first
        ts = [cast(tuple, _step_index(nodes[start + k * p + j]))[1] for k in range(n)]
        stride = ts[1] - t0
        if stride not in (1, -1) or any(t != t0 + k * stride for k, t in enumerate(ts)):
            return None
        sequences[j] = (node.inputs[0], axis, t0, stride)
    if not carries:
        return None  # steps that do not read each other: a map, which runs as well unrolled
    kept = {graph.alias[k].id if k in graph.alias else k for k in kept}
    if any(o.id in kept for node in nodes[start:end] for o in node.outputs):
        return None  # an intermediate differentiated with respect to
    for (j, o), init in carries.items():
        for k in range(n):
            if nodes[start + k * p + j].outputs[o].type != init.type:
                return None  # the step changes the carry's type: scan would cast it
    # what the rest of the graph reads of the steps: (step, position in step, output) by the value's id
    read: dict[int, tuple[int, int, int]] = {}

    def note(v: Variable) -> None:
        i = at(v)
        if i is not None and start <= i < end:
            read[graph.canonical(v).id] = ((i - start) // p, (i - start) % p, v.index)

    for node in nodes[end:]:
        for v in node.inputs:
            note(v)
    for v in outputs:
        note(v)
    key = (nodes[start].outputs[0].id, nodes[end - 1].outputs[0].id, p, n, frozenset(read))
    with _ROLLED_LOCK:  # (two threads compiling the same cost get the same loop)
        replacements = _ROLLED.get(key)
        if replacements is None:
            replacements = _ROLLED[key] = _loop(graph, loop, read, carries, sequences)
            while len(_ROLLED) > KEEP_ROLLED:
                del _ROLLED[next(iter(_ROLLED))]
    if log is not None:
        vid, (k, j, o) = next(iter(read.items()))
        node = nodes[start + k * p + j]
        log.changes.append(Change("unrolled_loop", Kind.ALGEBRA, node.location, node.outputs[o], [replacements[vid]]))
    duplicates = {a: replacements[c.id] for a, c in graph.alias.items() if c.id in replacements}
    return substitute(outputs, {**replacements, **duplicates})


def _carries(graph: _Graph, start: int, p: int) -> dict[tuple[int, int], Variable] | None:
    """What a step of the loop read from `start` in steps of p takes of the step before, as
    {(position in the step, output): initial value}, placed from the second step's operands;
    None where a step reads two steps back."""
    carries: dict[tuple[int, int], Variable] = {}
    for j, node in enumerate(graph.nodes[start + p : start + 2 * p]):
        for v_now, v_first in zip(node.inputs, graph.nodes[start + j].inputs):
            i = graph.at(v_now)
            if i is None or i >= start + p:
                continue
            if i < start:
                return None
            carries.setdefault((i - start, v_now.index), graph.canonical(v_first))
    return carries


def _rotated(graph: _Graph, loop: _Loop) -> tuple[_Loop, dict[tuple[int, int], Variable] | None]:
    """The loop with its steps begun where they carry the fewest entries, and those carries
    (`_carries`; None where every cut reads two steps back).

    Repeats can be cut into steps at any of `period` places; the user's own step is
    usually the one whose carry is smallest (`alpha`, not `alpha[:, None] + log(A)`),
    and only as the user wrote it does the step keep what recognition needs in it
    (`log(A)` next to the logsumexp that weighs by A)."""
    best, choice, chosen = None, loop, None
    for start in range(loop.start, loop.start + loop.period):
        steps = (loop.end - start) // loop.period
        if steps < MIN_STEPS:
            break
        carries = _carries(graph, start, loop.period)
        if carries is None:
            continue
        cost = (sum(_entries(v) for v in carries.values()), len(carries))
        if best is None or cost < best:
            best, choice, chosen = cost, _Loop(start, loop.period, steps, loop.end), carries
    return choice, chosen


def _entries(v: Variable) -> int:
    """How many numbers v holds, an unknown extent counted as many."""
    return int(np.prod([UNKNOWN_EXTENT if d is None else d for d in v.type.shape], dtype=np.int64))


#: the loops rolled lately, by their nodes and what the rest of the graph reads of them: `grad` rolls
#: a cost's loop, and `function` rolls the same loop of the same cost again; from here it gets the
#: same `scan` node, which the gradient's graph reads, and the loop runs once for both.  (Variable
#: ids are never reused, so an entry cannot be mistaken for a later graph's.)
_ROLLED: dict[tuple, dict[int, Variable]] = {}
_ROLLED_LOCK = threading.Lock()
KEEP_ROLLED = 64


def _loop(graph: _Graph, loop: _Loop, read, carries, sequences) -> dict[int, Variable]:
    """{id of a value the graph reads of the steps: the `scan` output that holds it}."""
    start, p, n = loop.start, loop.period, loop.steps
    step = graph.nodes[start + p : start + 2 * p]
    carried = list(carries)
    stacked = sorted({(j, o) for k, j, o in read.values() if not (k == n - 1 and (j, o) in carries)})

    def body(carry: tuple, x: tuple):
        before = dict(zip(carried, carry))  # the step before's values this step reads
        now: dict[tuple[int, int], Variable] = {}  # this step's values, by (position, output)
        slices = dict(zip(sequences, x or ()))
        for j, node in enumerate(step):
            if j in sequences:
                rest = _after_step(node, sequences[j][1])
                outs = [Index(rest)(slices[j]) if rest else slices[j]]
            else:
                operands = []
                for v in node.inputs:
                    i = graph.at(v)
                    if i is None:
                        operands.append(graph.canonical(v))  # a leaf or loop-invariant value
                    elif i >= start + p:
                        operands.append(now[(i - start - p, v.index)])
                    else:
                        operands.append(before[(i - start, v.index)])
                clone = Apply(node.op, operands, [o.type for o in node.outputs], node.location)
                outs = list(clone.outputs)
            for k, new in enumerate(outs):
                now[(j, k)] = new
        return tuple(now[c] for c in carried), tuple(now[s] for s in stacked)

    xs = tuple(
        (x if axis == 0 else moveaxis(x, axis, 0))[_slice(t0, stride, n)] for x, axis, t0, stride in sequences.values()
    )
    # (length=n with the sequences: where their extent is only known at run time, one shorter than
    # the steps is the loop's error, as it was x[t]'s, not a shorter loop)
    final, ys = scan(body, tuple(carries.values()), xs if xs else None, length=n)
    loop_node = final[0].owner
    loop_node.location = loop_node.op.location = step[0].location  # the user's step, not this module
    replacements: dict[int, Variable] = {}
    for vid, (k, j, o) in read.items():
        if k == n - 1 and (j, o) in carries:
            replacements[vid] = final[carried.index((j, o))]
        else:
            replacements[vid] = ys[stacked.index((j, o))][k]
    return replacements


def _slice(t0: int, stride: int, n: int) -> slice:
    """The slice of a sequence's leading axis that t0, t0 + stride, ... (n of them) index."""
    stop = t0 + n * stride
    return slice(t0, stop if stop >= 0 else None, stride)
