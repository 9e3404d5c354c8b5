"""log_cosh: value, gradient and second derivative against mpmath (tiny, moderate and huge
arguments), edges, dtypes, backends and the reads contract."""

from __future__ import annotations

import functools

import mpmath as mp
import numpy as np
import pytest

import stablegrad as sg
from stablegrad.ops.stable import LogCosh, log_cosh

from .reference import check_reads, ulps_off

POINTS = [0.0, 1e-300, 1e-10, -1e-10, 1e-4, 0.3, -0.999, 1.0, 1.001, 2.0, -19.0, 30.0, -300.0, 710.0, 1e5, -1e300]
POINTS32 = [0.0, 1e-30, -1e-5, 0.01, 0.5, 0.999, -1.0, 1.5, 9.0, -40.0, 89.0, 100.0, 1e30]


def _exact(x: float) -> tuple[float, float, float]:
    """(log cosh, tanh, sech²) at x; log1p(2 sinh²(x/2)) keeps the digits of x²/2 near 0."""
    with mp.workdps(60 + int(abs(mp.log10(abs(x) + 1)))):
        x = mp.mpf(x)
        value = mp.log1p(2 * mp.sinh(x / 2) ** 2)
        return float(value), float(mp.tanh(x)), float(mp.sech(x) ** 2)


@functools.cache
def _compiled(dtype: str, backend: str = "numpy"):
    x = sg.vector("x", dtype=dtype)
    y = log_cosh(x)
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


def test_tiny_arguments_keep_their_relative_accuracy():
    value = _compiled("float64")(np.array([1e-10, 3e-8]))[0]
    np.testing.assert_allclose(value, [5e-21, 4.5e-16], rtol=1e-15)  # log(cosh(1e-10)) written is 0


def test_edges():
    value, grad, hess = _compiled("float64")(np.array([np.inf, -np.inf, np.nan, -0.0]))
    np.testing.assert_array_equal(value, [np.inf, np.inf, np.nan, 0.0])
    np.testing.assert_array_equal(grad, [1.0, -1.0, np.nan, -0.0])
    np.testing.assert_array_equal(hess, [0.0, 0.0, np.nan, 1.0])


def test_reads_only_its_operand():
    check_reads(LogCosh(), np.array([-800.0, -0.5, 0.0, 1e-9, 3.0]))


def test_second_derivative_against_finite_differences():
    sg.testing.check_grads(log_cosh, [np.array([-3.0, -0.4, 0.2, 0.9, 1.1])], order=2, rtol=1e-6)


def test_dtypes():
    h = sg.vector("h", dtype="float16")
    out = sg.function([h], log_cosh(h))(np.array([-3.0, 0.01, 20.0], np.float16))
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, np.log(np.cosh([-3.0, 0.01, 20.0])), rtol=2e-3)
    assert log_cosh(sg.vector("i", dtype="int32")).dtype == np.float64


@pytest.mark.parametrize("backend", ["jax", "numba"])
def test_other_backends_agree(backend):
    pytest.importorskip(backend)
    x = np.array([-1e5, -30.0, -1.0, 1e-10, 0.0, 0.7, 6.0, 800.0])
    expected = _compiled("float64")(x)
    for got, want in zip(_compiled("float64", backend)(x), expected):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-300)
