"""The rules of rewrite/products.py (issue 17): each fires on its pattern at the points the issue
names, is named by `explain`, agrees in value and gradient with the formula as written evaluated
exactly (mpmath, float64 and float32), equals the written formula where that one is fine, keeps the
written domain at the edges (table of hand-written values), keeps shapes and dtypes, fires inside
user composites and loop bodies and on every backend, and leaves its near misses alone."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import mpmath as mp
import numpy as np
import pytest

import stablegrad as sg

from .written import as_held as _k
from .written import log as _log
from .written import sigmoid as _sigmoid
from .written import ulps as _ulps

INF, NAN = np.inf, np.nan
DPS = 400  # 1 + 1e-300 and a step of 1e-320 beside it
LATE = "sum_of_logs_of_magnitudes_from_log_of_product"
SUM = "sum_of_logs_from_log_of_product"
DET = "slogdet_from_log_of_det"
SINK = "where_from_product_with_zero_branch"
EXPLOG = "identity_from_exp_of_log"
POW = "power_of_sum_from_product_of_powers"


# -- the written formulas in mpmath ---------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    name: str
    rule: str
    build: Callable
    exact: Callable  # (*xs, k) in mpmath
    points: tuple  # float64 inputs (pairs for two operands), some where the written formula breaks
    points32: tuple
    near: Callable  # a near miss: the rule must not fire
    #: (input, value) by hand: ±0, ±tiny, ±inf, NaN, negative (one operand)
    edges: tuple = ()
    arity: int = 1
    #: points for XLA, which flushes subnormal numbers to zero (default: those with normal inputs)
    flushed: tuple | None = None
    ulps: float = 4
    grad_ulps: float = 8
    grad_floor: float = 0.0  # the gradient held to ulps of max(|exact|, grad_floor)


CASES = [
    Case(
        "log(1/x)",
        SUM,
        lambda x: sg.log(1.0 / x),
        lambda x, k: _log(1 / x),
        (1e-320, 1e-310, 1e-300, 1e-10, 0.5, 3.0, 1e300),
        (1e-44, 1e-40, 1e-30, 1e-5, 0.5, 3.0, 1e38),
        lambda x: sg.log(-1.0 / x),  # a negative constant
        # 1/(-0) = -inf, log → NaN; 1/inf = 0, log → -inf; 1/(-inf) = -0, log → -inf (as written)
        ((0.0, INF), (-0.0, NAN), (1e-310, 713.8013788281542), (-1e-310, NAN), (INF, -INF), (-INF, -INF), (NAN, NAN)),
    ),
    Case(
        "log(x / 0.1)",
        SUM,
        lambda x: sg.log(x / 0.1),
        lambda x, k: _log(x / k(0.1)),
        (1e-320, 1e-310, 1e-300, 0.5, 3.0, 1e300, 1e308),
        (1e-44, 1e-39, 1e-30, 0.5, 3.0, 1e37, 3e38),
        lambda x: sg.log(x / (x - 2.0)),  # neither factor of known sign
        ((0.0, -INF), (-0.0, -INF), (-1e-300, NAN), (1e308, 711.4987937351601), (INF, INF), (-INF, NAN), (NAN, NAN)),
    ),
    Case(
        "log|a·b|",
        SUM,
        lambda a, b: sg.log(sg.abs(a * b)),
        lambda a, b, k: _log(abs(a * b)),
        ((1e-200, -1e-200), (-1e200, 3e200), (0.5, -3.0), (-1e-300, -1e-30), (-2.0, 1e308), (7.0, 1e-320)),
        ((1e-30, -1e-30), (-1e20, 3e20), (0.5, -3.0), (-1e-38, -1e-5), (-2.0, 3e38)),
        lambda a, b: sg.log(sg.abs(a + b)),  # a sum
        arity=2,
    ),
    Case(
        "log(σ(a)·σ(b))",
        SUM,
        lambda a, b: sg.log(sg.sigmoid(a) * sg.sigmoid(b)),
        lambda a, b, k: _log(_sigmoid(a) * _sigmoid(b)),
        ((-800.0, -800.0), (-400.0, -400.0), (-1.0, -2.0), (0.0, 0.0), (3.0, -5.0), (40.0, -800.0), (-745.0, 2.0)),
        ((-100.0, -100.0), (-60.0, -60.0), (-1.0, -2.0), (0.0, 0.0), (3.0, -5.0), (15.0, -90.0)),
        lambda a, b: sg.log(sg.sigmoid(a) * (b - 1.0)),  # one factor of unknown sign
        arity=2,
    ),
    Case(
        "log(exp(x) / x²)",
        SUM,
        lambda x: sg.log(sg.exp(x) / (x * x)),
        lambda x, k: _log(mp.exp(x) / (x * x)),
        (-800.0, -30.0, -1e-5, 0.5, 3.0, 40.0, 800.0),
        (-100.0, -30.0, -1e-3, 0.5, 3.0, 40.0, 100.0),
        lambda x: sg.log(sg.exp(x) / (x * (x + 1.0))),
        ((0.0, INF), (INF, NAN), (-INF, -INF), (NAN, NAN)),  # inf/inf: NaN, 0/inf: log 0, as written
    ),
    Case(
        "log(x·x)",
        SUM,
        lambda x: sg.log(x * x),
        lambda x, k: _log(x * x),
        (1e-200, 1e-170, 0.5, 3.0, 1e170, 1e200, -1e-200, -1e200),
        (1e-30, 1e-20, 0.5, 3.0, 1e19, 1e30, -1e-30, -1e30),
        lambda x: sg.log(x * (x + 1.0)),  # not a square
        ((0.0, -INF), (-0.0, -INF), (1e-200, -921.0340371976183), (INF, INF), (-INF, INF), (NAN, NAN)),
    ),
    Case(
        "log1p(x·x / 3)",
        "sum_of_logs_from_log1p_of_square",
        lambda x: sg.log1p(x * x / 3.0),
        lambda x, k: _log(1 + x * x / k(3.0)),
        (1e-150, 1e-10, 0.5, 3.0, 1e100, 1e160, 1e200, -1e200),  # (1 + 1e-300/3 needs the reference's 400 digits)
        (1e-30, 1e-5, 0.5, 3.0, 1e19, 1e20, 1e30, -1e30),
        lambda x: sg.log1p(x * x - 3.0),  # not a product
        ((0.0, 0.0), (1e200, 919.9354249089502), (INF, INF), (-INF, INF), (NAN, NAN)),
    ),
    Case(
        "exp(x)·where(x > 700, 0, 1)",
        SINK,
        lambda x: sg.exp(x) * sg.where(x > 700.0, 0.0, 1.0),
        lambda x, k: mp.exp(x) * (0 if x > 700 else 1),
        (-800.0, -1.0, 0.0, 1.0, 699.0, 701.0, 800.0, 1e5),
        (-100.0, -1.0, 0.0, 1.0, 80.0, 701.0, 800.0),
        lambda x: sg.exp(x) * sg.where(x > 700.0, 0.5, 1.0),  # no zero branch
        ((0.0, 1.0), (1e300, 0.0), (INF, 0.0), (-INF, 0.0), (NAN, NAN)),
    ),
    Case(
        "where(x < 700, x, 0)·exp(x)",
        SINK,
        lambda x: sg.where(x < 700.0, x, 0.0) * sg.exp(x),
        lambda x, k: (x if x < 700 else 0) * mp.exp(x),
        (-700.0, -1.0, 0.0, 1.0, 699.0, 701.0, 800.0),
        (-80.0, -1.0, 0.0, 1.0, 80.0, 701.0, 800.0),
        lambda x: sg.where(x < 700.0, x, 1.0) * sg.exp(x),
        ((0.0, 0.0), (1e300, 0.0), (INF, 0.0), (NAN, NAN)),
        grad_floor=1.0,  # (1 + x)e^x is 0 at x = -1: held to the scale of its terms
    ),
    Case(
        # (value as written: 0/B is 0 wherever written is not NaN; the gradient, -0·B'/B² =
        # 0·inf as written, is what changes. B = 2^x: a quotient by exp(x) is a product with
        # exp(-x) first, product_from_quotient_by_exp's)
        "where(x < -1010, 0, x) / exp2(x)",
        SINK,
        lambda x: sg.where(x < -1010.0, 0.0, x) / sg.exp2(x),
        lambda x, k: (0 if x < -1010 else x) / mp.power(2, x),
        # (not 1000: the quotient's own pullback, -g·a/b², overflows there as written)
        (-1040.0, -1024.0, -1011.0, -1.0, 0.0, 3.0, 430.0),
        (-40.0, -1.0, 0.0, 3.0, 40.0),
        lambda x: sg.where(x < -1010.0, 0.5, x) / sg.exp2(x),  # no zero branch
        # 2^-1100 = 0: 0/0 stays NaN (a zero B cannot be told from a genuine one)
        ((0.0, 0.0), (-1100.0, NAN), (NAN, NAN)),
        flushed=(-1011.0, -1.0, 0.0, 3.0, 430.0),  # (2^-1024 is subnormal: 0 on XLA, and 0/0 NaN)
    ),
    Case(
        "exp(log(x))",
        EXPLOG,
        lambda x: sg.exp(sg.log(x)),
        lambda x, k: mp.exp(_log(x)) if x > 0 else _log(x),
        (1e-300, 1e-100, 1e-10, 0.5, 3.0, 1e10, 7e150, 1e300),
        (1e-38, 1e-20, 1e-5, 0.5, 3.0, 1e20, 1e38),
        lambda x: sg.exp(sg.log(x) + 1.0),
        ((0.0, 0.0), (-0.0, 0.0), (-1.0, NAN), (1e-320, 1e-320), (INF, INF), (-INF, NAN), (NAN, NAN)),
    ),
    Case(
        "expm1(log1p(x))",
        EXPLOG,
        lambda x: sg.expm1(sg.log1p(x)),
        lambda x, k: mp.expm1(mp.log1p(x)),
        (-0.9999999, -0.5, -1e-10, 1e-300, 1e-10, 3.0, 1e10, 1e300),
        (-0.999, -0.5, -1e-6, 1e-30, 3.0, 1e20, 1e38),
        lambda x: sg.expm1(2.0 * sg.log1p(x)),
        ((0.0, 0.0), (-1.0, -1.0), (-2.0, NAN), (INF, INF), (-INF, NAN), (NAN, NAN)),
    ),
    Case(
        "exp(log1p(x))",
        EXPLOG,
        lambda x: sg.exp(sg.log1p(x)),
        lambda x, k: mp.exp(mp.log1p(x)),
        (-0.999, -0.5, -1e-10, 1e-300, 3.0, 1e10, 1e300),
        (-0.999, -0.5, -1e-6, 3.0, 1e20, 1e38),
        lambda x: sg.exp(sg.log1p(x) - 1.0),
        ((0.0, 1.0), (-1.0, 0.0), (-2.0, NAN), (INF, INF), (-INF, NAN), (NAN, NAN)),
    ),
    Case(
        "10**x · 10**(-x)",
        POW,
        lambda x: 10.0**x * 10.0 ** (-x),
        lambda x, k: mp.power(10, x) * mp.power(10, -x),
        (-400.0, -310.0, -1.0, 0.0, 0.5, 300.0, 400.0),
        (-50.0, -39.0, -1.0, 0.0, 0.5, 30.0, 50.0),
        lambda x: 10.0**x * 9.0 ** (-x),  # another base
        ((0.0, 1.0), (1e300, 1.0), (INF, NAN), (-INF, NAN), (NAN, NAN)),  # inf - inf: NaN as written (inf·0)
        grad_floor=1.0,  # the derivative is 0: held to ulps of 1, the scale of its two terms
    ),
    Case(
        "2**a / 2**b",
        POW,
        lambda a, b: 2.0**a / 2.0**b,
        lambda a, b, k: mp.power(2, a) / mp.power(2, b),
        ((1100.0, 1050.0), (-1100.0, -1050.0), (3.0, 1.0), (0.5, -0.25), (-1074.5, -2.0), (1030.0, 1100.0)),
        ((130.0, 120.0), (-160.0, -150.0), (3.0, 1.0), (0.5, -0.25), (-149.5, -2.0)),
        lambda a, b: 2.0**a / (-2.0) ** b,  # a negative base
        arity=2,
    ),
]
IDS = [c.name for c in CASES]
UNARY = [c for c in CASES if c.arity == 1]


def _symbols(case: Case, dtype: str):
    return [sg.vector(f"x{i}", dtype=dtype) for i in range(case.arity)]


@functools.cache
def _compiled(case: Case, dtype: str, recognition: bool = True, backend: str = "numpy"):
    xs = _symbols(case, dtype)
    y = case.build(*xs)
    grads = sg.grad(sg.sum(y), xs, recognition=recognition)
    return sg.function(xs, [y, *grads], recognition=recognition, backend=backend)


def _columns(case: Case, points, dtype: str = "float64") -> list[np.ndarray]:
    columns = [np.array(c) for c in zip(*points)] if case.arity == 2 else [np.array(points)]
    return [c.astype(dtype) for c in columns]


def _exact(case: Case, dtype: str, args: list[float]) -> list[float]:
    """The written formula and its partial derivatives at `args`, exactly (NaN outside the domain)."""
    k = _k(dtype)

    def f(*xs):
        return case.exact(*xs, k)

    with mp.workdps(DPS):
        xs = [mp.mpf(a) for a in args]
        value = f(*xs)
        if not mp.isfinite(value):
            return [float(value)] + [NAN] * case.arity
        return [float(value)] + [float(_partial(f, xs, i)) for i in range(case.arity)]


def _partial(f, xs: list, i: int):
    """∂f/∂x_i by a central difference with a step relative to x_i: with DPS digits its error, of the
    order of the step squared, is far below float64's (mp.diff's absolute step is not, at 1e300)."""
    h = abs(xs[i]) * mp.mpf(10) ** -20 if xs[i] != 0 else mp.mpf(10) ** -20
    up, down = list(xs), list(xs)
    up[i], down[i] = xs[i] + h, xs[i] - h
    return (f(*up) - f(*down)) / (2 * h)


def _exact_table(case: Case, dtype: str, args: list[np.ndarray]) -> np.ndarray:
    return np.array([_exact(case, dtype, [float(a[i]) for a in args]) for i in range(len(args[0]))]).T


# -- the rules fire and give the written formula's exact value and gradient ---------------------------------
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_explain_names_the_rule(case):
    assert f"[{case.rule}]" in _compiled(case, "float64").explain()
    assert f"[{case.rule}]" in _compiled(case, "float32").explain()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_value_and_gradient_match_the_written_formula_exactly(case, dtype):
    args = _columns(case, case.points if dtype == "float64" else case.points32, dtype)
    got = _compiled(case, dtype)(*args)
    exact = _exact_table(case, dtype, args)
    for i, (g, e) in enumerate(zip(got, exact)):
        assert g.dtype == np.dtype(dtype) or (i == 0 and case.rule == SINK)  # (a where of Python numbers: float64)
        # an exact value beyond the dtype's range is ±inf in it (d log(1/x) = -1/x at x = 1e-310)
        with np.errstate(over="ignore"):
            rounded = np.asarray(e, np.float64).astype(dtype)
        assert not np.any(np.isnan(g)), (i, args, g)
        ulps = _ulps(g, rounded, dtype, floor=case.grad_floor if i else 0.0)
        limit = case.ulps if i == 0 else case.grad_ulps
        assert np.all(ulps <= limit), (i, [a[ulps > limit] for a in args], g[ulps > limit], e[ulps > limit])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_written_formula_breaks_where_the_recognised_one_does_not(case):
    args = _columns(case, case.points)
    with np.errstate(all="ignore"):
        written = _compiled(case, "float64", recognition=False)(*args)
    exact = _exact_table(case, "float64", args)
    worst = []
    for i, (w, e) in enumerate(zip(written, exact)):
        with np.errstate(invalid="ignore", over="ignore"):
            ulps = _ulps(w, e, "float64", floor=case.grad_floor if i else 0.0)
        worst.append(np.max(np.where(np.isnan(w), np.inf, ulps)))
    assert max(worst) > 16, f"{case.name}: no point here where the written formula is off"


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_where_the_written_formula_is_fine_the_answer_is_the_written_one(case, dtype):
    """Where the written value and gradient are normal numbers, the guarded rules give the written
    value itself (bit for bit: its branch computes it) and a gradient no further from the exact one
    than the written gradient and an ulp (the sunk product's pullback, and a product kept in range,
    multiply in another order); the exp-of-log rules are no further from the exact answer than the
    written formula."""
    args = _columns(case, case.points if dtype == "float64" else case.points32, dtype)
    with np.errstate(all="ignore"):
        written = _compiled(case, dtype, recognition=False)(*args)
    got = _compiled(case, dtype)(*args)
    info = np.finfo(dtype)
    fine = np.ones(len(args[0]), bool)
    for w in written:
        fine &= np.isfinite(w) & ((np.abs(w) >= info.tiny) | (w == 0))
    assert fine.any()
    exact = _exact_table(case, dtype, args)
    if case.rule != EXPLOG:
        np.testing.assert_array_equal(got[0][fine], written[0][fine])
    for i, (g, w, e) in enumerate(zip(got, written, exact)):
        assert np.all(_ulps(g[fine], e[fine], dtype) <= _ulps(w[fine], e[fine], dtype) + 1), i


# -- edges: 0, ±tiny, ±huge, ±inf, NaN (by hand) -----------------------------------------------------------
EDGED = [c for c in CASES if c.edges]


@pytest.mark.parametrize("case", EDGED, ids=[c.name for c in EDGED])
def test_edges(case):
    x = np.array([p for p, _ in case.edges])
    expected = np.array([v for _, v in case.edges])
    with np.errstate(all="ignore"):
        value, _ = _compiled(case, "float64")(x)
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(value), nan, err_msg=f"{x}: {value}")
    np.testing.assert_allclose(value[~nan], expected[~nan], rtol=1e-12, atol=0)


# -- inside user composites and loop bodies, other backends ----------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_fires_inside_a_user_composite(case):
    zs = _symbols(case, "float64")
    composite = sg.OpFromGraph(zs, [case.build(*zs)])
    xs = _symbols(case, "float64")
    y = composite(*xs)
    f = sg.function(xs, [y, *sg.grad(sg.sum(y), xs)])
    assert f"[{case.rule}]" in f.explain()
    args = _columns(case, case.points)
    for got, want in zip(f(*args), _compiled(case, "float64")(*args)):
        np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)


@pytest.mark.parametrize("case", UNARY, ids=[c.name for c in UNARY])
def test_fires_inside_a_scan_body(case):
    def step(total, xt):
        return total + case.build(xt), None

    (points,) = _columns(case, case.points)
    rows = np.stack([points, points[::-1]])  # two steps
    xs = sg.matrix("xs")
    final, _ = sg.scan(step, sg.zeros(rows.shape[1]), xs)
    f = sg.function([xs], [final, sg.grad(sg.sum(final), xs)])
    assert f"[{case.rule}]" in f.explain()
    value, grad = f(rows)
    single = _compiled(case, "float64")
    first, second = single(rows[0]), single(rows[1])
    np.testing.assert_allclose(value, first[0] + second[0], rtol=1e-14)
    np.testing.assert_allclose(grad, np.stack([first[1], second[1]]), rtol=1e-14)


@pytest.mark.parametrize("backend", ["jax", "numba"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_recognised_formulas_run_on_other_backends(case, backend):
    f = _compiled(case, "float64", backend=backend)
    assert f"[{case.rule}]" in f.explain()
    # (XLA flushes subnormal numbers to zero: inputs are normal, results compared down to the smallest
    # normal number)
    points = case.points
    if backend == "jax":
        normal = [p for p in points if all(v == 0 or abs(v) >= np.finfo(np.float64).tiny for v in np.atleast_1d(p))]
        points = case.flushed if case.flushed is not None else tuple(normal)
    args = _columns(case, points)
    for got, want in zip(f(*args), _compiled(case, "float64")(*args)):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=float(np.finfo(np.float64).tiny))


# -- near misses ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_near_miss_is_left_alone(case, dtype):
    xs = _symbols(case, dtype)
    y = case.near(*xs)
    f = sg.function(xs, y)
    assert f"[{case.rule}]" not in f.explain(), f.explain()
    points = [p for p in (case.points if dtype == "float64" else case.points32) if np.max(np.abs(p)) <= 3]
    args = _columns(case, points, dtype)
    with np.errstate(all="ignore"):
        written = sg.function(xs, y, recognition=False)(*args)
        np.testing.assert_allclose(f(*args), written, rtol=1e-12 if dtype == "float64" else 1e-5, equal_nan=True)


def test_two_factors_of_unknown_sign_are_left_to_the_late_rule():
    a, b = sg.vector("a"), sg.vector("b")
    for y in (sg.log(a * b), sg.log(a / b), sg.log(sg.abs(a) * b), sg.log(sg.sqrt(a) / b)):
        explained = sg.function([a, b], y).explain()
        assert f"[{SUM}]" not in explained and f"[{LATE}]" in explained
    # both negative: log|a| + log|b| (the written product overflowed; a sum of logs would be NaN);
    # signs that differ: NaN, as written; a factor 0: -inf, as written; in range: the written log
    y = sg.log(a * b)
    f = sg.function([a, b], [y, *sg.grad(sg.sum(y), [a, b])])
    with np.errstate(all="ignore"):
        value, da, db = f(np.array([-1e200, -1e200, 0.0, -2.0]), np.array([-1e200, 1e200, -3.0, -3.0]))
        written = np.log(np.array([-1e200, -1e200, 0.0, -2.0]) * np.array([-1e200, 1e200, -3.0, -3.0]))
    np.testing.assert_allclose(value[0], 400 * np.log(10.0), rtol=1e-15)
    np.testing.assert_array_equal(value[1:], written[1:])
    np.testing.assert_allclose([da[0], db[0], da[3], db[3]], [-1e-200, -1e-200, -0.5, -1 / 3], rtol=1e-15)


@pytest.mark.parametrize("backend", ["numpy", "numba", "jax"])
def test_x_log_of_a_quotient_out_of_range(backend):
    # x·log(x/y) (xlogy once recognised) at x/y = 0 or inf as written: -inf, and an infinite partial in x
    if backend != "numpy":
        pytest.importorskip(backend)
    x, y = sg.vector("x"), sg.vector("y")
    out = x * sg.log(x / y)
    f = sg.function([x, y], [out, *sg.grad(sg.sum(out), [x, y])], backend=backend)
    assert f"[{LATE}]" in f.explain()
    xs, ys = np.array([3e-307, -1.5e-297, 1e300, 2.0, 0.0]), np.array([7e65, -8e305, 1e-300, 3.0, 5.0])
    got = f(xs, ys)
    with mp.workdps(DPS):
        exact = [
            [float(mp.mpf(a) * mp.log(mp.mpf(a) / mp.mpf(b))) for a, b in zip(xs[:4], ys[:4])],
            [float(mp.log(mp.mpf(a) / mp.mpf(b)) + 1) for a, b in zip(xs[:4], ys[:4])],
            [float(-mp.mpf(a) / mp.mpf(b)) for a, b in zip(xs[:4], ys[:4])],
        ]
    for g, e in zip(got, exact):
        np.testing.assert_allclose(g[:4], e, rtol=4e-16, atol=1e-300)
    assert got[0][4] == 0.0 and got[2][4] == 0.0  # xlogy at x = 0: 0


def test_a_variable_base_is_left_alone():
    x, a, b = sg.vector("x"), sg.vector("a"), sg.vector("b")
    assert f"[{POW}]" not in sg.function([x, a, b], x**a * x**b).explain()
    assert f"[{POW}]" not in sg.function([a, b], (-2.0) ** a * (-2.0) ** b).explain()
    assert f"[{POW}]" not in sg.function([a, b], 10.0**a * 10.0000001**b).explain()


# -- products of more factors, softmax, the domain of the zero branch ------------------------------------------
def test_three_sigmoids_and_two_softmax_entries():
    a, b, c = sg.vector("a"), sg.vector("b"), sg.vector("c")
    y = sg.log(sg.sigmoid(a) * sg.sigmoid(b) * sg.sigmoid(c))
    f = sg.function([a, b, c], [y, *sg.grad(sg.sum(y), [a, b, c])])
    value, *grads = f(np.array([-300.0, -1.0]), np.array([-300.0, 2.0]), np.array([-300.0, 0.5]))
    with mp.workdps(DPS):
        exact = [float(sum(_log(_sigmoid(mp.mpf(v))) for v in vs)) for vs in ((-300, -300, -300), (-1, 2, 0.5))]
        slope = [float(_sigmoid(mp.mpf(-v))) for v in (-300.0, -1.0)]  # d log σ(a) / da = σ(-a)
    np.testing.assert_allclose(value, exact, rtol=4e-16)
    np.testing.assert_allclose(grads[0], slope, rtol=4e-16)

    v = sg.vector("v")
    s = sg.softmax(v)
    y = sg.log(s[0] * s[1])
    f = sg.function([v], [y, sg.grad(y, v)])
    value, grad = f(np.array([-800.0, 0.0, 800.0]))
    assert value == -2400.0  # log softmax: -1600 and -800
    np.testing.assert_array_equal(grad, [1.0, 1.0, -2.0])
    value, grad = f(np.array([0.0, 1.0, 2.0]))
    with mp.workdps(DPS):
        z = mp.exp(0) + mp.exp(1) + mp.exp(2)
        exact = float(mp.log(mp.exp(0) / z * mp.exp(1) / z))
    np.testing.assert_allclose(value, exact, rtol=4e-16)


def test_the_zero_branch_keeps_nan_where_the_factor_is_nan():
    x = sg.vector("x")
    # (not log(x) alone: 0·log(x) is xlogy's, which takes 0 for it at any x, as SciPy's xlogy does)
    y = (sg.log(x) + 1.0) * sg.where(x <= 0.0, 0.0, 1.0)
    f = sg.function([x], [y, sg.grad(sg.sum(y), x)])
    with np.errstate(all="ignore"):
        value, grad = f(np.array([-1.0, 0.0, NAN, 2.0]))
    assert np.isnan(value[0]) and np.isnan(value[2])  # log(-1)·0 and NaN·0: a domain error stays one
    assert value[1] == 0.0 and grad[1] == 0.0  # log(0)·0: the where says 0 (written: -inf·0 = NaN)
    assert value[3] == float(np.log(2.0)) + 1.0 and grad[3] == 0.5


def test_a_quotient_sinks_its_zero_branch_for_the_gradient_only():
    x = sg.vector("x")
    y = sg.where(x < -1010.0, 0.0, 1.0) / sg.exp2(x)
    f = sg.function([x], [y, sg.grad(sg.sum(y), x)])
    with np.errstate(all="ignore"):
        written = sg.function([x], [y, sg.grad(sg.sum(y), x, recognition=False)], recognition=False)
        points = np.array([-1030.0, -1100.0, 0.0])
        (value, grad), (w_value, w_grad) = f(points), written(points)
    np.testing.assert_array_equal(value, w_value)  # 0, NaN (0/0), 1: the value as written
    assert np.isnan(w_grad[0]) and grad[0] == 0.0  # -0·B'/B² = 0·inf as written
    assert grad[2] == -np.log(2.0)


def test_a_quotient_by_exp_is_a_product_whose_zero_branch_is_exact():
    """where(x < -700, 0, 1)/exp(x) is where(x < -700, 0, 1)·exp(-x): exp(x) is never 0, so at
    x = -800 (where e^-800 underflows and the written quotient is 0/0) the answer is the exact 0."""
    x = sg.vector("x")
    y = sg.where(x < -700.0, 0.0, 1.0) / sg.exp(x)
    value, grad = sg.function([x], [y, sg.grad(sg.sum(y), x)])(np.array([-720.0, -800.0, 0.0]))
    np.testing.assert_array_equal(value, [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(grad, [0.0, 0.0, -1.0])


@pytest.mark.parametrize(
    "x_shape, declared, cond_shape",
    [((3,), (3,), (2, 3)), ((2, 3), (2, 3), (3,)), ((1,), (None,), (3,)), ((2, 1), (None, None), (1, 4))],
)
def test_a_zero_branch_keeps_the_written_shape_when_the_condition_broadcasts(x_shape, declared, cond_shape):
    x = sg.tensor("x", shape=declared, dtype="float32")
    m = sg.tensor("m", shape=cond_shape, dtype="bool")
    y = sg.exp(x) * sg.where(m, 0.0, 2.0)
    f = sg.function([x, m], [y, sg.grad(sg.sum(y), x)])
    assert f"[{SINK}]" in f.explain()
    values = np.full(x_shape, 100.0, np.float32)  # e^100 overflows float32
    mask = (np.arange(int(np.prod(cond_shape))) % 2 == 0).reshape(cond_shape)
    value, grad = f(values, mask)
    with np.errstate(all="ignore"):
        written = sg.function([x, m], y, recognition=False)(values, mask)
    assert value.shape == written.shape and value.dtype == written.dtype
    np.testing.assert_array_equal(value, np.where(mask, np.float32(0.0), np.float32(INF)) + np.zeros(written.shape))
    assert grad.shape == x_shape and not np.any(np.isnan(grad))


def test_float32_keeps_its_dtype_with_python_constants():
    x = sg.vector("x", dtype="float32")
    for y in (sg.log(x / 0.1), sg.exp(sg.log(x)), 10.0**x * 10.0 ** (-x), sg.exp(x) * sg.where(x > 80.0, 0.0, 1.0)):
        f = sg.function([x], [y, sg.grad(sg.sum(y), x)])
        # (where(c, 0.0, 1.0) of two Python numbers is float64, and so is its product with x)
        written = sg.function([x], y, recognition=False)(np.array([0.5, 3.0], np.float32))
        value, grad = f(np.array([0.5, 3.0], np.float32))
        assert value.dtype == written.dtype and grad.dtype == np.float32


# -- log det ---------------------------------------------------------------------------------------------------
def _mp_logdet(a: np.ndarray) -> tuple[float, np.ndarray]:
    """log det A and its gradient A⁻ᵀ, exactly."""
    with mp.workdps(DPS):
        m = mp.matrix(a.tolist())
        d = mp.det(m)
        inv_t = (m**-1).T
        return float(mp.log(d)), np.array(inv_t.tolist(), dtype=np.float64)


MATRICES = [
    np.array([[2.0, 1.0], [1.0, 3.0]]) * 1e200,  # det overflows
    np.array([[2.0, 1.0], [1.0, 3.0]]) * 1e-200,  # det underflows
    np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.25], [0.5, 0.25, 2.0]]),
    np.array([[0.0, 2.0], [-3.0, 1.0]]),  # det 6 after a pivot
]


@pytest.mark.parametrize("a", MATRICES, ids=["1e200", "1e-200", "3x3", "pivot"])
def test_log_det_matches_the_exact_value_and_gradient(a):
    m = sg.matrix("m")
    y = sg.log(sg.linalg.det(m))
    f = sg.function([m], [y, sg.grad(y, m)])
    assert f"[{DET}]" in f.explain()
    value, grad = f(a)
    exact, exact_grad = _mp_logdet(a)
    np.testing.assert_allclose(value, exact, rtol=4 * np.finfo(np.float64).eps)
    np.testing.assert_allclose(grad, exact_grad, rtol=16 * np.finfo(np.float64).eps)
    if abs(exact) > 709:
        with np.errstate(all="ignore"):
            assert not np.isfinite(sg.function([m], y, recognition=False)(a))


def test_log_det_of_a_stack_and_its_signs():
    m = sg.tensor("m", shape=(None, 2, 2), dtype="float64")
    y = sg.log(sg.linalg.det(m))
    f = sg.function([m], y)
    stack = np.array(
        [[[2.0, 1.0], [1.0, 3.0]], [[1.0, 2.0], [3.0, 1.0]], [[1.0, 2.0], [2.0, 4.0]], [[NAN, 1.0], [1.0, 1.0]]]
    )
    with np.errstate(all="ignore"):
        value = f(stack * 1e200)
        written = sg.function([m], y, recognition=False)(stack)
    assert value.shape == (4,)
    np.testing.assert_allclose(value[0], np.log(5.0) + 400 * np.log(10.0), rtol=1e-15)
    assert np.isnan(value[1])  # det < 0: NaN, as log(-5e400) written
    assert value[2] == -INF  # singular: log 0
    # the same NaN and -inf pattern as written at a scale where det is a number (NumPy's det of a NaN
    # matrix is 0: its log is -inf as written)
    np.testing.assert_array_equal(f(stack) == -INF, written == -INF)
    np.testing.assert_array_equal(np.isnan(f(stack)), np.isnan(written))


def test_log_det_in_float32_inside_a_composite_and_on_other_backends():
    m = sg.matrix("m", dtype="float32")
    a = (np.array([[2.0, 1.0], [1.0, 3.0]]) * 1e20).astype(np.float32)  # det 5e40 overflows float32
    exact = float(np.log(5.0) + 40 * np.log(10.0))
    f = sg.function([m], sg.log(sg.linalg.det(m)))
    assert f(a).dtype == np.float32
    np.testing.assert_allclose(f(a), exact, rtol=4 * np.finfo(np.float32).eps)
    z = sg.matrix("z")
    composite = sg.OpFromGraph([z], [sg.log(sg.linalg.det(z))])
    m64 = sg.matrix("m64")
    for backend in ("numpy", "jax", "numba"):
        g = sg.function([m64], [composite(m64), sg.grad(composite(m64), m64)], backend=backend)
        assert f"[{DET}]" in g.explain()
        value, grad = g(a.astype(np.float64) * 1e180)
        exact, exact_grad = _mp_logdet(a.astype(np.float64) * 1e180)
        np.testing.assert_allclose(value, exact, rtol=1e-15)
        np.testing.assert_allclose(grad, exact_grad, rtol=1e-14)


def test_a_float32_factor_of_a_float64_formula_is_taken_in_float64():
    """The replacement multiplies (and takes logs) in the written formula's dtype, not in a factor's."""
    x, m = sg.vector("x", dtype="float32"), sg.vector("m")
    y = sg.exp(x) * sg.where(m > 0.0, 0.0, m * 0.0 + 1.0 / 3.0)
    points, mask = np.array([0.1, 1.0, 100.0], np.float32), np.array([-1.0, -1.0, 1.0])
    value = sg.function([x, m], y)(points, mask)
    with np.errstate(all="ignore"):
        written = sg.function([x, m], y, recognition=False)(points, mask)
    assert value.dtype == written.dtype == np.float64
    np.testing.assert_array_equal(value[:2], written[:2])  # bit for bit where written is a number
    assert np.isnan(written[2]) and value[2] == 0.0  # e^100 is inf in float32: inf·0 as written

    a, b = sg.vector("a", dtype="float32"), sg.vector("b")
    y = sg.log(sg.sigmoid(a) * sg.sigmoid(b))
    value = sg.function([a, b], y)(np.array([-0.1], np.float32), np.array([-800.0]))
    with mp.workdps(DPS):
        # (the written formula rounds σ(a) to float32, then multiplies in float64)
        sigma32 = float(np.float32(float(_sigmoid(mp.mpf(float(np.float32(-0.1)))))))
        exact = float(mp.log(sigma32) + _log(_sigmoid(mp.mpf(-800))))
    np.testing.assert_allclose(value, exact, rtol=2 * np.finfo(np.float64).eps)


# -- c - a/b over a common numerator, where a and b share a term (late) -----------------------------------------
COMMON = "common_numerator_from_constant_minus_quotient"
LOG_COMMON = "log_of_common_numerator_from_log1p_of_quotient"


def _value_and_partials(fn, row):
    with mp.workdps(DPS):
        point = [mp.mpf(float(v)) for v in row]
        value = fn(*point)
        partials = [
            mp.diff(lambda t, i=i: fn(*(t if j == i else v for j, v in enumerate(point))), point[i]) for i in range(2)
        ]
        return [float(value)] + [float(d) for d in partials]


@pytest.mark.parametrize("backend", ["numpy", "numba", "jax"])
@pytest.mark.parametrize(
    "rule, build, exact",
    [
        (COMMON, lambda x, y: 1.0 - (x - y) / (1.0 - y), lambda x, y: 1 - (x - y) / (1 - y)),
        (COMMON, lambda x, y: (x + 2.0 * y) / (y + 1.0) - 2.0, lambda x, y: (x + 2 * y) / (y + 1) - 2),
        (LOG_COMMON, lambda x, y: sg.log(1.0 - (x - y) / (1.0 - y)), lambda x, y: mp.log(1 - (x - y) / (1 - y))),
    ],
    ids=["1 - (x - y)/(1 - y)", "(x + 2y)/(y + 1) - 2", "log(1 - (x - y)/(1 - y))"],
)
def test_a_constant_minus_a_quotient_of_forms_in_a_shared_term(rule, build, exact, backend):
    # where the shared term y is large the quotient is within an ulp of c, and the written difference
    # keeps only rounding (0 at y = -1e16, x = 3e-125, where the answer is 1e-16; its log -inf)
    if backend != "numpy":
        pytest.importorskip(backend)
    x, y = sg.vector("x"), sg.vector("y")
    out = build(x, y)
    f = sg.function([x, y], [out, *sg.grad(sg.sum(out), [x, y])], backend=backend)
    assert f"[{rule}]" in f.explain()
    rows = [(3e-125, -1e16), (2.5, 7e18), (0.5, 0.2), (0.3, -3.0), (1e-5, 2e-5)]
    got = np.array(f(*(np.array(c) for c in zip(*rows)))).T
    for row, computed in zip(rows, got):
        expected = np.array(_value_and_partials(exact, row))
        assert np.allclose(computed, expected, rtol=4e-15, atol=1e-300), (row, computed, expected)


def test_a_constant_minus_a_quotient_keeps_the_written_zeros_infinities_and_nans():
    x, y = sg.vector("x"), sg.vector("y")
    out = 1.0 - (x - y) / (1.0 - y)
    f = sg.function([x, y], out)
    xs = np.array([2.0, 0.0, INF, 1.0, 3.0, NAN])
    ys = np.array([1.0, 1.0, 5.0, INF, 1e308, 2.0])
    with np.errstate(all="ignore"):
        got, written = f(xs, ys), sg.function([x, y], out, recognition=False)(xs, ys)
    # x/0 and 0/0 at y = 1, an infinite x or y, NaN: as written; at y = 1e308 the written difference
    # of 1 and the quotient rounded to 1 is 0, and the common numerator's (1 - 3)/(1 - 1e308) is exact
    np.testing.assert_array_equal(np.delete(got, 4), np.delete(written, 4))
    assert written[4] == 0.0 and got[4] == 2e-308
    # log1p(-q) stays where q is small (there it is the accurate one), and a log1p of another quotient stays
    assert f"[{LOG_COMMON}]" not in sg.function([x, y], sg.log1p(-(x / (1.0 - y)))).explain()
    small = sg.function([x, y], sg.log(1.0 - (x - y) / (1.0 - y)))(np.array([1e-10]), np.array([0.0]))
    np.testing.assert_allclose(small, np.log1p(-1e-10), rtol=1e-16)
