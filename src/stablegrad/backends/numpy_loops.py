"""Loops on the NumPy backend: how a `scan` node runs (`ops.scan.Scan.perform` calls `run_loop`).

The body is compiled once per tuple of argument shapes, so its extents are static
and shape lookups, needless broadcasts and the sums that undo broadcasting fold
away.  The part of the body that does not depend on the carry runs first, once,
batched over all steps (`loop_hoist`); the loop itself is generated code when the
types pin every shape, and otherwise runs step by step, checking what the types
leave open and naming the step where the body fails.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ExecutionError, StableGradError
from ..graph import hooks
from ..graph.basic import Variable, substitute
from ..graph.types import TensorType
from ..ops.scan import HOIST_BUDGET, InnerGraph, Scan, ScanError, run_length
from ..rewrite.pipeline import optimize
from .loop_hoist import hoist
from .numpy_program import Program, runs_whole


def run_loop(op: Scan, arrays: Sequence, store_history: bool = True) -> tuple:
    """The loop's outputs (final carries, stacked ys, carries entering each step) for these arguments.

    Without `store_history` the carries entering each step are not kept (None): nothing reads them.
    """
    n_carry, n_xs, n_ys = op.n_carry, op.n_xs, op.n_ys
    carry = list(arrays[:n_carry])
    xs = arrays[n_carry : n_carry + n_xs]
    consts = list(arrays[n_carry + n_xs :])
    steps = run_length(op, xs)
    shapes = tuple(np.shape(a) for a in carry) + tuple(np.shape(x)[1:] for x in xs)
    shapes += tuple(np.shape(a) for a in consts)
    program, xs, consts = step_program(op, shapes, steps, xs, consts)
    inner = op.inner
    # Outputs are written in place into arrays allocated once (ys: at the first step,
    # when their shape is known), so a step costs the body's ops and little else.
    history = (
        [np.empty((steps, *np.shape(c)), dtype=p.dtype) for c, p in zip(carry, inner.carries)] if store_history else []
    )
    order = range(steps - 1, -1, -1) if op.reverse else range(steps)
    ys: list = [None] * n_ys
    types = program.output_types
    if steps >= 2 and all(t.shape == np.shape(c) for t, c in zip(types, carry)) and _static(types[n_carry:]):
        # the types pin every shape: no check a step, and the loop runs as generated code
        try:
            ys = [np.empty((steps, *t.shape), dtype=t.dtype) for t in types[n_carry:]]
            with np.errstate(all="ignore"):
                carry = program.loop(n_carry, len(xs), store_history)(carry, xs, consts, history, ys, order)
            return _results(op, carry, ys, history)
        except Exception:  # run again step by step, which says at which step and node it fails
            ys = [None] * n_ys
    run = program.run_unguarded
    check_carry, check_ys = _runtime_checks(op)
    t = 0
    try:
        with np.errstate(all="ignore"):
            for t in order:
                for h, c in zip(history, carry):
                    h[t] = c
                outs = run(carry + [x[t] for x in xs] + consts)
                for i in check_carry:
                    if np.shape(outs[i]) != np.shape(carry[i]):
                        raise _step_error(
                            f"changed the shape of carry {i} from {np.shape(carry[i])} to {np.shape(outs[i])}",
                            t,
                            op,
                        )
                carry = outs[:n_carry]
                for k in range(n_ys):
                    buffer, y = ys[k], outs[n_carry + k]
                    if buffer is None:
                        buffer = ys[k] = np.empty((steps, *np.shape(y)), dtype=inner.outputs[n_carry + k].dtype)
                    elif k in check_ys and np.shape(y) != buffer.shape[1:]:
                        raise _step_error(f"returned y[{k}] of shape {np.shape(y)} after {buffer.shape[1:]}", t, op)
                    buffer[t] = y
    except ExecutionError as exc:  # an op inside the body failed: say at which step
        raise ScanError(f"scan: at step {t}, {exc.message}", exc.location) from exc
    if steps == 0 and n_ys:
        ys = [
            np.zeros((0, *shape), dtype=o.dtype)
            for shape, o in zip(_empty_ys_shapes(op, arrays), inner.outputs[n_carry:])
        ]
    return _results(op, carry, ys, history)


def _results(op: Scan, carry, ys, history) -> tuple:
    final = [np.asarray(c, dtype=p.dtype) for c, p in zip(carry, op.inner.carries)]
    return (*final, *ys, *(history or [None] * op.n_carry))


def step_program(op: Scan, shapes: tuple, steps: int, xs, consts):
    """The program run at each step, with the sequences and implicit inputs it takes.

    Where part of the body does not depend on the carry, it runs first, once,
    batched over all steps, and the step only does the rest — unless that would
    hold more than `HOIST_BUDGET` bytes, or the prologue fails (the step-by-step
    body then names the step where it does).
    """
    plan = hoisted_body(op.inner, shapes) if steps > 1 else None
    if plan is not None and steps * plan.bytes_per_step <= HOIST_BUDGET:
        try:
            hoisted = plan.prologue.run([*xs, *consts])
        except ExecutionError:
            pass
        else:
            n = plan.n_batched
            return plan.step, [*xs, *hoisted[:n]], [*consts, *hoisted[n:]]
    return body_program(op.inner, shapes), xs, consts


def _empty_ys_shapes(op: Scan, arrays) -> list[tuple[int, ...]]:
    """The shape each y would have, for a loop of zero steps: the body's types re-inferred
    for the actual shapes of the arguments, else the body run once on zero-filled slices."""
    inner = op.inner
    n_carry, n_xs = op.n_carry, op.n_xs
    shapes = [np.shape(a) for a in arrays]
    shapes[n_carry : n_carry + n_xs] = [s[1:] for s in shapes[n_carry : n_carry + n_xs]]
    typed = {p.id: Variable(TensorType(p.dtype, s)) for p, s in zip(inner.inputs, shapes)}
    try:
        ys = substitute(inner.outputs, typed)[n_carry:]
    except StableGradError:  # the body's type rules reject these shapes; nothing ran, nothing to report
        ys = inner.outputs[n_carry:]
    if all(None not in y.type.shape for y in ys):
        return [y.type.shape for y in ys]  # type: ignore[misc]
    values = [
        np.zeros(s, p.dtype) if n_carry <= i < n_carry + n_xs else a
        for i, (p, s, a) in enumerate(zip(inner.inputs, shapes, arrays))
    ]
    try:
        with np.errstate(all="ignore"):
            outs = body_program(inner).run_unguarded(values)
    except Exception:  # the body cannot run on zeros: no shape to recover
        return [tuple(n or 0 for n in y.type.shape) for y in ys]
    return [np.shape(o) for o in outs[n_carry:]]


def _runtime_checks(op: Scan) -> tuple[list[int], set[int]]:
    """Carries and ys whose shape the types do not pin down, so each step must be checked."""
    inner = op.inner
    checks = inner._step_checks
    if checks is None:
        carries = [
            i
            for i, (p, o) in enumerate(zip(inner.carries, inner.outputs))
            if None in p.type.shape or p.type.shape != o.type.shape
        ]
        ys = {k for k, o in enumerate(inner.outputs[op.n_carry :]) if None in o.type.shape}
        checks = inner._step_checks = (carries, ys)
    return checks


def _step_error(what: str, t: int, op: Scan) -> ScanError:
    return ScanError(f"scan: the step function {what} at step {t}; a carry or y keeps its shape", op.location)


def _static(types) -> bool:
    return all(None not in t.shape for t in types)


# -- the body, compiled for the shapes a loop runs with -------------------------------------------------
def body_program(inner: InnerGraph, shapes: tuple | None = None) -> Program:
    """The body compiled for the NumPy backend, once per tuple of argument shapes.

    Given the shapes the loop actually runs with, the body is compiled for exactly
    those: every extent is static, so shape lookups fold to constants and the
    sums that undo broadcasting vanish where nothing was broadcast — per step,
    that is most of the bookkeeping nodes of a gradient.
    Only the value-preserving late phase runs here (inlining, merging, folding):
    recognition is the outer pipeline's decision — its `scan_body_recognised`
    rewrite has already replaced this loop by one with a recognised body when
    recognition is on, and with `recognition=False` the body stays as written.
    """
    program = inner._programs.get(shapes)
    if program is None:
        program = inner._programs[shapes] = Program(*_typed_body(inner, shapes))
    return program


def hoisted_body(inner: InnerGraph, shapes: tuple):
    """The body for these shapes split into a prologue run once, batched over all
    steps, and a lighter step (see `backends.loop_hoist`); None when nothing hoists."""
    if shapes not in inner._hoisted:
        inputs, body = _typed_body(inner, shapes)
        n_carry, n_xs = len(inner.carries), len(inner.slices)
        inner._hoisted[shapes] = hoist(
            inputs[:n_carry], inputs[n_carry : n_carry + n_xs], inputs[n_carry + n_xs :], body
        )
    return inner._hoisted[shapes]


def _typed_body(inner: InnerGraph, shapes: tuple | None) -> tuple[list[Variable], list[Variable]]:
    """(placeholders, outputs) of the body typed for `shapes` and through the late phase."""
    compiled = inner._optimized.get(shapes)
    if compiled is None:
        inputs, outputs = inner.inputs, inner.outputs
        if shapes is not None:
            typed = [Variable(TensorType(p.dtype, s), name=p.name) for p, s in zip(inputs, shapes)]
            try:
                outputs = substitute(outputs, {p.id: t for p, t in zip(inputs, typed)})
                inputs = typed
            except StableGradError:  # the type rules reject these shapes: run the generic body, which reports it
                inputs, outputs = inner.inputs, inner.outputs
        compiled = inner._optimized[shapes] = (
            inputs,
            optimize(outputs, inputs, recognition=False, keep_whole=runs_whole),
        )
    return compiled


hooks.run_loop.provide(run_loop)
