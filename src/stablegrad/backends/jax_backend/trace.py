"""Walking a node list under a JAX trace, and the ops that contain graphs (scan, composites).

`evaluate(plan, values)` runs a `Plan` — a scheduled node list with each node's
lowering looked up in advance — on traced arrays.  Values known while tracing
stay NumPy: constants, every `ShapeDim` (the traced array's shape is static), and
small integer/shape arithmetic on them, which is run with the op's own NumPy
`perform`.  That is what lets `reshape(x, (x.shape[0] * 2, -1))` or `mean` over
an axis of unknown length compile: their shape entries are plain ints by the time
XLA sees them.  Everything else goes through its lowering, and each result is
cast to the dtype the graph declares, so JAX's promotion rules never leak out.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ...errors import ExecutionError, StableGradError
from ...graph.basic import Apply, Constant, Op, Variable, toposort
from ...graph.types import TensorType, is_floating
from ...ops import base, reduction, shape
from ...ops.composite import OpFromGraph, SymbolicOp, body_of
from ...ops.scan import HOIST_BUDGET, Scan, ScanError, run_length
from ...rewrite.pipeline import optimize
from . import flags
from .lowerings import LOWERINGS as PRIMITIVE_LOWERINGS
from .lowerings import ROUNDED, LoweringError, is_static, lower_ufunc, lower_ufunc_unguarded
from .whole import WHOLE, runs_whole, sharing

#: entries beyond which a value known at trace time is left to XLA rather than computed with NumPy
FOLD_LIMIT = 4096
#: ops cheap to run on small known values while tracing (their outputs are no bigger than their inputs)
_FOLDABLE = (base.Elementwise, reduction.Reduction, shape.Reshape, shape.ExpandDims, shape.Squeeze, shape.Transpose)


class Plan:
    """A node list to trace: inputs, outputs, and for each node its lowering.

    A product or quotient skips its rounding guard (`lowerings.rounded`) where no addition
    can take it into a fused multiply-add: where only other products and quotients read
    it, and, with `final`, the outputs (the plan of a whole program, whose outputs leave
    XLA, not of a loop step or a composite's body, whose outputs other XLA code reads).
    """

    def __init__(self, inputs: Sequence[Variable], outputs: Sequence[Variable], final: bool = False):
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.nodes = toposort(self.outputs, stop=self.inputs)
        # the variables an addition could contract: read by any node but a plain product or
        # quotient, or by code outside the plan
        exposed = {v.id for node in self.nodes if not _plain_product(node) for v in node.inputs}
        if not final:
            exposed.update(v.id for v in self.outputs)
        self.steps = [
            (
                node,
                lower_ufunc_unguarded
                if _plain_product(node) and node.outputs[0].id not in exposed
                else lowering_for(node.op),
            )
            for node in self.nodes
        ]
        for node in self.nodes:
            if isinstance(node.op, Scan):
                inner_plan(node.op)  # plans the step graph now, so a missing lowering fails at compile time


def _plain_product(node: Apply) -> bool:
    """Whether the node is a product or quotient lowered as the ufunc (with its rounding guard)."""
    return isinstance(node.op, ROUNDED) and lowering_for(node.op) is lower_ufunc


def lowering_of(op_class: type) -> Callable | None:
    """The lowering of an op class, looked up along its bases (so every SymbolicOp lowers through its body)."""
    for cls in op_class.__mro__:
        lower = LOWERINGS.get(cls)
        if lower is not None:
            return lower
    return None


def lowering_for(op: Op) -> Callable:
    """The lowering of an op, or an error that names it."""
    lower = lowering_of(type(op))
    if lower is not None:
        return lower
    raise StableGradError(
        f"backend 'jax': op {op.name!r} ({type(op).__qualname__}) has no lowering; register "
        "`lower_<op>(op, *args)` for it in stablegrad.backends.jax_backend.LOWERINGS"
    )


def evaluate(plan: Plan, values: Sequence) -> list:
    """The plan's outputs for these input values (traced arrays or NumPy values)."""
    with sharing():  # (a logsumexp and its gradient of one x lower to one max, exp and sum)
        return _evaluate(plan, values)


def _evaluate(plan: Plan, values: Sequence) -> list:
    env: dict[int, object] = {v.id: a for v, a in zip(plan.inputs, values)}
    raised = flags.current()
    checks = raised.checks if raised is not None else []

    def value_of(v: Variable):
        return v.data if isinstance(v, Constant) else env[v.id]

    for node, lower in plan.steps:
        args = [value_of(v) for v in node.inputs]
        try:
            if _foldable(node, args):
                with np.errstate(all="ignore"):
                    result = node.op.perform(*args)  # type: ignore[attr-defined]
            else:
                checked = len(checks)
                result = lower(node.op, *args)
                for c in checks[checked:]:  # a failed check names the line that built this node
                    c.location = c.location or node.location
        except LoweringError as exc:
            raise exc.kind(exc.message, location=node.location) from None
        except ScanError as exc:  # a loop's body went wrong while running: as the NumPy backend reports it
            raise ExecutionError(exc.message, location=exc.location) from exc
        except StableGradError:  # ExecutionError, or what this backend cannot compile (data-dependent shapes)
            raise
        except Exception as exc:
            shapes = ", ".join(str(np.shape(a)) for a in args)
            raise ExecutionError(f"{node.op.name}: {exc} (operands {shapes})", location=node.location) from exc
        results = (result,) if node.op.nout == 1 else tuple(result)
        for out, r in zip(node.outputs, results):
            env[out.id] = _conform(r, out.type)
    return [value_of(v) for v in plan.outputs]


def _foldable(node: Apply, args: list) -> bool:
    return isinstance(node.op, _FOLDABLE) and all(is_static(a) and np.size(a) <= FOLD_LIMIT for a in args)


def _conform(value, t: TensorType):
    """The value in the graph's declared dtype (a no-op when it already is)."""
    if is_static(value) or isinstance(value, int | float | bool):
        return np.asarray(value, dtype=t.dtype)
    return value if value.dtype == t.dtype else value.astype(t.dtype)


# -- composites that survived inlining: through their body ------------------------------------------------
_COMPOSITE_PLANS: dict[tuple, Plan] = {}


def lower_composite(op, *args):
    """A SymbolicOp kept whole (`inline = False`) or an OpFromGraph: its optimized body, traced in place."""
    types = tuple(TensorType(np.dtype(a.dtype), tuple(np.shape(a))) for a in args)
    key = (op, types)
    plan = _COMPOSITE_PLANS.get(key)
    if plan is None:
        placeholders, outputs = body_of(op, types)
        plan = _COMPOSITE_PLANS[key] = Plan(placeholders, optimize(outputs, placeholders, recognition=False))
    results = evaluate(plan, args)
    return results[0] if op.nout == 1 else tuple(results)


# -- scan: lax.scan over the optimized step graph --------------------------------------------------------
_SCAN_PLANS: weakref.WeakKeyDictionary[Scan, Plan] = weakref.WeakKeyDictionary()


def inner_plan(op: Scan) -> Plan:
    """The step graph after the value-preserving late phase, planned once (as `InnerGraph.program`).

    Recognition is not repeated here: the outer pipeline already replaced the loop
    by one with a recognised body when recognition is on.
    """
    plan = _SCAN_PLANS.get(op)
    if plan is None:
        inner = op.inner
        outputs = optimize(inner.outputs, inner.inputs, recognition=False, keep_whole=runs_whole)
        plan = _SCAN_PLANS[op] = Plan(inner.inputs, outputs)
    return plan


class HoistedStep:
    """A step split as the NumPy backend's `loop_hoist` splits it: `prologue` computes the
    values that depend on the sequences but on no carry, run for all steps at once
    (`jax.vmap`) before the loop; `step` takes them as extra sequences.  In a pullback
    that is the recomputed forward work (an HMM's softmax weights), which XLA would
    otherwise redo at every step of a `while` loop, one small kernel after another."""

    def __init__(self, plan: Plan, n_carry: int, n_xs: int):
        hoisted = _carry_free_values(plan, n_carry, n_xs)
        self.hoisted = len(hoisted)
        self.prologue = Plan(plan.inputs[n_carry:], hoisted)
        self.step = Plan([*plan.inputs, *hoisted], plan.outputs)


def _carry_free_values(plan: Plan, n_carry: int, n_xs: int) -> list[Variable]:
    """Float values computed from the sequences but from no carry, that the rest of the
    step reads or returns.  (Integer values stay: they are shapes and indices, known
    while tracing, which a batched prologue would turn into traced arrays.)"""
    on_carry = {v.id for v in plan.inputs[:n_carry]}
    on_slice = {v.id for v in plan.inputs[n_carry : n_carry + n_xs]}
    inputs = {v.id for v in plan.inputs}
    for node in plan.nodes:
        read = [v.id for v in node.inputs]
        if any(i in on_carry for i in read):
            on_carry.update(o.id for o in node.outputs)
        elif any(i in on_slice for i in read):
            on_slice.update(o.id for o in node.outputs)
    wanted: dict[int, Variable] = {}
    readers = [v for node in plan.nodes if node.outputs[0].id in on_carry for v in node.inputs]
    for v in [*readers, *plan.outputs]:
        if v.id in on_slice and v.id not in inputs and is_floating(v.dtype):
            wanted.setdefault(v.id, v)
    return list(wanted.values())


_HOISTED: weakref.WeakKeyDictionary[Scan, HoistedStep] = weakref.WeakKeyDictionary()


def hoisted_step(op: Scan) -> HoistedStep:
    split = _HOISTED.get(op)
    if split is None:
        split = _HOISTED[op] = HoistedStep(inner_plan(op), op.n_carry, op.n_xs)
    return split


def lower_scan(op: Scan, *args):
    """`lax.scan`; the stacked carry history (what the pullback reads) is one more per-step output.

    The carry-free part of the step runs first, batched (`HoistedStep`), unless it
    would hold more than `scan.HOIST_BUDGET` bytes.
    """
    n_carry, n_xs = op.n_carry, op.n_xs
    carry_types = [c.type for c in op.inner.carries]
    init = [jax.lax.convert_element_type(a, t.dtype) for a, t in zip(args[:n_carry], carry_types)]
    xs = [jnp.asarray(a) for a in args[n_carry : n_carry + n_xs]]
    consts = list(args[n_carry + n_xs :])
    length = run_length(op, xs)
    plan = inner_plan(op)

    first_step = length - 1 if op.reverse else 0  # shapes are static: if one changes, it is at the first step

    def in_step(run: Callable) -> tuple:
        """run() traced for the step, with its flags (never speculating: a doubt could not leave the loop)."""
        try:
            return flags.traced(run, speculate=False)
        except ExecutionError as exc:  # traced once for every step: no step to name, unlike NumPy's loop
            raise ExecutionError(f"scan: in the step function, {exc.message}", exc.location) from exc

    step_checks: list[flags.Check] = []  # the checks the step makes, filled in when lax.scan traces it

    def step(carry, x_t):
        x_t = list(x_t or ())  # the slices, then any hoisted values (the split step's last inputs)
        outs, raised = in_step(lambda: evaluate(plan, [*carry, *x_t[:n_xs], *consts, *x_t[n_xs:]]))
        step_checks[:] = raised.checks
        new = []
        for i, (c, old) in enumerate(zip(outs[:n_carry], carry)):
            if np.shape(c) != old.shape:
                raise ScanError(
                    f"scan: the step function changed the shape of carry {i} from {old.shape} to {np.shape(c)} "
                    f"at step {first_step}; a carry or y keeps its shape",
                    op.location,
                )
            new.append(jax.lax.convert_element_type(c, old.dtype))
        ys = [jnp.asarray(y) for y in outs[n_carry:]]
        return new, (ys, list(carry), raised.checked())

    split = hoisted_step(op) if xs and length > 1 else None
    if split is not None and split.hoisted:
        prologue_checks: list[flags.Check] = []

        def prologue(*x_t):
            values, raised = in_step(lambda: evaluate(split.prologue, [*x_t, *consts]))
            prologue_checks[:] = raised.checks
            return values, raised.checked()

        batched, checked = jax.vmap(prologue)(*xs)
        if sum(b.size * b.dtype.itemsize for b in batched) <= HOIST_BUDGET:
            plan, xs = split.step, [*xs, *batched]  # else unused: XLA drops it
            flags.restack(prologue_checks, checked)
    final, (ys, history, checked) = jax.lax.scan(step, init, xs or None, length=length, reverse=op.reverse)
    flags.restack(step_checks, checked)
    return (*final, *ys, *history)


def _plain_or_body(lower: Callable) -> Callable:
    """`lower` for the variants `runs_whole` keeps; any other is lowered through its body."""

    def lowering(op, *args):
        return lower(op, *args) if runs_whole(op) else lower_composite(op, *args)

    return lowering


LOWERINGS: dict[type, Callable] = {
    **PRIMITIVE_LOWERINGS,
    **{cls: _plain_or_body(lower) for cls, lower in WHOLE.items()},
    Scan: lower_scan,
    SymbolicOp: lower_composite,
    OpFromGraph: lower_composite,
}
