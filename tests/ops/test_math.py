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
    Spec("erf", sg.erf, sps.erf, (REAL,), (m.Erf,), int_domains=(small_integers(-3, 3),)),
    Spec("erfc", sg.erfc, sps.erfc, (REAL,), (m.Erfc,)),
    Spec("erfcx", m.erfcx, sps.erfcx, (REAL,), (m.Erfcx,)),
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
    ("erf", sg.erf, mpmath.erf, -5.0, 5.0),
    ("erfc", sg.erfc, mpmath.erfc, -3.0, 12.0),
    # erfcx' = 2x erfcx(x) - 2/√π cancels as x grows (relative error 2x²·eps): from 8 on the
    # derivative is its asymptotic series; between 5 and 8 the second derivative keeps ~2e-12
    ("erfcx", m.erfcx, _mp_erfcx, -3.0, 5.0),
    ("erfcx_far", m.erfcx, _mp_erfcx, 8.0, 1e4),
    ("gammaln", sg.gammaln, _mp_gammaln, 0.05, 50.0),
    ("digamma", sg.digamma, mpmath.digamma, 0.05, 50.0),
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


def test_power_with_a_zero_cotangent_contributes_zero_where_the_power_overflows():
    c, y = sg.scalar("c"), sg.scalar("y")
    out = c * y**400.0  # at c = 0 the cost does not vary with y, though y**399 overflows
    gc, gy = sg.function([c, y], sg.grad(out, [c, y]))(0.0, 10.0)
    assert gy == 0.0 and gc == np.inf  # 10**400 is past the float64 range: inf is its value
    gc, gy = sg.function([c, y], sg.grad(out, [c, y]))(2.0, 0.5)
    np.testing.assert_allclose([gc, gy], [0.5**400, 2.0 * 400 * 0.5**399], rtol=1e-14)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 3.0, np.int64(3), "int32 constant", "input"])
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
