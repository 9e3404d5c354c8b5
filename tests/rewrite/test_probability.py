"""Products and mixtures in probability space under a log: log(exp(a) @ B) (rewrite/probability.py)
and log(p · softmax(u) + (1 - p) · softmax(v)) (stabilize's logaddexp rule, with softmax and
sigmoid terms)."""

from __future__ import annotations

import numpy as np
import pytest

import stablegrad as sg

mpmath = pytest.importorskip("mpmath")

RULE = "[log_matmul_exp_from_naive]"


def _exact_log_matmul_exp(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log(exp(a) @ B) and the gradient of its sum with respect to a, both with 40 digits."""
    with mpmath.workdps(40):
        ea = [[mpmath.exp(mpmath.mpf(float(v))) for v in row] for row in a]
        total = [
            [mpmath.fsum(ea[i][k] * mpmath.mpf(float(b[k, j])) for k in range(a.shape[1])) for j in range(b.shape[1])]
            for i in range(a.shape[0])
        ]
        value = np.array([[float(mpmath.log(t)) for t in row] for row in total])
        slope = np.array(
            [
                [
                    float(mpmath.fsum(ea[i][k] * mpmath.mpf(float(b[k, j])) / total[i][j] for j in range(b.shape[1])))
                    for k in range(a.shape[1])
                ]
                for i in range(a.shape[0])
            ]
        )
    return value, slope


@pytest.mark.parametrize(("dtype", "scale"), [("float64", 1000.0), ("float32", 150.0)])
def test_log_matmul_exp_is_finite_and_accurate_where_exp_under_or_overflows(dtype, scale):
    a_value = np.array([[-1.0, -1.5, -3.0], [1.0, 0.25, 0.5]]) * scale  # exp underflows in row 0, overflows in row 1
    b_value = np.array([[0.5, 0.0], [0.25, 1.0], [0.25, 2.0]])
    a, b = sg.matrix("a", dtype=dtype), sg.matrix("b", dtype=dtype)
    y = sg.log(sg.exp(a) @ b)
    f = sg.function([a, b], [y, sg.grad(sg.sum(y), a)])
    value, slope = f(a_value.astype(dtype), b_value.astype(dtype))
    with np.errstate(all="ignore"):
        written = sg.function([a, b], y, recognition=False)(a_value.astype(dtype), b_value.astype(dtype))
    assert not np.isfinite(written).any()
    exact_value, exact_slope = _exact_log_matmul_exp(a_value.astype(dtype).astype(np.float64), b_value)
    rtol = 1e-14 if dtype == "float64" else 2e-6
    np.testing.assert_allclose(value, exact_value, rtol=rtol)
    np.testing.assert_allclose(slope, exact_slope, rtol=rtol, atol=rtol)
    assert value.dtype == slope.dtype == np.dtype(dtype)
    assert RULE in f.explain()


#: (side, shape of a, shape of B): vectors, matrices and batches on either side of the product
LAYOUTS = [
    ("exp @ B", a, b)
    for a, b in [
        ((3, 4), (4, 5)),
        ((4,), (4, 5)),
        ((3, 4), (4,)),
        ((4,), (4,)),
        ((2, 3, 4), (4, 5)),
        ((3, 4), (2, 4, 5)),
    ]
] + [
    ("B @ exp", a, b)
    for a, b in [
        ((4, 3), (5, 4)),
        ((4,), (5, 4)),
        ((4, 3), (4,)),
        ((4,), (4,)),
        ((2, 4, 3), (5, 4)),
        ((4, 3), (2, 5, 4)),
    ]
]


@pytest.mark.parametrize(("side", "a_shape", "b_shape"), LAYOUTS, ids=str)
def test_every_operand_layout_keeps_the_written_shape_and_finite_answer(side, a_shape, b_shape):
    rng = np.random.default_rng(0)
    a_value, b_value = rng.normal(size=a_shape), rng.uniform(0.1, 1.0, size=b_shape)
    a, b = sg.tensor("a", shape=(None,) * len(a_shape)), sg.tensor("b", shape=(None,) * len(b_shape))
    y = sg.log(sg.exp(a) @ b) if side == "exp @ B" else sg.log(b @ sg.exp(a))
    f = sg.function([a, b], [y, sg.grad(sg.sum(y), a)])
    written = sg.function([a, b], [y, sg.grad(sg.sum(y), a)], recognition=False)
    assert RULE in f.explain()
    for got, want in zip(f(a_value, b_value), written(a_value, b_value)):
        assert np.shape(got) == np.shape(want)
        np.testing.assert_allclose(got, want, rtol=1e-13)


def test_the_domain_stays_as_written():
    a, b = sg.matrix("a"), sg.matrix("b")
    y = sg.log(sg.exp(a) @ b)
    a_value = np.array([[0.0, 1.0], [-np.inf, -np.inf], [np.inf, 0.0], [np.nan, 0.0], [2.0, -1.0]])
    b_value = np.array([[1.0, -1.0], [1.0, 0.5]])  # column 1 is negative for rows whose first entry leads
    with np.errstate(all="ignore"):
        written = sg.function([a, b], y, recognition=False)(a_value, b_value)
        got = sg.function([a, b], y)(a_value, b_value)
    assert np.isnan(written[4, 1]) and np.isneginf(written[1]).all() and np.isposinf(written[2, 0])
    np.testing.assert_allclose(got, written, rtol=1e-15)  # (assert_allclose matches NaN and inf positions)


def test_near_misses_are_left_as_written():
    a, b = sg.matrix("a"), sg.matrix("b")
    for y in (sg.log(a @ b), sg.log(sg.exp(a) @ b + 1.0), sg.exp(a) @ b, sg.log(sg.exp(a) * b)):
        assert RULE not in sg.function([a, b], y).explain()


def test_an_hmm_forward_recursion_in_a_scan_body_has_a_finite_gradient():
    """alpha_t = log(exp(alpha_{t-1}) @ A) + log_b_t over 2000 steps: alpha falls to about -2000·2.5,
    where exp(alpha) is 0 from the fourth step on, written."""
    rng = np.random.default_rng(1)
    k, t = 3, 2000
    log_a_value = np.log(rng.dirichlet(np.ones(k), size=k))
    log_b_value = -rng.uniform(1.0, 4.0, size=(t, k))
    log_a, log_b = sg.matrix("log_a"), sg.matrix("log_b")

    def naive(alpha, lb):
        alpha = sg.log(sg.exp(alpha) @ sg.exp(log_a)) + lb
        return alpha, None

    def by_hand(alpha, lb):
        return sg.logsumexp(alpha[:, None] + log_a, axis=0) + lb, None

    results = []
    for step in (naive, by_hand):
        alpha, _ = sg.scan(step, log_b[0], log_b[1:])
        total = sg.logsumexp(alpha)
        results.append(sg.function([log_a, log_b], [total, *sg.grad(total, [log_a, log_b])]))
    assert RULE in results[0].explain()
    got, want = results[0](log_a_value, log_b_value), results[1](log_a_value, log_b_value)
    assert got[0] < -2000 and all(np.isfinite(g).all() for g in got)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_fires_inside_a_user_composite():
    za, zb = sg.matrix("za"), sg.matrix("zb")
    composite = sg.OpFromGraph([za, zb], [sg.log(sg.exp(za) @ zb)])
    a, b = sg.matrix("a"), sg.matrix("b")
    f = sg.function([a, b], composite(a, b))
    assert RULE in f.explain()
    np.testing.assert_allclose(
        f(np.array([[-1000.0, -1001.0]]), np.array([[1.0], [1.0]])), [[-1000.0 + np.log1p(np.exp(-1.0))]], rtol=1e-15
    )


# -- mixtures of probabilities ----------------------------------------------------------------------
def _exact_mixture(p: float, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    with mpmath.workdps(40):

        def log_softmax(x):
            total = mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(float(e))) for e in x))
            return [mpmath.mpf(float(e)) - total for e in x]

        lu, lv = log_softmax(u), log_softmax(v)
        return np.array(
            [float(mpmath.log(p * mpmath.exp(a) + (1 - mpmath.mpf(p)) * mpmath.exp(b))) for a, b in zip(lu, lv)]
        )


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_mixture_of_softmaxes_is_a_logsumexp_of_log_probabilities(dtype):
    u_value = np.array([0.0, -2000.0, 5.0, -3000.0]).astype(dtype)
    v_value = np.array([-3000.0, 0.0, 1.0, -2500.0]).astype(dtype)
    u, v, p = (
        sg.tensor("u", shape=(None,), dtype=dtype),
        sg.tensor("v", shape=(None,), dtype=dtype),
        sg.scalar("p", dtype=dtype),
    )
    y = sg.log(p * sg.softmax(u) + (1 - p) * sg.softmax(v))
    f = sg.function([u, v, p], [y, *sg.grad(sg.sum(y), [u, v, p])])
    got = f(u_value, v_value, np.asarray(0.25, dtype))
    with np.errstate(all="ignore"):
        written = sg.function([u, v, p], y, recognition=False)(u_value, v_value, np.asarray(0.25, dtype))
    assert np.isneginf(written[3])  # both probabilities underflow there
    np.testing.assert_allclose(
        got[0], _exact_mixture(0.25, u_value, v_value), rtol=1e-14 if dtype == "float64" else 1e-6
    )
    assert all(np.isfinite(g).all() for g in got)
    assert "[logaddexp_from_naive]" in f.explain()


def test_sigmoid_terms_join_a_log_of_a_sum():
    x = sg.vector("x")
    y = sg.log(sg.sigmoid(x) + 0.5 * sg.sigmoid(x - 3.0))
    f = sg.function([x], [y, sg.grad(sg.sum(y), x)])
    points = np.array([-800.0, -40.0, 0.0, 40.0])
    value, slope = f(points)
    with mpmath.workdps(40):
        sigmoid = lambda t: 1 / (1 + mpmath.exp(-t))  # noqa: E731
        exact = [mpmath.log(sigmoid(mpmath.mpf(t)) + sigmoid(mpmath.mpf(t) - 3) / 2) for t in points]
    np.testing.assert_allclose(value, [float(e) for e in exact], rtol=1e-14)
    assert np.isfinite(slope).all() and abs(slope[0] - 1.0) < 1e-14  # log σ(x) ≈ x far below 0
    assert "[logaddexp_from_naive]" in f.explain()


# -- the complement of a softmax probability --------------------------------------------------------
COMPLEMENTS = {
    "log(1 - softmax(x))": lambda x: sg.log(1 - sg.softmax(x)),
    "log1mexp(log_softmax(x))": lambda x: sg.log1mexp(sg.log_softmax(x)),
    "log(1 - exp(x - log(sum(exp(x)))))": lambda x: sg.log(1 - sg.exp(x - sg.log(sg.sum(sg.exp(x))))),
}


def _exact_complement(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log(1 - softmax(x)) and the gradient of its sum, with 60 digits."""
    with mpmath.workdps(60):
        xs = [mpmath.mpf(float(v)) for v in x]

        def entry(i, values):
            return mpmath.log(mpmath.fsum(mpmath.exp(v) for j, v in enumerate(values) if j != i)) - mpmath.log(
                mpmath.fsum(mpmath.exp(v) for v in values)
            )

        total = lambda *values: mpmath.fsum(entry(i, values) for i in range(len(values)))  # noqa: E731
        value = [float(entry(i, xs)) for i in range(len(xs))]
        slope = [float(mpmath.diff(total, xs, tuple(int(i == k) for i in range(len(xs))))) for k in range(len(xs))]
    return np.array(value), np.array(slope)


@pytest.mark.parametrize("spelling", COMPLEMENTS, ids=list(COMPLEMENTS))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_complement_of_a_saturated_softmax_keeps_its_tail(spelling, dtype):
    x = sg.tensor("x", shape=(None,), dtype=dtype)
    y = COMPLEMENTS[spelling](x)
    f = sg.function([x], [y, sg.grad(sg.sum(y), x)])
    assert "[log_softmax_complement_from_naive]" in f.explain()
    rtol = 1e-13 if dtype == "float64" else 1e-5
    gap = 800.0 if dtype == "float64" else 100.0  # 1 - p = 2·e^-gap underflows at the max
    for point in ([0.0, 0.0, gap], [0.0, 1.0, 2.0], [5.0, 5.0, -3.0], [-2.0, 30.0]):
        values = np.array(point, dtype)
        value, slope = f(values)
        exact_value, exact_slope = _exact_complement(values.astype(np.float64))
        tiny = np.finfo(dtype).tiny  # (below it the result is subnormal, with fewer digits)
        np.testing.assert_allclose(value, exact_value, rtol=rtol, atol=tiny, err_msg=str(point))
        np.testing.assert_allclose(slope, exact_slope, rtol=rtol, atol=rtol, err_msg=str(point))


def test_the_complement_keeps_the_written_domain():
    x = sg.vector("x")
    y = sg.log(1 - sg.softmax(x))
    f, written = sg.function([x], y), sg.function([x], y, recognition=False)
    for point in ([-np.inf, -np.inf], [np.nan, 0.0], [3.0], [0.0, -np.inf]):
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(f(np.array(point)), written(np.array(point)), rtol=1e-15, err_msg=str(point))


def test_only_leading_axes_make_x_minus_logsumexp_a_log_softmax():
    m = sg.matrix("m")
    values = np.arange(9.0).reshape(3, 3)
    for axis, fires in ((0, True), (1, False)):  # axis 1 without keepdims broadcasts across rows
        f = sg.function([m], m - sg.logsumexp(m, axis=axis))
        assert ("[log_softmax_from_logsumexp]" in f.explain()) == fires
        np.testing.assert_allclose(f(values), values - np.log(np.exp(values).sum(axis=axis)), rtol=1e-14)


# -- the probability of a set of classes ----------------------------------------------------------
def _exact_ratio(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    with mpmath.workdps(40):
        return np.array(
            [
                float(
                    mpmath.fsum(mpmath.exp(v) for v, m in zip(row, keep) if m) / mpmath.fsum(mpmath.exp(v) for v in row)
                )
                for row, keep in zip(x.tolist(), mask.tolist())
            ]
        )


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_ratio_of_masked_sums_of_exponentials_is_finite_past_overflow(dtype):
    scale = 1000.0 if dtype == "float64" else 120.0
    x_value = (np.array([[1.0, 0.999, 0.998], [0.0, 0.001, 0.002], [-1.0, -1.001, -2.0]]) * scale).astype(dtype)
    mask_value = np.array([[1, 0, 1], [0, 1, 1], [0, 1, 0]], bool)
    x, mask = sg.tensor("x", shape=(None, None), dtype=dtype), sg.tensor("mask", shape=(None, None), dtype="bool")
    p = sg.sum(sg.where(mask, sg.exp(x), 0), axis=1) / sg.sum(sg.exp(x), axis=1)
    f = sg.function([x, mask], [p, sg.grad(sg.sum(p), x)])
    value, slope = f(x_value, mask_value)
    with np.errstate(all="ignore"):
        written = sg.function([x, mask], p, recognition=False)(x_value, mask_value)
    assert not np.isfinite(written[[0, 2]]).any()  # inf/inf and 0/0
    np.testing.assert_allclose(
        value, _exact_ratio(x_value.astype(np.float64), mask_value), rtol=1e-14 if dtype == "float64" else 1e-6
    )
    assert np.isfinite(slope).all() and "[probability_from_ratio_of_sums]" in f.explain()
    # the gradient of a set's probability: p·(1 - p) on its members' share, against the softmax's
    softmax = np.exp(x_value - x_value.max(axis=1, keepdims=True).astype(np.float64))
    softmax /= softmax.sum(axis=1, keepdims=True)
    expected = softmax * (mask_value - value.astype(np.float64)[:, None])
    np.testing.assert_allclose(slope, expected, rtol=1e-12 if dtype == "float64" else 1e-5, atol=1e-30)


def test_a_ratio_keeps_its_domain_and_a_near_miss_stays():
    x, y = sg.vector("x"), sg.vector("y")
    ratio = sg.sum(sg.exp(x)) / sg.sum(sg.exp(y))
    f, written = sg.function([x, y], ratio), sg.function([x, y], ratio, recognition=False)
    for a, b in (([-np.inf], [-np.inf]), ([np.nan, 0.0], [0.0]), ([0.0, 1.0], [np.inf]), ([1.0, 2.0], [3.0, -1.0])):
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(f(np.array(a), np.array(b)), written(np.array(a), np.array(b)), rtol=1e-15)
    near_miss = sg.sum(sg.exp(x)) / sg.sum(sg.exp(y), keepdims=True)  # other axes: left as written
    assert "[probability_from_ratio_of_sums]" not in sg.function([x, y], near_miss).explain()


# -- mixture weights normalised through their logs -----------------------------------------------------
WEIGHTS_RULE = "[normalized_weights_from_softmax_of_log]"


def _exact_normalised_mixture(w: np.ndarray, x: np.ndarray) -> tuple[float, np.ndarray]:
    """log Σ (w_i / Σw) e^{x_i} and its gradient in w, e^{x_j} / Σ w e^x - 1 / Σw, with 40 digits."""
    with mpmath.workdps(40):
        ws, es = [mpmath.mpf(float(v)) for v in w], [mpmath.exp(mpmath.mpf(float(v))) for v in x]
        mixed, total = mpmath.fsum(a * b for a, b in zip(ws, es)), mpmath.fsum(ws)
        value = float(mpmath.log(mixed / total))
        slope = np.array([float(e / mixed - 1 / total) for e in es])
    return value, slope


@pytest.mark.parametrize(
    "spelling",
    [
        lambda w, x: sg.logsumexp(sg.log_softmax(sg.log(w)) + x),
        lambda w, x: sg.log(sg.sum(sg.softmax(sg.log(w)) * sg.exp(x))),
    ],
    ids=["logsumexp(log_softmax(log w) + x)", "log(sum(softmax(log w) * exp(x)))"],
)
@pytest.mark.parametrize("x_value", [[1.0, 2.0, 3.0, -1.0], [800.0, -800.0, 799.0, 0.0]])
def test_a_mixture_weight_of_exactly_zero_has_a_finite_gradient(spelling, x_value):
    w, x = sg.vector("w"), sg.vector("x")
    y = spelling(w, x)
    f = sg.function([w, x], [y, sg.grad(y, w)])
    w_value, x_value = np.array([0.0, 1.0, 2.0, 0.5]), np.array(x_value)
    value, slope = f(w_value, x_value)
    exact_value, exact_slope = _exact_normalised_mixture(w_value, x_value)
    np.testing.assert_allclose(value, exact_value, rtol=4e-16)
    np.testing.assert_allclose(slope, exact_slope, rtol=1e-14, atol=1e-300)
    assert WEIGHTS_RULE in f.explain()
    written = sg.function([w, x], sg.grad(y, w, recognition=False), recognition=False)(w_value, x_value)
    assert not np.isfinite(written).all()  # what the rule is for: 0/0 through log's pullback


def test_normalised_weights_keep_the_written_domain_and_values():
    w = sg.matrix("w")
    rows = np.array(
        [
            [0.0, 1.0, 3.0],  # a zero weight: -inf, as written
            [0.0, 0.0, 0.0],  # no mass: 0/0
            [np.inf, 1.0, np.inf],  # +inf weights share the mass
            [-1.0, 1.0, 2.0],  # a negative weight: log's NaN takes the row
            [np.nan, 1.0, 2.0],
            [1e-310, 2e-310, 1e300],
        ]
    )
    for fn in (sg.softmax, sg.log_softmax):
        y = fn(sg.log(w), axis=1)
        f, written = sg.function([w], y), sg.function([w], y, recognition=False)
        assert WEIGHTS_RULE in f.explain()
        np.testing.assert_allclose(f(rows), written(rows), rtol=4e-16, atol=0)  # NaN and ±inf where written
    np.testing.assert_array_equal(sg.function([w], sg.softmax(sg.log(w), axis=0))(rows[:1].T)[:, 0], [0.0, 0.25, 0.75])


def test_float16_weights_are_summed_where_their_sum_cannot_overflow():
    w = sg.tensor("w", (3,), "float16")
    value = sg.function([w], sg.softmax(sg.log(w)))(np.full(3, 30000.0, np.float16))  # Σ = 90000 > 65504
    assert value.dtype == np.float16
    np.testing.assert_array_equal(value, np.full(3, np.float16(1 / 3)))


def test_normalised_weights_in_a_scan_body_and_on_every_backend():
    w, xs = sg.vector("w"), sg.matrix("xs")

    def step(total, x):
        return total + sg.logsumexp(sg.log_softmax(sg.log(w)) + x), None

    y, _ = sg.scan(step, sg.constant(0.0), xs)
    x_value, w_value = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]]), np.array([0.0, 1.0, 3.0])
    exact_slope = sum(_exact_normalised_mixture(w_value, row)[1] for row in x_value)
    for backend in ("numpy", "jax", "numba"):
        pytest.importorskip(backend)
        f = sg.function([w, xs], sg.grad(y, w), backend=backend)
        np.testing.assert_allclose(f(w_value, x_value), exact_slope, rtol=1e-14)
    assert WEIGHTS_RULE in f.explain()


def test_a_masked_softmax_of_log_weights_is_left_as_written():
    w = sg.vector("w")
    y = sg.softmax(sg.log(w), where=np.array([True, False, True]))
    assert WEIGHTS_RULE not in sg.function([w], y).explain()
