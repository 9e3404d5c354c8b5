"""The NumPy executor: runs a node list in topological order, freeing as it goes.

Every variable gets a slot in a flat list; after each node, the slots whose last
reader it was are cleared, so a long elementwise chain holds only a couple of
intermediates at a time.  The per-node work is one call of the op's NumPy
implementation plus list indexing — a few hundred nanoseconds of overhead.

`IMPLEMENTATIONS` maps an op class to a factory of a faster implementation (or
None where it does not apply); an op without one runs its own `perform` (its
reference semantics).  A composite with an implementation is kept whole instead
of being inlined (`runs_whole`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..errors import ExecutionError, StableGradError
from ..graph.basic import Apply, Constant, Op, Variable, toposort
from .numpy_fused import FUSED

IMPLEMENTATIONS: dict[type, Callable[[Op], Callable | None]] = dict(FUSED)


def implementation(op: Op) -> Callable:
    factory = IMPLEMENTATIONS.get(type(op))
    fast = factory(op) if factory is not None else None
    return fast if fast is not None else op.perform


def runs_whole(op: Op) -> bool:
    """Whether this backend runs the (composite) op as one node rather than its inlined body."""
    factory = IMPLEMENTATIONS.get(type(op))
    return factory is not None and factory(op) is not None


class Program:
    """A compiled node list over numbered slots."""

    def __init__(self, inputs: Sequence[Variable], outputs: Sequence[Variable]):
        nodes = _schedule(toposort(outputs, stop=inputs))
        slot: dict[int, int] = {}
        constants: list[tuple[int, np.ndarray]] = []

        def slot_of(v: Variable) -> int:
            s = slot.get(v.id)
            if s is None:
                s = slot[v.id] = len(slot)
                if isinstance(v, Constant):
                    constants.append((s, v.data))
            return s

        self.input_slots = [slot_of(v) for v in inputs]
        steps = []
        last_use: dict[int, int] = {}
        for i, node in enumerate(nodes):
            ins = [slot_of(v) for v in node.inputs]
            outs = [slot_of(v) for v in node.outputs]
            for s in ins:
                last_use[s] = i
            steps.append((node, ins, outs))
        self.output_slots = [slot_of(v) for v in outputs]
        keep = set(self.output_slots)
        frees: list[list[int]] = [[] for _ in nodes]
        for s, i in last_use.items():
            if s not in keep:
                frees[i].append(s)
        self.constants = constants
        self.nslots = len(slot)
        self.steps = [
            (
                implementation(node.op),
                ins,
                outs[0] if len(outs) == 1 else outs,
                len(outs) == 1,
                frees[i],
                node,
            )
            for i, (node, ins, outs) in enumerate(steps)
        ]
        self.nodes = nodes
        self._straight: Callable | None = None
        self._runs = 0

    def run(self, values: Sequence[np.ndarray]) -> list:
        with np.errstate(all="ignore"):
            return self.run_unguarded(values)

    def run_unguarded(self, values: Sequence[np.ndarray]) -> list:
        """`run` for a caller that has already entered `np.errstate(all="ignore")` (a loop's body)."""
        if self._straight is None:
            self._runs += 1
            if self._runs == HOT_RUNS and len(self.nodes) <= STRAIGHT_LINE_LIMIT:
                self._straight = _straight_line(self)
            return self.interpret(values)
        try:
            return self._straight(values)
        except Exception:  # run again node by node, which says which node failed
            return self.interpret(values)

    def interpret(self, values: Sequence[np.ndarray]) -> list:
        """Run node by node over the slot list: the reference path, and the one that names a failing node."""
        storage: list = [None] * self.nslots
        for s, data in self.constants:
            storage[s] = data
        for s, v in zip(self.input_slots, values):
            storage[s] = v
        for fn, ins, out, single, frees, node in self.steps:
            try:
                result = fn(*[storage[s] for s in ins])
            except Exception as exc:
                raise _execution_error(node, exc) from exc
            if single:
                storage[out] = result  # type: ignore[index]
            else:
                for s, r in zip(out, result):  # type: ignore[arg-type]
                    storage[s] = r
            for s in frees:
                storage[s] = None
        return [storage[s] for s in self.output_slots]


#: programs up to this many nodes that have run HOT_RUNS times get a straight-line Python
#: function (see `_straight_line`); generating it costs about 30 µs a node, so only programs
#: that run often — a loop's body, a function in a training loop — earn it
STRAIGHT_LINE_LIMIT = 20_000
HOT_RUNS = 3


def _straight_line(program: Program) -> Callable:
    """The program as one generated Python function: a line per node, locals for slots.

    The interpreter's per-node bookkeeping (building the argument list from the slot
    list, storing, freeing) is about a microsecond a node — as much as a NumPy call
    on a small array.  As straight-line code it is a local load per argument, and
    `del` frees an intermediate after its last reader exactly as the interpreter
    does.  The interpreter stays the reference: a failure re-runs there to name the node.
    """
    constant_slots = {s for s, _ in program.constants}
    namespace: dict[str, object] = {f"k{s}": data for s, data in program.constants}

    def name(s: int) -> str:
        return f"k{s}" if s in constant_slots else f"v{s}"

    lines = ["def run(values):"]
    if program.input_slots:
        lines.append(f"    {''.join(name(s) + ', ' for s in program.input_slots)}= values")
    for i, (fn, ins, out, single, frees, _) in enumerate(program.steps):
        namespace[f"f{i}"] = fn
        targets = name(out) if single else "".join(name(s) + ", " for s in out)  # type: ignore[arg-type, union-attr]
        lines.append(f"    {targets} = f{i}({', '.join(name(s) for s in ins)})")
        dead = [name(s) for s in frees if s not in constant_slots]
        if dead:
            lines.append(f"    del {', '.join(dead)}")
    lines.append(f"    return [{', '.join(name(s) for s in program.output_slots)}]")
    exec(compile("\n".join(lines), "<stablegrad program>", "exec"), namespace)  # our own generated code
    return namespace["run"]  # type: ignore[return-value]


def _execution_error(node: Apply, exc: Exception) -> ExecutionError:
    if isinstance(exc, StableGradError):  # raised by the op itself (a loop's body): it says what and where
        return ExecutionError(exc.message, location=exc.location)
    shapes = ", ".join(str(np.shape(v.data)) if isinstance(v, Constant) else str(v.type) for v in node.inputs)
    message = str(exc).strip()  # NumPy's broadcast message ends in a space
    return ExecutionError(f"{node.op.name}: {message} (operands {shapes})", location=node.location)


def _schedule(nodes: list[Apply]) -> list[Apply]:
    """Topological order with shape lookups moved up to right after their operand exists.

    A `ShapeDim` only reads its operand's shape; running it early lets the operand
    be freed as soon as its real readers are done.
    """
    from ..ops.shape import ShapeDim

    early: dict[int, list[Apply]] = {}
    rest: list[Apply] = []
    for node in nodes:
        if isinstance(node.op, ShapeDim):
            producer = node.inputs[0].owner
            early.setdefault(id(producer) if producer is not None else 0, []).append(node)
        else:
            rest.append(node)
    order = early.pop(0, [])
    for node in rest:
        order.append(node)
        order.extend(early.pop(id(node), ()))
    for pending in early.values():  # producers outside the list (stopped at inputs)
        order[0:0] = pending
    return order
