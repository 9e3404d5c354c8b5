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
def test_xlogy_ops_respect_reads(op):
    with np.errstate(divide="ignore"):
        check_reads(op, np.array([0.0, 1.5, 0.0, 2.0]), np.array([0.0, 2.0, 3.0, 0.5]))
