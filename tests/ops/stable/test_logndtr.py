"""log_ndtr: value, gradient and second derivative against mpmath in both tails, SciPy's
semantics at the edges, dtypes, backends and the reads contract."""

from __future__ import annotations

import functools

import mpmath as mp
import numpy as np
import pytest
import scipy.special

import stablegrad as sg
from stablegrad.ops.stable import LogNdtr

from .reference import check_reads, ulps_off

POINTS = [-1e150, -1e10, -1e5, -40.0, -38.6, -26.0, -10.0, -3.0, -1.0, -0.3, -1e-10, 0.0]
POINTS += [1e-300, 1e-10, 0.3, 1.0, 3.0, 8.3, 10.0, 20.0, 37.0, 38.4, 1e5, 1e300]
POINTS32 = [-1e5, -14.0, -13.3, -9.0, -3.0, -1.0, -1e-5, 0.0, 1e-5, 0.5, 2.0, 5.0, 9.0, 13.0, 1e5]


def _exact(x: float) -> tuple[float, float, float]:
    """(log Φ, φ/Φ, its derivative) at x, at a precision that covers x²."""
    with mp.workdps(60 + 2 * int(abs(mp.log10(abs(x) + 1)))):
        x = mp.mpf(x)
        if x > 1e4:  # Φ(-x), and so every answer, is below the smallest subnormal
            return -0.0, 0.0, 0.0
        if x < -1e4:  # mpmath's ncdf gives up here: the Mills-ratio series of Φ(x)/φ(x) instead
            u = 1 / (x * x)
            ratio = -sum((-1) ** k * mp.fac2(2 * k - 1) * u**k for k in range(10)) / x
            value = -x * x / 2 - mp.log(2 * mp.pi) / 2 + mp.log(ratio)
            slope = 1 / ratio
        else:
            phi = mp.ncdf(x) if x < 0 else 1 - mp.ncdf(-x)
            value = mp.log(phi) if x < 0 else mp.log1p(-mp.ncdf(-x))
            slope = mp.npdf(x) / phi
        return float(value), float(slope), float(-slope * (x + slope))


@functools.cache
def _compiled(dtype: str, backend: str = "numpy"):
    x = sg.vector("x", dtype=dtype)
    y = sg.log_ndtr(x)
    g = sg.grad(sg.sum(y), x)
    return sg.function([x], [y, g, sg.grad(sg.sum(g), x)], backend=backend)


@pytest.mark.parametrize(
    "dtype, points, ulps",
    [("float64", POINTS, (4, 4, 128)), ("float32", POINTS32, (2, 2, 128))],
    ids=["float64", "float32"],
)
def test_value_gradient_and_second_derivative_match_mpmath(dtype, points, ulps):
    x = np.array(points, dtype=dtype)
    got = _compiled(dtype)(x)
    exact = np.array([_exact(float(p)) for p in x]).T
    for label, g, e, limit in zip(("value", "gradient", "second derivative"), got, exact, ulps):
        assert g.dtype == np.dtype(dtype)
        assert np.all(np.isfinite(g)), (label, g)
        # (the second derivative inherits erfcx's derivative, 2t·erfcx(t) - 2/√π, which cancels up to t = 8)
        assert np.all(ulps_off(g, e, dtype) <= limit), (label, x[ulps_off(g, e, dtype) > limit], g, e)


def test_the_tails_as_the_brief_gives_them():
    value, grad, _ = _compiled("float64")(np.array([-40.0, 10.0, 38.0]))
    np.testing.assert_allclose(value, [_exact(-40.0)[0], _exact(10.0)[0], _exact(38.0)[0]], rtol=1e-15)
    assert value[2] < 0 and grad[1] > 0  # -Φ(-38) ≈ -2.9e-316 (subnormal) is kept, not rounded to 0


def test_agrees_with_scipy_and_its_edges():
    x = np.concatenate([np.linspace(-50, 50, 201), [-np.inf, np.inf, np.nan, -0.0]])
    value, grad, hess = _compiled("float64")(x)
    # (SciPy rounds x/√2 into erfc: 1.1e-13 off at x = 23.5, where this is 2 ulps from mpmath)
    # and SciPy flushes the subnormal -Φ(-38) = -2.9e-316 to 0
    np.testing.assert_allclose(value, scipy.special.log_ndtr(x), rtol=2e-13, atol=1e-300)
    assert abs(value[147] - _exact(23.5)[0]) <= 2 * np.spacing(abs(value[147]))
    np.testing.assert_array_equal(value[-4:-1], [-np.inf, 0.0, np.nan])
    np.testing.assert_array_equal(grad[-4:-1], [np.inf, 0.0, np.nan])  # φ/Φ: ~|x| far out, 0 far in
    assert hess[-3] == 0.0 and np.isnan(hess[-2])
    assert value[-1] == -np.log(2.0)


def test_reads_only_its_operand():
    check_reads(LogNdtr(), np.array([-30.0, -0.5, 0.0, 2.0, 40.0]))


def test_second_derivative_against_finite_differences():
    sg.testing.check_grads(sg.log_ndtr, [np.array([-7.0, -0.4, 0.2, 3.0])], order=2, rtol=1e-6)


def test_dtypes():
    h = sg.vector("h", dtype="float16")
    out = sg.function([h], sg.log_ndtr(h))(np.array([-3.0, 0.0, 2.0], np.float16))
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, scipy.special.log_ndtr(np.array([-3.0, 0.0, 2.0])), rtol=1e-3)
    assert sg.log_ndtr(sg.vector("i", dtype="int32")).dtype == np.float64
    assert sg.log_ndtr is sg.ops.stable.log_ndtr


@pytest.mark.parametrize("backend", ["jax", "numba"])
def test_other_backends_agree(backend):
    pytest.importorskip(backend)
    x = np.array([-1e5, -30.0, -2.0, 0.0, 0.7, 6.0, 30.0])  # (XLA flushes subnormals: none here)
    expected = _compiled("float64")(x)
    for got, want in zip(_compiled("float64", backend)(x), expected):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300)
