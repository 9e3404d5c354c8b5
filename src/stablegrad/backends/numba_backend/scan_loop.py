"""A `scan` on the Numba backend: the whole loop, body and all, as one compiled function.

On the NumPy backend a step of an HMM's forward recursion is a dozen NumPy calls on
8-entry arrays, so 1000 steps cost milliseconds of call overhead.  Here the body program
(as `numpy_loops` optimises it for the arguments' shapes, but whole: hoisting its
carry-independent part would run that part in NumPy, which costs more than the loop
saves) becomes straight Numba code inside the loop: every value of the body has a buffer
of its static shape, allocated once, and every node is a loop nest writing it.  A body
with an op this module has no code for, or a shape the types leave open, runs as on the
NumPy backend.

`program_code` says which nodes it compiles and how.
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np

from ...ops.scan import Scan, run_length
from .. import numpy_loops
from ..numpy_program import Program
from .loop_source import warn_unsupported
from .program_code import HEADER, array_constants, loop_nest, translate


def scan_kernel(op: Scan, compiled: Callable[[str, str], Callable], unread: frozenset[int] = frozenset()) -> Callable:
    """The Scan node's implementation: the compiled loop where the body allows, else NumPy's.

    The history of a carry that nothing reads (`unread` indexes the node's outputs: carries,
    ys, histories) is not stored: a gradient's scan carries its accumulators, whose every
    step would otherwise be copied out (an HMM's 8 x 8 one: 9 % of its backward loop).  Its
    output is then an array of the right shape whose entries were never written."""
    loops: dict[tuple, Callable | None] = {}  # per shapes of the arguments
    first_history = op.n_carry + op.n_ys
    stored = tuple(i for i in range(op.n_carry) if first_history + i not in unread)

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
            text = loop_source(program, n_carry, len(xs), op.n_ys, stored)
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
            *[np.ascontiguousarray(data) for _, data in array_constants(program)],
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


def loop_source(program: Program, n_carry: int, n_xs: int, n_ys: int, stored: tuple[int, ...]) -> str | None:
    """Numba source of `loop(carries..., xs..., consts..., constants..., history..., ys..., steps, reverse)`,
    or None where the step program has a node or shape it cannot compile.  The carries entering
    each step are stored in the history of those in `stored` only."""
    inputs = program.input_slots
    carries, slices, consts = inputs[:n_carry], inputs[n_carry : n_carry + n_xs], inputs[n_carry + n_xs :]
    named = {s: f"c{i}" for i, s in enumerate(carries)} | {s: f"x{j}" for j, s in enumerate(slices)}
    named |= {s: f"v{s}" for s in consts}
    code = translate(program, named, varying={*carries, *slices})
    if code is None:
        return None
    args = [f"c{i}" for i in range(n_carry)] + [f"s{j}" for j in range(n_xs)]
    args += [f"v{s}" for s in consts] + [f"k{s}" for s, _ in array_constants(program)]
    args += [f"h{i}" for i in range(n_carry)] + [f"y{k}" for k in range(n_ys)] + ["steps", "reverse"]
    body = [f"x{j} = s{j}[t]" for j in range(n_xs)] + code.body
    names, outputs, types = code.names, program.output_slots, program.output_types
    numbers = {s for s, data in program.constants if np.size(data) == 1}  # (literals in the code)
    for k, s in enumerate(outputs[n_carry:]):
        shape = types[n_carry + k].shape
        body += [f"y{k}[t] = {names[s]}"] if s in numbers else _copied(f"y{k}[t, ", names[s], shape)
    # the new carries are written back at the end of the step: straight from a buffer of the
    # body's, from a copy where the value is an input of the step (a carry passed through or
    # swapped, a view of one), which a write-back before it could have changed
    for i, s in enumerate(outputs[:n_carry]):
        if names[s] != f"c{i}" and names[s] not in code.buffers and s not in numbers:
            body.append(f"n{i} = {names[s]}.copy()")
    for i, s in enumerate(outputs[:n_carry]):
        if s in numbers:  # (a one-entry constant: a number in the code)
            body.append(f"c{i}[:] = {names[s]}")
        elif names[s] != f"c{i}":
            body += _copied(f"c{i}[", names[s] if names[s] in code.buffers else f"n{i}", types[i].shape)
    lines = [*HEADER, f"def loop({', '.join(args)}):"]
    lines += ["    " + line for line in code.setup + code.invariant]
    lines += ["    for step in range(steps):", "        t = steps - 1 - step if reverse else step"]
    for i in stored:
        lines += ["        " + line for line in _copied(f"h{i}[t, ", f"c{i}", types[i].shape)]
    lines += ["        " + line for line in body]
    return "\n".join(lines) + "\n"


def _copied(target: str, source: str, shape: tuple) -> list[str]:
    """`target<index>] = source[index]` over `shape` (target the text up to the index, as
    `y0[t, `): on a step's small arrays a nest of loops costs less than a slice assignment."""
    index = ", ".join(f"i{a}" for a in range(len(shape)))
    return loop_nest(shape, "i", [f"{target}{index}] = {source}[{index}]"])
