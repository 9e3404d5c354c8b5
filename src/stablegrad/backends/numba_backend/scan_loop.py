"""A `scan` on the Numba backend: the whole loop, body and all, as one compiled function.

On the NumPy backend a step of an HMM's forward recursion is a dozen NumPy calls on
8-entry arrays, so 1000 steps cost milliseconds of call overhead.  Here the step program
(the one `numpy_loops` runs: optimised for the arguments' shapes, the carry-independent
part hoisted out) becomes straight Numba code inside the loop: every value of the body
has a buffer of its static shape, allocated once, and every node is a loop nest writing
it.  A body with an op this module has no code for, or a shape the types leave open,
runs as on the NumPy backend.

Nodes: elementwise ops (the scalar forms of `loops`), views (expand_dims, squeeze,
reshape), broadcast_to, sums and `reduce_to`, and plain logsumexp and its gradient over
any axes, computed as the stable body computes them (the max's ties counted apart, -inf
rows, +inf entries, NaN).
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np

from ...graph.basic import Apply
from ...ops.elementwise import Where
from ...ops.reduction import Sum
from ...ops.scan import Scan, run_length
from ...ops.shape import BroadcastTo, ExpandDims, ReduceTo, Reshape, Squeeze
from ...ops.stable import LogSumExp
from ...ops.stable.logsumexp import LogSumExpGrad
from .. import numpy_loops
from ..numpy_program import Program
from .loop_source import cast, literal_text, warn_unsupported
from .loops import scalar_form

_VIEWS = (ExpandDims, Squeeze, Reshape)
_SHAPED = (Reshape, BroadcastTo, ReduceTo)  # ops whose inputs after the first are extents


def scan_kernel(op: Scan, compiled: Callable[[str, str], Callable]) -> Callable:
    """The Scan node's implementation: the compiled loop where the body allows, else NumPy's."""
    loops: dict[tuple, Callable | None] = {}  # per shapes of the arguments

    def run(*arrays):
        n_carry, n_xs = op.n_carry, op.n_xs
        xs = arrays[n_carry : n_carry + n_xs]
        consts = list(arrays[n_carry + n_xs :])
        steps = run_length(op, xs)
        shapes = tuple(np.shape(a) for a in arrays[:n_carry]) + tuple(np.shape(x)[1:] for x in xs)
        shapes += tuple(np.shape(a) for a in consts)
        if steps < 2:
            return numpy_loops.run_loop(op, arrays)
        # (the whole body: hoisting its carry-independent part would run that part in NumPy)
        program = numpy_loops.body_program(op.inner, shapes)
        key = (shapes, id(program))
        if key not in loops:
            text = loop_source(program, n_carry, len(xs), op.n_ys)
            loops[key] = compiled(text, "loop") if text is not None else None
        fn = loops[key]
        if fn is None:
            return numpy_loops.run_loop(op, arrays)
        carries = [np.array(c, dtype=p.dtype, order="C") for c, p in zip(arrays[:n_carry], op.inner.carries)]
        history = [np.empty((steps, *c.shape), dtype=c.dtype) for c in carries]
        types = program.output_types
        ys = [np.empty((steps, *t.shape), dtype=t.dtype) for t in types[n_carry:]]
        arguments = (
            *carries,
            *[np.ascontiguousarray(x) for x in xs],
            *[np.ascontiguousarray(c) for c in consts],
            *[np.ascontiguousarray(data) for _, data in _array_constants(program)],
            *history,
            *ys,
            steps,
            op.reverse,
        )
        try:
            fn(*arguments)
        except numba.core.errors.NumbaError as exc:  # a gap in this module, not the user's error
            warn_unsupported("scan", exc)
            loops[key] = None
            return numpy_loops.run_loop(op, arrays)
        return (*carries, *ys, *history)

    return run


def _array_constants(program: Program) -> list[tuple[int, np.ndarray]]:
    return [(s, np.asarray(d)) for s, d in program.constants if np.size(d) != 1]


def loop_source(program: Program, n_carry: int, n_xs: int, n_ys: int) -> str | None:
    """Numba source of `loop(carries..., xs..., consts..., constants..., history..., ys..., steps, reverse)`,
    or None where the step program has a node or shape it cannot compile."""
    types: dict[int, tuple] = {}
    names: dict[int, str] = {}
    literals = set()
    for s, data in program.constants:
        if np.size(data) == 1:
            names[s] = literal_text(np.asarray(data).reshape(()))
            literals.add(s)
        else:
            names[s] = f"k{s}"
    for node, ins, out, _single, _frees, _ in _steps(program):
        data = ins[:1] if isinstance(node.op, _SHAPED) else ins  # (the rest give a shape)
        for s, v in [*zip(data, node.inputs), *zip(out, node.outputs)]:
            types[s] = (v.type.shape, v.dtype)
            if None in v.type.shape or (not v.type.shape and s not in literals):
                return None  # (a 0-d array: Numba's scalar and array code differ; the NumPy loop runs it)
    inputs = program.input_slots
    carries, slices, consts = inputs[:n_carry], inputs[n_carry : n_carry + n_xs], inputs[n_carry + n_xs :]
    args = [f"c{i}" for i in range(n_carry)] + [f"s{j}" for j in range(n_xs)]
    args += [f"v{s}" for s in consts] + [f"k{s}" for s, _ in _array_constants(program)]
    args += [f"h{i}" for i in range(n_carry)] + [f"y{k}" for k in range(n_ys)] + ["steps", "reverse"]
    for i, s in enumerate(carries):
        names[s] = f"c{i}"
    for s in consts:
        names[s] = f"v{s}"
    setup, body = [], []
    for j, s in enumerate(slices):
        names[s] = f"x{j}"
        body.append(f"x{j} = s{j}[t]")
    for node, ins, out, _single, _frees, _ in _steps(program):
        o = out[0]
        if isinstance(node.op, _VIEWS):
            names[o] = f"v{o}"
            body.append(f"v{o} = {names[ins[0]]}.reshape({_shape_text(types[o][0])})")
            continue
        if len(out) != 1:
            return None
        names[o] = f"v{o}"
        setup.append(f"v{o} = np.empty({_shape_text(types[o][0])}, dtype=np.{types[o][1].name})")
        if (isinstance(node.op, LogSumExp) and node.op.plain) or isinstance(node.op, LogSumExpGrad):
            scratch, lines = _logsumexp_code(node.op, names[ins[0]], types[ins[0]], f"v{o}", types[o])
            setup.extend(scratch)
            body.extend(lines)
            continue
        code = _node_code(node, [names[s] for s in ins], [types[s] for s in ins], f"v{o}", types[o])
        if code is None:
            return None
        body.extend(code)
    outputs = program.output_slots
    for k, s in enumerate(outputs[n_carry:]):
        body.append(f"y{k}[t] = {names[s]}")
    # the new carries are written back at the end of the step: straight from a buffer of the
    # body's, from a copy where the value is an input of the step (a carry passed through or
    # swapped, a view of one), which a write-back before it could have changed
    buffers = {f"v{o}" for o in types if f"v{o} = np.empty" in "\n".join(setup)}
    for i, s in enumerate(outputs[:n_carry]):
        if names[s] != f"c{i}" and names[s] not in buffers:
            body.append(f"n{i} = {names[s]}.copy()")
    for i, s in enumerate(outputs[:n_carry]):
        if names[s] != f"c{i}":
            body.append(f"c{i}[:] = {names[s] if names[s] in buffers else f'n{i}'}")
    lines = [
        "import math",
        "import numba",
        "import numpy as np",
        "",
        "from stablegrad.backends.numba_backend.kernels import exp",
        "",
        "",
        '@numba.njit(cache=True, nogil=True, error_model="numpy")',
        f"def loop({', '.join(args)}):",
    ]
    lines += ["    " + line for line in setup]
    lines += ["    for step in range(steps):", "        t = steps - 1 - step if reverse else step"]
    lines += [f"        h{i}[t] = c{i}" for i in range(n_carry)]
    lines += ["        " + line for line in body]
    return "\n".join(lines) + "\n"


def _steps(program: Program):
    for _fn, ins, out, single, frees, node in program.steps:
        yield node, ins, ([out] if single else out), single, frees, None


def _shape_text(shape: tuple) -> str:
    return "(" + "".join(f"{n}, " for n in shape) + ")"


def _at(name: str, shape: tuple, out_shape: tuple, idx: list[str]) -> str:
    """The operand's entry at output index `idx` (a 0-d operand here is a literal)."""
    return name if not shape else f"{name}[{_index(shape, out_shape, idx)}]"


def _index(shape: tuple, out_shape: tuple, idx: list[str]) -> str:
    """Broadcasting: the index into an operand of `shape` at output index `idx`."""
    pad = len(out_shape) - len(shape)
    return ", ".join("0" if n == 1 and out_shape[pad + a] != 1 else idx[pad + a] for a, n in enumerate(shape))


def _nest(shape: tuple, prefix: str, inner: list[str]) -> list[str]:
    """Loops over `shape` (indices prefix0, prefix1, ...) around `inner`."""
    lines, indent = [], ""
    for a, n in enumerate(shape):
        lines.append(f"{indent}for {prefix}{a} in range({n}):")
        indent += "    "
    return lines + [indent + line for line in inner]


def _node_code(node: Apply, ins: list[str], in_types: list, out: str, out_type) -> list[str] | None:
    op = node.op
    shape, dtype = out_type
    idx = [f"i{a}" for a in range(len(shape))]
    form = scalar_form(op)
    if form is not None and len(node.outputs) == 1:
        values = list(zip(ins, in_types, node.inputs))
        if isinstance(op, Where):
            condition, values = values[0], values[1:]
        else:
            condition = None
        common = np.result_type(*(t[1] for _, t, _ in values))
        operands = [cast(_at(name, t[0], shape, idx), t[1], common) for name, t, _ in values]
        if condition is not None:
            name, t, _ = condition
            operands.insert(0, _at(name, t[0], shape, idx))
        value = cast("(" + form.format(*operands) + ")", common, dtype, force=True)
        return _nest(shape, "i", [f"{out}[{', '.join(idx)}] = {value}"])
    if isinstance(op, BroadcastTo):
        return _nest(shape, "i", [f"{out}[{', '.join(idx)}] = {ins[0]}[{_index(in_types[0][0], shape, idx)}]"])
    if isinstance(op, Sum | ReduceTo):
        in_shape = in_types[0][0]
        j = [f"j{a}" for a in range(len(in_shape))]
        if isinstance(op, Sum):
            kept = [j[a] if a not in op.axes else "0" for a in range(len(in_shape))]
            target = kept if op.keepdims else [j[a] for a in range(len(in_shape)) if a not in op.axes]
        else:  # the axes the target has as 1 or lacks
            pad = len(in_shape) - len(shape)
            target = ["0" if n == 1 and in_shape[pad + a] != 1 else j[pad + a] for a, n in enumerate(shape)]
        return [f"{out}.fill(0)"] + _nest(in_shape, "j", [f"{out}[{', '.join(target)}] += {ins[0]}[{', '.join(j)}]"])
    return None


def _logsumexp_code(op, x: str, x_type, out: str, out_type) -> tuple[list[str], list[str]]:
    """(set-up, step) lines: the stable body's passes, each one nest over all of x's axes with
    the per-row values (max, NaN seen, rest, ties) in arrays of the kept shape, so that where
    the last axis is kept the inner loop runs across rows and vectorises.  The max (NaN noted
    apart), then Σ exp(x - m) below it and the ties at it, then `m + log1p(rest + ties - 1)`
    (logsumexp) or `where(at max, 1, exp(x - m)) / (ties + rest)` (its gradient; 0 on a row
    with nothing above -inf)."""
    shape = x_type[0]
    axes = {a % len(shape) for a in op.axes}
    kept_shape = tuple(1 if a in axes else n for a, n in enumerate(shape))
    j = [f"j{a}" for a in range(len(shape))]
    at = f"{x}[{', '.join(j)}]"
    row = "[" + ", ".join("0" if a in axes else j[a] for a in range(len(shape))) + "]"
    m, nan, rest, ties = (f"{out}_{name}" for name in ("m", "nan", "rest", "ties"))
    setup = [f"{name} = np.empty({_shape_text(kept_shape)})" for name in (m, rest, ties)]
    setup.append(f"{nan} = np.empty({_shape_text(kept_shape)}, dtype=np.bool_)")
    lines = [f"{m}.fill(-np.inf)", f"{nan}.fill(False)", f"{rest}.fill(0.0)", f"{ties}.fill(0.0)"]
    lines += _nest(shape, "j", [f"v = np.float64({at})", f"{m}{row} = max({m}{row}, v)", f"{nan}{row} |= v != v"])
    lines += _nest(kept_shape, "j", [f"{m}{row} = np.nan if {nan}{row} else {m}{row}"])
    lines += _nest(
        shape,
        "j",
        [
            f"v = np.float64({at})",
            f"tie = v == {m}{row}",
            f"e = math.exp(v - {m}{row})",
            f"{rest}{row} += 0.0 if tie else e",
            f"{ties}{row} += 1.0 if tie else 0.0",
            *([f"{out}[{', '.join(j)}] = 1.0 if tie else e"] if isinstance(op, LogSumExpGrad) else []),
        ],
    )
    if isinstance(op, LogSumExp):
        kept = [a for a in range(len(shape)) if a not in axes]
        target = [j[a] if a in kept else "0" for a in range(len(shape))] if op.keepdims else [j[a] for a in kept]
        lines += _nest(
            kept_shape,
            "j",
            [
                f"mb = {m}{row}",
                "if mb == mb and mb != np.inf and mb != -np.inf:",
                f"    mb = mb + math.log1p({rest}{row} + ({ties}{row} - 1.0))",
                f"{out}[{', '.join(target) or '0'}] = mb",
            ],
        )
    else:
        lines += _nest(kept_shape, "j", [f"{rest}{row} += {ties}{row}"])  # now the total
        lines += _nest(
            shape,
            "j",
            [  # (the terms from the pass before, kept in the output)
                f"p = {out}[{', '.join(j)}] / {rest}{row}",
                f"{out}[{', '.join(j)}] = 0.0 if {m}{row} == -np.inf else p",
            ],
        )
    return setup, lines
