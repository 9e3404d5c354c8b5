"""Exponentials, logarithms, trigonometric and special functions (stablegrad.ops.math).

The spec table checks value against NumPy/SciPy and the pullback against finite
differences (first and second order) over broadcast-free hypothesis shapes; the mpmath
table checks value, first and second derivative at 30 digits, including tails where
float64 finite differences cannot resolve the derivative (erfc(10) ~ 2e-45).
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import scipy.special as sps
from hypothesis import given
from hypothesis import strategies as st

import stablegrad as sg
from stablegrad.ops import math as m

from .helpers import (
    BACKEND,
    INTS,
    Spec,
    broadcastable,
    check_float32_pullback,
    check_pullback,
    check_value,
    float32_examples,
    pullback_examples,
    seeds,
    small_integers,
    two_sided,
    uniform,
    value_examples,
)

REAL = uniform(-3, 3)
POSITIVE = uniform(0.2, 5)
GAMMA_DOMAIN = uniform(0.5, 6)


def _negative_off_poles(rng, shape, dtype):
    """Negative non-integers, n + U(0.2, 0.8): gammaln and digamma are smooth there."""
    return np.asarray(rng.integers(-4, -1, shape, endpoint=True) + rng.uniform(0.2, 0.8, shape), dtype)


SPECS = [
    Spec(
        "power",
        lambda x, y: x**y,
        np.power,
        (uniform(0.5, 2), uniform(-2, 2)),
        (m.Power,),
        int_domains=(small_integers(-3, 3), small_integers(0, 3)),
    ),
    Spec("power_int_exponent", lambda x: x**3, lambda x: x**3, (REAL,), (m.Power,)),
    Spec("power_two", lambda x: x**2, lambda x: x**2, (REAL,), (m.Power,)),
    Spec("power_one", lambda x: x**1, lambda x: x**1, (REAL,), (m.Power,)),
    Spec("power_negative", lambda x: x**-2, lambda x: x**-2.0, (two_sided(0.5, 2),), (m.Power,)),
    Spec("power_half", lambda x: x**0.5, lambda x: x**0.5, (uniform(0.2, 3),), (m.Power,)),
    Spec("rpow", lambda x: 2.0**x, lambda x: 2.0**x, (REAL,), (m.Power,)),
    Spec("exp", sg.exp, np.exp, (REAL,), (m.Exp,), int_domains=(small_integers(-5, 5),)),
    Spec("exp2", sg.exp2, np.exp2, (REAL,), (m.Exp2,), int_domains=(small_integers(-5, 5),)),
    Spec("expm1", sg.expm1, np.expm1, (REAL,), (m.Expm1,)),
    Spec("log", sg.log, np.log, (POSITIVE,), (m.Log,), int_domains=(small_integers(1, 9),)),
    Spec("log2", sg.log2, np.log2, (POSITIVE,), (m.Log2,)),
    Spec("log10", sg.log10, np.log10, (POSITIVE,), (m.Log10,)),
    Spec("log1p", sg.log1p, np.log1p, (uniform(-0.8, 3),), (m.Log1p,)),
    Spec("sin", sg.sin, np.sin, (REAL,), (m.Sin,), int_domains=(small_integers(-5, 5),)),
    Spec("cos", sg.cos, np.cos, (REAL,), (m.Cos,)),
    Spec("tan", sg.tan, np.tan, (uniform(-1.2, 1.2),), (m.Tan,)),
    Spec("tanh", sg.tanh, np.tanh, (REAL,), (m.Tanh,)),
    Spec("sech_squared", lambda x: m.SechSquared()(x), lambda x: 1 / np.cosh(x) ** 2, (REAL,), (m.SechSquared,)),
    Spec("sinh", sg.sinh, np.sinh, (REAL,), (m.Sinh,)),
    Spec("cosh", sg.cosh, np.cosh, (REAL,), (m.Cosh,)),
    Spec("arctan", sg.arctan, np.arctan, (REAL,), (m.Arctan,)),
    Spec("arcsinh", sg.arcsinh, np.arcsinh, (REAL,), (m.Arcsinh,)),
    Spec("arccosh", sg.arccosh, np.arccosh, (uniform(1.1, 30),), (m.Arccosh,)),
    Spec("arctanh", sg.arctanh, np.arctanh, (uniform(-0.9, 0.9),), (m.Arctanh,)),
    Spec("erf", sg.erf, sps.erf, (REAL,), (m.Erf,), int_domains=(small_integers(-3, 3),)),
    Spec("erfc", sg.erfc, sps.erfc, (REAL,), (m.Erfc,)),
    Spec("erfcx", sg.erfcx, sps.erfcx, (REAL,), (m.Erfcx,)),
    Spec("ndtr", sg.ndtr, sps.ndtr, (REAL,), (m.Ndtr,), int_domains=(small_integers(-3, 3),)),
    Spec("ndtri", sg.ndtri, sps.ndtri, (uniform(0.1, 0.9),), (m.Ndtri,)),  # finite differences step 1e-3
    Spec(
        "betaln",
        sg.betaln,
        sps.betaln,
        (POSITIVE, POSITIVE),
        (m.Betaln,),
        int_domains=(small_integers(1, 6), small_integers(1, 6)),
    ),
    Spec(
        "digamma_difference",
        lambda a, b: m.DigammaDifference()(a, b),
        lambda a, b: sps.digamma(a) - sps.digamma(a + b),
        (POSITIVE, POSITIVE),
        (m.DigammaDifference,),
    ),
    # the modified Bessel functions at a fixed order (their gradient in the order is NaN: not derived)
    Spec("kv", lambda x: sg.kv(1.5, x), lambda x: sps.kv(1.5, x), (POSITIVE,), (m.Kv,)),
    Spec("kve", lambda x: sg.kve(0.3, x), lambda x: sps.kve(0.3, x), (POSITIVE,), (m.Kve,)),
    Spec("iv", lambda x: sg.iv(2.0, x), lambda x: sps.iv(2.0, x), (REAL,), (m.Iv,)),
    Spec("ive", lambda x: sg.ive(0.7, x), lambda x: sps.ive(0.7, x), (POSITIVE,), (m.Ive,)),
    Spec("gammaln", sg.gammaln, sps.gammaln, (GAMMA_DOMAIN,), (m.Gammaln,), int_domains=(small_integers(1, 9),)),
    Spec("gammaln_negative", sg.gammaln, sps.gammaln, (_negative_off_poles,), (m.Gammaln,)),
    Spec("digamma", sg.digamma, sps.digamma, (GAMMA_DOMAIN,), (m.Polygamma,)),
    Spec("digamma_negative", sg.digamma, sps.digamma, (_negative_off_poles,), (m.Polygamma,)),
    *(
        Spec(
            f"polygamma_{n}",
            lambda x, n=n: sg.polygamma(n, x),
            lambda x, n=n: sps.polygamma(n, x),
            (GAMMA_DOMAIN,),
            (m.Polygamma,),
        )
        for n in (1, 2, 3)
    ),
]

COVERED = {op for spec in SPECS for op in spec.ops}


def _dtypes(spec: Spec) -> tuple[str, ...]:
    return spec.dtypes + (INTS if spec.int_domains else ())


@pytest.mark.parametrize("spec", SPECS, ids=str)
@given(data=st.data())
@value_examples
def test_math_value(spec, data):
    shapes = data.draw(broadcastable(spec.nargs)).input_shapes
    dtype = data.draw(st.sampled_from(_dtypes(spec)))
    check_value(spec, shapes, data.draw(seeds), dtype, data.draw(st.booleans()))


@pytest.mark.parametrize("spec", SPECS, ids=str)
@given(data=st.data())
@pullback_examples
def test_math_pullback(spec, data):
    check_pullback(spec, data.draw(broadcastable(spec.nargs)).input_shapes, data.draw(seeds), data.draw(st.booleans()))


@pytest.mark.parametrize("spec", SPECS, ids=str)
@given(data=st.data())
@float32_examples
def test_math_pullback_float32(spec, data):
    check_float32_pullback(spec, data.draw(broadcastable(spec.nargs)).input_shapes, data.draw(seeds))


# -- against mpmath at 30 digits: value, first and second derivative ------------------------------
def _mp_erfcx(x):
    return mpmath.exp(x * x) * mpmath.erfc(x)


def _mp_gammaln(x):
    return mpmath.log(abs(mpmath.gamma(x)))


def _mp_ndtri(p):
    """Φ⁻¹(p) by Newton on log Φ, from SciPy's float64 answer (mpmath has no inverse normal CDF);
    the upper half by symmetry, where log Φ is too flat for the secant steps."""
    if p > 0.5:
        return -_mp_ndtri(1 - p)
    return mpmath.findroot(lambda y: mpmath.log(mpmath.ncdf(y)) - mpmath.log(p), float(sps.ndtri(float(p))))


MPMATH = [
    # (name, stablegrad function, mpmath function, lo, hi)
    ("exp", sg.exp, mpmath.exp, -30.0, 30.0),
    ("exp2", sg.exp2, lambda x: mpmath.power(2, x), -30.0, 30.0),
    ("expm1", sg.expm1, mpmath.expm1, -50.0, 5.0),  # the derivative must not be (out + 1)
    ("log", sg.log, mpmath.log, 1e-3, 1e3),
    ("log2", sg.log2, lambda x: mpmath.log(x, 2), 1e-3, 1e3),
    ("log10", sg.log10, mpmath.log10, 1e-3, 1e3),
    ("log1p", sg.log1p, mpmath.log1p, -0.999, 1e-3),
    ("sin", sg.sin, mpmath.sin, -3.0, 3.0),
    ("cos", sg.cos, mpmath.cos, -3.0, 3.0),
    ("tan", sg.tan, mpmath.tan, -1.5, 1.5),
    ("tanh", sg.tanh, mpmath.tanh, -30.0, 30.0),  # nor 1 - tanh², which cancels for |x| > 1
    ("sinh", sg.sinh, mpmath.sinh, -20.0, 20.0),
    ("cosh", sg.cosh, mpmath.cosh, -20.0, 20.0),
    ("arctan", sg.arctan, mpmath.atan, -50.0, 50.0),
    ("arcsinh", sg.arcsinh, mpmath.asinh, -50.0, 50.0),
    ("arccosh", sg.arccosh, mpmath.acosh, 1.01, 1e3),
    ("arctanh", sg.arctanh, mpmath.atanh, -0.999, 0.999),
    ("erf", sg.erf, mpmath.erf, -5.0, 5.0),
    ("erfc", sg.erfc, mpmath.erfc, -3.0, 12.0),
    # erfcx' = 2x erfcx(x) - 2/√π cancels as x grows (relative error 2x²·eps): from 8 on the
    # derivative is its asymptotic series; between 5 and 8 the second derivative keeps ~2e-12
    ("erfcx", m.erfcx, _mp_erfcx, -3.0, 5.0),
    ("erfcx_far", m.erfcx, _mp_erfcx, 8.0, 1e4),
    ("gammaln", sg.gammaln, _mp_gammaln, 0.05, 50.0),
    ("ndtr", sg.ndtr, mpmath.ncdf, -37.0, 8.0),  # the density unrounded: φ(-37) ≈ 5.7e-298 to 1e-12
    ("ndtri", sg.ndtri, _mp_ndtri, 0.01, 0.99),
    ("betaln", lambda x: sg.betaln(x, 2.5), lambda x: mpmath.log(mpmath.beta(x, 2.5)), 0.1, 50.0),
    ("digamma", sg.digamma, mpmath.digamma, 0.05, 50.0),
    (
        "digamma_difference",
        lambda x: m.DigammaDifference()(x, sg.constant(2.5)),
        lambda x: mpmath.digamma(x) - mpmath.digamma(x + 2.5),
        0.1,
        50.0,
    ),
    ("kv", lambda x: sg.kv(1.5, x), lambda x: mpmath.besselk(1.5, x), 0.1, 50.0),
    # (the scaled functions' derivatives are differences of nearly equal terms for large x:
    # 1e-10 relative in the second derivative at x = 600, see Kve's docstring)
    ("kve", lambda x: sg.kve(0.3, x), lambda x: mpmath.besselk(0.3, x) * mpmath.exp(x), 0.1, 20.0),  # 1e-11 at 48
    ("iv", lambda x: sg.iv(2.5, x), lambda x: mpmath.besseli(2.5, x), 0.1, 50.0),
    ("ive", lambda x: sg.ive(1.0, x), lambda x: mpmath.besseli(1, x) * mpmath.exp(-x), 0.1, 20.0),  # 1e-12 at 47
    ("polygamma_1", lambda x: sg.polygamma(1, x), lambda x: mpmath.polygamma(1, x), 0.1, 50.0),
    ("polygamma_2", lambda x: sg.polygamma(2, x), lambda x: mpmath.polygamma(2, x), 0.1, 50.0),
]

_COMPILED: dict[str, sg.Function] = {}


def _value_and_derivatives(name, fn) -> sg.Function:
    """f(x), f'(x), f''(x) for an elementwise f, all as graph from sg.grad."""
    if name not in _COMPILED:
        x = sg.vector("x")
        y = fn(x)
        d1 = sg.grad(sg.sum(y), x)
        d2 = sg.grad(sg.sum(d1), x)
        _COMPILED[name] = sg.function([x], [y, d1, d2])
    return _COMPILED[name]


@pytest.mark.parametrize(("name", "fn", "mp_fn", "lo", "hi"), MPMATH, ids=[row[0] for row in MPMATH])
@given(points=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4))
@pullback_examples
def test_math_against_mpmath(name, fn, mp_fn, lo, hi, points):
    x = np.array([lo + (hi - lo) * t for t in points])
    value, d1, d2 = _value_and_derivatives(name, fn)(x)
    with mpmath.workdps(30):
        for i, xi in enumerate(x):
            point = mpmath.mpf(float(xi))
            expected = [float(mpmath.diff(mp_fn, point, k)) for k in range(3)]
            for order, got in enumerate((value[i], d1[i], d2[i])):
                assert np.isclose(got, expected[order], rtol=1e-12, atol=0), (
                    f"{name} order {order} at x={xi!r}: {got!r} vs mpmath {expected[order]!r}"
                )


@pytest.mark.parametrize(
    ("fn", "slope", "points"),
    [  # where a textbook derivative overflows (x² past 1e154) or cancels (x² - 1, 1 - x² at ±1)
        (sg.arcsinh, lambda x: 1 / mpmath.sqrt(1 + x * x), [-1e300, -1e200, -3e154, 1e-300, 2.0, 1e160, 1e300]),
        (sg.arccosh, lambda x: 1 / mpmath.sqrt(x * x - 1), [1.0 + 2**-52, 1.0 + 1e-10, 3.0, 1e160, 1e300]),
        (sg.arctanh, lambda x: 1 / (1 - x * x), [-(1.0 - 2**-53), -0.5, 1e-300, 1.0 - 2**-53]),
    ],
    ids=["arcsinh", "arccosh", "arctanh"],
)
def test_inverse_hyperbolic_derivatives_keep_their_accuracy_at_the_ends(fn, slope, points):
    x = sg.vector("x")
    f = sg.function([x], [fn(x), sg.grad(sg.sum(fn(x)), x)])
    value, d1 = f(np.array(points))
    with mpmath.workdps(60):
        expected = [float(slope(mpmath.mpf(p))) for p in points]
    np.testing.assert_allclose(d1, expected, rtol=4e-16)
    assert np.all(np.isfinite(value))


def test_inverse_hyperbolic_functions_outside_their_domains():
    x = sg.vector("x")
    outs = [sg.arccosh(x), sg.arctanh(x), sg.arcsinh(x)]
    with np.errstate(all="ignore"):
        acosh, atanh, asinh = sg.function([x], outs)(np.array([0.5, -1.0, 1.0, 2.0, np.inf, -np.inf, np.nan]))
    np.testing.assert_array_equal(np.isnan(acosh), [True, True, False, False, False, True, True])
    np.testing.assert_array_equal(atanh[1:4], [-np.inf, np.inf, np.nan])
    np.testing.assert_array_equal(asinh[4:6], [np.inf, -np.inf])


def test_the_power_rule_keeps_its_accuracy_and_its_zeros():
    x, y, c = sg.vector("x"), sg.vector("y"), sg.vector("c")
    f = sg.function([x, y, c], sg.grad(sg.sum(c * x**y), x))
    # x = 1e300, y = 1e-10: x**(y - 1) carries y - 1's rounding times |log x| (~700 ulps), out / x does not;
    # y = 1.65e229: the cotangent times y overflows, where the derivative y·x**(y-1) underflows to 0;
    # x = 1e-300, y = 1.5: out underflows, so x**(y - 1) itself
    X = np.array([1e300, 2.1e-143, 1e-300, 3.0, -2.0])
    Y = np.array([1e-10, 1.65e229, 1.5, 0.7, 3.0])
    C = np.array([1.0, -1.15e85, 1.0, 1.0, 1.0])
    got = f(X, Y, C)
    with mpmath.workdps(60):
        exact = [
            float(mpmath.mpf(c) * mpmath.mpf(b) * mpmath.power(mpmath.mpf(a), mpmath.mpf(b) - 1))
            for a, b, c in zip(X, Y, C)
        ]
    np.testing.assert_allclose(got, exact, rtol=4e-16, atol=0)
    assert got[1] == 0.0


def test_power_with_a_zero_cotangent_contributes_zero_where_the_power_overflows():
    c, y = sg.scalar("c"), sg.scalar("y")
    out = c * y**400.0  # at c = 0 the cost does not vary with y, though y**399 overflows
    gc, gy = sg.function([c, y], sg.grad(out, [c, y]))(0.0, 10.0)
    assert gy == 0.0 and gc == np.inf  # 10**400 is past the float64 range: inf is its value
    gc, gy = sg.function([c, y], sg.grad(out, [c, y]))(2.0, 0.5)
    np.testing.assert_allclose([gc, gy], [0.5**400, 2.0 * 400 * 0.5**399], rtol=1e-14)


@pytest.mark.parametrize("k", [0, 0.0, 1, 2, 3, 4, 3.0, np.int64(3), "int32 constant", "input"])
def test_integer_powers_at_zero_have_their_exact_derivatives(k):
    x = sg.scalar("x")
    inputs, args = [x], []
    if k == "int32 constant":
        k = sg.constant(np.int32(3))
    elif k == "input":
        k_in = sg.scalar("k")
        inputs, args, k = [x, k_in], [3.0], k_in
    y = x**k
    d1 = sg.grad(y, x)
    d2 = sg.grad(d1, x, disconnected="zero")
    n = 3 if not isinstance(k, int | float | np.integer) else int(k)
    exact = [1.0 if n == 1 else 0.0, 2.0 if n == 2 else 0.0]  # d/dx x^n and d²/dx² x^n at 0
    for zero in (0.0, -0.0):
        got = sg.function(inputs, [d1, d2])(zero, *args)
        assert [float(v) for v in got] == exact, f"x**{n} at {zero}: {got}"


# -- the normal distribution's tails, against mpmath: value, first and second derivative -----------------
def _mp_log_ndtr(x):
    return mpmath.log(mpmath.ncdf(x))


TAILS = [
    # (name, function, mpmath reference, points, rtol): where naive formulas under- or overflow.
    # ndtr: SciPy's own is off by 6e-14 at -30 (x/√2 rounded into erfc), ours by an ulp or two;
    # ndtri's slope 1/φ(y) inherits y's rounding times y² (1e-13 at p = 1e-300) from any formula in y
    ("ndtr", sg.ndtr, mpmath.ncdf, [-37.5, -30.0, -10.0, 5.0], 5e-15),
    ("ndtri", sg.ndtri, _mp_ndtri, [1e-300, 1e-100, 1e-10, 1 - 1e-12], 2e-13),
    ("log_ndtr", sg.log_ndtr, _mp_log_ndtr, [-1e5, -1e4, -1e3, -40.0, 30.0], 5e-15),
]


@pytest.mark.parametrize(("name", "fn", "mp_fn", "points", "rtol"), TAILS, ids=[row[0] for row in TAILS])
def test_normal_tails_against_mpmath(name, fn, mp_fn, points, rtol):
    x = np.array(points)
    got = _value_and_derivatives(f"tail_{name}", fn)(x)
    with mpmath.workdps(60):
        for i, xi in enumerate(points):
            point = mpmath.mpf(xi)
            step = abs(point) * mpmath.mpf("1e-20")  # relative: an absolute step would leave (0, 1) at 1e-300
            for order in range(3):
                expected = float(mpmath.diff(mp_fn, point, order, h=step))
                if not np.isfinite(expected) or abs(expected) < 1e-300:  # past the float64 range
                    continue
                assert np.isclose(got[order][i], expected, rtol=rtol, atol=0), (
                    f"{name} order {order} at {xi!r}: {got[order][i]!r} vs mpmath {expected!r}"
                )


def test_ndtr_underflows_to_zero_and_ndtri_reaches_the_ends():
    x = sg.vector("x")
    f = sg.function([x], [sg.ndtr(x), sg.grad(sg.sum(sg.ndtr(x)), x)])
    value, slope = f(np.array([-40.0, -np.inf, np.inf]))
    assert value.tolist() == [0.0, 0.0, 1.0] and slope.tolist() == [0.0, 0.0, 0.0]  # Φ(-40) ≈ 3.7e-350
    if BACKEND != "jax":  # (XLA flushes subnormals to zero)
        (subnormal,), _ = f(np.array([-38.0]))  # SciPy's ndtr flushes it to 0
        assert np.isclose(subnormal, float(mpmath.ncdf(-38)), rtol=1e-6, atol=0)
    p = sg.vector("p")
    g = sg.function([p], [sg.ndtri(p), sg.grad(sg.sum(sg.ndtri(p)), p)])
    value, slope = g(np.array([0.0, 1.0, 0.5]))
    assert value.tolist() == [-np.inf, np.inf, 0.0]
    assert slope[0] == slope[1] == np.inf and np.isclose(slope[2], np.sqrt(2 * np.pi), rtol=1e-15)


@pytest.mark.parametrize(
    ("a", "b"), [(1e10, 1.5), (1e6, 0.7), (20.0, 1e-5), (0.5, 1e-5), (3.0, -2.5), (1e-300, 1e-300)]
)
def test_betaln_gradient_does_not_cancel_against_mpmath(a, b):
    """ψ(a) - ψ(a + b), two digammas that cancel where b is small against a (5.8e-6 relative at
    (1e10, 1.5), 9e-13 at (0.5, 1e-5) as SciPy's digammas give it): 1e-14 here, in both arguments."""
    x, y = sg.scalar("x"), sg.scalar("y")
    f = sg.function([x, y], sg.grad(sg.betaln(x, y), [x, y]) if a + b > 0 and b > 0 else [m.DigammaDifference()(x, y)])
    with mpmath.workdps(80):
        a_, b_ = mpmath.mpf(a), mpmath.mpf(b)
        expected = [mpmath.digamma(a_) - mpmath.digamma(a_ + b_), mpmath.digamma(b_) - mpmath.digamma(a_ + b_)]
    got = f(a, b)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, float(e), rtol=1e-14)


@pytest.mark.parametrize(("a", "b"), [(0.13986835678120813, 973598.786496438), (1e6, 0.7), (1e10, 1.5), (20.0, 1e-5)])
def test_betaln_with_a_large_argument_against_mpmath(a, b):
    """Where log Γ(a) - log Γ(a + b) cancels (SciPy's betaln keeps 3e-8 at the first point): 1e-13 here."""
    x, y = sg.vector("x"), sg.vector("y")
    got = sg.function([x, y], sg.betaln(x, y))(np.array([a, b]), np.array([b, a]))
    with mpmath.workdps(50):
        expected = float(mpmath.log(mpmath.beta(mpmath.mpf(a), mpmath.mpf(b))))
    np.testing.assert_allclose(got, [expected, expected], rtol=1e-13)
