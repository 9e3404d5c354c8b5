"""log_sigmoid_difference: log(σ(a) - σ(b)) against mpmath in both tails (value, gradient,
Hessian), the written formula's domain at a <= b, edges, dtypes, backends, reads."""

from __future__ import annotations

import functools

import mpmath as mp
import numpy as np
import pytest

import stablegrad as sg
from stablegrad.ops.stable import LogSigmoidDifference, log_sigmoid_difference

from .reference import check_reads

#: (a, b) with a > b: both σ near 1, both near 0, straddling 0, far out, a hair apart
PAIRS = [(50.0, 45.0), (-40.0, -45.0), (3.0, -3.0), (800.0, 799.0), (-800.0, -801.0), (1e-8, -1e-8)]
PAIRS += [(1e16 + 4, 1e16), (40.0, 39.0), (710.0, -710.0), (0.5, 0.5 - 2**-40), (1e300, -1e300)]
PAIRS32 = [(20.0, 15.0), (-40.0, -45.0), (3.0, -3.0), (800.0, 799.0), (-80.0, -81.0), (1e-4, -1e-4), (17.0, 16.0)]


def _sigmoid(v):
    return 1 / (1 + mp.exp(-v))


def _exact(a: float, b: float) -> list[float]:
    """value, ∂a, ∂b, ∂²/∂a², ∂²/∂a∂b, ∂²/∂b² of log(σ(a) - σ(b)).

    σ(a) - σ(b) is taken as (e⁻ᵇ - e⁻ᵃ) / ((1 + e⁻ᵃ)(1 + e⁻ᵇ)) with e⁻ᵇ - e⁻ᵃ = -e⁻ᵇ·expm1(b - a):
    the same number, without the difference of two numbers near 1 that no precision holds at 1e16.
    """
    with mp.workdps(800):
        a, b = mp.mpf(a), mp.mpf(b)
        d = -mp.exp(-b) * mp.expm1(b - a) / ((1 + mp.exp(-a)) * (1 + mp.exp(-b)))
        sa, sb = _sigmoid(a) * _sigmoid(-a), _sigmoid(b) * _sigmoid(-b)  # σ'
        ta, tb = sa * (1 - 2 * _sigmoid(a)), sb * (1 - 2 * _sigmoid(b))  # σ''
        da, db = sa / d, -sb / d
        return [float(v) for v in (mp.log(d), da, db, ta / d - da * da, -da * db, -tb / d - db * db)]


@functools.cache
def _compiled(dtype: str, backend: str = "numpy"):
    a, b = sg.vector("a", dtype=dtype), sg.vector("b", dtype=dtype)
    y = log_sigmoid_difference(a, b)
    ga, gb = sg.grad(sg.sum(y), [a, b])
    haa, hab = sg.grad(sg.sum(ga), [a, b])
    hbb = sg.grad(sg.sum(gb), b)
    return sg.function([a, b], [y, ga, gb, haa, hab, hbb], backend=backend)


def _ulps(got, expected, dtype, scale) -> np.ndarray:
    info = np.finfo(dtype)
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    return np.abs(got - expected) / np.maximum(scale, float(info.tiny)) / float(info.eps)


@pytest.mark.parametrize("dtype, pairs", [("float64", PAIRS), ("float32", PAIRS32)], ids=["float64", "float32"])
def test_value_gradient_and_hessian_match_mpmath(dtype, pairs):
    a, b = (np.array(v, dtype=dtype) for v in zip(*pairs))
    got = _compiled(dtype)(a, b)
    exact = np.array([_exact(float(x), float(y)) for x, y in zip(a, b)]).T  # (the pairs as rounded)
    labels = ("value", "∂a", "∂b", "∂aa", "∂ab", "∂bb")
    for label, g, e in zip(labels, got, exact):
        assert g.dtype == np.dtype(dtype) and np.all(np.isfinite(g)), (label, g)
        # the second derivatives of the difference are held to the scale of their terms
        scale = np.abs(e) if label in labels[:3] else np.maximum(np.abs(e), np.abs(exact[1] * exact[2]))
        ulps = _ulps(g, e, dtype, scale)
        assert np.all(ulps <= 8), (label, list(zip(a[ulps > 8], b[ulps > 8])), g, e)


def test_written_domain_is_kept():
    a = np.array([1.0, 2.0, -np.inf, np.inf, -np.inf, 3.0, np.nan])
    b = np.array([2.0, 2.0, -np.inf, np.inf, np.inf, np.nan, 0.0])
    value, ga, gb, *_ = _compiled("float64")(a, b)
    np.testing.assert_array_equal(value, [np.nan, -np.inf, -np.inf, -np.inf, np.nan, np.nan, np.nan])
    np.testing.assert_array_equal(ga, [np.nan, np.inf, 0.0, 0.0, np.nan, np.nan, np.nan])
    np.testing.assert_array_equal(gb, [np.nan, -np.inf, 0.0, 0.0, np.nan, np.nan, np.nan])


def test_infinite_bounds_are_the_one_sided_functions():
    a = np.array([np.inf, 2.0, np.inf])
    b = np.array([1.0, -np.inf, -np.inf])
    value, ga, gb, *_ = _compiled("float64")(a, b)
    with mp.workdps(40):  # log σ(-1) and log σ(2); the slopes σ(-2) and -σ(1)
        expected = [float(mp.log(_sigmoid(-1))), float(mp.log(_sigmoid(2))), 0.0]
        np.testing.assert_allclose(value, expected, rtol=4e-16)
        np.testing.assert_allclose(ga, [0.0, float(_sigmoid(-2)), 0.0], rtol=4e-16)
        np.testing.assert_allclose(gb, [-float(_sigmoid(1)), 0.0, 0.0], rtol=4e-16)


def test_broadcasting_and_dtypes():
    a, b = sg.matrix("a"), sg.vector("b", dtype="float32")
    assert log_sigmoid_difference(a, b).dtype == np.float64
    out = sg.function([a, b], log_sigmoid_difference(a, b))(np.array([[3.0], [60.0]]), np.array([0.0, 1.0], "float32"))
    assert out.shape == (2, 2)
    h = sg.vector("h", dtype="float16")
    half = sg.function([h], log_sigmoid_difference(h, h - 1.0))(np.array([0.0, 20.0], np.float16))
    assert half.dtype == np.float16 and np.all(np.isfinite(half))


def test_reads_its_operands():
    check_reads(LogSigmoidDifference(), np.array([50.0, 3.0, -800.0, 1.0]), np.array([45.0, -3.0, -801.0, 2.0]))


def test_second_derivative_against_finite_differences():
    sg.testing.check_grads(
        log_sigmoid_difference, [np.array([2.0, -1.0, 6.0]), np.array([0.5, -3.0, 5.5])], order=2, rtol=1e-6
    )


@pytest.mark.parametrize("backend", ["jax", "numba"])
def test_other_backends_agree(backend):
    pytest.importorskip(backend)
    a, b = (np.array(v) for v in zip(*PAIRS[:6]))
    for got, want in zip(_compiled("float64", backend)(a, b), _compiled("float64")(a, b)):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300)
