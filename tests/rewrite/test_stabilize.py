"""Recognition: each naive formula becomes its stable primitive, agrees with the naive value
wherever that is finite, and stays finite (value and gradient) where the naive one overflows."""

from collections.abc import Callable
from dataclasses import dataclass

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import stablegrad as sg
from stablegrad.graph.basic import toposort
from stablegrad.ops import stable
from stablegrad.rewrite import recognise


@dataclass
class Naive:
    name: str
    fn: Callable  # of symbolic inputs
    produces: type  # the stable op recognition must produce
    arity: int = 1
    low: float = -5.0  # domain of the moderate inputs
    high: float = 5.0
    extreme: float | None = 1000.0  # a magnitude where the naive form breaks (None: no such test)


def _sum_exp(x, **kw):
    return sg.sum(sg.exp(x), axis=-1, **kw)


NAIVE = [
    Naive("log_sum_exp", lambda x: sg.log(_sum_exp(x)), stable.LogSumExp),
    Naive("log_sum_exp_axis0", lambda x: sg.log(sg.sum(sg.exp(x), axis=0)), stable.LogSumExp),
    Naive("log_sum_exp_keepdims_via_index", lambda x: x - sg.log(_sum_exp(x))[:, None], stable.LogSoftmax),
    Naive("log_weighted_sum_exp", lambda x, b: sg.log(sg.sum(sg.exp(b) * sg.exp(x), axis=-1)), stable.LogSumExp, 2),
    Naive("log_mean_exp", lambda x: sg.log(sg.mean(sg.exp(x), axis=-1)), stable.LogMeanExp),
    Naive("log_cumsum_exp", lambda x: sg.log(sg.cumsum(sg.exp(x), axis=-1)), stable.LogCumSumExp),
    Naive("log_sum_exp_over_constant", lambda x: sg.log(_sum_exp(x) / 7.0), stable.LogSumExp),
    Naive("exp_product", lambda a, b: sg.exp(a) * sg.exp(-b), stable.ExpOfSum, 2),
    Naive("exp_quotient", lambda a, b: sg.exp(a) / sg.exp(b), stable.ExpOfSum, 2),
    Naive("logsumexp_of_log_weights", lambda x: sg.logsumexp(sg.log(sg.exp(x) + 1.0) + x, axis=-1), stable.LogSumExp),
    Naive("softmax", lambda x: sg.exp(x) / _sum_exp(x, keepdims=True), stable.Softmax),
    Naive("softmax_reciprocal", lambda x: sg.exp(x) * (1.0 / _sum_exp(x, keepdims=True)), stable.Softmax),
    Naive(
        "softmax_shifted", lambda x: sg.exp(x - 3.0) / sg.sum(sg.exp(x - 3.0), axis=-1, keepdims=True), stable.Softmax
    ),
    Naive(
        "softmax_temperature",
        lambda x: sg.exp(x / 0.25) / sg.sum(sg.exp(x / 0.25), axis=-1, keepdims=True),
        stable.Softmax,
        extreme=300.0,
    ),
    Naive("log_of_softmax", lambda x: sg.log(sg.softmax(x)), stable.LogSoftmax),
    Naive("x_minus_log_sum_exp", lambda x: x - sg.log(_sum_exp(x, keepdims=True)), stable.LogSoftmax),
    Naive("x_minus_logsumexp", lambda x: x - sg.logsumexp(x, axis=-1, keepdims=True), stable.LogSoftmax, extreme=None),
    Naive("exp_of_log_softmax", lambda x: sg.exp(sg.log_softmax(x)), stable.Softmax, extreme=None),
    Naive("log_add_exp", lambda a, b: sg.log(sg.exp(a) + sg.exp(b)), stable.LogAddExp, 2),
    Naive("log_add_exp3", lambda a, b: sg.log(sg.exp(a) + sg.exp(b) + sg.exp(a - b)), stable.LogAddExp, 2, -3, 3),
    Naive("log_exp_plus_constant", lambda a: sg.log(sg.exp(a) + 2.0), stable.LogAddExp),
    Naive("log_diff_exp", lambda a, b: sg.log(sg.exp(a + 6.0) - sg.exp(b)), stable.LogDiffExp, 2, -2.0, 2.0),
    Naive("softplus", lambda x: sg.log(1.0 + sg.exp(x)), stable.Softplus),
    Naive("log1p", lambda x: sg.log(1.0 + sg.abs(x) * 1e-3), sg.ops.math.Log1p, extreme=None),
    Naive("expm1", lambda x: sg.exp(x * 1e-3) - 1.0, sg.ops.math.Expm1, extreme=None),
    Naive(
        "logsumexp_log_weights",
        lambda x, w: sg.logsumexp(sg.log(sg.abs(w) + 0.5) + x, axis=-1),
        stable.LogSumExp,
        2,
        extreme=None,
    ),
    Naive("softplus_log1p", lambda x: sg.log1p(sg.exp(x)), stable.Softplus),
    Naive("log_sigmoid_div", lambda x: sg.log(1.0 / (1.0 + sg.exp(-x))), stable.LogSigmoid),
    Naive("log_sigmoid_neg", lambda x: -sg.log(1.0 + sg.exp(-x)), stable.LogSigmoid),
    Naive("log_of_sigmoid", lambda x: sg.log(sg.sigmoid(x)), stable.LogSigmoid),
    Naive("x_minus_softplus", lambda x: x - sg.log(1.0 + sg.exp(x)), stable.LogSigmoid),
    Naive("softplus_minus_x", lambda x: sg.log(1.0 + sg.exp(x)) - x, stable.Softplus),
    Naive("log_one_minus_sigmoid", lambda x: sg.log(1.0 - sg.sigmoid(x)), stable.LogSigmoid),
    Naive("sigmoid", lambda x: 1.0 / (1.0 + sg.exp(-x)), stable.Sigmoid),
    Naive("sigmoid_scaled", lambda x: 3.0 / (1.0 + sg.exp(-x)), stable.Sigmoid),
    Naive("sigmoid_exp_ratio", lambda x: sg.exp(x) / (1.0 + sg.exp(x)), stable.Sigmoid),
    Naive("one_minus_sigmoid", lambda x: 1.0 - sg.sigmoid(x), stable.Sigmoid, extreme=None),
    Naive("log1mexp", lambda x: sg.log(1.0 - sg.exp(-sg.abs(x) - 1e-3)), stable.Log1mExp, extreme=None),
    Naive("inverse_softplus", lambda x: sg.log(sg.exp(sg.abs(x) + 0.01) - 1.0), stable.Log1mExp),
    Naive("log1mexp_expm1", lambda x: sg.log(-sg.expm1(-sg.abs(x) - 1e-3)), stable.Log1mExp, extreme=None),
    Naive(
        "logit",
        lambda x: sg.log((0.5 + 0.4 * sg.tanh(x)) / (1.0 - (0.5 + 0.4 * sg.tanh(x)))),
        stable.Logit,
        extreme=None,
    ),
    Naive("xlogy", lambda x: sg.abs(x) * sg.log(sg.abs(x)), stable.XLogY, extreme=None),
    Naive("log_erfc", lambda x: sg.log(sg.erfc(x)), stable.LogErfc, extreme=30.0),
    Naive(
        "softmax_cross_entropy",
        lambda x: -sg.sum(sg.softmax(x) * sg.log(sg.softmax(x * 2.0)), axis=-1),
        stable.SoftmaxCrossEntropy,
    ),
]
IDS = [n.name for n in NAIVE]


def _inputs(naive: Naive, arrays):
    return [sg.tensor(f"x{i}", shape=(None, None)) for i in range(naive.arity)], arrays


def _compiled(naive: Naive, recognition: bool, with_grad: bool = False):
    xs = [sg.tensor(f"x{i}", shape=(None, None)) for i in range(naive.arity)]
    out = naive.fn(*xs)
    outputs = [out]
    if with_grad:
        outputs += sg.grad(sg.sum(out * 0.75), xs, recognition=recognition)
    return sg.function(xs, outputs, recognition=recognition)


@pytest.mark.parametrize("naive", NAIVE, ids=IDS)
def test_recognition_produces_the_stable_op(naive):
    xs = [sg.tensor(f"x{i}", shape=(None, None)) for i in range(naive.arity)]
    (out,) = recognise([naive.fn(*xs)], keep=xs)
    ops = {type(n.op) for n in toposort([out])}
    assert naive.produces in ops, f"{naive.name}: got {sorted(t.__name__ for t in ops)}"


@pytest.mark.parametrize("naive", NAIVE, ids=IDS)
@given(data=st.data())
def test_recognised_agrees_with_naive_where_naive_is_finite(naive, data):
    shape = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 4)))
    arrays = [
        np.array(
            data.draw(
                st.lists(st.floats(naive.low, naive.high), min_size=shape[0] * shape[1], max_size=shape[0] * shape[1])
            )
        ).reshape(shape)
        for _ in range(naive.arity)
    ]
    with np.errstate(all="ignore"):
        plain = _compiled(naive, recognition=False, with_grad=True)(*arrays)
    stable_ = _compiled(naive, recognition=True, with_grad=True)(*arrays)
    for p, s in zip(plain, stable_):
        finite = np.isfinite(p)
        np.testing.assert_allclose(s[finite], p[finite], rtol=1e-9, atol=1e-12)


EXTREME = [n for n in NAIVE if n.extreme is not None]


@pytest.mark.parametrize("naive", EXTREME, ids=[n.name for n in EXTREME])
def test_recognised_is_finite_where_naive_breaks(naive):
    rng = np.random.default_rng(0)
    big = naive.extreme
    signs = np.array([[1.0, -1.0, 1.0], [-1.0, 1.0, -1.0]])  # both magnitudes in every row
    arrays = [big * np.concatenate([signs, signs]) + rng.random((4, 3)) for _ in range(naive.arity)]
    with np.errstate(all="ignore"):
        plain = _compiled(naive, recognition=False, with_grad=True)(*arrays)
    results = _compiled(naive, recognition=True, with_grad=True)(*arrays)
    assert any(not np.all(np.isfinite(p)) for p in plain), f"{naive.name}: the naive form did not break here"
    for r in results:
        assert np.all(np.isfinite(r)), f"{naive.name}: {r}"


def test_xlogx_is_zero_at_zero_with_finite_gradient_elsewhere():
    x = sg.vector("x")
    y = x * sg.log(x)
    g = sg.grad(sg.sum(y), x)
    value, grad = sg.function([x], [y, g])(np.array([0.0, 0.5, 1.0]))
    np.testing.assert_allclose(value, [0.0, 0.5 * np.log(0.5), 0.0], atol=0)
    np.testing.assert_allclose(grad[1:], [np.log(0.5) + 1, 1.0])


def test_x_log1p_y_is_zero_at_x_zero_where_the_product_is_zero_times_minus_inf():
    x, y = sg.vector("x"), sg.vector("y")
    out = x * sg.log1p(y)
    gx, gy = sg.grad(sg.sum(out), [x, y])
    value, dx, dy = sg.function([x, y], [out, gx, gy])(np.array([0.0, 2.0]), np.array([-1.0, 0.5]))
    np.testing.assert_array_equal(value, [0.0, 2.0 * np.log1p(0.5)])
    np.testing.assert_allclose(dx[1], np.log1p(0.5))
    np.testing.assert_allclose(dy[1], 2.0 / 1.5)


@pytest.mark.parametrize(
    "case",
    [
        (lambda x, y: sg.where(x != 0, x * sg.log(y), 0.0), 0.0),
        (lambda x, y: sg.where(sg.equal(x, 0), 0.0, x * sg.log(y)), 0.0),
        (lambda x, y: sg.where(sg.logical_or(x != 0, y != y), x * sg.log(y), 0.0), np.nan),
        (lambda x, y: sg.where(sg.logical_or(sg.isnan(y), sg.not_equal(0, x)), x * sg.log(y), 0.0), np.nan),
    ],
    ids=["x_ne_0", "x_eq_0", "or_y_ne_y", "or_isnan"],
)
def test_a_guarded_xlogy_keeps_its_values_and_the_derivative_in_x_at_zero(case):
    # the guard changes no value of xlogy but cuts d/dx at x = 0, which is log(y)
    guarded, at_nan = case  # at_nan: the value at x = 0, y = NaN, and its gradients
    x, y = sg.vector("x"), sg.vector("y")
    out = guarded(x, y)
    gx, gy = sg.grad(sg.sum(out), [x, y])
    xs, ys = np.array([0.0, 0.0, 0.0, 2.0, 0.0]), np.array([2.0, 0.0, np.inf, 3.0, np.nan])
    value, dx, dy = sg.function([x, y], [out, gx, gy])(xs, ys)
    with np.errstate(all="ignore"):
        written = sg.function([x, y], out, recognition=False)(xs, ys)
    np.testing.assert_array_equal(value, written)
    np.testing.assert_array_equal([value[4], dx[4], dy[4]], [at_nan] * 3)
    np.testing.assert_allclose(dx[[0, 3]], [np.log(2.0), np.log(3.0)], rtol=1e-15)
    assert dx[1] == -np.inf and dx[2] == np.inf  # log(y) at y = 0 and y = inf, as xlogy's own
    assert np.all(dy[[0, 1, 2]] == 0)
    np.testing.assert_allclose(dy[3], 2.0 / 3.0, rtol=1e-15)


def test_a_guard_on_something_else_than_x_is_left_alone():
    x, y = sg.vector("x"), sg.vector("y")
    (out,) = recognise([sg.where(x != 1, x * sg.log(y), 0.0)], keep=[x, y])
    assert sum(isinstance(n.op, sg.ops.elementwise.Where) for n in toposort([out])) == 1
    g = sg.grad(sg.sum(sg.where(y != 0, x * sg.log(y), 0.0)), x)
    dx = sg.function([x, y], g)(np.array([0.0]), np.array([0.0]))
    assert dx[0] == 0  # the guard is on y: where it cuts, the written 0 stays


def test_log_of_prod_of_positives_becomes_a_sum_of_logs():
    x = sg.matrix("x")
    f = sg.function([x], sg.log(sg.prod(sg.exp(x), axis=1)))
    big = np.full((2, 400), 3.0)  # the product overflows: exp(1200)
    np.testing.assert_allclose(f(big), [1200.0, 1200.0])
    assert "Prod" not in [type(n.op).__name__ for n in f.nodes]


def test_log_of_prod_of_signed_values_is_left_alone():
    x = sg.vector("x")
    f = sg.function([x], sg.log(sg.prod(x)))
    np.testing.assert_allclose(f(np.array([-2.0, -3.0])), np.log(6.0))  # sum(log(x)) would be NaN


def test_expm1_from_exp_minus_one():
    x = sg.vector("x")
    f = sg.function([x], [sg.exp(x) - 1.0, -1.0 + sg.exp(x)])
    tiny = np.array([1e-20, -3e-18])
    for out in f(tiny):
        np.testing.assert_allclose(out, np.expm1(tiny), rtol=1e-15)


def test_log1p_from_log_one_plus():
    x = sg.vector("x")
    f = sg.function([x], [sg.log(1.0 + x), sg.log(1.0 - x)])
    tiny = np.array([1e-20, 3e-17])
    np.testing.assert_allclose(f(tiny)[0], np.log1p(tiny), rtol=1e-15)
    np.testing.assert_allclose(f(tiny)[1], np.log1p(-tiny), rtol=1e-15)


def test_weighted_log_sum_exp_keeps_the_gradient_of_a_zero_weight_finite():
    x, w = sg.vector("x"), sg.vector("w")
    cost = sg.log(sg.sum(w * sg.exp(x)))
    gx, gw = sg.grad(cost, [x, w])
    values = sg.function([x, w], [cost, gx, gw])(np.array([1000.0, 999.0, 5.0]), np.array([0.5, 0.0, 1.0]))
    for v in values:
        assert np.all(np.isfinite(v))
    np.testing.assert_allclose(values[0], 1000.0 + np.log(0.5), rtol=1e-15)
    np.testing.assert_allclose(values[2][1], np.exp(999.0 - values[0]))


def test_recognition_off_compiles_the_formula_as_written():
    x = sg.vector("x")
    naive = sg.log(sg.sum(sg.exp(x)))
    f = sg.function([x], naive, recognition=False)
    assert [type(n.op).__name__ for n in f.nodes] == ["Exp", "Sum", "Log"]
    with np.errstate(over="ignore"):
        assert np.isinf(f(np.array([1000.0])))
    assert f.explain().strip() == "no rewrites changed the formulas as written"


def test_log_odds_of_a_sigmoid_is_its_argument():
    x = sg.vector("x")
    p = sg.sigmoid(x)
    f = sg.function([x], [sg.log(p / (1.0 - p)), sg.grad(sg.sum(sg.log(p / (1.0 - p))), x)])
    assert not f.nodes or all(type(n.op).__name__ != "Log" for n in f.nodes)
    values = np.array([-800.0, -3.0, 0.5, 40.0])
    value, grad = f(values)
    np.testing.assert_array_equal(value, values)
    np.testing.assert_array_equal(grad, np.ones(4))


def test_logsumexp_of_log_weights_uses_the_weights_so_a_zero_weight_has_a_finite_gradient():
    w, x = sg.vector("w"), sg.vector("x")
    cost = sg.logsumexp(sg.log(w) + x)
    gw, gx = sg.grad(cost, [w, x])
    value, grad_w, grad_x = sg.function([w, x], [cost, gw, gx])(np.array([0.5, 0.0, 0.5]), np.array([1.0, 2.0, 3.0]))
    expected = np.log(0.5 * np.exp(1.0) + 0.5 * np.exp(3.0))
    np.testing.assert_allclose(value, expected, rtol=1e-15)
    np.testing.assert_allclose(grad_w, np.exp(np.array([1.0, 2.0, 3.0]) - expected), rtol=1e-14)
    np.testing.assert_allclose(grad_x, [0.5 * np.exp(1.0 - expected), 0.0, 0.5 * np.exp(3.0 - expected)], rtol=1e-14)


def test_difference_of_log_sigmoids_is_the_log_odds_exactly():
    x = sg.vector("x", dtype="float32")
    p = sg.sigmoid(x)
    f = sg.function([x], sg.log(p) - sg.log(1.0 - p))
    values = np.array([-200.0, -1e-3, 3e-4, 17.0], dtype="float32")
    np.testing.assert_array_equal(f(values), values)


@pytest.mark.parametrize(
    "build",
    [
        lambda x, m: sg.where(m, sg.exp(x), 0.0) / sg.sum(sg.where(m, sg.exp(x), 0.0), axis=-1, keepdims=True),
        lambda x, m: sg.exp(x) * m / sg.sum(sg.exp(x) * m, axis=-1, keepdims=True),
        lambda x, m: sg.log(sg.sum(sg.where(m, sg.exp(x), 0.0), axis=-1)),
        lambda x, m: sg.log(sg.sum(sg.exp(x) * sg.astype(m, "float64"), axis=-1)),
    ],
    ids=["where_softmax", "mask_softmax", "where_logsumexp", "cast_mask_logsumexp"],
)
def test_masked_naive_forms_are_stable_and_give_masked_entries_no_gradient(build):
    x, m = sg.matrix("x"), sg.matrix("m", dtype="bool")
    y = build(x, m)
    f = sg.function([x, m], [y, sg.grad(sg.sum(y * 0.5), x)])
    values = np.array([[1000.0, 999.0, -1000.0], [-1000.0, 5.0, 1000.0]])
    mask = np.array([[True, True, False], [False, True, True]])
    value, grad = f(values, mask)
    assert np.all(np.isfinite(value)) and np.all(np.isfinite(grad))
    assert np.all(grad[~mask] == 0)
    # the naive form overflows on these values; on values shifted by the row max it does not
    shifted = sg.function([x, m], y, recognition=False)(values - values.max(axis=1, keepdims=True), mask)
    if y.ndim == 1:  # logsumexp is shift-covariant: add the shift back
        shifted = shifted + values.max(axis=1)
    np.testing.assert_allclose(value, shifted, rtol=1e-12, atol=1e-300)


def test_a_guarded_log_of_sum_is_a_logaddexp_with_the_guard():
    x = sg.matrix("x")
    f = sg.function([x], sg.log(sg.sum(sg.exp(x), axis=-1) + 1e-10))
    np.testing.assert_allclose(
        f(np.array([[1000.0, 1000.0], [-1000.0, -1000.0]])), [1000.0 + np.log(2.0), np.log(1e-10)]
    )


def test_recognised_weights_keep_log_domain_nan_where_a_weight_is_negative():
    w, x = sg.vector("w"), sg.vector("x")
    y = sg.logsumexp(sg.log(w) + x)
    with np.errstate(invalid="ignore"):
        for recognition in (True, False):
            assert np.isnan(sg.function([w, x], y, recognition=recognition)(np.array([-1.0, 2.0]), np.zeros(2)))
    value, gw = sg.function([w, x], [y, sg.grad(y, w)])(np.array([0.0, 2.0]), np.array([0.0, 1.0]))
    np.testing.assert_allclose(value, np.log(2.0) + 1.0, rtol=1e-15)
    np.testing.assert_allclose(gw, [np.exp(-value), np.exp(1.0 - value)], rtol=1e-15)  # finite at w = 0


def test_log_of_a_mean_is_split_only_for_a_mean_of_exponentials():
    x = sg.vector("x")
    plain = sg.function([x], sg.log(sg.mean(x)))
    assert "log_of_sum_over_count" not in plain.explain()  # log(s) - log(n) would cancel near s/n = 1
    data = np.array([1.0, 1.0 + 2**-30])
    assert plain(data) == np.log(np.mean(data))
    of_exps = sg.function([x], sg.log(sg.mean(sg.exp(x))))
    assert "logmeanexp(x, axis=0)" in of_exps.explain()
    np.testing.assert_allclose(of_exps(np.array([1000.0, 1000.0])), 1000.0, rtol=1e-15)
    over_other = sg.function([x], sg.log(sg.sum(sg.exp(x)) / 3.0))  # 3 does not count x's entries
    assert "logsumexp_from_naive" in over_other.explain()
    np.testing.assert_allclose(over_other(np.array([1000.0, 1000.0])), 1000.0 + np.log(2 / 3), rtol=1e-15)


def test_logmeanexp_is_relatively_accurate_near_zero():
    x = sg.vector("x")
    values = np.array([1e-10, -1e-10, 2e-10])
    with mpmath.workdps(60):
        exact = mpmath.log(sum(mpmath.exp(mpmath.mpf(v)) for v in values) / 3)
    for out in (sg.logmeanexp(x), sg.log(sg.mean(sg.exp(x)))):
        got = sg.function([x], out)(values)
        assert abs(got - float(exact)) <= 4 * np.spacing(float(exact))


def test_product_of_exponentials_is_as_accurate_as_written():
    a, b = sg.scalar("a"), sg.scalar("b")
    f = sg.function([a, b], sg.exp(a) * sg.exp(b))
    assert "exp_of_sum" in f.explain()
    with mpmath.workdps(60):
        exact = float(mpmath.exp(mpmath.mpf(0.1)) * mpmath.exp(mpmath.mpf(700.3)))
    assert abs(f(0.1, 700.3) - exact) <= 2 * np.spacing(exact)  # exp(a + b) is 200 ulps off here
    np.testing.assert_allclose(f(800.0, -800.0), 1.0, rtol=0)  # written: inf * 0 = nan
    np.testing.assert_allclose(f(-800.0, 790.0), np.exp(-10.0), rtol=1e-13)


def test_log1p_of_expm1_is_the_identity_where_the_composition_cancels():
    x = sg.vector("x", dtype="float32")
    f = sg.function([x], [sg.log(1.0 + (sg.exp(x) - 1.0)), sg.log1p(sg.expm1(x))])
    values = np.array([-10.90625, -100.0, 0.0, 3.0, -np.inf, np.inf, np.nan], dtype=np.float32)
    for got in f(values):
        np.testing.assert_array_equal(got, values)  # written: -10.9054 at the first entry (1 - 0.99998)
    assert "[log1p_of_expm1]" in f.explain()


def test_a_one_operand_op_of_a_broadcast_is_computed_before_broadcasting():
    x = sg.tensor("x", shape=(None, None))
    y = sg.log1p(sg.expm1(sg.broadcast_to(x, (x.shape[0], 3))))
    f = sg.function([x], y)
    assert "[broadcast_after_unary]" in f.explain()
    assert [type(n.op).__name__ for n in f.nodes if type(n.op).__name__ in ("Log1p", "Expm1")] == []
    np.testing.assert_array_equal(f(np.array([[-40.0], [2.0]])), [[-40.0] * 3, [2.0] * 3])


# -- mixture weights: exact zeros reach the weighted logsumexp by every route --------------------------------
def _mp_mixture(p, a, b):
    p, a, b = (mpmath.mpf(float(v)) for v in (p, a, b))
    value = mpmath.log(p * mpmath.exp(a) + (1 - p) * mpmath.exp(b))
    grads = [
        (mpmath.exp(a) - mpmath.exp(b)) / mpmath.exp(value),
        p * mpmath.exp(a - value),
        (1 - p) * mpmath.exp(b - value),
    ]
    return float(value), [float(g) for g in grads]


MIXTURES = {
    "log_space": lambda p, a, b: sg.logaddexp(sg.log(p) + a, sg.log1p(-p) + b),
    "log_of_one_minus": lambda p, a, b: sg.logaddexp(sg.log(p) + a, sg.log(1 - p) + b),
    "probability_space": lambda p, a, b: sg.log(p * sg.exp(a) + (1 - p) * sg.exp(b)),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(MIXTURES))
def test_a_two_component_mixture_has_finite_gradients_at_weights_zero_and_one(name, dtype):
    p, a, b = sg.vector("p", dtype=dtype), sg.vector("a", dtype=dtype), sg.vector("b", dtype=dtype)
    y = MIXTURES[name](p, a, b)
    f = sg.function([p, a, b], [y, *sg.grad(sg.sum(y), [p, a, b])])
    ps, as_, bs = np.array([0.0, 1.0, 0.3, 0.0]), np.array([1.0, 2.0, -3.0, 80.0]), np.array([-1.0, 5.0, 4.0, 60.0])
    value, *grads = f(*(v.astype(dtype) for v in (ps, as_, bs)))
    tol = 1e-5 if dtype == "float32" else 1e-13
    for i in range(len(ps)):
        exact_value, exact_grads = _mp_mixture(ps[i], as_[i], bs[i])
        np.testing.assert_allclose(value[i], exact_value, rtol=tol)
        np.testing.assert_allclose([g[i] for g in grads], exact_grads, rtol=tol, atol=tol)


def test_an_overflowing_mixture_in_probability_space_is_repaired():
    p, a = sg.vector("p"), sg.vector("a")
    y = sg.log(p * sg.exp(a) + (1 - p) * sg.exp(2 * a))
    f = sg.function([p, a], [y, *sg.grad(sg.sum(y), [p, a])])
    assert "logaddexp_from_naive" in f.explain()
    value, gp, ga = f(np.array([0.0, 0.5]), np.array([800.0, 800.0]))
    np.testing.assert_allclose(value, [1600.0, 1600.0 + np.log(0.5)], rtol=1e-15)
    np.testing.assert_allclose(gp, [-1.0, -2.0], rtol=1e-15)
    np.testing.assert_allclose(ga, [2.0, 2.0], rtol=1e-15)


def test_a_negative_weight_in_probability_space_keeps_the_signed_meaning():
    a, b = sg.vector("a"), sg.vector("b")
    y = sg.log(sg.exp(a) + (-0.5) * sg.exp(b))  # as written: finite while e^a > e^b / 2
    f = sg.function([a, b], y)
    with np.errstate(invalid="ignore"):
        value = f(np.array([1.0, 0.0]), np.array([0.0, 1.0]))
    np.testing.assert_allclose(value[0], np.log(np.e - 0.5), rtol=1e-15)
    assert np.isnan(value[1])  # log of a negative total, as written


def test_normalised_log_weights_keep_the_gradient_of_a_zero_weight_finite():
    w, x = sg.vector("w"), sg.vector("x")
    for y in (
        sg.logsumexp(sg.log(w) - sg.logsumexp(sg.log(w)) + x),
        sg.logsumexp(sg.log(w / sg.sum(w)) + x),
    ):
        value, gw = sg.function([w, x], [y, sg.grad(y, w)])(np.array([0.0, 0.5, 0.5]), np.array([1.0, 2.0, 3.0]))
        total = 0.5 * np.exp(2.0) + 0.5 * np.exp(3.0)
        np.testing.assert_allclose(value, np.log(total), rtol=1e-15)
        np.testing.assert_allclose(gw, np.exp([1.0, 2.0, 3.0]) / total - 1.0, rtol=1e-14)


def test_a_logaddexp_without_log_weights_is_left_alone():
    a, b = sg.vector("a"), sg.vector("b")
    f = sg.function([a, b], sg.logaddexp(a + 1.0, sg.exp(b)))
    assert "logsumexp_with_weights_from_logaddexp_of_logs" not in f.explain()


def test_a_zero_weighted_exponential_of_nan_or_infinity_stays_nan_as_written():
    a, b = sg.vector("a"), sg.vector("b")
    f = sg.function([a, b], sg.log(0.0 * sg.exp(a) + sg.exp(b)))
    assert "logaddexp_from_naive" in f.explain()
    with np.errstate(invalid="ignore"):
        value = f(np.array([np.nan, np.inf, 1.0]), np.zeros(3))
    assert np.isnan(value[0]) and np.isnan(value[1])  # 0 · NaN and 0 · inf, as written
    assert value[2] == 0.0


def test_float16_log_softmax_and_log_sigmoid_are_taken_before_the_rounding():
    # float16's softmax and sigmoid are float32's, rounded: log of the rounded value is -inf
    # below float16's smallest subnormal (6e-8), where log_softmax in float32 is about -18
    x = sg.tensor("x", shape=(3,), dtype="float16")
    values = np.array([0.0, 30.0, 12.0], dtype=np.float16)
    outputs = [sg.log(sg.softmax(x)[::-1]), sg.log(sg.sigmoid(-x)), sg.exp(sg.log_softmax(x))]
    f = sg.function([x], outputs)
    log_p, log_s, p = f(values)
    assert log_p.dtype == log_s.dtype == p.dtype == np.float16
    wide = values.astype(np.float64)
    exact_log_p = (wide - np.log(np.sum(np.exp(wide))))[::-1]
    np.testing.assert_allclose(log_p, exact_log_p, rtol=2e-3, atol=6e-8)  # (-1.5e-8 rounds to -0)
    np.testing.assert_allclose(log_s, -np.logaddexp(0.0, wide), rtol=2e-3)
    np.testing.assert_allclose(p, np.exp(wide - np.log(np.sum(np.exp(wide)))), rtol=2e-3, atol=6e-8)
    assert "[log_softmax_from_log_of_softmax]" in f.explain() and "[log_sigmoid_from_log_of_sigmoid]" in f.explain()


def test_a_running_log_sum_exp_written_out_matches_mpmath_past_overflow():
    x = sg.vector("x")
    y = sg.log(sg.cumsum(sg.exp(x)))
    weights = np.array([0.5, 1.0, -2.0, 1.5])
    f = sg.function([x], [y, sg.grad(sg.sum(y * weights), x)])
    assert "[logcumsumexp_from_naive]" in f.explain()
    point = np.array([1000.0, -1000.0, 999.0, 0.0])
    value, slope = f(point)
    with mpmath.workdps(50):
        e = [mpmath.exp(mpmath.mpf(v)) for v in point]
        prefix = [mpmath.fsum(e[: i + 1]) for i in range(4)]
        exact = [float(mpmath.log(t)) for t in prefix]
        # d/dx_j Σ_i w_i log(prefix_i) = e_j Σ_{i >= j} w_i / prefix_i
        exact_slope = [float(e[j] * mpmath.fsum(weights[i] / prefix[i] for i in range(j, 4))) for j in range(4)]
    np.testing.assert_allclose(value, exact, rtol=1e-15)
    np.testing.assert_allclose(slope, exact_slope, rtol=1e-14, atol=1e-300)
    written = sg.function([x], y, recognition=False)(point)
    assert np.isinf(written[0])  # the point of the rule: exp(1000) overflows as written


def test_logit_and_sigmoid_undo_each_other():
    x = sg.vector("x")
    there_and_back = sg.logit(sg.sigmoid(x))
    f = sg.function([x], [there_and_back, sg.grad(sg.sum(there_and_back), x)])
    point = np.array([-800.0, -40.0, 0.0, 40.0, 800.0, np.inf, np.nan])
    value, slope = f(point)
    np.testing.assert_array_equal(value, point)  # written, logit(sigmoid(40)) is logit(1) = inf
    np.testing.assert_array_equal(slope[:5], np.ones(5))
    assert "[identity_from_logit_of_sigmoid]" in f.explain()
    p = sg.vector("p")
    back = sg.sigmoid(sg.logit(p))
    f = sg.function([p], [back, sg.grad(sg.sum(back), p)])
    value, slope = f(np.array([0.0, 1e-300, 0.25, 1.0, 1.5, -0.5, np.nan]))
    np.testing.assert_array_equal(value, [0.0, 1e-300, 0.25, 1.0, np.nan, np.nan, np.nan])  # outside [0, 1]: NaN
    np.testing.assert_array_equal(slope[1:3], [1.0, 1.0])
    f32 = sg.function([p], sg.logit(sg.sigmoid(sg.astype(p, "float32"))))
    assert f32(np.array([20.0])).dtype == np.float32
