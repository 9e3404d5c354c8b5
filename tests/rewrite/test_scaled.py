"""log(kv(v, x)) and log(iv(v, x)) through the exponentially scaled functions, and quotients of exp
sums divided through (rewrite/scaled.py)."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

import stablegrad as sg

pytest.importorskip("mpmath")

CASES = [
    ("kv", sg.kv, mpmath.besselk, [0.5, 3.0, 80.0, 800.0, 1e5]),
    ("iv", sg.iv, mpmath.besseli, [0.5, 3.0, 80.0, 800.0, 1e5, -3.0]),
]


def _exact_log_and_slope(mp_fn, v: float, x: float) -> tuple[float, float]:
    with mpmath.workdps(40):
        f = lambda t: mpmath.log(mp_fn(v, t))  # noqa: E731
        return float(f(mpmath.mpf(x))), float(mpmath.diff(f, mpmath.mpf(x)))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("name", "fn", "mp_fn", "points"), CASES, ids=[c[0] for c in CASES])
def test_the_log_is_finite_and_accurate_where_the_function_under_or_overflows(dtype, name, fn, mp_fn, points):
    v = 2.0  # (an integer order: iv is real at negative x too)
    x = sg.tensor("x", shape=(None,), dtype=dtype)
    y = sg.log(fn(v, x))
    value, slope = sg.function([x], [y, sg.grad(sg.sum(y), x)])(np.array(points, dtype))
    with np.errstate(all="ignore"):
        written = sg.function([x], y, recognition=False)(np.array(points, dtype))
    assert not np.all(np.isfinite(written))  # past ~700 (float64) or ~88 (float32) the function is 0 or inf
    rtol = 1e-13 if dtype == "float64" else 1e-5
    for k, point in enumerate(points):
        exact_value, exact_slope = _exact_log_and_slope(mp_fn, v, point)
        np.testing.assert_allclose(value[k], exact_value, rtol=rtol, err_msg=f"{name} at {point}")
        np.testing.assert_allclose(slope[k], exact_slope, rtol=rtol * 100, err_msg=f"{name}' at {point}")
    assert value.dtype == slope.dtype == np.dtype(dtype)


def test_the_domain_and_the_infinite_points_stay_as_written():
    x = sg.vector("x")
    points = np.array([0.0, -1.0, np.inf, np.nan])
    for fn, v in ((sg.kv, 1.5), (sg.iv, 1.5), (sg.iv, 2.0)):
        with np.errstate(all="ignore"):
            written = sg.function([x], sg.log(fn(v, x)), recognition=False)(points)
        # NaN and ±inf exactly where they are written (iv(2, -1) is finite: within an ulp)
        np.testing.assert_allclose(sg.function([x], sg.log(fn(v, x)))(points), written, rtol=4e-16)


def test_the_rules_fire_and_a_near_miss_does_not():
    x = sg.vector("x")
    f = sg.function([x], [sg.log(sg.kv(1.0, x)), sg.log(sg.iv(1.0, x)), sg.log(sg.kv(1.0, x) + 1.0)])
    ops = [type(n.op).__name__ for n in f.nodes]
    assert "Kve" in ops and "Ive" in ops
    assert "Kv" in ops  # log(kv + 1) is not a log of kv


def test_a_term_that_is_the_negated_factor_itself():
    # in the gradient of sqrt(y² - y) - y, y = cosh(x), a term is -exp(x) itself: over exp(max(x, 0)) it
    # is -1 (the fuzzer found it crashing the rule, which rebuilt -f(x) with f dropped as -(1 the array))
    x = sg.vector("x")
    y = 0.5 * sg.exp(x) + 0.5 / sg.exp(x)
    out = sg.sqrt(y * y - 1.0 * y) - y
    f = sg.function([x], [out, sg.grad(sg.sum(out), x)])
    points = np.array([0.5, 3.0, -2.0])
    value, slope = f(points)

    def exact(t):
        c = mpmath.cosh(t)
        return mpmath.sqrt(c * c - c) - c

    with mpmath.workdps(60):
        np.testing.assert_allclose(value, [float(exact(v)) for v in points], rtol=1e-14)
        np.testing.assert_allclose(slope, [float(mpmath.diff(exact, v)) for v in points], rtol=1e-12)


def test_a_subtracted_term_that_is_the_scale_itself():
    # (sinh(x) - cosh(x))/(cosh(x) + 2·sinh(x)) over cosh(x): the subtracted cosh(x) is the number -1
    # (the fuzzer found the rule negating it as a graph node)
    x = sg.vector("x")
    out = (sg.sinh(x) - sg.cosh(x)) / (sg.cosh(x) + 2.0 * sg.sinh(x))
    f = sg.function([x], out)
    assert "[quotient_scaled_by_cosh]" in f.explain()
    points = np.array([0.5, 3.0, 800.0])
    with mpmath.workdps(60):
        exact = [float((mpmath.sinh(t) - mpmath.cosh(t)) / (mpmath.cosh(t) + 2 * mpmath.sinh(t))) for t in points]
    np.testing.assert_allclose(f(points), exact, rtol=1e-14)
