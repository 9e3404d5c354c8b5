"""How the NumPy backend runs a loop: carry-independent work hoisted out and batched,
the loop as generated code, no stored carries nobody reads.  Each fast path is
checked against the plain step-by-step loop it replaces."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import stablegrad as sg
import stablegrad.backends.numpy_loops as numpy_loops
from stablegrad.backends.loop_hoist import hoist
from stablegrad.backends.numpy_program import Program
from stablegrad.graph.basic import Variable
from stablegrad.graph.types import TensorType
from stablegrad.ops.scan import Scan
from stablegrad.ops.stable.logsumexp import LogSumExpGrad

rng = np.random.default_rng(7)


def _step_by_step(monkeypatch):
    """Turn off both fast paths: nothing is hoisted and the loop is not generated code."""
    monkeypatch.setattr(numpy_loops, "HOIST_BUDGET", -1)

    def refuse(self, *args):
        raise RuntimeError("the generated loop is off in this test")

    monkeypatch.setattr(Program, "loop", refuse)


def _hmm(K: int = 4):
    log_A, log_b = sg.matrix("log_A"), sg.matrix("log_b")

    def step(alpha, b_t):
        new = sg.logsumexp(alpha[:, None] + log_A, axis=0) + b_t
        return new, sg.exp(new)

    final, ys = sg.scan(step, log_b[0], log_b[1:])
    loglik = sg.logsumexp(final)
    grads = sg.grad(loglik + sg.sum(ys), [log_A, log_b])
    args = (np.log(rng.dirichlet(np.ones(K), size=K)), -8 + rng.standard_normal((50, K)))
    return [log_A, log_b], [loglik, ys, *grads], args


def _scan_nodes(f) -> list:
    return [n for n in f.nodes if isinstance(n.op, Scan)]


def test_the_hmm_pullback_computes_its_softmax_weights_before_the_loop_and_agrees_with_the_plain_loop(monkeypatch):
    inputs, outputs, args = _hmm()
    f = sg.function(inputs, outputs)
    fast = f(*args)
    (backward,) = [n for n in _scan_nodes(f) if n.op.reverse]
    (plan,) = [p for p in backward.op.inner._hoisted.values() if p is not None]
    assert any(isinstance(n.op, LogSumExpGrad) for n in plan.prologue.nodes)
    assert not any(isinstance(n.op, LogSumExpGrad) for n in plan.step.nodes)
    assert len(plan.step.nodes) <= 5  # what is left a step: the cotangent's matrix-vector product and the sum
    _step_by_step(monkeypatch)
    plain = sg.function(inputs, outputs)(*args)
    for a, b in zip(fast, plain):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-300)


def test_every_batching_rule_agrees_with_the_step_by_step_loop(monkeypatch):
    """A body using each rule: broadcasting against a higher-rank implicit input,
    reductions over negative axes, transpose, squeeze/expand_dims, the stable family."""
    xs, W = sg.tensor("xs", shape=(None, 3)), sg.matrix("W")

    def step(c, x):
        u = sg.transpose(x[:, None] * W)  # (4, 3): a batched rank-1 slice against a rank-2 input
        lse = sg.logsumexp(u, axis=-1, keepdims=True)  # (4, 1)
        p = sg.softmax(u, axis=0)
        q = sg.log_softmax(u, axis=(0, 1))
        r = sg.squeeze(sg.max(u, axis=-1, keepdims=True), axis=1) + sg.mean(sg.expand_dims(x, 0), axis=-1)
        new = c * 0.5 + sg.sum(p * c[:, None]) + sg.sum(lse) + sg.sum(q) + sg.sum(r)
        return new, (r, q)

    final, (rs, qs) = sg.scan(step, sg.zeros((4,)), xs)
    outputs = [final, rs, qs, *sg.grad(sg.sum(final), [xs, W])]
    args = (rng.standard_normal((6, 3)), rng.standard_normal((3, 4)))
    fast = sg.function([xs, W], outputs)(*args)
    _step_by_step(monkeypatch)
    plain = sg.function([xs, W], outputs)(*args)
    for a, b in zip(fast, plain):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)


def test_hoist_splits_a_body_into_batched_per_step_and_invariant_values_and_the_rest():
    carry, x, k = (
        Variable(TensorType(np.dtype("float64"), s), name=n) for s, n in [((2,), "c"), ((2,), "x"), ((2,), "k")]
    )
    invariant = sg.exp(k)  # the same every step: computed once
    per_step = sg.sin(x) * invariant  # needs only the slice: computed for all steps at once
    out = carry * per_step + invariant
    plan = hoist([carry], [x], [k], [out, per_step])
    assert plan is not None and plan.n_batched == 1
    assert [type(n.op).__name__ for n in plan.step.nodes] == ["Multiply", "Add"]
    stacked, k_value, c_value = rng.standard_normal((5, 2)), rng.standard_normal(2), rng.standard_normal(2)
    hoisted_sin, hoisted_exp = plan.prologue.run([stacked, k_value])
    np.testing.assert_array_equal(hoisted_sin, np.sin(stacked) * np.exp(k_value))
    np.testing.assert_array_equal(hoisted_exp, np.exp(k_value))
    new, y = plan.step.run([c_value, stacked[3], hoisted_sin[3], k_value, hoisted_exp])
    np.testing.assert_array_equal(new, c_value * hoisted_sin[3] + np.exp(k_value))
    np.testing.assert_array_equal(y, hoisted_sin[3])


def test_hoist_leaves_a_body_whose_every_node_needs_the_carry_alone():
    carry, x = Variable(TensorType(np.dtype("float64"), (2,))), Variable(TensorType(np.dtype("float64"), (2,)))
    assert hoist([carry], [x], [], [sg.exp(carry) + x]) is None


def test_a_loop_over_the_memory_budget_is_not_hoisted(monkeypatch):
    inputs, outputs, args = _hmm()
    f = sg.function(inputs, outputs)
    expected = f(*args)
    monkeypatch.setattr(numpy_loops, "HOIST_BUDGET", 0)
    ran = []
    monkeypatch.setattr(Program, "run", lambda self, values: ran.append(self) or Program.interpret(self, values))
    g = sg.function(inputs, outputs)
    for a, b in zip(g(*args), expected):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-300)
    (backward,) = [n for n in _scan_nodes(g) if n.op.reverse]
    prologues = [p.prologue for p in backward.op.inner._hoisted.values() if p is not None]
    assert prologues and not any(p in ran for p in prologues)


def test_the_generated_loop_handles_swapped_carries_constant_and_carry_outputs(monkeypatch):
    xs = sg.vector("xs")

    def step(c, x):
        a, b = c
        return (b, a + x), (a, sg.constant(2.0), x * 0)

    (a, b), ys = sg.scan(step, (sg.constant(1.0), sg.constant(10.0)), xs)
    outputs = [a, b, *ys]
    values = rng.standard_normal(9)
    fast = sg.function([xs], outputs)(values)
    _step_by_step(monkeypatch)
    plain = sg.function([xs], outputs)(values)
    for got, want in zip(fast, plain):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(fast[3], np.full(9, 2.0))


def test_a_failing_generated_loop_runs_again_step_by_step_and_names_the_step():
    xs, W = sg.matrix("xs"), sg.matrix("W")
    f = sg.function([xs, W], sg.scan(lambda c, x: (sg.matmul(W, c) + x, None), sg.zeros((3,)), xs)[0])
    with pytest.raises(sg.ExecutionError, match=r"scan: at step 0, matmul"):
        f(np.zeros((4, 3)), np.zeros((2, 2)))
    np.testing.assert_allclose(f(np.ones((4, 3)), np.eye(3)), np.full(3, 4.0))


def test_the_pullback_loop_stores_no_carries_unless_it_is_differentiated_again():
    inputs, outputs, args = _hmm()
    f = sg.function(inputs, outputs)
    stores = {
        node.op.reverse: not (isinstance(fn, functools.partial) and fn.keywords == {"store_history": False})
        for fn, _, _, _, _, node in f._program.steps
        if isinstance(node.op, Scan)
    }
    assert stores == {False: True, True: False}
    # the Hessian-vector product differentiates the backward loop: its carries are kept and read
    log_A, log_b = inputs
    v = sg.matrix("v")
    (g,) = sg.grad(outputs[0], [log_A])
    (hvp,) = sg.grad(sg.sum(g * v), [log_A])
    direction = rng.standard_normal(args[0].shape)
    got = sg.function([log_A, log_b, v], hvp)(*args, direction)
    grad_at = sg.function([log_A, log_b], g)
    eps = 1e-6
    expected = (grad_at(args[0] + eps * direction, args[1]) - grad_at(args[0] - eps * direction, args[1])) / (2 * eps)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8)
