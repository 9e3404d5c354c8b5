"""Recognition sees through layout ops: indexing, transposes, expand/squeeze dims, reshapes
and broadcasts between the pieces of a pattern (they commute with entrywise ops)."""

import mpmath as mp
import numpy as np
import pytest

import stablegrad as sg
from stablegrad.rewrite import Kind

mp.mp.dps = 50
LOGITS = np.array([[1000.0, -1000.0, 0.0], [3.0, 2.0, 1.0]])


def mp_log_softmax(x, axis):
    x = np.vectorize(mp.mpf, otypes=[object])(x)
    total = np.sum(np.vectorize(mp.exp, otypes=[object])(x), axis=axis, keepdims=axis is not None)
    return x - np.vectorize(mp.log, otypes=[object])(total)


def mp_softmax(x, axis):
    return np.vectorize(mp.exp, otypes=[object])(mp_log_softmax(x, axis))


INDICES = {
    "basic": (slice(None), 1),
    "row": 0,
    "advanced": (np.array([0, 1, 1]), np.array([1, 2, 1])),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("axis", [None, 0, -1])
@pytest.mark.parametrize("index", sorted(INDICES))
def test_log_of_an_indexed_softmax_is_the_indexed_log_softmax(index, axis, dtype):
    idx = INDICES[index]
    x = sg.matrix("x", dtype=dtype)
    y = sg.log(sg.softmax(x, axis=axis)[idx])
    f = sg.function([x], [y, sg.grad(sg.sum(y), x)])
    assert "log_softmax_from_log_of_softmax" in f.explain()
    value, grad = f(LOGITS.astype(dtype))
    expected = mp_log_softmax(LOGITS, axis)[idx]
    tol = 1e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(value, np.array(expected, dtype=float), rtol=tol)
    # d/dx sum_i log_softmax(x)[idx_i] = (number of picks of x) - (picks in x's softmax group) * softmax(x)
    picks = np.zeros(LOGITS.shape)
    np.add.at(picks, idx, 1.0)
    p = np.array(mp_softmax(LOGITS, axis), dtype=float)
    group = picks.sum() if axis is None else picks.sum(axis=axis, keepdims=True)
    np.testing.assert_allclose(grad, picks - group * p, rtol=tol, atol=tol)
    assert np.all(np.isfinite(value)) and np.all(np.isfinite(grad))


@pytest.mark.parametrize(
    "layout",
    [
        lambda s: sg.transpose(s),
        lambda s: s[:, None, :],
        lambda s: sg.reshape(s, (6,)),
        lambda s: sg.broadcast_to(s, (4, 2, 3)),
        lambda s: s.T[::-1],
    ],
    ids=["transpose", "expand_dims", "reshape", "broadcast_to", "transpose_then_slice"],
)
def test_log_of_a_rearranged_sigmoid_is_the_rearranged_log_sigmoid(layout):
    x = sg.matrix("x")
    f = sg.function([x], sg.log(layout(sg.sigmoid(x))))
    assert "log_sigmoid_from_log_of_sigmoid" in f.explain()
    expected = layout(sg.log_sigmoid(x)).eval({x: LOGITS})
    np.testing.assert_array_equal(f(LOGITS), expected)
    assert f(LOGITS).min() == -1000.0  # not log(0)


def test_a_zero_weight_behind_expand_dims_keeps_a_finite_gradient():
    w, lp = sg.vector("w"), sg.matrix("lp")
    y = sg.logsumexp(sg.log(w)[None, :] + lp, axis=1)
    f = sg.function([w, lp], [y, sg.grad(sg.sum(y), w)])
    assert "logsumexp_with_weights_from_log" in f.explain()
    weights, logp = np.array([0.0, 0.5, 0.5]), np.array([[-1.0, -2.0, -3.0], [-4.0, -5.0, -6.0]])
    value, grad = f(weights, logp)
    row = [[mp.mpf(v) for v in r] for r in logp]
    mp_value = [mp.log(sum(mp.mpf(wi) * mp.exp(v) for wi, v in zip(weights, r))) for r in row]
    mp_grad = [sum(mp.exp(r[j] - m) for r, m in zip(row, mp_value)) for j in range(3)]
    np.testing.assert_allclose(value, np.array(mp_value, dtype=float), rtol=1e-15)
    np.testing.assert_allclose(grad, np.array(mp_grad, dtype=float), rtol=1e-14)


def test_x_times_a_broadcast_log_is_xlogy():
    x, y = sg.matrix("x"), sg.vector("y")
    z = x * sg.log(y)[None, :]
    f = sg.function([x, y], [z, sg.grad(sg.sum(z), x)])
    assert "xlogy_from_naive" in f.explain()
    value, grad = f(np.array([[0.0, 2.0]]), np.array([0.0, np.e]))
    np.testing.assert_array_equal(value, [[0.0, 2.0]])  # 0 · log 0 is 0
    assert grad[0, 1] == 1.0


def test_layout_of_an_input_is_left_alone():
    x = sg.matrix("x")
    for y in (sg.log(x[:, 0]), sg.exp(sg.transpose(x)), sg.log(x[None])):
        f = sg.function([x], y)
        assert not [c for c in f.changes.changes if c.kind is Kind.RECOGNITION]
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(f(LOGITS), sg.function([x], y, recognition=False)(LOGITS))


def test_inside_a_composite_and_a_loop_body():
    z = sg.vector("z")
    first_log_prob = sg.OpFromGraph([z], [sg.log(sg.softmax(z)[0])])
    x = sg.vector("x")
    f = sg.function([x], first_log_prob(x))
    np.testing.assert_allclose(f(np.array([0.0, 1000.0])), -1000.0)

    def step(total, xt):
        return total + sg.log(sg.softmax(xt)[0]), None

    xs = sg.matrix("xs")
    final, _ = sg.scan(step, sg.zeros(()), xs)
    g = sg.function([xs], [final, sg.grad(final, xs)])
    value, grad = g(np.array([[0.0, 1000.0], [1000.0, 0.0]]))
    np.testing.assert_allclose(value, -1000.0)
    np.testing.assert_allclose(grad, [[1.0, -1.0], [0.0, 0.0]], atol=1e-300)
