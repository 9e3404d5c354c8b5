"""Forward mode: `sg.jvp` pushes tangents through a graph; `sg.hessian` is the gradient's Jacobian."""

from __future__ import annotations

import numpy as np
import pytest

import stablegrad as sg
from stablegrad import GradientError


def _softmax(v):
    e = np.exp(v - v.max())
    return e / e.sum()


def _central_difference(f, x, v, h=1e-6):
    return (f(x + h * v) - f(x - h * v)) / (2 * h)


def test_jvp_of_softmax_is_its_jacobian_times_the_tangent():
    x = sg.vector("x")
    value = np.array([1.0, 2.0, 3.0])
    tangent = np.array([0.3, -1.0, 2.0])
    s = _softmax(value)
    analytic = (np.diag(s) - np.outer(s, s)) @ tangent
    got = sg.function([x], sg.jvp(sg.softmax(x), x, tangent))(value)
    np.testing.assert_allclose(got, analytic, rtol=1e-14, atol=1e-16)


def test_jvp_of_a_naive_formula_is_the_stable_ones():
    x = sg.vector("x")
    naive = sg.log(sg.sum(sg.exp(x)))
    f = sg.function([x], sg.jvp(naive, x, np.array([1.0, 0.0, 0.0])))
    # softmax(x)[0] at x = (1000, 0, 0): 1, where exp overflows as written
    np.testing.assert_allclose(f(np.array([1000.0, 0.0, 0.0])), 1.0, rtol=1e-15)


def test_jvp_of_several_outputs_and_inputs_matches_finite_differences():
    a, b = sg.vector("a"), sg.vector("b")
    outputs = [sg.sum(sg.tanh(a) * b), sg.logaddexp(a, b) * 2.0]
    ta, tb = np.array([1.0, -0.5]), np.array([0.25, 2.0])
    f = sg.function([a, b], sg.jvp(outputs, [a, b], [ta, tb]))
    av, bv = np.array([0.3, -1.2]), np.array([0.7, 0.1])

    def numeric(k):
        g = sg.function([a, b], outputs[k])
        return (g(av + 1e-6 * ta, bv + 1e-6 * tb) - g(av - 1e-6 * ta, bv - 1e-6 * tb)) / 2e-6

    for k, got in enumerate(f(av, bv)):
        np.testing.assert_allclose(got, numeric(k), rtol=1e-8)


def test_jvp_with_unknown_extents_and_a_symbolic_tangent():
    x, v = sg.matrix("x"), sg.matrix("v")
    f = sg.function([x, v], sg.jvp(sg.logsumexp(x, axis=1), x, v))
    xv, vv = np.random.default_rng(1).standard_normal((2, 4, 3))
    expected = np.sum(np.apply_along_axis(_softmax, 1, xv) * vv, axis=1)
    np.testing.assert_allclose(f(xv, vv), expected, rtol=1e-13)


def test_jvp_of_an_output_that_ignores_wrt_is_zero():
    x, y = sg.vector("x"), sg.vector("y")
    got = sg.function([x, y], sg.jvp(sg.exp(y), x, np.ones(2)))(np.ones(2), np.ones(2))
    np.testing.assert_array_equal(got, np.zeros(2))


def test_jvp_compiles_as_written_too():
    x = sg.vector("x")
    jv = sg.jvp(sg.log(sg.sum(sg.exp(x))), x, np.array([0.0, 1.0]))
    value = sg.function([x], jv, recognition=False)(np.array([0.5, -0.5]))
    np.testing.assert_allclose(value, _softmax(np.array([0.5, -0.5]))[1], rtol=1e-14)


def test_jvp_is_one_forward_sweep_of_pushforwards():
    """No reverse pass: the tangent of a chain of n entrywise ops is about n nodes, and its graph
    holds no stand-in cotangent (the transposed reverse mode builds two pullback chains)."""
    x = sg.vector("x")
    y = x
    for _ in range(20):
        y = sg.tanh(y) * 1.5
    jv = sg.jvp(y, x, np.ones(3))
    nodes = sg.graph.basic.toposort([jv], stop=[x])
    assert len(nodes) <= 4 * 40, len(nodes)
    assert not any(v.name and v.name.startswith("cotangent") for n in nodes for v in n.inputs)
    value = np.array([0.1, -0.4, 0.8])
    f = sg.function([x], y)
    np.testing.assert_allclose(
        sg.function([x], jv)(value), _central_difference(f, value, np.ones(3)), rtol=1e-7, atol=1e-9
    )


@pytest.mark.parametrize(
    ("fn", "ref"),
    [
        (lambda x: x**2.5, lambda x: 2.5 * x**1.5),  # power's pullback guards g = 0: where(g == 0, 0, g·...)
        (lambda x: sg.logcumsumexp(x), lambda x: np.cumsum(np.exp(x)) / np.cumsum(np.exp(x))),  # log-space pullback
    ],
)
def test_jvp_through_pullbacks_that_are_linear_only_as_functions(fn, ref):
    """Tangent 1 everywhere: x**2.5 gives 2.5·x**1.5; logcumsumexp gives Σ_{j≤i} softmax_j = 1.
    (Transposing those pullbacks at a zero cotangent gave 0.)"""
    x = sg.vector("x")
    value = np.array([0.5, 1.5, 2.0])
    got = sg.function([x], sg.jvp(fn(x), x, np.ones(3)))(value)
    np.testing.assert_allclose(got, ref(value), rtol=1e-14)


def test_jvp_bad_arguments_say_what_is_wrong():
    x = sg.vector("x")
    with pytest.raises(GradientError, match="got 2 tangents for 1 wrt"):
        sg.jvp(sg.exp(x), [x], [np.ones(2), np.ones(2)])
    with pytest.raises(GradientError, match="tangents\\[0\\] has 2 dimensions"):
        sg.jvp(sg.exp(x), x, np.ones((2, 2)))
    with pytest.raises(GradientError, match="outputs\\[0\\] must be a float"):
        sg.jvp(sg.argmax(x), x, np.ones(2))


def test_hessian_of_logsumexp_is_diag_s_minus_ssT():
    x = sg.tensor("x", (3,))
    value = np.array([1000.0, 999.0, -5.0])
    s = _softmax(value)
    got = sg.function([x], sg.hessian(sg.logsumexp(x), x))(value)
    np.testing.assert_allclose(got, np.diag(s) - np.outer(s, s), rtol=1e-12, atol=1e-300)


def test_hessian_needs_one_wrt():
    x = sg.tensor("x", (2,))
    with pytest.raises(GradientError, match="one symbolic Variable"):
        sg.hessian(sg.sum(x), [x])


def test_jacobian_with_unknown_extents_loops_over_the_entries():
    x, w = sg.vector("x"), sg.vector("w")
    jac_x, jac_w = sg.jacobian(sg.softmax(x), [x, w])  # softmax ignores w: zeros of shape (3, 2)
    value = np.array([1.0, 2.0, 3.0])
    got_x, got_w = sg.function([x, w], [jac_x, jac_w])(value, np.ones(2))
    s = _softmax(value)
    np.testing.assert_allclose(got_x, np.diag(s) - np.outer(s, s), rtol=1e-14, atol=1e-17)
    assert got_w.shape == (3, 2) and not got_w.any()


def test_jacobian_of_a_matrix_output_with_unknown_extents_has_both_shapes():
    a = sg.matrix("a")
    jac = sg.function([a], sg.jacobian(sg.exp(a), a))(np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]))
    assert jac.shape == (3, 2, 3, 2)
    expected = np.zeros((3, 2, 3, 2))
    for i, j in np.ndindex(3, 2):
        expected[i, j, i, j] = np.exp(2 * i + j)
    np.testing.assert_allclose(jac, expected, rtol=1e-15)


def test_hessian_with_unknown_extents_is_the_stable_one():
    x = sg.vector("x")
    value = np.array([1000.0, 999.0, -5.0])
    s = _softmax(value)
    got = sg.function([x], sg.hessian(sg.log(sg.sum(sg.exp(x))), x))(value)
    np.testing.assert_allclose(got, np.diag(s) - np.outer(s, s), rtol=1e-12, atol=1e-300)


def test_jacobian_of_an_empty_output_is_empty():
    x = sg.vector("x")
    got = sg.function([x], sg.jacobian(sg.exp(x), x))(np.zeros(0))
    assert got.shape == (0, 0)


def test_jacobian_of_few_inputs_and_many_outputs_takes_forward_mode():
    """5 input entries, 6 output entries: five jvps (columns), equal to the six gradients (rows)."""
    from stablegrad.autodiff import _forward_is_cheaper, _jacobian_unrolled

    x, w = sg.tensor("x", (2,)), sg.tensor("w", (3,))
    y = sg.outer(sg.exp(x), w) * sg.sum(x)
    assert _forward_is_cheaper(y, [x, w])
    forward = sg.jacobian(y, [x, w])
    reverse = _jacobian_unrolled(y, [x, w], "zero")
    values = (np.array([0.3, -0.2]), np.array([1.0, 2.0, -3.0]))
    got, want = sg.function([x, w], forward)(*values), sg.function([x, w], reverse)(*values)
    for g, r in zip(got, want):
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=1e-14, atol=1e-15)
    exact = np.einsum("i,j->ij", np.exp(values[0]), values[1])[:, :, None] * (
        np.eye(2)[:, None, :] * values[0].sum() + 1
    )
    np.testing.assert_allclose(got[0], exact, rtol=1e-14)
    unused = sg.tensor("u", (1,))
    with pytest.raises(GradientError, match=r"jacobian: wrt\[1\] 'u' is not part of y's graph"):
        sg.jacobian(y, [x, unused], disconnected="raise")
