"""A graph of ours run as JAX code, whose reverse-mode derivative is our symbolic one.

`LoweredGraph(inputs, outputs)` recognises naive formulas in `outputs`, optimises them
and plans them for the JAX backend's tracer (`backends.jax_backend.trace`).  Calling
it on JAX arrays (or tracers: it runs inside the user's `jit`, `vmap`, `grad`) traces
that plan in place.  It is a `jax.custom_vjp` function: JAX never differentiates the
lowered code of the value; the backward pass runs the lowered graph of our own
`autodiff.vjp` of the recognised outputs, with the cotangents as extra inputs.

The backward graph is plain traced JAX code (not custom_vjp again), so that forward
mode works on it: `jax.hessian` is `jacfwd(jacrev(f))`, and JAX has no forward mode
for a custom_vjp function.  Second derivatives (`jax.hessian`, grad of grad) are thus
JAX's derivatives of the lowered code of our stable forward and gradient graphs.

The JAX backend's "cheap form with an exact rerun on doubt" (`flags.settle`) reruns a
whole second program; inside the user's trace there is none to rerun.  So the plan is
traced twice: cheap, recording its doubts, and exact, as the false and true branches
of one `lax.cond` on "any doubt" — XLA runs the exact branch only on the rare data
that needs it (under `vmap` a batched condition runs both, as `where` would).
Run-time checks (labels in range) have nowhere to raise from inside a user's `jit`,
and are dropped.

>>> import jax.numpy as jnp, stablegrad as sg
>>> x = sg.vector("x")
>>> f = LoweredGraph([x], [sg.log(sg.sum(sg.exp(x)))])
>>> [round(float(v), 3) for v in f(jnp.array([1000.0, 1000.0]))]
[1000.693]
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..autodiff import vjp
from ..backends.jax_backend import flags
from ..backends.jax_backend.lowerings import xla_rounding
from ..backends.jax_backend.trace import Plan, evaluate
from ..backends.jax_backend.whole import runs_whole
from ..graph.basic import Constant, Variable, Zero, ancestors, substitute, toposort
from ..rewrite.engine import ChangeLog
from ..rewrite.pipeline import optimize, recognise


class LoweredGraph:
    """`outputs` of `inputs`, callable on JAX values, with our VJP (see the module docstring)."""

    def __init__(self, inputs: Sequence[Variable], outputs: Sequence[Variable], log: ChangeLog | None = None):
        self.inputs = list(inputs)
        self.log = log if log is not None else ChangeLog()
        self.recognised = recognise(list(outputs), keep=self.inputs, log=self.log)
        self.plan = _plan(self.inputs, self.recognised)
        self._pullback: Pullback | None = None
        value = jax.custom_vjp(self._value)
        value.defvjp(self._forward, self._backward)
        # jitted even when the caller is not: run eagerly, JAX would compile each primitive on its own
        self._call = jax.jit(value)

    def __call__(self, *values) -> list:
        return list(self._call(*values))

    # -- the custom_vjp rule ---------------------------------------------------------------------------------
    def _value(self, *values) -> tuple:
        return tuple(_run(self.plan, values))

    def _forward(self, *values):
        pullback = self.pullback()
        results = _run(pullback.forward, values)
        n = len(self.recognised)
        return tuple(results[:n]), (values, tuple(results[n:]))

    def _backward(self, residuals, cotangents) -> tuple:
        values, saved = residuals
        pullback = self.pullback()
        cts = [cotangents[i] for i in pullback.differentiable_outputs]
        grads = pullback.call(*values, *saved, *cts)
        return tuple(None if slot is None else grads[slot] for slot in pullback.gradient_slots)

    def pullback(self) -> Pullback:
        if self._pullback is None:
            self._pullback = Pullback(self.inputs, self.recognised)
        return self._pullback


class Pullback:
    """Our VJP of `outputs` as a plan, and the forward plan that saves what it reads.

    The VJP graph reads forward values (a logsumexp's result, a loop's stored carries).
    Recomputing them in the backward pass would redo the forward work, so the forward
    plan returns them too (`saved`, JAX's residuals) and the VJP takes them as inputs.

    `plan` takes (inputs, saved values, one cotangent per float output);
    `differentiable_outputs` says which outputs those are; `gradient_slots[k]` is input
    k's place among the plan's outputs (None: no gradient, for an integer input or one
    the outputs do not depend on).
    """

    def __init__(self, inputs: list[Variable], outputs: list[Variable]):
        self.differentiable_outputs = [i for i, v in enumerate(outputs) if v.type.is_float()]
        cts = [Variable(outputs[i].type, name=f"cotangent{i}") for i in self.differentiable_outputs]
        wrt = [v for v in inputs if v.type.is_float()]
        found = vjp([outputs[i] for i in self.differentiable_outputs], cts, wrt) if cts and wrt else []
        by_input = {w.id: g for w, g in zip(wrt, found) if not isinstance(g, Zero)}
        kept = [v.id for v in inputs if v.id in by_input]
        self.gradient_slots = [kept.index(v.id) if v.id in by_input else None for v in inputs]
        grads = [by_input[k] for k in kept]
        saved = _forward_values_read(grads, outputs, [*inputs, *cts])
        placeholders = [Variable(v.type, name=f"saved{k}") for k, v in enumerate(saved)]
        grads = substitute(grads, {v.id: p for v, p in zip(saved, placeholders)}) if saved else grads
        self.forward = _plan(inputs, [*outputs, *saved])
        self.plan = _plan([*inputs, *placeholders, *cts], grads)
        self.call = jax.jit(lambda *args: _run(self.plan, args))


def _forward_values_read(grads: list[Variable], outputs: list[Variable], leaves: list[Variable]) -> list[Variable]:
    """The computed values of the forward graph that the VJP graph reads (or returns)."""
    forward = {v.id for v in ancestors(outputs, stop=leaves) if v.owner is not None}
    saved: dict[int, Variable] = {}
    for node in toposort(grads, stop=leaves):
        if node.outputs[0].id in forward:
            continue  # a forward node itself: its value is saved or read further down
        for v in node.inputs:
            if v.id in forward and not isinstance(v, Constant):
                saved.setdefault(v.id, v)
    for g in grads:
        if g.id in forward and not isinstance(g, Constant):
            saved.setdefault(g.id, g)
    return list(saved.values())


def _plan(inputs: list[Variable], outputs: list[Variable]) -> Plan:
    # recognition once more: a pullback's own formulas (and nested gradients) get the same repairs
    optimized = optimize(outputs, inputs, recognition=True, keep_whole=runs_whole)
    return Plan(inputs, optimized, final=True)


def _run(plan: Plan, values: Sequence) -> list:
    """The plan traced on these values, every result a JAX array of the graph's dtype.

    With JAX's 64-bit mode off, a float64 constant of a pullback (an `inf` fill, say) is
    computed in float32, as every float of the user's program is; JAX's warning that it
    truncates the requested dtype says nothing the user could act on, so it is silenced.
    """

    def run(speculate: bool) -> tuple[list, flags.Flags]:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Explicitly requested dtype (float|int)64", category=UserWarning)
            with xla_rounding():
                results, raised = flags.traced(lambda: evaluate(plan, values), speculate=speculate)
            return [jnp.asarray(r, dtype=np.dtype(v.dtype)) for r, v in zip(results, plan.outputs)], raised

    cheap, raised = run(speculate=True)
    doubt = raised.doubt()
    if doubt is None:
        return cheap
    # the exact form only where the cheap one doubts itself: a branch XLA skips otherwise
    # (under vmap, a batched condition runs both)
    return jax.lax.cond(doubt, lambda: run(speculate=False)[0], lambda: cheap)
