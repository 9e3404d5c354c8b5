"""softmax, log_softmax, softmax_cross_entropy: mpmath values and derivatives, the edge table, errors, reads."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import scipy.special
from hypothesis import given
from hypothesis import strategies as st

import stablegrad as sg
from stablegrad.ops.stable import LogSoftmax, Softmax, SoftmaxCrossEntropy

from .reference import check_reads, grad_of, mp_array, mp_log_softmax, mp_softmax, run, to_float
from .test_logsumexp import _check_against_mpmath, rows

INF = np.inf


@given(rows(1000.0))
def test_softmax_matches_mpmath(x):
    x[:, 0] = np.where(np.all(x == -INF, axis=1), 0.0, x[:, 0])  # all -inf rows have their own test
    _check_against_mpmath(lambda v: sg.softmax(v), mp_softmax, x, 1e-14, 1e-11, 1e-9)


@given(rows(1000.0))
def test_log_softmax_matches_mpmath(x):
    x[:, 0] = np.where(np.all(x == -INF, axis=1), 0.0, x[:, 0])
    _check_against_mpmath(lambda v: sg.log_softmax(v), mp_log_softmax, x, 1e-14, 1e-11, 1e-9)


@given(rows(100.0, np.float32, neg_inf=False))
def test_log_softmax_matches_mpmath_float32(x):
    _check_against_mpmath(lambda v: sg.log_softmax(v), mp_log_softmax, x, 1e-5, 1e-4, 1e-3)


@given(rows(800.0, neg_inf=False), st.sampled_from([0, 1, None, (0, 1)]))
def test_softmax_and_log_softmax_match_scipy(x, axis):
    np.testing.assert_allclose(
        run(lambda v: sg.softmax(v, axis=axis), x), scipy.special.softmax(x, axis=axis), rtol=1e-13, atol=1e-300
    )
    ours = run(lambda v: sg.log_softmax(v, axis=axis), x)
    np.testing.assert_allclose(
        ours, scipy.special.log_softmax(x, axis=axis), rtol=1e-13, atol=1e-13 * np.max(np.abs(x))
    )


def test_softmax_axis_default_is_last():
    x = np.array([[1.0, 2.0], [3.0, 5.0]])
    np.testing.assert_allclose(run(sg.softmax, x), scipy.special.softmax(x, axis=-1), rtol=1e-15)
    np.testing.assert_allclose(run(sg.log_softmax, x), scipy.special.log_softmax(x, axis=-1), rtol=1e-15)


# -- the edge table ---------------------------------------------------------------------------------------------
def test_softmax_neg_inf_entries():
    x = np.array([-INF, 1.0, 2.0])
    sm, ls = run(sg.softmax, x), run(sg.log_softmax, x)
    assert sm[0] == 0.0 and ls[0] == -INF
    assert grad_of(sg.softmax, x, w=[0.3, -1.0, 2.0])[0][0] == 0.0
    jac0 = grad_of(lambda v: sg.log_softmax(v)[0], x)[0]  # ∂ls₀/∂x = e₀ - softmax: the limit
    np.testing.assert_allclose(jac0, [1.0, *-scipy.special.softmax([1.0, 2.0])], rtol=1e-15)


def test_entropy_of_a_softmax_with_neg_inf_logits_has_the_limit_gradient():
    # -Σ p·log p with p = softmax(x): the label side of the cross-entropy it becomes sends -log p = +inf
    # back to the masked entry, where p = 0; 0 · inf there must not turn the whole row NaN
    x = np.array([0.0, -INF, 5.0, -3.0])
    with mpmath.workdps(50):
        e = [mpmath.exp(mpmath.mpf(v)) for v in x]
        p = [t / mpmath.fsum(e) for t in e]
        h = -mpmath.fsum(q * mpmath.log(q) for q in p if q > 0)
        entropy = float(h)
        # dH/dx_k = -p_k (log p_k + H), and its limit 0 where p_k = 0
        expected = np.array([float(-q * (mpmath.log(q) + h)) if q > 0 else 0.0 for q in p])
    for build in (
        lambda v: -sg.sum(sg.softmax(v) * sg.log(sg.softmax(v))),
        lambda v: -sg.sum(sg.softmax(v) * sg.log_softmax(v)),
        lambda v: sg.softmax_cross_entropy(v, sg.softmax(v)),
    ):
        np.testing.assert_allclose(run(build, x), entropy, rtol=1e-15)
        np.testing.assert_allclose(grad_of(build, x)[0], expected, rtol=1e-14, atol=0)
    v = sg.vector("v")
    h = sg.softmax_cross_entropy(v, sg.softmax(v))
    hvp = sg.function([v], sg.grad(sg.sum(sg.grad(h, v) * np.array([1.0, 2.0, -1.0, 0.5])), v))(x)
    assert np.all(np.isfinite(hvp)) and hvp[1] == 0.0


def test_softmax_pos_inf_entries_share():
    x = np.array([[INF, 1.0, INF], [INF, -INF, 0.0]])
    np.testing.assert_array_equal(run(sg.softmax, x), [[0.5, 0.0, 0.5], [1.0, 0.0, 0.0]])
    np.testing.assert_allclose(run(sg.log_softmax, x), [[-np.log(2), -INF, -np.log(2)], [0.0, -INF, -INF]], rtol=1e-15)
    w = np.array([[1.0, 2.0, -1.0], [0.5, 1.0, 3.0]])
    for fn in (sg.softmax, sg.log_softmax):
        assert np.all(np.isfinite(grad_of(fn, x, w=w)[0]))
    g = grad_of(sg.log_softmax, x, w=w)[0]
    np.testing.assert_allclose(g, w - np.array([[0.5, 0.0, 0.5], [1.0, 0.0, 0.0]]) * w.sum(1, keepdims=True))


def test_softmax_all_neg_inf_row():
    x = np.array([[-INF, -INF], [0.0, 1.0]])
    assert np.all(np.isnan(run(sg.softmax, x)[0])) and np.all(np.isnan(run(sg.log_softmax, x)[0]))
    for fn in (sg.softmax, sg.log_softmax):
        np.testing.assert_array_equal(grad_of(fn, x, w=[[1.0, 2.0], [0.0, 0.0]])[0][0], [0.0, 0.0])
    mask = np.array([[False, False], [True, False]])
    np.testing.assert_array_equal(run(lambda v, m: sg.softmax(v, where=m), x, mask), [[0.0, 0.0], [1.0, 0.0]])
    np.testing.assert_array_equal(run(lambda v, m: sg.log_softmax(v, where=m), x, mask), [[-INF, -INF], [0.0, -INF]])


def test_softmax_where_masks_entries():
    x = np.array([1.0, 100.0, 2.0])
    mask = np.array([True, False, True])
    np.testing.assert_allclose(
        run(lambda v, m: sg.softmax(v, where=m), x, mask),
        [*scipy.special.softmax([1.0, 2.0])[:1], 0.0, scipy.special.softmax([1.0, 2.0])[1]],
        rtol=1e-15,
    )
    for fn in (sg.softmax, sg.log_softmax):
        g = grad_of(lambda v, m, f=fn: f(v, where=m), x, mask, w=[1.0, 5.0, -2.0])[0]
        assert g[1] == 0.0 and np.all(np.isfinite(g))


def test_softmax_integer_and_float16():
    out = run(sg.softmax, np.array([1, 2]))
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, scipy.special.softmax([1.0, 2.0]), rtol=1e-15)
    h = run(sg.log_softmax, np.zeros(4096, np.float16))
    assert h.dtype == np.float16 and np.all(h == np.float16(-np.log(4096.0)))


def test_softmax_second_derivatives_at_extremes():
    x = np.array([[1000.0, -1000.0, 999.0], [-INF, 3.0, -745.0]])
    _check_against_mpmath(lambda v: sg.softmax(v), mp_softmax, x, 1e-15, 1e-12, 1e-10)
    _check_against_mpmath(lambda v: sg.log_softmax(v), mp_log_softmax, x, 1e-15, 1e-12, 1e-10)


# -- cross-entropy ----------------------------------------------------------------------------------------------
def test_softmax_cross_entropy_integer_and_probability_labels():
    logits = np.array([[1000.0, -1000.0, 0.0], [1.0, 2.0, 3.0]])
    labels = np.array([1, 2])
    probs = np.eye(3)[labels]
    expected = -to_float(mp_log_softmax(mp_array(logits)))[[0, 1], labels]
    np.testing.assert_allclose(run(sg.softmax_cross_entropy, logits, labels), expected, rtol=1e-15)
    np.testing.assert_allclose(run(sg.softmax_cross_entropy, logits, probs), expected, rtol=1e-15)
    w = np.array([0.5, -2.0])
    g_int = grad_of(sg.softmax_cross_entropy, logits, labels, w=w)[0]
    g_prob, g_y = grad_of(sg.softmax_cross_entropy, logits, probs, w=w)
    ref = w[:, None] * (scipy.special.softmax(logits, axis=1) - probs)
    np.testing.assert_allclose(g_int, ref, rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(g_prob, ref, rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(g_y, -w[:, None] * scipy.special.log_softmax(logits, axis=1), rtol=1e-14)
    sg.testing.check_grads(
        lambda v: sg.softmax_cross_entropy(v, labels), [np.array([[0.3, -1.0, 2.0], [1.0, 0.5, -0.5]])]
    )


def test_softmax_cross_entropy_bad_labels():
    logits = sg.matrix("logits", shape=(2, 3))
    with pytest.raises(
        sg.DTypeError, match=r"softmax_cross_entropy: labels of shape \(2,\).*integers.*test_softmax.py"
    ):
        sg.softmax_cross_entropy(logits, np.array([0.0, 1.0]))
    with pytest.raises(sg.ShapeError, match=r"softmax_cross_entropy: integer labels.*test_softmax.py"):
        sg.softmax_cross_entropy(logits, np.zeros((2, 3), int))
    with pytest.raises(sg.ShapeError, match=r"softmax_cross_entropy: axis 2 is out of range"):
        sg.softmax_cross_entropy(logits, np.zeros(2, int), axis=2)
    labels = sg.vector("labels", dtype="int64")
    loss = sg.softmax_cross_entropy(logits, labels)
    f = sg.function([logits, labels], loss)
    with pytest.raises(
        sg.ExecutionError, match=r"softmax_cross_entropy: labels must lie in \[0, 3\).*got 3.*test_softmax.py"
    ):
        f(np.zeros((2, 3)), np.array([0, 3]))
    with pytest.raises(sg.ExecutionError, match=r"got -1"):
        f(np.zeros((2, 3)), np.array([-1, 0]))


def test_softmax_bad_axes():
    x = sg.matrix("x")
    with pytest.raises(sg.ShapeError, match=r"softmax: axis 2 is out of range.*test_softmax.py"):
        sg.softmax(x, axis=2)
    with pytest.raises(sg.ShapeError, match=r"log_softmax: repeated axis"):
        sg.log_softmax(x, axis=(0, 0))


@pytest.mark.parametrize(
    "op, arrays",
    [
        (Softmax((1,)), [np.array([[1.0, -INF, 2.0], [-INF, -INF, -INF]])]),
        (Softmax((0,), True), [np.array([1.0, 2.0, 3.0]), np.array([True, False, True])]),
        (LogSoftmax((1,)), [np.array([[1.0, -INF, INF], [3.0, 0.0, 1.0]])]),
        (LogSoftmax((0,), True), [np.array([1.0, 2.0]), np.array([False, True])]),
        (SoftmaxCrossEntropy(1, True), [np.array([[1.0, 2.0], [0.0, -1.0]]), np.array([1, 0])]),
        (SoftmaxCrossEntropy(1, False), [np.array([[1.0, 2.0]]), np.array([[0.25, 0.75]])]),
    ],
)
def test_softmax_ops_respect_reads(op, arrays):
    check_reads(op, *arrays)


def test_softmax_cross_entropy_takes_probability_labels_that_broadcast_over_the_batch():
    logits, labels = sg.tensor("x", shape=(2, 3)), sg.tensor("p", shape=(3,))
    out = sg.softmax_cross_entropy(logits, labels)
    x, p = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 5.0]]), np.array([0.2, 0.3, 0.5])
    value, gx, gp = sg.function([logits, labels], [out, *sg.grad(sg.sum(out), [logits, labels])])(x, p)
    log_p = scipy.special.log_softmax(x, axis=-1)
    np.testing.assert_allclose(value, -(p * log_p).sum(-1), rtol=1e-14)
    np.testing.assert_allclose(gx, scipy.special.softmax(x, axis=-1) * p.sum() - p, rtol=1e-14)
    np.testing.assert_allclose(gp, -log_p.sum(0), rtol=1e-14)


@pytest.mark.parametrize("shapes", [((2, 3), (2,)), ((None, None), (None,))], ids=["batch-shaped", "unknown"])
def test_softmax_cross_entropy_float_labels_shaped_like_indices_are_refused_with_a_hint(shapes):
    logits, labels = sg.tensor("x", shape=shapes[0]), sg.tensor("y", shape=shapes[1])
    with pytest.raises(sg.DTypeError, match="look like class indices, which must be integers"):
        sg.softmax_cross_entropy(logits, labels)
