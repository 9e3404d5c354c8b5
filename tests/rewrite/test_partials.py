"""Products and quotients of affine forms in shared terms: the value as written, the gradient without
the product and quotient rules' cancellation (rewrite/partials.py, ops/partials.py)."""

import mpmath as mp
import numpy as np
import pytest

import stablegrad as sg
from stablegrad.graph.basic import toposort
from stablegrad.ops.partials import AffineProduct, AffineQuotient
from stablegrad.rewrite.partials import polynomial_difference, polynomial_form
from stablegrad.rewrite.pipeline import optimize, recognise

RULE = "affine_quotient_gradient"
BACKENDS = ["numpy", "jax", "numba"]
mp.mp.dps = 60


def _fired(output) -> bool:
    return any(isinstance(n.op, AffineQuotient) for n in toposort(recognise([output])))


def _exact_gradient(formula, points: list[tuple]) -> np.ndarray:
    """∂formula/∂ each argument at each point, by mpmath's numerical differentiation at 60 digits."""
    rows = []
    for point in points:
        args = [mp.mpf(float(p)) for p in point]
        row = []
        for k in range(len(args)):

            def along(t, k=k, args=args):
                return formula(*(t if i == k else a for i, a in enumerate(args)))

            row.append(float(mp.diff(along, args[k])))
        rows.append(row)
    return np.array(rows)


def _relative(got, expected):
    return np.abs(got - expected) / np.abs(expected)


# (formula on sg variables or mpf numbers alike, points where the written gradient cancels)
CASES = {
    "difference_over_sum": (lambda x, y: (x - y) / (x + y), [(1.0, 1e-12), (1e10, 1.0), (-3.0, 1e-9)]),
    "sum_over_difference": (lambda x, y: (x + y) / (x - y), [(1.0, 1e-12), (1e10, -1.0), (2.0, 3e-10)]),
    "x_over_one_minus_x": (lambda x, y: x / (1 - x) + 0 * y, [(1e17, 1.0), (-1e20, 1.0), (1e12, 1.0)]),
    "scaled_terms": (lambda x, y: (2 * x - y / 4) / (x + 3 * y), [(1.0, 1e-13), (1e9, 1.0), (-2.0, 1e-11)]),
    "constant_offsets": (lambda x, y: (x + 1) / (x + 2 * y + 1), [(1e16, 1.0), (3.0, 1e-14), (-1e14, 0.5)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient_keeps_its_digits_where_the_written_one_cancels(name):
    formula, points = CASES[name]
    x, y = sg.vector("x"), sg.vector("y")
    q = formula(x, y)
    assert _fired(q)
    xs, ys = (np.array(c) for c in zip(*points))
    exact = _exact_gradient(formula, points)
    cost = sg.sum(q)
    got = np.stack(sg.function([x, y], sg.grad(cost, [x, y]))(xs, ys), axis=1)
    written = np.stack(sg.function([x, y], sg.grad(cost, [x, y], recognition=False))(xs, ys), axis=1)
    mask = exact != 0
    assert np.all(_relative(got[mask], exact[mask]) < 1e-14), (got, exact)
    assert np.max(_relative(written[mask], exact[mask])) > 1e-6  # the case does cancel as written


@pytest.mark.parametrize("backend", BACKENDS)
def test_value_is_the_written_division_bit_for_bit(backend):
    x, y = sg.vector("x"), sg.vector("y")
    q = (x - 2 * y) / (x + y + 1)
    rng = np.random.default_rng(0)
    xs = np.concatenate([rng.normal(size=50) * 10.0 ** rng.integers(-20, 20, 50), [0, np.inf, -np.inf, np.nan, 1e308]])
    ys = np.concatenate([rng.normal(size=50), [0, 1, np.inf, 0, 1e308]])
    with np.errstate(all="ignore"):
        expected = (xs - 2 * ys) / (xs + ys + 1)
    (value, _) = sg.function([x, y], [q, sg.grad(sg.sum(q), x)], backend=backend)(xs, ys)
    np.testing.assert_array_equal(value[:-1], expected[:-1])
    # at x = y = 1e308 the written -inf/inf is NaN; the wide-range rescue evaluates it as -1e308/2e308
    assert np.isnan(expected[-1]) and value[-1] == -0.5


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_matches_the_analytic_one_on_every_backend(backend):
    x, y = sg.vector("x"), sg.vector("y")
    q = (x - y) / (x + y)
    xs, ys = np.array([1.0, 1e10, 3.0, -2.0]), np.array([1e-12, 1.0, 3.0, 1.0])
    gx, gy = sg.function([x, y], sg.grad(sg.sum(q), [x, y]), backend=backend)(xs, ys)
    np.testing.assert_allclose(gx, 2 * ys / (xs + ys) ** 2, rtol=1e-15)
    np.testing.assert_allclose(gy, -2 * xs / (xs + ys) ** 2, rtol=1e-15)


def test_an_overflowed_denominator_gives_the_written_gradient_not_nan():
    """Where c = hi - lo overflows the cancelled numerator (hi - lo again) overflows too: inf/inf
    would be NaN, so the quotient rule's partials (0 here) are taken as written."""
    x, lo, hi = sg.vector("x"), sg.vector("lo"), sg.vector("hi")
    q = (x - lo) / (hi - lo)
    args = (np.array([1.0, 2.0]), np.array([-1.5e308, 0.0]), np.array([1.5e308, 4.0]))
    ours = sg.function([x, lo, hi], sg.grad(sg.sum(q), [x, lo, hi]))(*args)
    written = sg.function([x, lo, hi], sg.grad(sg.sum(q), [x, lo, hi], recognition=False))(*args)
    for g, w in zip(ours, written):
        assert np.isfinite(g).all()
        assert g[0] == w[0] == 0.0
    np.testing.assert_allclose([g[1] for g in ours], [1 / 4.0, (2.0 - 4.0) / 16, -2.0 / 16], rtol=1e-15)


def test_nan_inputs_keep_a_nan_gradient():
    x, y = sg.vector("x"), sg.vector("y")
    q = (x - y) / (x + y)
    gx, gy = sg.function([x, y], sg.grad(sg.sum(q), [x, y]))(np.array([np.nan, 1.0]), np.array([1.0, np.nan]))
    assert np.isnan(gx).all() and np.isnan(gy).all()


def test_terms_that_are_computed_values_pass_their_gradient_on():
    """(1 + w)/(2 + w) with w = u·u: the term w gets g/(2 + w)², and u its share through the product."""
    u = sg.vector("u")
    w = u * u
    q = (1 + w) / (2 + w)
    assert _fired(q)
    us = np.array([1e9, 3.0, -1e12])
    (g,) = sg.function([u], [sg.grad(sg.sum(q), u)])(us)
    exact = _exact_gradient(lambda t: (1 + t * t) / (2 + t * t), [(v,) for v in us])[:, 0]
    np.testing.assert_allclose(g, exact, rtol=1e-14)


def test_broadcast_terms_get_their_own_shape_and_dtype():
    x = sg.matrix("x", dtype="float32")
    b = sg.vector("b", dtype="float32")
    q = (x - b) / (x + b)
    gx, gb = sg.grad(sg.sum(q), [x, b])
    xs = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
    bs = np.array([1e-6, 2.0, 0.5], dtype=np.float32)
    got_x, got_b = sg.function([x, b], [gx, gb])(xs, bs)
    assert got_x.shape == xs.shape and got_b.shape == bs.shape
    assert got_x.dtype == got_b.dtype == np.float32
    x64, b64 = xs.astype(np.float64), bs.astype(np.float64)
    np.testing.assert_allclose(got_x, 2 * b64 / (x64 + b64) ** 2, rtol=2e-6)
    np.testing.assert_allclose(got_b, np.sum(-2 * x64 / (x64 + b64) ** 2, axis=0), rtol=2e-6)


def test_second_derivatives_are_those_of_the_quotient():
    x = sg.vector("x")
    y = sg.vector("y")
    q = sg.sum((x - y) / (x + y))
    gx = sg.grad(q, x)
    hxx, hxy = sg.grad(sg.sum(gx), [x, y])
    xs, ys = np.array([1.0, 2.0]), np.array([0.5, 3.0])
    got_xx, got_xy = sg.function([x, y], [hxx, hxy])(xs, ys)
    np.testing.assert_allclose(got_xx, -4 * ys / (xs + ys) ** 3, rtol=1e-14)
    np.testing.assert_allclose(got_xy, 2 * (xs - ys) / (xs + ys) ** 3, rtol=1e-14)


@pytest.mark.parametrize(
    "formula",
    [
        lambda x, y: x / (y + 1),  # no shared term: no sum to cancel
        lambda x, y: x / (x * y + 1),  # x·y is a term of its own, not x
        lambda x, y: (x + np.inf) / (x + 1),  # a non-finite constant
    ],
    ids=["no_shared_term", "product_is_its_own_term", "infinite_constant"],
)
def test_near_misses_do_not_fire(formula):
    x, y = sg.vector("x"), sg.vector("y")
    assert not _fired(formula(x, y))


def test_a_zero_factor_keeps_its_product_as_a_term():
    """0·y is NaN where y is infinite: it stays a term (with y's gradient through it), not dropped."""
    x, y = sg.vector("x"), sg.vector("y")
    q = (x + 0 * y) / (x - y)
    (node,) = [n for n in toposort(recognise([q])) if isinstance(n.op, AffineQuotient)]
    assert len(node.inputs) == 2 + 3  # a, c, and the terms x, 0·y, y
    gx, gy = sg.function([x, y], sg.grad(sg.sum(q), [x, y]))(np.array([1.0, 2.0]), np.array([np.inf, 1.0]))
    assert np.isnan(gy[0]) and np.isnan(gx[0])
    np.testing.assert_allclose([gx[1], gy[1]], [-1.0, 2.0], rtol=1e-15)


def test_integer_terms_do_not_fire():
    x = sg.vector("x", dtype="int64")
    assert not _fired((x - 1) / (x + 1))


def test_values_compile_without_it_and_explain_names_it():
    x, y = sg.vector("x"), sg.vector("y")
    q = (x - y) / (x + y)
    assert not any(isinstance(n.op, AffineQuotient) for n in toposort(optimize([q])))
    text = sg.function([x, y], sg.grad(sg.sum(q), [x, y])).explain()
    assert f"1 quotient(s): gradient taken with the shared terms cancelled   [{RULE}]" in text


def test_recognition_of_a_quotient_still_comes_first():
    """log((1 + x)/(1 - x)) is read as log1p(x) - log1p(-x) before the quotient could be wrapped."""
    x = sg.vector("x")
    text = sg.explain(sg.grad(sg.sum(sg.log((1 + x) / (1 - x))), x))
    assert "log1p_difference_from_log_of_ratio" in text
    assert RULE not in text


# -- products of affine forms ----------------------------------------------------------------------------------
PRODUCT = "affine_product_gradient"


def _fired_product(output) -> bool:
    return any(isinstance(n.op, AffineProduct) for n in toposort(recognise([output])))


@pytest.mark.parametrize(
    "formula, dx, dy",
    [
        (lambda x, y: (x + y) * (x - y), lambda x, y: 2 * x, lambda x, y: -2 * y),
        (lambda x, y: (x - 1) * (x + 1) + 0 * y, lambda x, y: 2 * x, lambda x, y: 0 * y),
        (lambda x, y: (2 * x + y) * (x - y / 2), lambda x, y: 4 * x, lambda x, y: -y),
    ],
    ids=["difference_of_squares", "shifted_by_constants", "scaled_terms"],
)
@pytest.mark.parametrize("backend", BACKENDS)
def test_product_gradient_keeps_its_digits_where_the_product_rule_cancels(formula, dx, dy, backend):
    x, y = sg.vector("x"), sg.vector("y")
    p = formula(x, y)
    assert _fired_product(p)
    xs, ys = np.array([1e-20, 3.0, -2e-12, 1e10]), np.array([1.0, 2.0, 5.0, 1e-3])
    cost = sg.sum(p)
    gx, gy = sg.function([x, y], sg.grad(cost, [x, y], disconnected="zero"), backend=backend)(xs, ys)
    np.testing.assert_allclose(gx, dx(xs, ys), rtol=1e-15)
    np.testing.assert_allclose(gy, dy(xs, ys), rtol=1e-15, atol=0)
    written = sg.function([x, y], sg.grad(cost, [x, y], recognition=False, disconnected="zero"))(xs, ys)
    assert np.max(np.abs(written[0] - dx(xs, ys)) / np.abs(dx(xs, ys))) > 1e-6  # as written it cancels


def test_product_value_is_the_written_product_bit_for_bit():
    x, y = sg.vector("x"), sg.vector("y")
    p = (x + 2 * y) * (x - y)
    rng = np.random.default_rng(1)
    xs = np.concatenate([rng.normal(size=40) * 1e5, [0.0, np.inf, np.nan, 1e308]])
    ys = np.concatenate([rng.normal(size=40), [1.0, 0.0, 1.0, -1e308]])
    with np.errstate(all="ignore"):
        expected = (xs + 2 * ys) * (xs - ys)
    value, _ = sg.function([x, y], [p, sg.grad(sg.sum(p), x)])(xs, ys)
    np.testing.assert_array_equal(value, expected)


def test_an_infinite_factor_gives_the_product_rule_s_partials():
    """(x + y)(x - y) at x = y = 1e308: x + y overflows, and the product rule's (x - y) + (x + y) = inf is kept."""
    x, y = sg.vector("x"), sg.vector("y")
    p = (x + y) * (x - y)
    args = (np.array([1e308, 2.0]), np.array([1e308, 1.0]))
    with np.errstate(all="ignore"):
        ours = sg.function([x, y], sg.grad(sg.sum(p), [x, y]))(*args)
        written = sg.function([x, y], sg.grad(sg.sum(p), [x, y], recognition=False))(*args)
    for g, w in zip(ours, written):
        np.testing.assert_array_equal(g[0], w[0])
    np.testing.assert_array_equal([ours[0][1], ours[1][1]], [4.0, -2.0])


@pytest.mark.parametrize(
    "formula",
    [
        lambda x, y: x * (x + 1),  # x's parts, (x + 1) + x, hold nothing that cancels
        lambda x, y: (x + y) * (x + y),
        lambda x, y: 2 * (x + y),  # a constant factor
        lambda x, y: x * y,  # no shared term
    ],
    ids=["nothing_cancels", "a_square", "constant_factor", "no_shared_term"],
)
def test_products_whose_parts_cannot_cancel_keep_the_product_rule(formula):
    x, y = sg.vector("x"), sg.vector("y")
    assert not _fired_product(formula(x, y))


def test_product_second_derivatives():
    x, y = sg.vector("x"), sg.vector("y")
    gx = sg.grad(sg.sum((x + y) * (x - y) * x), x)
    hxx, hxy = sg.grad(sg.sum(gx), [x, y])
    xs, ys = np.array([1.0, -2.0]), np.array([0.5, 3.0])
    got_xx, got_xy = sg.function([x, y], [hxx, hxy])(xs, ys)
    np.testing.assert_allclose(got_xx, 6 * xs, rtol=1e-15)
    np.testing.assert_allclose(got_xy, -2 * ys, rtol=1e-15)


def test_a_polynomial_difference_cancels_the_products_a_and_b_share():
    x, e, y = sg.vector("x"), sg.vector("e"), sg.vector("y")
    # -(1 - e)·x - -(1 + e)·x is 2·e·x: written, 1 ± e rounds to 1 below e = 1e-16 and the difference is 0
    d = polynomial_difference(-((1.0 - e) * x), -((1.0 + e) * x))
    assert d is not None
    value = sg.function([x, e], d)(np.array([3.0, -2.0]), np.array([1e-300, 0.25]))
    np.testing.assert_array_equal(value, [6e-300, -1.0])
    assert polynomial_form(-((1.0 - e) * x)) is not None and len(polynomial_form(-((1.0 - e) * x))) == 2
    # nothing shared, or nothing that cancels: no difference to sum
    assert polynomial_difference(2.0 * x, 3.0 * x) is None
    assert polynomial_difference(x * e, y) is None
    # all of it cancels: a - b is 0 where both are finite, not a formula of its own
    assert polynomial_difference((x + e) * y, y * (e + x)) is None
    # degree three, or a coefficient that would round: no form
    assert polynomial_form(x * x * x) is None
    assert polynomial_difference(0.1 * x + 0.2 * x + e, e) is None  # 0.1 + 0.2 exactly is no float
