"""logsumexp, logmeanexp, logcumsumexp: mpmath values and derivatives, the edge table, errors, reads."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest
import scipy.special
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import stablegrad as sg
from stablegrad.ops.stable import LogCumSumExp, LogMeanExp, LogSumExp

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
    mp_lse,
    mp_second_directional,
    run,
    to_float,
)

INF = np.inf


def rows(max_abs: float, dtype=np.float64, neg_inf: bool = True):
    """(3..4, 1..5) matrices over [-max_abs, max_abs], some entries -inf."""
    finite = st.floats(-max_abs, max_abs, width=32 if dtype == np.float32 else 64)
    elements = st.one_of(finite, st.just(-INF)) if neg_inf else finite
    return hnp.arrays(dtype, st.tuples(st.integers(1, 3), st.integers(1, 5)), elements=elements)


def _lse_rows(x):
    return sg.logsumexp(x, axis=-1)


def _check_against_mpmath(build, mp_fn, x, rtol_value, rtol_first, rtol_second, seed=0):
    rng = np.random.default_rng(seed)
    ref = to_float(mp_fn(mp_array(x)))
    w = rng.standard_normal(ref.shape).astype(x.dtype)
    v = np.where(np.isfinite(x), rng.standard_normal(x.shape), 0).astype(x.dtype)
    value, grads, first, second = derivatives(build, [x], w, [v])
    # outputs near 0 are limited by the rounding of max|x| (the condition number, not the method)
    atol = rtol_value * (1 + np.max(np.abs(x[np.isfinite(x)]), initial=0.0))
    assert_matches(value, ref.astype(x.dtype), rtol=rtol_value, atol=atol, tiny=np.finfo(x.dtype).tiny)
    assert np.all(np.isfinite(grads[0])) or not np.all(np.isfinite(ref))
    if np.all(np.isfinite(ref)):
        scale = float(np.sum(np.abs(w)) * np.max(np.abs(v), initial=1.0))
        assert_close_scalar(first, mp_directional(mp_fn, [x], w, [v]), rtol_first, scale)
        assert_close_scalar(second, mp_second_directional(mp_fn, [x], w, [v]), rtol_second, scale)


@given(rows(1000.0))
def test_logsumexp_matches_mpmath_float64(x):
    _check_against_mpmath(_lse_rows, lambda m: mp_lse(m, axis=-1), x, 1e-14, 1e-11, 1e-9)


@given(rows(100.0, np.float32))
def test_logsumexp_matches_mpmath_float32(x):
    _check_against_mpmath(_lse_rows, lambda m: mp_lse(m, axis=-1), x, 1e-5, 1e-4, 1e-3)


@given(rows(800.0, neg_inf=False), st.sampled_from([None, 0, 1, (0, 1)]), st.booleans())
def test_logsumexp_matches_scipy(x, axis, keepdims):
    out = run(lambda v: sg.logsumexp(v, axis=axis, keepdims=keepdims), x)
    expected = scipy.special.logsumexp(x, axis=axis, keepdims=keepdims)
    assert out.shape == np.shape(expected)
    np.testing.assert_allclose(out, expected, rtol=1e-13)


@given(rows(50.0, neg_inf=False), st.data())
def test_logsumexp_weighted_matches_scipy(x, data):
    """Against SciPy, and where SciPy rounds the total before its log, within that rounding.

    Where the weighted rest outweighs the weight at the max (b = [0.5, 0.5] at x = [1e-308, 0]),
    neither keeps a tail: the total (1.000456 for [1e-308, 0, -7] and b = [0.5, 0.5, 0.5]) is
    rounded, and its log near 0 is off by up to an ulp of 1 (SciPy through log1p(s/m) + log(m),
    which cancels as much); there both are held to a few ulps of 1 from the exact answer."""
    b = data.draw(hnp.arrays(np.float64, x.shape, elements=st.sampled_from([0.0, 0.5, 1.0, 3.0])))
    out = run(lambda v, w: sg.logsumexp(v, axis=-1, b=w), x, b)
    with np.errstate(divide="ignore"):
        expected = scipy.special.logsumexp(x, axis=-1, b=b)
    live = np.where(b != 0, x, -np.inf)
    top = live.max(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):  # (a row of zero weights: -inf - -inf, and no comparison holds)
        lead = np.sum(np.where(live == top, b, 0.0), axis=-1)
        rest = np.sum(np.where(live == top, 0.0, b * np.exp(live - top)), axis=-1)
    rounded_total = rest > lead
    with mp.workdps(50):
        exact = np.array(
            [float(mp.log(mp.fsum(wi * mp.exp(mp.mpf(xi)) for xi, wi in zip(r, w)))) for r, w in zip(x, b)]
        )
    eps = np.finfo(np.float64).eps
    for i in range(len(out)):
        if rounded_total[i]:
            assert abs(out[i] - exact[i]) <= 1e-13 * abs(exact[i]) + 4 * eps, (x[i], b[i], out[i], exact[i])
            assert abs(expected[i] - exact[i]) <= 1e-13 * abs(exact[i]) + 4 * eps  # (SciPy's bound too)
        else:
            np.testing.assert_allclose(out[i], expected[i], rtol=1e-13)


@pytest.mark.parametrize(
    "x, b",
    [
        # rows CI runs drew: the max (1e-308, 5e-324) sits an underflow away from 0, whose
        # term exp(0 - max) rounds to 1; counted in the rest, the tail e⁻⁷ or e⁻¹⁶ was
        # rounded into a total near 1 before its log (relative errors 3e-13 and 2e-9)
        ([2.2250738585072014e-308, 0.0, 0.0, -7.0, 0.0], [0.5, 0.0, 0.0, 0.5, 0.5]),
        ([-16.0, 5e-324, 0.0], [-0.5, -0.5, -0.5]),
        ([-16.0, 5e-324, 0.0], [0.5, -1.5, 2.0]),
    ],
)
def test_weighted_logsumexp_counts_entries_whose_term_rounds_to_one_with_the_max(x, b):
    x, b = np.array([x]), np.array([b])
    value, sign = run(lambda v, w: sg.logsumexp(v, axis=-1, b=w, return_sign=True), x, b)
    with mp.workdps(50):
        total = mp.fsum(mp.mpf(wi) * mp.exp(mp.mpf(xi)) for xi, wi in zip(x[0], b[0]))
        exact = float(mp.log(abs(total)))
    assert sign[0] == float(mp.sign(total))
    assert abs(value[0] - exact) <= 2 * np.spacing(abs(exact)), (value[0], exact)


def test_logsumexp_signed_of_an_exactly_cancelling_total_is_minus_inf_with_sign_zero():
    value, sign = run(
        lambda v, w: sg.logsumexp(v, axis=-1, b=w, return_sign=True),
        np.ones((1, 4)),
        np.array([[1.0, -2.0, 3.0, -2.0]]),
    )
    assert value.tolist() == [-np.inf] and sign.tolist() == [0.0]


@given(rows(50.0, neg_inf=False), st.data())
def test_logsumexp_signed_matches_scipy_and_mpmath(x, data):
    b = data.draw(hnp.arrays(np.float64, x.shape, elements=st.sampled_from([-2.0, -0.5, 0.0, 0.5, 1.0, 3.0])))
    value, sign = run(lambda v, w: sg.logsumexp(v, axis=-1, b=w, return_sign=True), x, b)
    total = np.sum(mp_array(b) * mexp(mp_array(x)), axis=-1)
    mp_magnitude = np.sum(np.abs(mp_array(b)) * mexp(mp_array(x)), axis=-1)
    # a total that cancels to the reference's own precision is exactly 0 (x = [1, 1], b = [2, -2])
    total = np.array(
        [t if abs(t) > m * mp.mpf(10) ** (20 - mp.mp.dps) else mp.mpf(0) for t, m in zip(total, mp_magnitude)]
    )
    magnitude = to_float(mp_magnitude)
    # the sign is decidable in floating point where the total is not lost in rounding
    # (x = [7e-118, 0], b = [0.5, -0.5] sums to 3e-118 exactly but to 0 in any float64 sum)
    decidable = np.abs(to_float(total)) > 1e-15 * magnitude
    expected_sign = np.array([float(mp.sign(t)) for t in total])
    np.testing.assert_array_equal(sign[decidable], expected_sign[decidable])
    assert set(np.unique(sign)) <= {-1.0, 0.0, 1.0}
    with np.errstate(divide="ignore", invalid="ignore"):  # a zero total has no condition number (value -inf)
        cond = np.nan_to_num(magnitude / np.abs(to_float(total)))
    assert_matches(
        value, to_float(mlog(np.abs(total))), rtol=1e-12, atol=1e-14 * (1 + np.max(np.abs(x))) * np.max(cond)
    )
    ref_value, ref_sign = scipy.special.logsumexp(x, axis=-1, b=b, return_sign=True)
    magnitude = np.sum(np.abs(b) * np.exp(x), axis=-1)
    ref_value, ref_sign = ref_value.reshape(-1), ref_sign.reshape(-1)
    clear = np.abs(np.sum(b * np.exp(x), axis=-1)) > 1e-6 * magnitude  # SciPy itself cancels below
    np.testing.assert_array_equal(sign[clear], ref_sign[clear])
    np.testing.assert_allclose(value[clear], ref_value[clear], rtol=1e-9)
    unsigned = run(lambda v, w: sg.logsumexp(v, axis=-1, b=w), x, b)
    np.testing.assert_array_equal(np.isnan(unsigned), sign < 0)
    np.testing.assert_array_equal(unsigned[sign >= 0], value[sign >= 0])


def test_logsumexp_shapes():
    x = np.zeros((2, 3, 4))
    for axis, keepdims, shape in [
        (None, False, ()),
        (1, False, (2, 4)),
        ((0, 2), True, (1, 3, 1)),
        (-1, True, (2, 3, 1)),
    ]:
        assert run(lambda v, a=axis, k=keepdims: sg.logsumexp(v, axis=a, keepdims=k), x).shape == shape
    assert run(lambda v: sg.logsumexp(v), np.float64(2.5)) == 2.5


# -- the edge table, one row per test -------------------------------------------------------------------------
def test_logsumexp_some_neg_inf_as_if_absent():
    x = np.array([1.0, -INF, 2.0, -INF])
    assert run(sg.logsumexp, x) == pytest.approx(float(np.logaddexp(1.0, 2.0)), rel=1e-15)
    g = grad_of(sg.logsumexp, x)[0]
    assert g[1] == 0.0 and g[3] == 0.0
    np.testing.assert_allclose(g[[0, 2]], scipy.special.softmax([1.0, 2.0]), rtol=1e-15)


def test_logsumexp_all_neg_inf_and_empty_axis():
    x = np.full((2, 3), -INF)
    assert np.all(run(lambda v: sg.logsumexp(v, axis=1), x) == -INF)
    g = grad_of(lambda v: sg.logsumexp(v, axis=1), x)[0]
    np.testing.assert_array_equal(g, np.zeros((2, 3)))
    empty = np.zeros((2, 0))
    np.testing.assert_array_equal(run(lambda v: sg.logsumexp(v, axis=1), empty), [-INF, -INF])
    assert grad_of(lambda v: sg.logsumexp(v, axis=1), empty)[0].shape == (2, 0)


def test_logsumexp_pos_inf_shares_the_mass():
    x = np.array([[INF, 1.0, INF, -INF], [INF, 0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(run(lambda v: sg.logsumexp(v, axis=1), x), [INF, INF])
    g = grad_of(lambda v: sg.logsumexp(v, axis=1), x)[0]
    np.testing.assert_array_equal(g, [[0.5, 0.0, 0.5, 0.0], [1.0, 0.0, 0.0, 0.0]])


def test_logsumexp_tiny_tail_exact():
    out = run(sg.logsumexp, np.array([0.0, -40.0]))
    with mp.workdps(40):
        expected = float(mp.log1p(mp.exp(-40)))
    assert out == pytest.approx(expected, rel=1e-15)
    assert out == pytest.approx(4.2484e-18, rel=1e-4)


def test_logsumexp_weights():
    x, b = np.array([1.0, 2.0, 3.0]), np.array([0.5, 2.0, 1.0])
    assert run(lambda v, w: sg.logsumexp(v, b=w), x, b) == pytest.approx(np.log(np.sum(b * np.exp(x))), rel=1e-15)
    # b = 0 removes the term, even against +inf; the gradient w.r.t. b stays finite there
    x, b = np.array([INF, 1.0, 2.0]), np.array([0.0, 1.0, 1.0])
    lse = run(lambda v, w: sg.logsumexp(v, b=w), x, b)
    assert lse == pytest.approx(np.logaddexp(1.0, 2.0), rel=1e-15)
    x, b = np.array([5.0, 1.0, 2.0]), np.array([0.0, 1.0, 1.0])
    gx, gb = grad_of(lambda v, w: sg.logsumexp(v, b=w), x, b)
    out = np.logaddexp(1.0, 2.0)
    np.testing.assert_allclose(gb, np.exp(x - out), rtol=1e-14)
    np.testing.assert_allclose(gx, [0.0, *np.exp(x[1:] - out)], rtol=1e-14)
    gx, gb = grad_of(lambda v, w: sg.logsumexp(v, b=w), np.array([-INF, 0.0]), np.array([0.0, 2.0]))
    np.testing.assert_array_equal(gx, [0.0, 1.0])
    np.testing.assert_allclose(gb, [0.0, 0.5], rtol=1e-15)


@pytest.mark.parametrize(
    ("x", "b", "dtype"),
    [
        ([0.0, 0.0], [5e-324, 1.0], np.float64),  # a subnormal weight at the max
        ([1.0, 0.0], [5e-324, 1.0], np.float64),
        ([1.0, 0.0], [1e-35, 1e4], np.float32),  # rest / lead past the float32 range
        ([0.0, -1.0, 2.0], [1e-300, 1e10, 1e-300], np.float64),
    ],
)
def test_logsumexp_a_tiny_weight_at_the_max_does_not_overflow(x, b, dtype):
    x, b = np.array(x, dtype), np.array(b, dtype)
    with mp.workdps(40):
        exact = float(mp.log(mp.fsum(mp.mpf(float(w)) * mp.exp(mp.mpf(float(v))) for v, w in zip(x, b))))
    tolerance = 1e-6 if dtype == np.float32 else 1e-15
    assert run(lambda v, w: sg.logsumexp(v, b=w), x, b) == pytest.approx(exact, rel=tolerance, abs=tolerance)
    naive = run(lambda v, w: sg.log(sg.sum(w * sg.exp(v))), x, b)  # recognised as the weighted logsumexp
    assert naive == pytest.approx(exact, rel=tolerance, abs=tolerance)
    assert all(np.all(np.isfinite(g)) for g in grad_of(lambda v, w: sg.logsumexp(v, b=w), x, b))


@pytest.mark.parametrize("fn", [sg.logsumexp, sg.logmeanexp], ids=["logsumexp", "logmeanexp"])
@pytest.mark.parametrize(("value", "gradient"), [(2.0, 1.0), (-1e300, 1.0), (-INF, 0.0)])
def test_a_0d_input_has_its_gradient(fn, value, gradient):
    x = sg.scalar("x")
    f = sg.function([x], [fn(x), sg.grad(fn(x), x)])
    out, g = f(np.float64(value))
    assert (out, g) == (value, gradient)


def test_logsumexp_negative_total_is_nan_without_sign():
    x, b = np.array([1.0, 2.0]), np.array([1.0, -1.0])
    with np.errstate(invalid="ignore"):
        assert np.isnan(run(lambda v, w: sg.logsumexp(v, b=w), x, b))
        assert np.all(np.isnan(np.concatenate(grad_of(lambda v, w: sg.logsumexp(v, b=w), x, b))))


def test_logsumexp_return_sign_as_scipy():
    cases = [
        (np.array([1.0, 2.0]), np.array([1.0, -1.0])),
        (np.array([0.0, 0.0]), np.array([1.0, -1.0])),
        (np.array([-INF, -INF]), np.array([1.0, 1.0])),
        (np.array([3.0, 0.0]), np.array([2.0, -1.0])),
    ]
    for x, b in cases:
        value, sign = run(lambda v, w: sg.logsumexp(v, b=w, return_sign=True), x, b)
        ref_value, ref_sign = scipy.special.logsumexp(x, b=b, return_sign=True)
        assert sign == ref_sign and value == pytest.approx(ref_value, rel=1e-15)
    # the gradient where the total is non-zero: d log|s| = b exp(x) / s
    x, b = np.array([1.0, 2.0]), np.array([1.0, -1.0])
    gx, gb = grad_of(lambda v, w: sg.logsumexp(v, b=w, return_sign=True)[0], x, b)
    s = np.sum(b * np.exp(x))
    np.testing.assert_allclose(gx, b * np.exp(x) / s, rtol=1e-14)
    np.testing.assert_allclose(gb, np.exp(x) / s, rtol=1e-14)


def test_logsumexp_where_masks_entries():
    x = np.array([[1.0, 50.0, 2.0], [INF, 3.0, np.nan]])
    mask = np.array([[True, False, True], [False, True, False]])
    out = run(lambda v, m: sg.logsumexp(v, axis=1, where=m), x, mask)
    np.testing.assert_allclose(out, [np.logaddexp(1.0, 2.0), 3.0], rtol=1e-15)
    g = grad_of(lambda v, m: sg.logsumexp(v, axis=1, where=m), x, mask)[0]
    assert g[0, 1] == 0.0 and g[1, 0] == 0.0 and g[1, 2] == 0.0
    np.testing.assert_allclose(g[0, [0, 2]], scipy.special.softmax([1.0, 2.0]), rtol=1e-15)
    value, sign = run(lambda v, m: sg.logsumexp(v, axis=1, where=m, return_sign=True), x, mask)
    np.testing.assert_allclose(value, out, rtol=1e-15)
    np.testing.assert_array_equal(sign, [1.0, 1.0])


@pytest.mark.parametrize("mask_dtype", ["float64", "float32", "int8"])
def test_a_numeric_where_mask_is_cast_to_bool_as_jax_does(mask_dtype):
    x = np.array([[1.0, 50.0, 2.0], [-3.0, 3.0, 7.0]])
    as_bool = np.array([[True, False, True], [False, True, True]])
    numeric = np.array([[1, 0, 2], [0, 1, -1]], dtype=mask_dtype)  # nonzero is True
    for fn in (
        lambda v, m: sg.logsumexp(v, axis=1, where=m),
        lambda v, m: sg.softmax(v, axis=1, where=m),
        lambda v, m: sg.log_softmax(v, axis=1, where=m),
    ):
        np.testing.assert_array_equal(run(fn, x, numeric), run(fn, x, as_bool))
        np.testing.assert_array_equal(grad_of(fn, x, numeric)[0], grad_of(fn, x, as_bool)[0])


def test_a_where_mask_of_strings_is_refused():
    with pytest.raises(sg.DTypeError, match="where must be boolean or numeric"):
        sg.logsumexp(sg.vector("x"), where=sg.constant(np.array(["a", "b"])))


def test_logsumexp_nan_entry():
    x = np.array([1.0, np.nan, 2.0])
    assert np.isnan(run(sg.logsumexp, x))
    assert np.all(np.isnan(grad_of(sg.logsumexp, x)[0]))


def test_logsumexp_integer_input_promoted():
    out = run(sg.logsumexp, np.array([1, 2, 3]))
    assert out.dtype == np.float64
    assert out == pytest.approx(scipy.special.logsumexp([1.0, 2.0, 3.0]), rel=1e-15)


def test_logsumexp_float16_accumulates_in_float32():
    x = np.zeros(4096, dtype=np.float16)  # a float16 running sum saturates at 2048
    out = run(sg.logsumexp, x)
    assert out.dtype == np.float16
    assert out == np.float16(np.log(4096.0))
    g = grad_of(sg.logsumexp, x)[0]
    assert g.dtype == np.float16 and np.all(g == np.float16(1 / 4096))


def test_logsumexp_second_derivative_finite_at_extremes():
    x = np.array([[1000.0, -1000.0, 999.0], [-INF, 3.0, -745.0]])
    _check_against_mpmath(_lse_rows, lambda m: mp_lse(m, axis=-1), x, 1e-15, 1e-12, 1e-10)


# -- logmeanexp ----------------------------------------------------------------------------------------------
def _mp_lme(m):
    return mlog(np.mean(mexp(m), axis=-1))


@given(rows(700.0, neg_inf=False))
def test_logmeanexp_matches_mpmath(x):
    _check_against_mpmath(lambda v: sg.logmeanexp(v, axis=-1), _mp_lme, x, 1e-14, 1e-11, 1e-9)


def test_logmeanexp_where_and_edges():
    x = np.array([[1.0, 100.0, 3.0], [-INF, -INF, 0.0]])
    mask = np.array([[True, False, True], [True, True, False]])
    out = run(lambda v, m: sg.logmeanexp(v, axis=1, where=m), x, mask)
    np.testing.assert_allclose(out, [np.logaddexp(1.0, 3.0) - np.log(2.0), -INF], rtol=1e-15)
    g = grad_of(lambda v, m: sg.logmeanexp(v, axis=1, where=m), x, mask)[0]
    np.testing.assert_allclose(g, [[scipy.special.expit(-2.0), 0, scipy.special.expit(2.0)], [0, 0, 0]], rtol=1e-15)
    assert run(lambda v: sg.logmeanexp(v, keepdims=True), np.full((2, 2), 1000.0)).shape == (1, 1)


# -- logcumsumexp --------------------------------------------------------------------------------------------
def _mp_lcse(m):
    out = np.empty_like(m)
    for i in range(m.shape[-1]):
        out[..., i] = mlog(np.sum(mexp(m[..., : i + 1]), axis=-1))
    return out


@given(rows(800.0))
def test_logcumsumexp_matches_mpmath(x):
    _check_against_mpmath(lambda v: sg.logcumsumexp(v, axis=-1), _mp_lcse, x, 1e-14, 1e-11, 1e-9)


def test_logcumsumexp_axis_none_and_edges():
    x = np.array([[-INF, 1.0], [1000.0, -1000.0]])
    out = run(lambda v: sg.logcumsumexp(v), x)
    np.testing.assert_allclose(out, np.logaddexp.accumulate(x.ravel()), rtol=1e-15)
    g = grad_of(lambda v: sg.logcumsumexp(v, axis=0), x)[0]
    assert np.all(np.isfinite(g)) and g[0, 0] == 0.0


# -- errors and the reads contract ---------------------------------------------------------------------------
def test_logsumexp_bad_input_errors():
    x = sg.matrix("x", shape=(2, 3))
    with pytest.raises(
        sg.ShapeError, match=r"logsumexp: b of shape \(4,\) is not broadcastable.*test_logsumexp.py:\d+"
    ):
        sg.logsumexp(x, b=np.ones(4))
    with pytest.raises(sg.ShapeError, match=r"logsumexp: where of shape .*not broadcastable.*test_logsumexp.py"):
        sg.logsumexp(x, where=np.ones((3, 3), bool))
    with pytest.raises(sg.ShapeError, match=r"logsumexp: axis 2 is out of range.*test_logsumexp.py"):
        sg.logsumexp(x, axis=2)
    with pytest.raises(sg.ShapeError, match=r"logsumexp: repeated axis.*test_logsumexp.py"):
        sg.logsumexp(x, axis=(1, -1))
    with pytest.raises(sg.ShapeError, match=r"logmeanexp: axis -3 is out of range"):
        sg.logmeanexp(x, axis=-3)
    with pytest.raises(sg.ShapeError, match=r"logcumsumexp: axis"):
        sg.logcumsumexp(x, axis=(0, 1))
    with pytest.raises(sg.DTypeError, match=r"logmeanexp: complex"):  # (logsumexp takes complex: SciPy's)
        sg.logmeanexp(np.ones(2, complex))


@pytest.mark.parametrize(
    "op, arrays",
    [
        (LogSumExp((1,)), [np.array([[1.0, -INF, 2.0], [INF, 0.0, INF]])]),
        (LogSumExp((1,), True, True, False, True), [np.array([[1.0, 2.0]]), np.array([[1.0, -2.0]])]),
        (LogSumExp((0,), False, True, True), [np.array([1.0, 2.0]), np.array([0.0, 2.0]), np.array([True, False])]),
        (LogMeanExp((0,), False, True), [np.array([1.0, 2.0]), np.array([True, False])]),
        (LogCumSumExp(0), [np.array([1.0, -3.0, 2.0])]),
    ],
)
def test_stable_logsumexp_ops_respect_reads(op, arrays):
    check_reads(op, *arrays)


def test_logsumexp_compiles_through_perform_and_reference():
    x = np.array([[2.0, 1.0], [0.5, -0.5]])
    assert_matches(LogSumExp((1,)).perform(x), to_float(mp_lse(mp_array(x), axis=1)), rtol=1e-15)


def test_gradient_shares_tied_maxima_exactly_at_huge_magnitude():
    # out = max + log(2) rounds to max itself past 2**53, so exp(x - out) would give 1 to each
    x = sg.vector("x")
    f = sg.function([x], sg.grad(sg.logsumexp(x), x))
    for big in (1e17, 1e300, -1e300):
        below = big - abs(big) - 1.0  # well under the two tied maxima
        np.testing.assert_array_equal(f(np.array([big, big, below])), [0.5, 0.5, 0.0])


@pytest.mark.parametrize(
    "build",
    [
        lambda v: sg.logsumexp(v, b=np.array([1.0, 1.0])),
        lambda v: sg.logsumexp(v, b=np.array([2.0, 2.0])),
        lambda v: sg.logsumexp(v, return_sign=True)[0],
        lambda v: sg.logsumexp(v, b=np.array([3.0, 3.0]), return_sign=True)[0],
        lambda v: sg.logcumsumexp(v)[-1],
    ],
    ids=["weighted", "weighted by 2", "signed", "weighted and signed", "logcumsumexp"],
)
@pytest.mark.parametrize(("x", "dtype"), [([1e16, 1e16], np.float64), ([1e3, 1e3], np.float32)])
def test_gradients_at_huge_tied_entries_are_their_exact_shares(build, x, dtype):
    """exp(x - out) would carry the rounding of `out`: at 1e16 the whole log 2 of the tie."""
    (grad,) = grad_of(build, np.array(x, dtype))
    np.testing.assert_allclose(grad, [0.5, 0.5], rtol=1e-15 if dtype == np.float64 else 1e-7)
