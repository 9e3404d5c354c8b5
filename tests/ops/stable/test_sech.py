"""sech: value, gradient and second derivative against mpmath (tiny, moderate and huge arguments,
into the subnormal range), edges, dtypes, backends and the reads contract."""

from __future__ import annotations

import functools

import mpmath as mp
import numpy as np
import pytest

import stablegrad as sg
from stablegrad.ops.stable import Sech, sech

from .reference import check_reads, ulps_off

POINTS = [0.0, 1e-300, -1e-10, 1e-4, 0.3, -1.0, 2.0, -19.0, 30.0, -300.0, 700.0, 710.0, -720.0]
POINTS32 = [0.0, 1e-30, -1e-5, 0.5, -1.0, 9.0, -40.0, 80.0, 89.0]


def _exact(x: float) -> tuple[float, float, float]:
    """(sech, -tanh·sech, (2 tanh² - 1)·sech) at x."""
    with mp.workdps(60):
        x = mp.mpf(x)
        s, t = mp.sech(x), mp.tanh(x)
        return float(s), float(-t * s), float((2 * t * t - 1) * s)


@functools.cache
def _compiled(dtype: str, backend: str = "numpy"):
    x = sg.vector("x", dtype=dtype)
    y = sech(x)
    g = sg.grad(sg.sum(y), x)
    return sg.function([x], [y, g, sg.grad(sg.sum(g), x)], backend=backend)


@pytest.mark.parametrize("dtype, points", [("float64", POINTS), ("float32", POINTS32)], ids=["float64", "float32"])
def test_value_gradient_and_second_derivative_match_mpmath(dtype, points):
    x = np.array(points, dtype=dtype)
    got = _compiled(dtype)(x)
    exact = np.array([_exact(float(p)) for p in x]).T
    for label, g, e in zip(("value", "gradient", "second derivative"), got, exact):
        assert g.dtype == np.dtype(dtype) and np.all(np.isfinite(g)), (label, g)
        assert np.all(ulps_off(g, e, dtype) <= 4), (label, x[ulps_off(g, e, dtype) > 4], g, e)


def test_past_the_overflow_of_cosh_the_written_reciprocal_is_lost():
    """1/cosh(x) is 0 from 710, and its chain-rule derivative NaN; sech is 2e^-x there."""
    x = np.array([711.0, 740.0])
    value, grad, _ = _compiled("float64")(x)
    np.testing.assert_allclose(value, 2 * np.exp(-x), rtol=1e-12)
    np.testing.assert_allclose(grad, -2 * np.exp(-x), rtol=1e-12)
    with np.errstate(over="ignore"):
        assert np.all(1 / np.cosh(x) == 0)


def test_edges():
    value, grad, hess = _compiled("float64")(np.array([np.inf, -np.inf, np.nan, -0.0, 800.0]))
    np.testing.assert_array_equal(value, [0.0, 0.0, np.nan, 1.0, 0.0])
    np.testing.assert_array_equal(np.abs(grad), [0.0, 0.0, np.nan, 0.0, 0.0])
    np.testing.assert_array_equal(hess, [0.0, 0.0, np.nan, -1.0, 0.0])


def test_reads_its_operand_and_output():
    check_reads(Sech(), np.array([-800.0, -0.5, 0.0, 1e-9, 3.0]))


def test_second_derivative_against_finite_differences():
    sg.testing.check_grads(sech, [np.array([-3.0, -0.4, 0.2, 0.9, 1.1])], order=2, rtol=1e-6)


def test_dtypes():
    h = sg.vector("h", dtype="float16")
    out = sg.function([h], sech(h))(np.array([-3.0, 0.01, 8.0], np.float16))
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, 1 / np.cosh([-3.0, 0.01, 8.0]), rtol=2e-3)
    assert sech(sg.vector("i", dtype="int32")).dtype == np.float64


@pytest.mark.parametrize("backend", ["jax", "numba"])
def test_other_backends_agree(backend):
    pytest.importorskip(backend)
    x = np.array([-1e5, -720.0, -1.0, 1e-10, 0.0, 0.7, 6.0, 800.0])
    expected = _compiled("float64")(x)
    for got, want in zip(_compiled("float64", backend)(x), expected):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-300)  # (XLA flushes subnormals)
