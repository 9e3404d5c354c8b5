"""`sg.scan`: values against plain NumPy loops, gradients against finite differences (first
and second order), errors that name the step function's line, recognition inside the body.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import stablegrad as sg
from stablegrad import ExecutionError
from stablegrad.backends.numpy_loops import body_program
from stablegrad.errors import ShapeError
from stablegrad.ops.scan import Scan, ScanError
from stablegrad.testing import check_grads

from .helpers import BACKEND

HERE = os.path.basename(__file__)
rng = np.random.default_rng(20240605)


def lineno() -> int:
    """The caller's line."""
    return sys._getframe(1).f_lineno


def assert_names_line(error: Exception, line: int) -> None:
    assert str(error).endswith(f"(at {HERE}:{line})"), str(error)


# -- values against NumPy loops -----------------------------------------------------------------------
def test_scan_single_carry_and_ys_match_a_loop():
    xs, a = sg.vector("xs"), sg.scalar("a")
    final, ys = sg.scan(lambda c, x: (c * a + x, sg.sin(c)), sg.constant(0.5), xs)
    x_values = rng.standard_normal(7)
    got_final, got_ys = sg.function([xs, a], [final, ys])(x_values, 0.9)
    c, expected = 0.5, []
    for x in x_values:
        expected.append(np.sin(c))
        c = c * 0.9 + x
    np.testing.assert_allclose(got_final, c, rtol=1e-14)
    np.testing.assert_allclose(got_ys, expected, rtol=1e-14)
    assert got_ys.shape == (7,)


def test_scan_tuple_carries_and_tuple_xs_match_a_loop():
    inputs, gates, W = sg.matrix("inputs"), sg.vector("gates"), sg.matrix("W")

    def step(carry, x):
        h, total = carry
        row, gate = x
        h_new = sg.tanh(sg.matmul(W, h) + row * gate)
        return (h_new, total + sg.sum(h_new)), (h_new, sg.sum(h_new**2))

    (h, total), (hs, norms) = sg.scan(step, (sg.zeros((3,)), sg.constant(0.0)), (inputs, gates))
    X, G, Wv = rng.standard_normal((5, 3)), rng.standard_normal(5), rng.standard_normal((3, 3))
    got = sg.function([inputs, gates, W], [h, total, hs, norms])(X, G, Wv)
    h_ref, total_ref, hs_ref = np.zeros(3), 0.0, []
    for row, gate in zip(X, G):
        h_ref = np.tanh(Wv @ h_ref + row * gate)
        total_ref += h_ref.sum()
        hs_ref.append(h_ref)
    hs_ref = np.array(hs_ref)
    for value, expected in zip(got, [h_ref, total_ref, hs_ref, (hs_ref**2).sum(axis=1)]):
        np.testing.assert_allclose(value, expected, rtol=1e-13)
    assert got[2].shape == (5, 3)


def test_scan_ys_none_gives_none():
    xs = sg.vector("xs")
    final, ys = sg.scan(lambda c, x: (c + x, None), sg.constant(0.0), xs)
    assert ys is None
    assert float(sg.function([xs], final)(np.arange(4.0))) == 6.0


def test_scan_reverse_runs_last_step_first_and_keeps_ys_in_place():
    xs = sg.vector("xs")
    final, ys = sg.scan(lambda c, x: (0.5 * c + x, c), sg.constant(0.0), xs, reverse=True)
    x_values = rng.standard_normal(6)
    got_final, got_ys = sg.function([xs], [final, ys])(x_values)
    c, expected = 0.0, np.empty(6)
    for t in range(5, -1, -1):
        expected[t] = c
        c = 0.5 * c + x_values[t]
    np.testing.assert_allclose(got_final, c, rtol=1e-14)
    np.testing.assert_allclose(got_ys, expected, rtol=1e-14)


def test_scan_length_without_xs_passes_none():
    seen = []

    def step(c, x):
        seen.append(x)
        return c * 2.0, c

    final, ys = sg.scan(step, sg.constant(1.5), length=5)
    assert seen == [None]  # the step is traced once
    got_final, got_ys = sg.function([], [final, ys])()
    assert float(got_final) == 1.5 * 2**5
    np.testing.assert_array_equal(got_ys, 1.5 * 2.0 ** np.arange(5))


def test_scan_zero_steps_returns_init_and_empty_ys():
    init, xs = sg.vector("init"), sg.matrix("xs")
    final, ys = sg.scan(lambda c, x: (c + x, c * 2.0), init, xs)
    got_final, got_ys = sg.function([init, xs], [final, ys])(np.array([1.0, 2.0]), np.zeros((0, 2)))
    np.testing.assert_array_equal(got_final, [1.0, 2.0])
    assert got_ys.shape == (0, 2)


def test_scan_outer_variables_are_loop_inputs_with_gradients():
    xs, w, b = sg.vector("xs"), sg.scalar("w"), sg.scalar("b")
    final, _ = sg.scan(lambda c, x: (w * c + x + b, None), sg.constant(0.0), xs)
    (node,) = [n for n in sg.function([xs, w, b], final).nodes if isinstance(n.op, Scan)]
    assert node.op.n_consts == 2
    # final = sum_t w^(T-1-t) (x_t + b): d/dw and d/db by hand
    x_values, w_value, b_value = rng.standard_normal(5), 0.7, 0.3
    g_w, g_b = sg.function([xs, w, b], sg.grad(final, [w, b]))(x_values, w_value, b_value)
    powers = np.arange(4, -1, -1)
    np.testing.assert_allclose(g_b, np.sum(w_value**powers), rtol=1e-14)
    np.testing.assert_allclose(g_w, np.sum(powers * w_value ** (powers - 1.0) * (x_values + b_value)), rtol=1e-14)


def test_a_log_of_a_closed_over_matrix_stays_in_the_body_so_zero_transitions_have_finite_gradients():
    # a left-to-right HMM: log(A) has -inf entries; lifted out of the loop it would be an opaque
    # input whose zeros recognition cannot see, and d/dA would be 0 · inf = NaN there
    A, B = sg.matrix("A"), sg.matrix("B")

    def step(alpha, b):
        return sg.logsumexp(alpha[:, None] + sg.log(A), axis=0) + b, None

    alpha, _ = sg.scan(step, B[0], B[1:])
    assert alpha.owner.inputs[-1] is A  # A itself is the loop's input, log(A) is computed in the body
    cost = sg.logsumexp(alpha)
    unrolled = B[0]
    for t in range(1, 6):
        unrolled = sg.logsumexp(unrolled[:, None] + sg.log(A), axis=0) + B[t]
    A_value = np.array([[0.9, 0.1, 0.0], [0.0, 0.8, 0.2], [0.0, 0.0, 1.0]])
    B_value = np.log(np.random.default_rng(3).random((6, 3)))  # (not the module rng: later tests draw from it)
    got = sg.function([A, B], [cost, sg.grad(cost, A)])(A_value, B_value)
    expected = sg.function([A, B], [sg.logsumexp(unrolled), sg.grad(sg.logsumexp(unrolled), A)], backend="numpy")(
        A_value, B_value
    )
    assert np.isfinite(got[1]).all()
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-14)
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-13)


def test_scan_loop_invariant_ys_and_passthrough_carries():
    xs, W = sg.vector("xs"), sg.matrix("W")

    def step(carry, x):
        count, unchanged = carry
        return (count + x, unchanged), (W, sg.constant(3.0), unchanged)

    (count, unchanged), (Ws, threes, copies) = sg.scan(step, (sg.constant(0.0), sg.ones((2,))), xs)
    Wv = rng.standard_normal((2, 2))
    got = sg.function([xs, W], [count, unchanged, Ws, threes, copies])(np.arange(3.0), Wv)
    assert float(got[0]) == 3.0
    np.testing.assert_array_equal(got[1], [1.0, 1.0])
    np.testing.assert_array_equal(got[2], np.stack([Wv] * 3))
    np.testing.assert_array_equal(got[3], [3.0, 3.0, 3.0])
    np.testing.assert_array_equal(got[4], np.ones((3, 2)))


def test_scan_integer_sequences_index_and_get_no_gradient():
    table, idx = sg.vector("table"), sg.tensor("idx", shape=(None,), dtype="int64")
    final, _ = sg.scan(lambda c, i: (c * table[i], None), sg.constant(1.0), idx)
    g_table = sg.grad(final, table)
    t_values, i_values = np.array([2.0, 3.0, 5.0]), np.array([0, 2, 2, 1])
    value, gradient = sg.function([table, idx], [final, g_table])(t_values, i_values)
    assert float(value) == 2.0 * 5.0 * 5.0 * 3.0
    np.testing.assert_allclose(gradient, [75.0, 50.0, 60.0], rtol=1e-15)


def test_scan_float32_carry_stays_float32():
    xs = sg.tensor("xs", shape=(None,), dtype="float32")
    final, ys = sg.scan(lambda c, x: (c * 0.5 + x, c), sg.constant(np.float32(1.0)), xs)
    got_final, got_ys = sg.function([xs], [final, ys])(np.ones(3, np.float32))
    assert final.dtype == np.float32 and got_final.dtype == np.float32 and got_ys.dtype == np.float32


def test_scan_unknown_shapes_take_the_runtime_ones():
    init, xs = sg.tensor("init", shape=(None,)), sg.tensor("xs", shape=(None, None))
    final, ys = sg.scan(lambda c, x: (c + x, sg.sum(c)), init, xs)
    got_final, got_ys = sg.function([init, xs], [final, ys])(np.ones(4), np.ones((3, 4)))
    np.testing.assert_array_equal(got_final, np.full(4, 4.0))
    np.testing.assert_array_equal(got_ys, [4.0, 8.0, 12.0])


def test_scan_inside_scan():
    M = sg.matrix("M")

    def outer_step(total, row):
        row_sum, _ = sg.scan(lambda c, v: (c + v * v, None), sg.constant(0.0), row)
        return total + sg.sqrt(row_sum), None

    final, _ = sg.scan(outer_step, sg.constant(0.0), M)
    Mv = rng.standard_normal((4, 3))
    assert np.isclose(sg.function([M], final)(Mv), np.sqrt((Mv**2).sum(axis=1)).sum(), rtol=1e-14)
    check_grads(lambda M: sg.scan(outer_step, sg.constant(0.0), M)[0], [Mv], order=2)


# -- gradients against finite differences ---------------------------------------------------------------
def _rnn(inputs, gates, W, h0, reverse=False):
    def step(carry, x):
        h, total = carry
        row, gate = x
        h_new = sg.tanh(sg.matmul(W, h) + row * gate)
        return (h_new, total + sg.sum(h_new * h)), sg.sum(sg.exp(h_new) * row)

    (h, total), ys = sg.scan(step, (h0, sg.constant(0.0)), (inputs, gates), reverse=reverse)
    return sg.sum(h * h) + total + sg.sum(ys * sg.arange(1.0, 5.0))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("symbolic_shapes", [False, True])
def test_scan_gradients_match_finite_differences(reverse, symbolic_shapes):
    args = [
        rng.standard_normal((4, 3)),
        rng.standard_normal(4),
        0.5 * rng.standard_normal((3, 3)),
        rng.standard_normal(3),
    ]
    check_grads(lambda X, G, W, h0: _rnn(X, G, W, h0, reverse=reverse), args, order=2, symbolic_shapes=symbolic_shapes)


def test_scan_gradient_of_ys_only():
    args = [rng.standard_normal(6), np.array(0.8)]
    check_grads(lambda xs, a: sg.scan(lambda c, x: (a * sg.sin(c) + x, c * c), sg.constant(0.1), xs)[1], args)


def test_scan_gradient_with_length_and_implicit_inputs():
    def fn(a, b):
        final, ys = sg.scan(lambda c, x: (sg.tanh(a * c + b), sg.exp(c)), sg.constant(0.3), length=6)
        return final + sg.sum(ys)

    check_grads(fn, [np.array(1.3), np.array(-0.2)], order=2)


def test_scan_hessian_vector_product_matches_differences_of_the_gradient():
    X, G, W, h0 = (sg.matrix("X"), sg.vector("G"), sg.matrix("W"), sg.vector("h0"))
    cost = _rnn(X, G, W, h0)
    args = [
        rng.standard_normal((4, 3)),
        rng.standard_normal(4),
        0.5 * rng.standard_normal((3, 3)),
        rng.standard_normal(3),
    ]
    vectors = [rng.standard_normal(a.shape) for a in args]
    hvp = sg.function([X, G, W, h0], sg.hessian_vector_product(cost, [X, G, W, h0], [sg.constant(v) for v in vectors]))
    gradient = sg.function([X, G, W, h0], sg.grad(cost, [X, G, W, h0]))
    h = 1e-4
    plus = gradient(*[a + h * v for a, v in zip(args, vectors)])
    minus = gradient(*[a - h * v for a, v in zip(args, vectors)])
    for got, p, m in zip(hvp(*args), plus, minus):
        np.testing.assert_allclose(got, (p - m) / (2 * h), rtol=1e-6, atol=1e-8)


def test_scan_hessian_vector_product_of_hmm_loglik_is_finite_and_matches_differences():
    K = 3
    L, log_b = sg.matrix("L"), sg.matrix("log_b")
    cost = _forward_algorithm(L, log_b)
    Lv, bv = rng.standard_normal((K, K)), rng.standard_normal((40, K)) + 300.0
    v_L, v_b = rng.standard_normal((K, K)), rng.standard_normal((40, K))
    hvp = sg.function([L, log_b], sg.hessian_vector_product(cost, [L, log_b], [sg.constant(v_L), sg.constant(v_b)]))
    gradient = sg.function([L, log_b], sg.grad(cost, [L, log_b]))
    h = 1e-4
    plus, minus = gradient(Lv + h * v_L, bv + h * v_b), gradient(Lv - h * v_L, bv - h * v_b)
    for got, p, m in zip(hvp(Lv, bv), plus, minus):
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, (p - m) / (2 * h), rtol=1e-6, atol=1e-8)


def _forward_algorithm(L, log_b, naive=False):
    """log p(observations) of an HMM with transition logits L and emission log-densities log_b."""
    log_A = sg.log_softmax(L, axis=1)

    def lse(x):
        return sg.log(sg.sum(sg.exp(x), axis=0)) if naive else sg.logsumexp(x, axis=0)

    def step(log_alpha, log_b_t):
        new = lse(log_alpha[:, None] + log_A) + log_b_t
        return new, None

    final, _ = sg.scan(step, log_b[0] - np.log(3.0), log_b[1:])
    return sg.logsumexp(final)


# -- recognition inside the step --------------------------------------------------------------------
def test_scan_naive_logsumexp_in_the_step_gives_finite_gradients():
    K, T = 3, 200
    L, log_b = sg.matrix("L"), sg.matrix("log_b")
    Lv, bv = rng.standard_normal((K, K)), rng.standard_normal((T, K)) + 8.0  # the message passes 709 at t ≈ 90
    naive = sg.function(
        [L, log_b],
        [_forward_algorithm(L, log_b, naive=True), *sg.grad(_forward_algorithm(L, log_b, naive=True), [L, log_b])],
    )
    stable = sg.function([L, log_b], [_forward_algorithm(L, log_b), *sg.grad(_forward_algorithm(L, log_b), [L, log_b])])
    for got, expected in zip(naive(Lv, bv), stable(Lv, bv)):
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    # written without recognition, the same loop overflows: that is what the rewrite repairs
    raw = sg.function([L, log_b], _forward_algorithm(L, log_b, naive=True), recognition=False)
    assert not np.isfinite(raw(Lv, bv))


def test_scan_naive_logsumexp_in_the_step_is_recognised_in_the_body():
    L, log_b = sg.matrix("L"), sg.matrix("log_b")
    f = sg.function([L, log_b], _forward_algorithm(L, log_b, naive=True))
    (node,) = [n for n in f.nodes if isinstance(n.op, Scan)]
    body_ops = {n.op.name for n in body_program(node.op.inner).nodes}
    assert "logsumexp" in body_ops  # the NumPy backend runs the recognised logsumexp whole
    assert "log" not in body_ops and "exp" not in body_ops  # nothing of the naive formula is left


# -- errors name the step function's line ----------------------------------------------------------------
def test_scan_error_carry_shape_changes():
    xs = sg.vector("xs")
    line = lineno() + 2

    def step(c, x):
        return sg.stack([c, x]), None

    with pytest.raises(ScanError, match=r"changed carry 0 from float64\[\] to float64\[2\]") as info:
        sg.scan(step, sg.constant(0.0), xs)
    assert_names_line(info.value, line)


def test_scan_error_carry_dtype_kind_changes():
    xs = sg.vector("xs")
    line = lineno() + 2

    def step(c, x):
        return c > x, None

    with pytest.raises(ScanError, match=r"changed carry 0 from float64\[\] to bool\[\]") as info:
        sg.scan(step, sg.constant(0.0), xs)
    assert_names_line(info.value, line)


def test_scan_error_carry_shape_changes_at_run_time():
    init, xs = sg.tensor("init", shape=(None,)), sg.vector("xs")
    line = lineno() + 2

    def step(c, x):
        return sg.concatenate([c, x[None]]), None

    f = sg.function([init, xs], sg.scan(step, init, xs)[0])
    with pytest.raises(ExecutionError, match=r"changed the shape of carry 0 from \(2,\) to \(3,\) at step 0") as info:
        f(np.zeros(2), np.zeros(3))
    assert_names_line(info.value, line)


def test_scan_error_y_shape_changes_at_run_time():
    line = lineno() + 2

    def step(count, x):
        return count + 1, sg.arange(0, count)

    if BACKEND == "jax":  # XLA compiles static shapes: the arange's length must be known when compiling
        with pytest.raises(ShapeError, match="arange: on the jax backend start, stop and step must be known") as info:
            sg.function([], sg.scan(step, sg.constant(1), length=3)[1])()
        assert_names_line(info.value, line + 1)  # the arange's own line
        return
    f = sg.function([], sg.scan(step, sg.constant(1), length=3)[1])
    with pytest.raises(ExecutionError, match=r"returned y\[0\] of shape \(2,\) after \(1,\) at step 1") as info:
        f()
    assert_names_line(info.value, line)


def test_scan_error_xs_with_mismatched_lengths():
    line = lineno() + 2

    def step(c, x):
        return c + x[0] * x[1], None

    with pytest.raises(ScanError, match=r"sequences in xs have different lengths \[3, 4\]") as info:
        sg.scan(step, sg.constant(0.0), (sg.zeros((3,)), sg.zeros((4,))))
    assert_names_line(info.value, line)


def test_scan_error_xs_with_mismatched_lengths_at_run_time():
    a, b = sg.vector("a"), sg.vector("b")
    line = lineno() + 2

    def step(c, x):
        return c + x[0] * x[1], None

    f = sg.function([a, b], sg.scan(step, sg.constant(0.0), (a, b))[0])
    with pytest.raises(ExecutionError, match=r"sequences in xs have different lengths \[3, 4\]") as info:
        f(np.zeros(3), np.zeros(4))
    assert_names_line(info.value, line)


def test_scan_error_length_disagrees_with_xs():
    line = lineno() + 2

    def step(c, x):
        return c + x, None

    with pytest.raises(ScanError, match="length=4 disagrees with the length 3 of xs") as info:
        sg.scan(step, sg.constant(0.0), sg.zeros((3,)), length=4)
    assert_names_line(info.value, line)


def test_scan_error_length_disagrees_with_xs_at_run_time():
    xs = sg.vector("xs")  # its extent is known only when the loop runs
    line = lineno() + 2

    def step(c, x):
        return c + x, None

    f = sg.function([xs], sg.scan(step, sg.constant(0.0), xs, length=4)[0], backend=BACKEND)
    assert f(np.ones(4)) == 4.0
    with pytest.raises(ExecutionError, match="length=4 disagrees with the length 3 of xs") as info:
        f(np.ones(3))
    assert_names_line(info.value, line)


@pytest.mark.parametrize("result", ["one", "triple", "list"])
def test_scan_error_step_not_returning_a_pair(result):
    xs = sg.vector("xs")
    line = lineno() + 2

    def step(c, x):
        return {"one": c + x, "triple": (c, c, c), "list": [c, c]}[result]

    with pytest.raises(ScanError, match=r"must return a pair \(new_carry, y\)") as info:
        sg.scan(step, sg.constant(0.0), xs)
    assert_names_line(info.value, line)


def test_scan_error_wrong_number_of_carries():
    xs = sg.vector("xs")
    line = lineno() + 2

    def step(c, x):
        return (c, c), None

    with pytest.raises(ScanError, match="returned 2 carries for 1 in init") as info:
        sg.scan(step, sg.constant(0.0), xs)
    assert_names_line(info.value, line)


def test_scan_error_neither_xs_nor_length_and_scalar_xs():
    with pytest.raises(ScanError, match="give xs or length"):
        sg.scan(lambda c, x: (c, None), sg.constant(0.0))
    with pytest.raises(ScanError, match="xs\\[0\\] is a scalar"):
        sg.scan(lambda c, x: (c, None), sg.constant(0.0), sg.constant(1.0))
    with pytest.raises(ScanError, match="length must be a non-negative int"):
        sg.scan(lambda c, x: (c, None), sg.constant(0.0), length=-1)


def test_scan_error_inside_the_body_names_the_step_and_the_op_line():
    xs, W = sg.matrix("xs"), sg.matrix("W")

    def step(c, x):
        return sg.matmul(W, c) + x, None

    line = lineno() - 2  # the failing op's line in the step
    f = sg.function([xs, W], sg.scan(step, sg.zeros((3,)), xs)[0])
    # XLA compiles the step once for all steps: the error comes while compiling, at no particular step
    where = "in the step function" if BACKEND == "jax" else "at step 0"
    with pytest.raises(ExecutionError, match=rf"scan: {where}, matmul") as info:
        f(np.zeros((4, 3)), np.zeros((2, 2)))
    assert_names_line(info.value, line)
