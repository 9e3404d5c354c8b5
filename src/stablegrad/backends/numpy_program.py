"""The NumPy executor: runs a node list in topological order, freeing as it goes.

Every variable gets a slot in a flat list; after each node, the slots whose last
reader it was are cleared, so a long elementwise chain holds only a couple of
intermediates at a time.  The per-node work is one call of the op's NumPy
implementation plus list indexing — a few hundred nanoseconds of overhead.

An op runs as a bare ufunc where its `perform` is one (`UFUNCS`), as a fused
whole where `numpy_fused.FUSED` has a version for it (such a composite is kept
whole instead of being inlined: `runs_whole`), and otherwise as its own `perform`
(its reference semantics).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..errors import ExecutionError, StableGradError
from ..graph.basic import Apply, Constant, Op, Variable, toposort
from ..graph.types import is_inexact
from ..ops.creation import Alloc
from ..ops.elementwise import Add, Divide, Maximum, Minimum, Multiply, Negative, Subtract
from ..ops.indexing import IndexUpdate
from ..ops.math import Exp, Log, Log1p
from ..ops.shape import ShapeDim
from .numpy_fused import FUSED

#: ops whose `perform` is exactly one NumPy ufunc call: the backend calls the ufunc itself,
#: which saves a Python frame a node (a fifth of an add on a small array, in a loop's step)
UFUNCS: dict[type, np.ufunc] = {
    Add: np.add,
    Subtract: np.subtract,
    Multiply: np.multiply,
    Divide: np.true_divide,
    Maximum: np.maximum,
    Minimum: np.minimum,
    Negative: np.negative,
    Exp: np.exp,
    Log: np.log,
    Log1p: np.log1p,
}


def implementation(op: Op, unread: frozenset[int] = frozenset()) -> Callable:
    """How the backend runs `op`, given which of its outputs nobody reads."""
    ufunc = UFUNCS.get(type(op))
    if ufunc is not None:
        return ufunc
    factory = FUSED.get(type(op))
    fast = factory(op) if factory is not None else None
    if fast is None and unread:
        fast = op.perform_unread(unread)
    return fast if fast is not None else op.perform


def runs_whole(op: Op) -> bool:
    """Whether this backend runs the (composite) op as one node rather than its inlined body."""
    factory = FUSED.get(type(op))
    return factory is not None and factory(op) is not None


#: a backend built on this executor (Numba) may offer its own kernel for a node: one that
#: computes the same values, or None for the NumPy implementation; it is told which of the
#: node's outputs the program never reads (by index), which it need not compute
Kernels = Callable[[Apply, frozenset[int]], Callable | None]


class Program:
    """A compiled node list over numbered slots."""

    def __init__(self, inputs: Sequence[Variable], outputs: Sequence[Variable], kernels: Kernels | None = None):
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
        readers: dict[int, int] = {}
        for i, node in enumerate(nodes):
            ins = [slot_of(v) for v in node.inputs]
            outs = [slot_of(v) for v in node.outputs]
            for s in ins:
                last_use[s] = i
                readers[s] = readers.get(s, 0) + 1
            steps.append((node, ins, outs))
        self.output_slots = [slot_of(v) for v in outputs]
        owned = _fresh_buffers(steps, readers, set(self.input_slots) | set(self.output_slots))
        keep = set(self.output_slots)
        read = keep.union(last_use)
        frees: list[list[int]] = [[] for _ in nodes]
        for s, i in last_use.items():
            if s not in keep:
                frees[i].append(s)
        self.constants = constants
        self.constant_slots = frozenset(s for s, _ in constants)
        self.nslots = len(slot)

        def run_node(node: Apply, ins: list[int], outs: list[int]) -> Callable:
            unread = frozenset(k for k, s in enumerate(outs) if s not in read)
            kernel = kernels(node, unread) if kernels is not None else None
            if kernel is not None:
                return kernel
            if isinstance(node.op, IndexUpdate) and ins[0] in owned:
                return node.op.perform_in_place
            return implementation(node.op, unread)

        self.steps = [
            (
                run_node(node, ins, outs),
                ins,
                outs[0] if len(outs) == 1 else outs,
                len(outs) == 1,
                frees[i],
                node,
            )
            for i, (node, ins, outs) in enumerate(steps)
        ]
        self.nodes = nodes
        self.output_types = [v.type for v in outputs]
        self._straight: Callable | None = None
        self._runs = 0
        self._loops: dict[tuple, Callable] = {}

    def loop(self, n_carry: int, n_xs: int, store_history: bool) -> Callable:
        """This program as the body of a whole loop, one generated function (see `_loop_code`)."""
        key = (n_carry, n_xs, store_history)
        code = self._loops.get(key)
        if code is None:
            code = self._loops[key] = _loop_code(self, n_carry, n_xs, store_history)
        return code

    def run(self, values: Sequence[np.ndarray]) -> list:
        token = quiet_errors()
        try:
            straight = self._straight
            if straight is None:
                return self.run_unguarded(values)
            try:  # (run_unguarded's hot path, inlined: on scalars a call is a few microseconds)
                return straight(values)
            except Exception:
                return self.interpret(values)
        finally:
            restore_errors(token)

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


def _error_state():
    """NumPy's floating-point error state lives in a context variable (NumPy >= 2); entering
    `np.errstate(all="ignore")` builds a new state object every time, 0.8 µs: as much as the
    rest of a call on scalars.  Here the quiet state is built again only when the state it
    replaces is another than last time."""
    try:
        from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj
    except ImportError:  # (another NumPy: np.errstate, as before)
        return None
    last: list = [None, None]  # the state replaced last time, and its quiet version

    def enter():
        current = _extobj_contextvar.get()
        if last[0] is not current:  # (its buffer size and error callback kept, errors ignored)
            last[:] = [current, _make_extobj(all="ignore")]
        return _extobj_contextvar.set(last[1])

    return enter, _extobj_contextvar.reset


def _quiet_errors_slowly():
    state = np.errstate(all="ignore")
    state.__enter__()
    return state


def _restore_errors_slowly(token) -> None:
    token.__exit__(None, None, None)


#: `token = quiet_errors()` ignores floating-point errors until `restore_errors(token)`, as
#: `np.errstate(all="ignore")` does (bound directly, not wrapped: a wrapper's frame is 0.1 µs)
quiet_errors, restore_errors = _error_state() or (_quiet_errors_slowly, _restore_errors_slowly)


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
    lines = ["def run(values):"]
    if program.input_slots:
        lines.append(f"    {_names(program, program.input_slots)} = values")
    namespace = _body_code(program, lines, "    ", frozenset())
    lines.append(f"    return [{_names(program, program.output_slots)}]")
    return _compiled(lines, namespace, "run")


def _loop_code(program: Program, n_carry: int, n_xs: int, store_history: bool) -> Callable:
    """A whole loop with `program` as its body, as one generated function.

    `run(carry, xs, consts, history, ys, order)` runs the steps in `order`: it stores the
    carry entering step t in `history[i][t]`, feeds `xs[j][t]`, writes `ys[k][t]` and
    returns the final carry.  Against calling the body once a step, it saves building
    the argument list and unpacking the results, about a microsecond a step.
    """
    inputs = program.input_slots
    carries, slices, consts = inputs[:n_carry], inputs[n_carry : n_carry + n_xs], inputs[n_carry + n_xs :]
    new_carries, ys = program.output_slots[:n_carry], program.output_slots[n_carry:]
    lines = ["def run(carry, xs, consts, history, ys, order):"]
    for names, values in ((carries, "carry"), (consts, "consts")):
        if names:
            lines.append(f"    {_names(program, names)} = {values}")
    for prefix, count, values in (
        ("s", n_xs, "xs"),
        ("h", n_carry if store_history else 0, "history"),
        ("y", len(ys), "ys"),
    ):
        if count:
            lines.append(f"    {''.join(f'{prefix}{i}, ' for i in range(count))}= {values}")
    lines.append("    for t in order:")
    if store_history:
        lines.extend(f"        h{i}[t] = {_name(program, s)}" for i, s in enumerate(carries))
    read = {s for _, ins, *_ in program.steps for s in ins} | set(program.output_slots)
    lines.extend(f"        {_name(program, s)} = s{j}[t]" for j, s in enumerate(slices) if s in read)
    namespace = _body_code(program, lines, "        ", frozenset(consts))  # an implicit input serves every step
    lines.extend(f"        y{k}[t] = {_name(program, s)}" for k, s in enumerate(ys))
    if carries:
        lines.append(f"        {_names(program, carries)} = {_names(program, new_carries)}")
    lines.append(f"    return [{_names(program, carries)}]")
    return _compiled(lines, namespace, "run")


def _name(program: Program, s: int) -> str:
    return f"k{s}" if s in program.constant_slots else f"v{s}"


def _names(program: Program, slots: Sequence[int]) -> str:
    return "".join(_name(program, s) + ", " for s in slots)


def _body_code(program: Program, lines: list[str], indent: str, kept: frozenset[int]) -> dict[str, object]:
    """Append a line per node (and the `del`s after last readers, but of no slot in `kept`)
    to `lines`; returns the namespace the lines need: the op functions and constants."""
    # (a 0-d constant as the NumPy scalar it holds: a ufunc on one takes NumPy's scalar path)
    namespace: dict[str, object] = {f"k{s}": data[()] if data.ndim == 0 else data for s, data in program.constants}
    for i, (fn, ins, out, single, frees, node) in enumerate(program.steps):
        operands = [_name(program, s) for s in ins]
        operator = _OPERATORS.get(fn) if is_inexact(node.outputs[0].dtype) else None
        if operator is not None:
            call = operator.format(*operands)
        else:
            namespace[f"f{i}"] = fn
            call = f"f{i}({', '.join(operands)})"
        targets = _name(program, out) if single else _names(program, out)  # type: ignore[arg-type]
        lines.append(f"{indent}{targets} = {call}")
        dead = [_name(program, s) for s in frees if s not in program.constant_slots and s not in kept]
        if dead:
            lines.append(f"{indent}del {', '.join(dead)}")
    return namespace


#: the arithmetic ufuncs as Python's operators, which run them: on arrays the same call, on
#: NumPy scalars (a scalar function's values) NumPy's scalar arithmetic, a tenth of the time
_OPERATORS: dict[object, str] = {
    np.add: "{} + {}",
    np.subtract: "{} - {}",
    np.multiply: "{} * {}",
    np.true_divide: "{} / {}",
    np.negative: "-{}",
}


def _compiled(lines: list[str], namespace: dict[str, object], name: str) -> Callable:
    exec(compile("\n".join(lines), "<stablegrad program>", "exec"), namespace)  # our own generated code
    return namespace[name]  # type: ignore[return-value]


def _execution_error(node: Apply, exc: Exception) -> ExecutionError:
    if isinstance(exc, StableGradError):  # raised by the op itself (a loop's body): it says what and where
        return ExecutionError(exc.message, location=exc.location)
    shapes = ", ".join(str(np.shape(v.data)) if isinstance(v, Constant) else str(v.type) for v in node.inputs)
    message = str(exc).strip()  # NumPy's broadcast message ends in a space
    return ExecutionError(f"{node.op.name}: {message} (operands {shapes})", location=node.location)


def _fresh_buffers(steps, readers: dict[int, int], kept: set[int]) -> set[int]:
    """Slots an index update may write in place: a fresh array (from `full` or another update)
    that this update is the only reader of, so no view of it and no other reader can exist."""
    fresh = set()
    for node, _, outs in steps:
        if isinstance(node.op, Alloc | IndexUpdate):
            fresh.add(outs[0])
    return {s for s in fresh if readers.get(s) == 1 and s not in kept}


def _schedule(nodes: list[Apply]) -> list[Apply]:
    """Topological order with shape lookups moved up to right after their operand exists.

    A `ShapeDim` only reads its operand's shape; running it early lets the operand
    be freed as soon as its real readers are done.
    """
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
