"""softplus, sigmoid, log_sigmoid, logit: mpmath values and derivatives, edges, dtypes, reads."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest
import scipy.special
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import stablegrad as sg
from stablegrad.ops.stable import Logit, LogSigmoid, Sigmoid, Softplus

from .reference import assert_matches, check_reads, grad_of, mp_array, run, to_float
from .test_logaddexp import _check

INF = np.inf
_softplus = np.frompyfunc(lambda v: mp.log1p(mp.exp(v)), 1, 1)
_sigmoid = np.frompyfunc(lambda v: 1 / (1 + mp.exp(-v)), 1, 1)
_log_sigmoid = np.frompyfunc(lambda v: -mp.log1p(mp.exp(-v)), 1, 1)
_logit = np.frompyfunc(lambda p: mp.log(p / (1 - p)), 1, 1)

CASES = [(sg.softplus, _softplus), (sg.sigmoid, _sigmoid), (sg.log_sigmoid, _log_sigmoid)]


@pytest.mark.parametrize("fn, mp_fn", CASES, ids=["softplus", "sigmoid", "log_sigmoid"])
@given(x=hnp.arrays(np.float64, 4, elements=st.floats(-1000, 1000)))
def test_scalar_primitive_matches_mpmath(fn, mp_fn, x):
    _check(fn, mp_fn, [x], rtol=(1e-14, 1e-11, 1e-9))


@pytest.mark.parametrize("fn, mp_fn", CASES, ids=["softplus", "sigmoid", "log_sigmoid"])
@given(x=hnp.arrays(np.float32, 4, elements=st.floats(-110, 110, width=32)))
def test_scalar_primitive_matches_mpmath_float32(fn, mp_fn, x):
    _check(fn, mp_fn, [x], rtol=(1e-6, 1e-4, 1e-3))


@given(hnp.arrays(np.float64, 4, elements=st.floats(1e-6, 1 - 1e-6)))  # differences need room before 0 and 1
def test_logit_matches_mpmath(p):
    _check(sg.logit, _logit, [p], rtol=(1e-14, 1e-10, 1e-8))
    edges = np.array([1e-300, 1e-100, 1e-20, 1 - 2**-53, 1 - 1e-12])
    assert_matches(run(sg.logit, edges), to_float(_logit(mp_array(edges))), rtol=1e-15)


def test_scalar_primitives_match_scipy():
    x = np.linspace(-800, 800, 161)
    tiny = np.finfo(np.float64).tiny  # below it SciPy and NumPy flush to 0, we keep the subnormal
    np.testing.assert_allclose(run(sg.sigmoid, x), scipy.special.expit(x), rtol=1e-15, atol=tiny)
    np.testing.assert_allclose(run(sg.log_sigmoid, x), scipy.special.log_expit(x), rtol=1e-15)
    np.testing.assert_allclose(run(sg.softplus, x), np.logaddexp(0, x), rtol=1e-15, atol=tiny)
    p = np.linspace(0.001, 0.999, 99)
    np.testing.assert_allclose(run(sg.logit, p), scipy.special.logit(p), rtol=1e-13)
    assert sg.expit is sg.sigmoid and sg.log_expit is sg.log_sigmoid and sg.log1pexp is sg.softplus


def test_scalar_primitive_infinities():
    x = np.array([-INF, INF])
    np.testing.assert_array_equal(run(sg.softplus, x), [0.0, INF])
    np.testing.assert_array_equal(run(sg.sigmoid, x), [0.0, 1.0])
    np.testing.assert_array_equal(run(sg.log_sigmoid, x), [-INF, 0.0])
    np.testing.assert_array_equal(grad_of(sg.sigmoid, np.array([-1000.0, 1000.0]))[0], [0.0, 0.0])


def test_logit_edges():
    p = np.array([0.0, 1.0, -0.5, 1.5, 0.5])
    with np.errstate(invalid="ignore", divide="ignore"):
        out = run(sg.logit, p)
        g = grad_of(sg.logit, p)[0]
    np.testing.assert_array_equal(out[[0, 1, 4]], [-INF, INF, 0.0])
    assert np.all(np.isnan(out[2:4])) and np.all(np.isnan(g[2:4]))
    np.testing.assert_array_equal(g[[0, 1, 4]], [INF, INF, 4.0])


def test_scalar_primitive_dtypes():
    assert run(sg.softplus, np.array([1, 2])).dtype == np.float64
    h = run(sg.sigmoid, np.array([0.0, 20.0], np.float16))
    assert h.dtype == np.float16 and h[0] == np.float16(0.5)


@pytest.mark.parametrize("op", [Softplus(), Sigmoid(), LogSigmoid(), Logit()])
def test_scalar_primitive_ops_respect_reads(op):
    with np.errstate(invalid="ignore"):
        check_reads(op, np.array([-30.0, -0.5, 0.25, 2.0]))
