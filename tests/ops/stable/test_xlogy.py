"""xlogy, xlog1py: mpmath values and derivatives, the x = 0 row of the edge table, reads."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest
import scipy.special
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import stablegrad as sg
from stablegrad.ops.stable import XLog1PY, XLogY

from ..helpers import as_the_backend_sees
from .reference import check_reads, grad_of, run
from .test_logaddexp import _check

INF = np.inf
_xlogy = np.frompyfunc(lambda x, y: 0 if x == 0 else x * mp.log(y), 2, 1)
_xlog1py = np.frompyfunc(lambda x, y: 0 if x == 0 else x * mp.log1p(y), 2, 1)


@given(
    hnp.arrays(np.float64, 4, elements=st.floats(-1e3, 1e3)),
    hnp.arrays(np.float64, 4, elements=st.floats(1e-300, 1e300)),
)
def test_xlogy_matches_scipy(x, y):
    expected = scipy.special.xlogy(as_the_backend_sees(x), as_the_backend_sees(y))
    np.testing.assert_allclose(run(sg.xlogy, x, y), expected, rtol=1e-15)


@given(
    hnp.arrays(np.float64, 4, elements=st.floats(-1e3, 1e3)), hnp.arrays(np.float64, 4, elements=st.floats(1e-6, 1e6))
)
def test_xlogy_matches_mpmath(x, y):  # y away from 0 so that the differences stay in the domain
    _check(sg.xlogy, _xlogy, [x, y], rtol=(1e-14, 1e-10, 1e-8))


@given(
    hnp.arrays(np.float64, 4, elements=st.floats(-1e3, 1e3)),
    hnp.arrays(np.float64, 4, elements=st.floats(-1 + 1e-6, 1e6)),
)
def test_xlog1py_matches_mpmath(x, y):
    _check(sg.xlog1py, _xlog1py, [x, y], rtol=(1e-14, 1e-9, 1e-7))
    np.testing.assert_allclose(run(sg.xlog1py, x, y), scipy.special.xlog1py(x, y), rtol=1e-15)


def test_xlogy_zero_x():
    x, y = np.zeros(5), np.array([0.0, 2.0, INF, np.nan, -1.0])
    with np.errstate(invalid="ignore", divide="ignore"):
        out = run(sg.xlogy, x, y)
        gx, gy = grad_of(sg.xlogy, x, y)
    np.testing.assert_array_equal(out, [0.0, 0.0, 0.0, np.nan, 0.0])
    np.testing.assert_array_equal(gx[:3], [-INF, np.log(2.0), INF])
    np.testing.assert_array_equal(gy[[0, 1, 2]], [0.0, 0.0, 0.0])
    # the mixed second derivative at x = 0 is 1/y, as away from 0
    sg.testing.check_grads(sg.xlogy, [np.array([0.0, 0.5]), np.array([2.0, 3.0])], order=2)


def test_xlog1py_zero_x():
    x, y = np.zeros(3), np.array([-1.0, 1.0, INF])
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(run(sg.xlog1py, x, y), [0.0, 0.0, 0.0])
        gx, gy = grad_of(sg.xlog1py, x, y)
    np.testing.assert_array_equal(gx, [-INF, np.log(2.0), INF])
    np.testing.assert_array_equal(gy, [0.0, 0.0, 0.0])


def test_xlogy_dtypes():
    assert run(sg.xlogy, np.array([1, 2]), np.array([3, 4])).dtype == np.float64
    assert run(sg.xlogy, np.array([1.0], np.float16), np.array([2.0], np.float16)).dtype == np.float16


@pytest.mark.parametrize("op", [XLogY(), XLog1PY()])
def test_xlogy_ops_compute_float32_in_float32(op):
    # (its NaN for y = NaN once came from a float64 constant, which made the whole op float64)
    x = sg.tensor("x", shape=(3,), dtype="float32")
    assert op(x, x).dtype == np.float32
    out = sg.function([x], op(x, x))(np.array([0.0, np.nan, 2.0], np.float32))
    assert out.dtype == np.float32 and out[0] == 0 and np.isnan(out[1])


@pytest.mark.parametrize("op", [XLogY(), XLog1PY()])
def test_xlogy_ops_respect_reads(op):
    with np.errstate(divide="ignore"):
        check_reads(op, np.array([0.0, 1.5, 0.0, 2.0]), np.array([0.0, 2.0, 3.0, 0.5]))


# -- xexpx: x · exp(x), 0 at x = -inf ---------------------------------------------------------------------
_xexpx = np.frompyfunc(lambda x: x * mp.exp(x), 1, 1)


@given(hnp.arrays(np.float64, 4, elements=st.floats(-1000, 700)))
def test_xexpx_matches_mpmath(x):
    _check(sg.xexpx, _xexpx, [x], rtol=(1e-14, 1e-12, 1e-10), dps=80)


@given(hnp.arrays(np.float32, 4, elements=st.floats(-100, 80, width=32)))
def test_xexpx_matches_mpmath_float32(x):
    _check(sg.xexpx, _xexpx, [x], rtol=(1e-5, 1e-4, 1e-3), dps=80)


def test_xexpx_is_zero_at_minus_infinity_with_zero_derivatives():
    x = np.array([-INF, -800.0, -1.0, 0.0])
    # (to an ulp: another backend's exp may round differently)
    np.testing.assert_allclose(run(sg.xexpx, x), [0.0, -800.0 * np.exp(-800.0), -np.exp(-1.0), 0.0], rtol=3e-16)
    (g,) = grad_of(sg.xexpx, x)
    np.testing.assert_allclose(g, [0.0, np.exp(-800.0) * -799.0, 0.0, 1.0], rtol=3e-16, atol=1e-300)
    v = sg.vector("v")
    hvp = sg.function([v], sg.hessian_vector_product(sg.sum(sg.xexpx(v)), v, sg.ones_like(v)))(x)
    np.testing.assert_allclose(hvp, [0.0, np.exp(-800.0) * -798.0, np.exp(-1.0), 2.0], rtol=3e-16, atol=1e-300)


def test_xexpx_keeps_nan_and_plus_infinity():
    with np.errstate(invalid="ignore"):
        value = run(sg.xexpx, np.array([np.nan, INF]))
    assert np.isnan(value[0]) and value[1] == INF


def test_an_expectation_in_log_space_is_xexpx_with_a_zero_probability():
    lp = sg.vector("lp")
    entropy = -sg.sum(sg.exp(lp) * lp)
    f = sg.function([lp], [entropy, sg.grad(entropy, lp)])
    assert "xexpx_from_naive" in f.explain()
    value, g = f(np.array([-INF, np.log(0.25), np.log(0.75)]))
    np.testing.assert_allclose(value, -(0.25 * np.log(0.25) + 0.75 * np.log(0.75)), rtol=1e-15)
    np.testing.assert_allclose(g, [0.0, -0.25 * (1 + np.log(0.25)), -0.75 * (1 + np.log(0.75))], rtol=1e-14)
    near_miss = sg.function([lp], sg.sum(sg.exp(lp) * (lp + 1.0)))
    assert "xexpx_from_naive" not in near_miss.explain()


def test_a_zero_partial_stays_zero_under_an_infinite_cotangent():
    # where(x == 0, 0, x·log1p(x)) is recognised as xlog1py(x, x); the guard gave ∂x = 0 at x = 0
    # whatever the cotangent, and log(sinh(·)) sends an infinite one there (coth(0)): not inf · 0
    x = sg.vector("x")
    for inner in (sg.where(x == 0.0, 0.0, x * sg.log1p(x)), sg.where(x == 0.0, 0.0, (x + 1.0) * sg.log(x + 1.0))):
        y = sg.log(sg.sinh(inner))
        f = sg.function([x], sg.grad(sg.sum(y), x))
        written = sg.function([x], sg.grad(sg.sum(y), x), recognition=False)
        with np.errstate(all="ignore"):
            got, expected = f(np.array([0.0, 1.0, np.nan])), written(np.array([0.0, 1.0, np.nan]))
        assert got[0] == 0.0 and expected[0] == 0.0
        np.testing.assert_allclose(got[1], expected[1], rtol=1e-15)
        assert np.isnan(got[2])
