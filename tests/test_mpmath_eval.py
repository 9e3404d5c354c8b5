"""The mpmath evaluator: op semantics at high precision, extended reals, composites and loops."""

from __future__ import annotations

import numpy as np
import pytest

import stablegrad as sg
from stablegrad.audit.mpmath_eval import MPMATH_IMPLEMENTATIONS, evaluate, to_float

mpmath = pytest.importorskip("mpmath")


def _floats(values):
    return [float(v) for v in np.asarray(values, dtype=object).ravel()]


def test_mpmath_naive_logsumexp_is_exact_past_the_float_range():
    x = sg.vector("x")
    naive = sg.log(sg.sum(sg.exp(x)))
    gradient = sg.grad(naive, x, recognition=False)
    data = np.array([1000.0, 999.0, -5.0])
    value, g = evaluate([x], [naive, gradient], [data], dps=50)
    with mpmath.workdps(50):
        terms = [mpmath.exp(mpmath.mpf(v)) for v in data]
        total = mpmath.fsum(terms)
        assert abs(value[()] - mpmath.log(total)) < mpmath.mpf(10) ** -45
        for got, term in zip(g, terms):
            assert abs(got - term / total) < mpmath.mpf(10) ** -45


def test_logcumsumexp_is_evaluated_exactly_by_its_own_rule():
    from stablegrad.ops.stable import LogCumSumExp

    x = sg.matrix("x")
    data = np.array([[1000.0, -3.0, 2.0], [-40.0, -1000.0, 7.0]])
    (value,) = evaluate([x], [sg.logcumsumexp(x, axis=1)], [data], dps=60)
    assert LogCumSumExp in MPMATH_IMPLEMENTATIONS
    with mpmath.workdps(60):
        for row, got in zip(data, value):
            for k in range(len(row)):
                exact = mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(v)) for v in row[: k + 1]))
                assert abs(got[k] - exact) < mpmath.mpf(10) ** -55


@pytest.mark.parametrize(
    ("build", "data", "expected"),
    [
        (lambda x: sg.exp(x), [-np.inf], [0.0]),
        (lambda x: sg.log(x), [0.0], [-np.inf]),
        (lambda x: sg.log(x), [-1.0], [np.nan]),
        (lambda x: sg.sqrt(x), [-4.0], [np.nan]),
        (lambda x: x - x[::-1], [np.inf, np.inf], [np.nan, np.nan]),
        (lambda x: x[:1] * x[1:], [0.0, np.inf], [np.nan]),
        (lambda x: x[:1] / x[1:], [0.0, 0.0], [np.nan]),
        (lambda x: x[:1] / x[1:], [-2.0, 0.0], [-np.inf]),
        (lambda x: sg.maximum(x, 0.0), [np.nan, -1.0], [np.nan, 0.0]),
        (lambda x: x**0.0, [np.nan], [1.0]),
        (lambda x: sg.max(x), [1.0, np.nan], np.nan),
        (lambda x: sg.where(x > 0, x, 0.0), [2.0, -3.0], [2.0, 0.0]),
        (lambda x: sg.exp(x), [1e300], [np.inf]),
    ],
)
def test_mpmath_extended_real_semantics(build, data, expected):
    x = sg.vector("x")
    [value] = evaluate([x], [build(x)], [np.array(data)], dps=30)
    np.testing.assert_array_equal(to_float(value), np.asarray(expected, dtype=float))


def test_mpmath_huge_exponent_is_exact_and_quick():
    x = sg.vector("x")
    [value] = evaluate([x], [sg.log(sg.exp(x) + sg.exp(x))], [np.array([1e300, -1e300])], dps=330)
    with mpmath.workdps(330):
        assert abs(value[0] - (mpmath.mpf(1e300) + mpmath.log(2))) < mpmath.mpf(10) ** -20
        assert abs(value[1] - (mpmath.mpf(-1e300) + mpmath.log(2))) < mpmath.mpf(10) ** -20


def test_mpmath_symbolic_op_runs_through_its_body():
    x = sg.matrix("x")
    out = sg.log_softmax(x, axis=1)
    data = np.array([[1000.0, 0.0, -1000.0], [1.0, 2.0, 3.0]])
    [value] = evaluate([x], [out], [data], dps=40)
    with mpmath.workdps(40):
        for row, got in zip(data, value):
            total = mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(v)) for v in row))
            for v, g in zip(row, got):
                assert abs(g - (mpmath.mpf(v) - total)) < mpmath.mpf(10) ** -35


def test_mpmath_scan_loops_over_its_step_graph():
    xs = sg.vector("xs")
    total, _ = sg.scan(lambda c, x: (sg.log(sg.exp(c) + sg.exp(x)), c), sg.constant(0.0), xs)
    g = sg.grad(total, xs, recognition=False)
    data = np.array([800.0, 801.0, 2.0])
    value, gradient = evaluate([xs], [total, g], [data], dps=40)
    with mpmath.workdps(40):
        terms = [mpmath.mpf(1)] + [mpmath.exp(mpmath.mpf(v)) for v in data]
        expected = mpmath.log(mpmath.fsum(terms))
        assert abs(value[()] - expected) < mpmath.mpf(10) ** -30
        for got, term in zip(gradient, terms[1:]):
            assert abs(got - term / mpmath.fsum(terms)) < mpmath.mpf(10) ** -30


def test_mpmath_float_result_of_integers_is_exact():
    x = sg.tensor("x", shape=(2,), dtype="int64")
    (value,) = evaluate([x], [sg.exp(x)], [np.array([800, 0])])
    assert mpmath.almosteq(value[0], mpmath.exp(800), rel_eps=1e-14)  # not float64's overflow to inf
    assert value[1] == 1


def test_mpmath_integer_and_shape_ops_stay_exact():
    x = sg.matrix("x")
    i = sg.vector("i", dtype="int64")
    out = sg.sum(sg.reshape(sg.transpose(x), (-1,))[i] * 2) + sg.astype(sg.argmax(x), "float64")
    [value] = evaluate([x, i], [out], [np.arange(6.0).reshape(2, 3), np.array([0, 5])], dps=20)
    assert float(value) == (0.0 + 5.0) * 2 + 5


def test_mpmath_registry_covers_every_plain_op():
    from stablegrad.audit.mpmath_eval import _register_once
    from stablegrad.ops import elementwise, math

    _register_once()
    for module in (elementwise, math):
        for name in dir(module):
            cls = getattr(module, name)
            if isinstance(cls, type) and issubclass(cls, sg.Op) and getattr(cls, "__final__", False):
                assert cls in MPMATH_IMPLEMENTATIONS, name


def test_mpmath_matches_float64_on_ordinary_inputs():
    rng = np.random.default_rng(0)
    x = sg.matrix("x")
    ops = [sg.tanh, sg.sin, sg.cos, sg.arctan, sg.erf, sg.erfc, sg.expm1, sg.log1p, sg.sinh, sg.gammaln, sg.digamma]
    outs = [op(sg.abs(x) + 0.5) for op in ops]
    data = rng.standard_normal((2, 3))
    values = evaluate([x], outs, [data], dps=30)
    compiled = sg.function([x], outs, recognition=False)(data)
    for got, want in zip(values, compiled):
        np.testing.assert_allclose(to_float(got), want, rtol=1e-13)
