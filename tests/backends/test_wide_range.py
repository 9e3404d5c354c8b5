"""Entries that left the float range on the way: the wide numbers against mpmath, and what
`sg.function` does with them (backends/wide_range.py)."""

import mpmath as mp
import numpy as np
import pytest

import stablegrad as sg
from stablegrad.backends import wide_range as wr

mp.mp.dps = 60


@pytest.fixture(autouse=True)
def _quiet():
    with np.errstate(all="ignore"):  # as the rescue runs them: out-of-range floats on the way are the point
        yield


def _wide(p: float, q: float) -> wr.Wide:
    """p·q as a wide number (out of the float range for most of the products below)."""
    return wr.multiply(wr.wide(np.array([p])), wr.wide(np.array([q])))


def _exact(w: wr.Wide) -> mp.mpf:
    m, e = w
    return mp.ldexp(mp.mpf(float(m[0])), int(e[0]))


def _ulps(got: wr.Wide, want: mp.mpf) -> float:
    """|got - want| in ulps of want, both wide (no range: 1e400 is 1e400)."""
    if want == 0:
        return 0.0 if got[0][0] == 0 else np.inf
    return float(abs(_exact(got) - want) / abs(want) * 2**52)


PAIRS = [(1e200, 3e250), (-2e300, 7e100), (1e-200, 3e-250), (-5e-300, 1e-100), (3.0, 7.0), (1e300, 1e-300)]


@pytest.mark.parametrize("p, q", PAIRS)
def test_arithmetic_rounds_once_where_floats_would_overflow(p, q):
    a, b = _wide(p, q), _wide(q, 1.5)
    x, y = _exact(a), _exact(b)
    assert _ulps(a, mp.mpf(p) * q) <= 0.5
    assert _ulps(wr.divide(a, b), x / y) <= 0.5
    assert _ulps(wr.add(a, b), x + y) <= 0.5
    assert _ulps(wr.subtract(a, b), x - y) <= 0.5
    if x > 0:
        assert _ulps(wr.square_root(a), mp.sqrt(x)) <= 0.5


@pytest.mark.parametrize("p, q", PAIRS)
def test_functions_against_mpmath(p, q):
    a = _wide(p, q)
    x = _exact(a)
    if x > 0:
        assert _ulps(wr.log(a), mp.log(x)) <= 2
        assert _ulps(wr.log1p(a), mp.log1p(x)) <= 2
    small = _wide(p / abs(p) * 600.0, 1.5 if abs(q) > 1 else 1e-9)  # ±900, or ±6e-7
    s = _exact(small)
    for f, ref in [(wr.exp, mp.exp), (wr.expm1, mp.expm1), (wr.sinh, mp.sinh), (wr.cosh, mp.cosh)]:
        assert _ulps(f(small), ref(s)) <= 2, f.__name__
    assert _ulps(wr.sech_squared(small), mp.sech(s) ** 2) <= 4
    assert _ulps(wr.sech(small), mp.sech(s)) <= 2


def test_power_of_wide_numbers():
    for base, y in [((1e200, 1e200), 0.5), ((1e-200, 1e-200), 1.5), ((-1e200, 1e200), 3.0), ((1e300, 1e10), -2.0)]:
        a = _wide(*base)
        got = wr.power(a, wr.wide(np.array([y])))
        want = mp.power(_exact(a), y)
        assert _ulps(got, want) <= 2**11, (base, y)  # 2^(y·log₂|x|): |y·log₂|x|| ulps of the exponent
    assert np.isnan(wr.power(_wide(-1e200, 1e200), wr.wide(np.array([0.5])))[0][0])  # a negative to 1/2
    assert wr.narrow(wr.power(wr.wide(np.array([2.0])), wr.wide(np.array([0.5]))))[0] == np.sqrt(2.0)


def test_the_edges_keep_their_meaning():
    inf, nan = np.inf, np.nan
    a = wr.wide(np.array([inf, -inf, nan, 0.0, 0.0, inf]))
    b = wr.wide(np.array([inf, 1.0, 1.0, inf, 0.0, 0.0]))
    np.testing.assert_array_equal(wr.narrow(wr.add(a, b)), [inf, -inf, nan, inf, 0.0, inf])
    np.testing.assert_array_equal(wr.narrow(wr.multiply(a, b)), [inf, -inf, nan, nan, 0.0, nan])
    np.testing.assert_array_equal(wr.narrow(wr.subtract(a, a)), [nan, nan, nan, 0.0, 0.0, nan])
    np.testing.assert_array_equal(wr.narrow(wr.exp(a)), [inf, 0.0, nan, 1.0, 1.0, inf])
    np.testing.assert_array_equal(wr.narrow(wr.log(wr.wide(np.array([-1.0, 0.0, inf])))), [nan, -inf, inf])


def test_an_exponent_past_every_range_is_inf_or_zero_not_a_cancelling_number():
    # exp(1e400) has an exponent of 1.4e400, itself past float64: it is inf, and inf·0 NaN, never 1
    big = _wide(1e200, 1e200)
    assert np.isnan(wr.narrow(wr.multiply(wr.exp(big), wr.exp(wr.negative(wr.add(big, big)))))[0])
    far = wr.exp(wr.wide(np.array([7e299])))  # 2^(1.01e300): past the exponents kept
    assert np.isinf(far[0][0]) and np.isnan(wr.narrow(wr.multiply(far, wr.exp(wr.wide(np.array([-7e299])))))[0])
    near = wr.exp(wr.wide(np.array([-6e5])))  # e^(-6e5)·e^(6e5 - 1) = 1/e, to the roundings of two exps
    product = wr.narrow(wr.multiply(near, wr.exp(wr.wide(np.array([6e5 - 1.0])))))[0]
    np.testing.assert_allclose(product, np.exp(-1.0), rtol=4e-16)


# -- in sg.function ----------------------------------------------------------------------------------------------
def _grad(f, *xs):
    return sg.grad(sg.sum(f(*xs)), list(xs))


def test_a_gradient_that_meets_zero_times_inf_is_its_value():
    # d/dt exp(-t²)·t³ = (3t² - 2t⁴)·exp(-t²): written, the cotangent of exp is t³ = inf at t = 1e103
    t = sg.vector("t")
    f = sg.function([t], [sg.exp(-t * t) * (t * t * t), *_grad(lambda t: sg.exp(-t * t) * (t * t * t), t)])
    value, grad = f(np.array([1e103, 2.0, 30.0]))
    np.testing.assert_array_equal(value[0], 0.0)
    assert grad[0] == 0.0
    np.testing.assert_allclose(grad[1], float((3 * 4 - 2 * 16) * mp.exp(-4)), rtol=1e-15)


def test_a_quotient_of_overflowed_sinh_is_its_limit():
    # GERG's -n·t²/sinh(t·τ)², t = θ·T: at t = 1e200 the quotient is inf/inf written, e^(-2e200)·… in fact
    n, theta, tau = sg.vector("n"), sg.vector("theta"), sg.vector("tau")

    def model(n, theta, tau):
        t = theta * 3.0
        s = sg.sinh(t * tau)
        return -n * (t * t) / (s * s)

    f = sg.function([n, theta, tau], [model(n, theta, tau), *_grad(model, n, theta, tau)])
    args = [np.array([1.5, 1.5]), np.array([1e200, 2.0]), np.array([0.5, 0.25])]
    outs = f(*args)
    for out in outs:
        assert out[0] == 0.0 or out[0] == -0.0
    n0, th, ta = (mp.mpf(a[1]) for a in args)
    want = -n0 * (3 * th) ** 2 / mp.sinh(3 * th * ta) ** 2
    np.testing.assert_allclose(outs[0][1], float(want), rtol=1e-14)


def test_what_is_nan_for_its_domain_stays_nan():
    a, b = sg.vector("a"), sg.vector("b")
    product = a * b  # 1e400: out of range, but negative
    f = sg.function([a, b], [sg.log(-product) + sg.exp(-product * product), sg.sqrt(-product) / product])
    got = f(np.array([1e200, 1e200, -3.0]), np.array([1e200, 1e200, 3.0]))
    assert np.isnan(got[0][0]) and np.isnan(got[1][0])
    np.testing.assert_allclose(got[1][2], np.sqrt(9.0) / -9.0)


def test_an_op_without_a_wide_rule_gives_nan_for_an_operand_out_of_range():
    # gammaln(x)/x at x = 1e400 is about log(1e400) - 1, finite; gammaln has no wide rule, so the
    # rescue does not guess from gammaln(inf) = inf: the written NaN (inf/inf) stays
    a, b = sg.vector("a"), sg.vector("b")
    f = sg.function([a, b], sg.gammaln(a * b) / (a * b))
    got = f(np.array([1e200, 3.0]), np.array([1e200, 2.0]))
    assert np.isnan(got[0])
    np.testing.assert_allclose(got[1], np.log(120.0) / 6.0)  # log(5!)/6


def test_the_range_an_op_without_a_wide_rule_needs_is_its_dtype_s():
    # float32: a·b = 1e40 is a float64 but no float32, so gammaln (computed in float32) cannot take it
    a, b = sg.vector("a", dtype="float32"), sg.vector("b", dtype="float32")
    got = sg.function([a, b], sg.gammaln(a * b) / (a * b))(np.float32([1e20, 3.0]), np.float32([1e20, 2.0]))
    assert got.dtype == np.float32 and np.isnan(got[0])
    np.testing.assert_allclose(got[1], np.log(120.0) / 6.0, rtol=1e-6)


def test_entries_that_stayed_in_range_keep_their_bits():
    x, y = sg.vector("x"), sg.vector("y")
    out = x * y / (x + y) * sg.exp(-x)
    f = sg.function([x, y], out)
    written = sg.function([x, y], out, recognition=False)
    xs, ys = np.array([1e200, 0.3, 2.0, -1.0]), np.array([1e200, 0.7, 1e-300, 3.0])
    got, want = f(xs, ys), written(xs, ys)
    np.testing.assert_array_equal(got[1:], want[1:])
    assert np.isnan(want[0]) and got[0] == 0.0  # inf/inf·0 written, 5e199·e^(-1e200) = 0


def test_inputs_that_are_inf_or_nan_are_left_as_written():
    x = sg.vector("x")
    f = sg.function([x], sg.exp(-x) * x)
    np.testing.assert_array_equal(f(np.array([np.inf, np.nan, -np.inf])), [np.nan, np.nan, -np.inf])


def test_without_recognition_the_written_nan_stays():
    t = sg.vector("t")
    f = sg.function([t], sg.exp(-t * t) * (t * t * t), recognition=False)
    assert np.isnan(f(np.array([1e103]))[0])


def test_graphs_that_sum_or_broadcast_are_not_rescued():
    x, m = sg.vector("x"), sg.matrix("m")
    assert sg.function([x], sg.sum(sg.exp(-x * x) * (x * x * x)))._rescue is None
    # a vector broadcast along a matrix's rows: its gradient sums over them; at a call with
    # shapes that broadcast, nothing is rescued (the written NaN stays)
    f = sg.function([x, m], _grad(lambda x, m: sg.exp(-x * m) * (m * m * m), x, m))
    assert f._rescue is not None
    gx, gm = f(np.array([1e103, 1.0]), np.array([[1e103, 1.0], [2.0, 3.0]]))
    assert np.isnan(gx[0]) and np.isnan(gm[0, 0])
    # one row: as many entries as x, so no sum over a broadcast, and both gradients are rescued
    gx, gm = f(np.array([1e103, 1.0]), np.array([[1e103, 1.0]]))
    assert gx[0] == 0.0 and gm[0, 0] == 0.0 and gx.shape == (2,) and gm.shape == (1, 2)


def test_scalars_and_float32():
    t = sg.scalar("t", dtype="float32")
    f = sg.function([t], sg.exp(-t * t) * (t * t * t))
    got = f(np.float32(1e20))
    assert got.dtype == np.float32 and got == 0.0
    np.testing.assert_allclose(f(np.float32(2.0)), np.float32(8 * np.exp(-4.0)), rtol=1e-6)


@pytest.mark.parametrize("backend", ["numba", "jax"])
def test_the_other_backends_rescue_too(backend):
    pytest.importorskip(backend)
    t = sg.vector("t")
    out = [sg.exp(-t * t) * (t * t * t), *_grad(lambda t: sg.exp(-t * t) * (t * t * t), t)]
    value, grad = sg.function([t], out, backend=backend)(np.array([1e103, 2.0]))
    assert value[0] == 0.0 and grad[0] == 0.0
    np.testing.assert_allclose(grad[1], float((3 * 4 - 2 * 16) * mp.exp(-4)), rtol=1e-15)
