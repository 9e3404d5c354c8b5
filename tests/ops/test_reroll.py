"""Re-rolling (`rewrite/reroll.py`): a loop unrolled in Python runs as one `scan`, with the
values and gradients of the loop as written, and what cannot be rolled stays as written."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stablegrad as sg
from stablegrad.ops.scan import Scan
from stablegrad.rewrite.reroll import MIN_STEPS
from stablegrad.testing import check_grads

from .helpers import BACKEND, seeds

rng = np.random.default_rng(20261207)


def loops(f) -> int:
    return sum(isinstance(node.op, Scan) for node in f.nodes)


def hmm(steps: int, states: int = 4):
    """The forward algorithm unrolled: (inputs, cost, every alpha)."""
    log_a = sg.tensor("log_a", (states, states))
    log_b = sg.tensor("log_b", (steps, states))
    log_pi = sg.tensor("log_pi", (states,))
    alpha = log_pi + log_b[0]
    alphas = [alpha]
    for t in range(1, steps):
        alpha = sg.logsumexp(alpha[:, None] + log_a, axis=0) + log_b[t]
        alphas.append(alpha)
    return [log_a, log_b, log_pi], sg.logsumexp(alpha, axis=0), alphas


def hmm_data(steps: int, states: int = 4) -> list[np.ndarray]:
    log_a = np.log(rng.dirichlet(np.ones(states), states))
    log_b = -0.5 * rng.standard_normal((steps, states)) ** 2 - 1.0
    return [log_a, log_b, np.full(states, -np.log(states))]


def assert_as_written(inputs, outputs, values, rtol=1e-12):
    """The function equals the same graph compiled as written (no recognition: nothing rolled)."""
    got = sg.function(inputs, outputs, backend=BACKEND)(*values)
    written = sg.function(inputs, outputs, backend="numpy", recognition=False)(*values)
    for g, w in zip(got, written):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-300)


# -- rolled ---------------------------------------------------------------------------------------------
def test_an_unrolled_hmm_runs_as_one_loop_forward_and_one_back():
    inputs, cost, _ = hmm(20)
    grads = sg.grad(cost, inputs[:2])
    f = sg.function(inputs, [cost, *grads], backend=BACKEND)
    assert loops(f) == 2  # the forward loop, read by the value and by the gradient, and its reverse
    assert_as_written(inputs, [cost, *grads], hmm_data(20))


def test_the_compiled_graph_does_not_grow_with_the_steps():
    sizes = []
    for steps in (12, 300):
        inputs, cost, _ = hmm(steps)
        sizes.append(len(sg.function(inputs, [cost, *sg.grad(cost, inputs)], backend=BACKEND).nodes))
    assert sizes[0] == sizes[1]


def test_gradients_of_a_rolled_loop_match_finite_differences():
    def cost(log_a, log_b, log_pi):
        alpha = log_pi + log_b[0]
        for t in range(1, 6):
            alpha = sg.logsumexp(alpha[:, None] + log_a, axis=0) + log_b[t]
        return sg.logsumexp(alpha, axis=0)

    check_grads(cost, hmm_data(6, 3), order=2, rtol=1e-5)


def test_values_read_at_every_step_come_from_the_loops_stacked_outputs():
    inputs, cost, alphas = hmm(10)
    total = cost + sg.sum(sg.stack(alphas[3:7])) + sg.sum(alphas[-1] * alphas[4])
    f = sg.function(inputs, [total, *sg.grad(total, inputs)], backend=BACKEND)
    assert loops(f) == 2
    assert_as_written(inputs, [total, *sg.grad(total, inputs)], hmm_data(10))


def test_two_carries_and_a_constant_written_at_every_step():
    x = sg.tensor("x", (9, 3))
    w = sg.tensor("w", (3, 3))
    h, c = sg.tanh(x[0]), x[0] * 0.0
    for t in range(1, 9):
        h, c = sg.tanh(h @ w + x[t] + c), c * 0.5 + h
    cost = sg.sum(h * c)
    outputs = [cost, *sg.grad(cost, [x, w])]
    assert loops(sg.function([x, w], outputs, backend=BACKEND)) == 2
    assert_as_written([x, w], outputs, [rng.standard_normal((9, 3)), 0.5 * rng.standard_normal((3, 3))])


def test_a_loop_over_the_steps_in_reverse():
    x = sg.tensor("x", (8, 2))
    h = x[7]
    for t in reversed(range(7)):
        h = sg.softplus(h - x[t])
    cost = sg.sum(h)
    outputs = [cost, sg.grad(cost, x)]
    assert loops(sg.function([x], outputs, backend=BACKEND)) == 2
    assert_as_written([x], outputs, [rng.standard_normal((8, 2))])


def test_forward_mode_through_a_rolled_loop():
    x = sg.tensor("x", (6,))
    h = x[0]
    for t in range(1, 6):
        h = sg.tanh(h * 0.5 + x[t])
    (tangent,) = sg.jvp([h], [x], [sg.constant(np.linspace(-1.0, 1.0, 6))])
    assert_as_written([x], [h, tangent], [rng.standard_normal(6)])


def test_explain_names_the_rolled_loop():
    inputs, cost, _ = hmm(8)
    assert "[unrolled_loop]" in sg.function(inputs, cost, backend=BACKEND).explain()


# -- left as written ------------------------------------------------------------------------------------
def test_fewer_steps_than_the_minimum_stay_unrolled():
    inputs, cost, _ = hmm(MIN_STEPS)  # MIN_STEPS - 1 steps after the first alpha
    f = sg.function(inputs, [cost, *sg.grad(cost, inputs)], backend=BACKEND)
    assert loops(f) == 0
    assert_as_written(inputs, [cost, *sg.grad(cost, inputs)], hmm_data(MIN_STEPS))


def test_a_step_that_reads_two_steps_back_stays_unrolled():
    x = sg.tensor("x", (10,))
    older, old = x[0], x[1]
    for t in range(2, 10):
        older, old = old, sg.sin(old) + 0.5 * older + x[t]
    outputs = [old, sg.grad(old, x)]
    f = sg.function([x], outputs, backend=BACKEND)
    assert_as_written([x], outputs, [rng.standard_normal(10)])
    assert loops(f) in (0, 2)  # (read as two carries, it may roll; as one, it must not)


def test_an_intermediate_differentiated_with_respect_to_keeps_its_loop_unrolled():
    inputs, cost, alphas = hmm(10)
    (g,) = sg.grad(cost, [alphas[5]])
    f = sg.function(inputs, [cost, g], backend=BACKEND)
    values = hmm_data(10)
    np.testing.assert_allclose(f(*values)[1], sg.function(inputs, g, recognition=False)(*values), rtol=1e-12)


def test_steps_that_do_not_read_each_other_stay_unrolled():
    x = sg.tensor("x", (6, 3))
    parts = [sg.logsumexp(x[t] * 2.0) for t in range(6)]
    f = sg.function([x], sg.stack(parts), backend=BACKEND)
    assert loops(f) == 0
    assert_as_written([x], [sg.stack(parts)], [rng.standard_normal((6, 3))])


def test_a_carry_that_grows_stays_unrolled():
    """The same op at every step, but the carry's shape changes: not a loop."""
    x = sg.tensor("x", (7, 2))
    h = x[0]
    for t in range(1, 7):
        h = sg.concatenate([h, sg.exp(x[t])])
    f = sg.function([x], h, backend=BACKEND)
    assert loops(f) == 0
    values = rng.standard_normal((7, 2))
    np.testing.assert_allclose(f(values), np.concatenate([values[0], *np.exp(values[1:])]), rtol=1e-15)


@pytest.mark.parametrize("index", [lambda t: t, lambda t: -7 + t])
def test_negative_step_indices_are_read_as_the_same_sequence(index):
    x = sg.tensor("x", (7, 3))
    h = x[0]
    for t in range(1, 7):
        h = sg.log1p(sg.exp(h)) * x[index(t)]
    outputs = [sg.sum(h), sg.grad(sg.sum(h), x)]
    assert loops(sg.function([x], outputs, backend=BACKEND)) == 2
    assert_as_written([x], outputs, [rng.standard_normal((7, 3))])


# -- any step: rolled or not, the values and gradients as written ---------------------------------------
UNARY = (sg.tanh, sg.sin, sg.softplus)
BINARY = (sg.add, sg.subtract, lambda a, b: a * sg.tanh(b))


@st.composite
def steps(draw):
    """A random step: ops reading this step's earlier values, any value of the step before,
    x[t], x[t + 1] (or x[:, t], x[:, t + 1]), an invariant w and constants; and which values
    the cost reads."""
    size = draw(st.integers(1, 5))
    ops = []
    for j in range(size):
        operands = st.one_of(
            st.tuples(st.just("before"), st.integers(0, size - 1)),
            st.tuples(st.just("now"), st.integers(0, j - 1)) if j else st.tuples(st.just("before"), st.just(0)),
            st.tuples(st.sampled_from(["x[t]", "x[t+1]", "w", "constant"]), st.just(0)),
        )
        if draw(st.booleans()):
            ops.append((draw(st.sampled_from(UNARY)), [draw(operands)]))
        else:
            ops.append((draw(st.sampled_from(BINARY)), [draw(operands), draw(operands)]))
    count = draw(st.integers(MIN_STEPS - 1, 10))
    reads = draw(st.lists(st.tuples(st.integers(0, count - 1), st.integers(0, size - 1)), max_size=3))
    return ops, count, reads, draw(st.booleans())


def unrolled(ops, count, reads, x, w, columns=False):
    def row(t):
        return x[:, t] if columns else x[t]

    def operand(kind, j, t):
        if kind in ("before", "now"):
            return (before if kind == "before" else now)[j]
        if kind.startswith("x["):
            return row(t + 1) if kind == "x[t+1]" else row(t)
        return w if kind == "w" else sg.constant(0.75)

    before = [row(0) * (0.25 * (j + 1)) for j in range(len(ops))]
    history = []
    for t in range(count):
        now: list = []
        for op, operands in ops:
            now.append(op(*(operand(kind, j, t) for kind, j in operands)))
        history.append(now)
        before = now
    last = sum((sg.sum(v) for v in before), sg.constant(0.0))
    return last + sum((sg.sum(history[t][j]) for t, j in reads), sg.constant(0.0))


@given(steps(), seeds)
@settings(max_examples=40, deadline=None)
def test_any_unrolled_step_keeps_its_values_and_gradients(step, seed):
    ops, count, reads, columns = step
    shape = (3, count + 1) if columns else (count + 1, 3)
    x, w = sg.tensor("x", shape), sg.tensor("w", (3,))
    cost = unrolled(ops, count, reads, x, w, columns)
    values = [np.random.default_rng(seed).uniform(-1, 1, shape), np.array([0.3, -0.6, 0.9])]
    assert_as_written([x, w], [cost, *sg.grad(cost, [x, w], disconnected="zero")], values, rtol=1e-10)


def test_a_sequence_shorter_than_the_steps_is_an_error_not_a_shorter_loop():
    """x's extent is known only at run time: x[t] past its end was an error, and stays one."""
    x = sg.matrix("x")
    h = x[0]
    for t in range(1, 8):
        h = sg.tanh(h + x[t])
    f = sg.function([x], h, backend=BACKEND)
    assert loops(f) == 1
    values = rng.standard_normal((8, 2))
    expected = values[0]
    for row in values[1:]:
        expected = np.tanh(expected + row)
    np.testing.assert_allclose(f(values), expected, rtol=1e-14)
    with pytest.raises(sg.StableGradError):
        f(values[:5])


def test_a_batched_hmm_steps_along_its_second_axis():
    """log_b[:, t] of a batch of sequences (batch, time, state): the loop's sequence is time."""
    log_a, log_b = sg.tensor("log_a", (3, 3)), sg.tensor("log_b", (2, 9, 3))
    alpha = log_b[:, 0]
    for t in range(1, 9):
        alpha = sg.logsumexp(alpha[:, :, None] + log_a, axis=1) + log_b[:, t]
    cost = sg.sum(sg.logsumexp(alpha, axis=1))
    outputs = [cost, *sg.grad(cost, [log_a, log_b])]
    assert loops(sg.function([log_a, log_b], outputs, backend=BACKEND)) == 2
    values = [np.log(rng.dirichlet(np.ones(3), 3)), -0.5 * rng.standard_normal((2, 9, 3)) ** 2]
    assert_as_written([log_a, log_b], outputs, values)
