"""logaddexp, logdiffexp, log1mexp: mpmath values and derivatives, the edge table, errors, reads."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import stablegrad as sg
from stablegrad.ops.stable import Log1mExp, LogAddExp, LogDiffExp

from .reference import (
    assert_close_scalar,
    assert_matches,
    check_reads,
    derivatives,
    grad_of,
    mexp,
    mlog,
    mp_array,
    mp_directional,
    mp_second_directional,
    run,
    to_float,
)

INF = np.inf
_log1mexp = np.frompyfunc(lambda v: mp.log(-mp.expm1(v)) if v <= 0 else mp.nan, 1, 1)


def vectors(lo, hi, n=4, dtype=np.float64):
    return hnp.arrays(dtype, n, elements=st.floats(lo, hi, width=32 if dtype == np.float32 else 64))


def _check(build, mp_fn, args, rtol=(1e-14, 1e-11, 1e-9), seed=0, dps=80):
    """Value, first and second directional derivatives against mpmath (dps: no cancellation in mp_fn)."""
    rng = np.random.default_rng(seed)
    dtype = args[0].dtype
    ref = to_float(mp_fn(*[mp_array(a) for a in args]))
    w = rng.standard_normal(ref.shape).astype(dtype)
    vs = [rng.standard_normal(a.shape).astype(dtype) for a in args]
    value, _, first, second = derivatives(build, args, w, vs)
    atol = rtol[0] * (1 + max(float(np.max(np.abs(a))) for a in args))
    assert_matches(value, ref.astype(dtype), rtol=rtol[0], atol=atol, tiny=np.finfo(dtype).tiny)
    scale = float(np.sum(np.abs(w)))
    assert_close_scalar(first, mp_directional(mp_fn, args, w, vs, dps), rtol[1], scale)
    assert_close_scalar(second, mp_second_directional(mp_fn, args, w, vs, dps), rtol[2], scale)


def _mp_logaddexp(a, b):  # cancels when the result is tiny: full precision
    return mlog(mexp(a) + mexp(b))


@given(vectors(-1000, 1000), vectors(-1000, 1000))
def test_logaddexp_matches_mpmath(a, b):
    _check(sg.logaddexp, _mp_logaddexp, [a, b], dps=340)


@given(vectors(-100, 100, dtype=np.float32), vectors(-100, 100, dtype=np.float32))
def test_logaddexp_matches_mpmath_float32(a, b):
    _check(sg.logaddexp, _mp_logaddexp, [a, b], rtol=(1e-6, 1e-4, 1e-3), dps=340)


@given(vectors(-800, 800), vectors(-800, 800), vectors(-800, 800))
def test_logaddexp_variadic_matches_mpmath(a, b, c):
    _check(sg.logaddexp, lambda x, y, z: mlog(mexp(x) + mexp(y) + mexp(z)), [a, b, c], dps=340)
    np.testing.assert_allclose(run(sg.logaddexp, a, b), np.logaddexp(a, b), rtol=1e-15)


def test_logaddexp_edges():
    a, b = np.array([-INF, INF, 3.0, 1000.0]), np.array([-INF, INF, 3.0, 1000.0])
    np.testing.assert_allclose(run(sg.logaddexp, a, b), [-INF, INF, 3.0 + np.log(2), 1000.0 + np.log(2)], rtol=1e-16)
    ga, gb = grad_of(sg.logaddexp, a, b)
    np.testing.assert_array_equal(ga[:3], [0.0, 0.5, 0.5])  # (-inf,-inf) → 0; (+inf,+inf) and ties → halves
    np.testing.assert_array_equal(gb[:3], [0.0, 0.5, 0.5])
    np.testing.assert_allclose([ga[3], gb[3]], [0.5, 0.5], rtol=1e-12)
    ga, gb = grad_of(sg.logaddexp, np.array([INF, -INF]), np.array([1.0, 2.0]))
    np.testing.assert_array_equal(ga, [1.0, 0.0])
    np.testing.assert_array_equal(gb, [0.0, 1.0])


def test_logaddexp_dtypes_and_broadcasting():
    assert run(sg.logaddexp, np.array([1, 2]), np.array([3, 4])).dtype == np.float64
    h = run(sg.logaddexp, np.array([1.0], np.float16), np.array([1.0], np.float16))
    assert h.dtype == np.float16 and h[0] == np.float16(1 + np.log(2))
    assert run(sg.logaddexp, np.zeros((2, 1)), np.zeros(3)).shape == (2, 3)
    x32 = sg.vector("x", dtype="float32")
    assert sg.logaddexp(x32, 1.0).dtype == np.float32


def test_logaddexp_errors():
    with pytest.raises(sg.ShapeError, match=r"logaddexp: needs at least two operands.*test_logaddexp.py"):
        sg.logaddexp(sg.vector("x"))
    with pytest.raises(sg.ShapeError, match=r"could not be broadcast.*test_logaddexp.py"):
        sg.logaddexp(sg.vector("x", length=2), sg.vector("y", length=3))


# -- log1mexp -------------------------------------------------------------------------------------------------
@given(hnp.arrays(np.float64, 4, elements=st.floats(-1000, -1e-6)))  # differences need room before 0
def test_log1mexp_matches_mpmath(x):
    _check(sg.log1mexp, _log1mexp, [x], rtol=(1e-14, 1e-10, 1e-8))


@given(hnp.arrays(np.float32, 4, elements=st.floats(-100, -(2.0**-20), width=32)))
def test_log1mexp_matches_mpmath_float32(x):
    _check(sg.log1mexp, _log1mexp, [x], rtol=(1e-6, 1e-4, 1e-3))


def test_log1mexp_edges():
    x = np.array([0.0, -0.0, 1.0, -INF])
    with np.errstate(invalid="ignore"):
        out = run(sg.log1mexp, x)
        g = grad_of(sg.log1mexp, x)[0]
    np.testing.assert_array_equal(out[[0, 1, 3]], [-INF, -INF, 0.0])
    np.testing.assert_array_equal(g[[0, 1, 3]], [-INF, -INF, -0.0])
    assert np.isnan(out[2]) and np.isnan(g[2])
    tiny = -(10.0 ** np.arange(-300, -5, 15))  # right next to 0
    assert_matches(run(sg.log1mexp, tiny), to_float(_log1mexp(mp_array(tiny))), rtol=1e-15)


# -- logdiffexp -----------------------------------------------------------------------------------------------
def _mp_logdiffexp(a, b):
    return mlog(mexp(a) - mexp(b))


@given(vectors(-1000, 1000), st.data())
def test_logdiffexp_matches_mpmath(a, data):
    gap = data.draw(hnp.arrays(np.float64, 4, elements=st.floats(1e-6, 50)))
    b = a - gap
    a = np.where(b < a, a, a + 1.0)  # rounding could close the gap
    _check(sg.logdiffexp, _mp_logdiffexp, [a, b], rtol=(1e-13, 1e-9, 1e-7), dps=340)


def test_logdiffexp_edges():
    a, b = np.array([1.0, -INF, 2.0, INF]), np.array([2.0, -INF, 2.0, 0.0])
    with np.errstate(invalid="ignore", divide="ignore"):
        out = run(sg.logdiffexp, a, b)
        ga, gb = grad_of(sg.logdiffexp, a, b)
    assert np.isnan(out[0]) and np.isnan(ga[0]) and np.isnan(gb[0])
    np.testing.assert_array_equal(out[1:], [-INF, -INF, INF])
    assert ga[1] == 0.0 and gb[1] == 0.0


@pytest.mark.parametrize(
    "op, arrays",
    [
        (LogAddExp(), [np.array([1.0, -INF, INF, 2.0]), np.array([1.0, -INF, INF, -3.0])]),
        (LogAddExp(), [np.array([1.0, 2.0]), np.array([0.0, 5.0]), np.array([3.0, 3.0])]),
        (Log1mExp(), [np.array([-0.1, -3.0, 0.0])]),
        (LogDiffExp(), [np.array([2.0, -INF]), np.array([1.0, -INF])]),
    ],
)
def test_logaddexp_ops_respect_reads(op, arrays):
    with np.errstate(divide="ignore"):
        check_reads(op, *arrays)


def test_logdiffexp_gradient_does_not_carry_the_rounding_of_its_value():
    a, b = sg.scalar("a"), sg.scalar("b")
    grads = sg.function([a, b], sg.grad(sg.logdiffexp(a, b), [a, b]))
    da, db = grads(1e16 + 4, 1e16)  # the value rounds to a itself; the slopes are those of d = -4
    np.testing.assert_allclose([da, db], [1 / -np.expm1(-4.0), -np.exp(-4.0) / -np.expm1(-4.0)], rtol=1e-15)
    assert grads(0.0, 0.0) == [np.inf, -np.inf]
    assert grads(-np.inf, -np.inf) == [0.0, 0.0]
    with np.errstate(invalid="ignore"):
        assert all(np.isnan(grads(1.0, 2.0)))
