"""The identity rules (rewrite/identities.py, rewrite/exponentials.py): each fires on its pattern, is named by
`explain`, agrees in value and gradient with the formula as written evaluated exactly
(mpmath, float64 and float32), keeps the written domain at the edges, fires inside user
composites and loop bodies, and leaves its near misses alone."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace

import mpmath as mp
import numpy as np
import pytest

import stablegrad as sg

from .written import as_held as _k
from .written import log as _log
from .written import sigmoid as _sigmoid
from .written import ulps as _ulps

SQRT2 = float(np.sqrt(2.0))
INF, NAN = np.inf, np.nan
DPS = 900  # 1 + erf(-30) = erfc(30) ≈ 2.6e-393 needs its digits below the 1


# -- the written formulas in mpmath: extended reals, NaN outside a log's domain ---------------------------
def _sqrt(v):
    return mp.nan if mp.isnan(v) or v < 0 else mp.sqrt(v)


def _rsqrt(v):
    return mp.inf if v == 0 else 1 / _sqrt(v)


def _power(base, a):
    return mp.nan if mp.isnan(base) or base < 0 else mp.power(base, a)


def _log1p(v):
    return _log(1 + v)


def _xlogx(v):
    # x·log(x) with xlogy's limit 0 at x = 0: what xlogy_from_naive makes of the written product
    # before any rule of this file sees it
    return mp.mpf(0) if v == 0 else v * _log(v)


def _log1mexp(z):
    return _log(1 - mp.exp(z))


def _just_above_one(dtype) -> float:
    return 1.0 + float(np.finfo(dtype).eps)


@dataclass(frozen=True)
class Case:
    name: str
    rule: str  # what explain() must name
    build: Callable  # the naive formula, of symbolic inputs
    #: the same formula in mpmath, `k` rounds a written constant to the dtype as the graph holds it
    exact: Callable
    points: tuple  # float64 inputs (pairs for two operands)
    points32: tuple
    near: Callable  # a near miss: the rule must not fire
    at_inf: tuple = (None, None)  # exact limits at -inf and +inf (one operand)
    arity: int = 1
    ulps: int = 16
    #: the gradient's: as ulps, unless said otherwise
    grad_ulps: int | None = None
    #: the gradient is held to ulps of max(|exact|, grad_floor): a gradient that cancels to ~0 at
    #: the logistic density's peak is as accurate as the terms it sums, as written too
    grad_floor: float = 0.0
    huge: float = 1e300  # the "±huge" edge (1e5 for erf: mpmath's erfc gives up past 1e200)
    dps: int = DPS
    #: the written formula in an exactly equal form that mpmath's digits can hold at ±huge
    #: (1 + erf(-1e5) = erfc(1e5) = e^-1e10 is 0 at 900 digits): only for the edges
    far: Callable | None = None


# (not 27: SciPy's erfc(27) is 0, not the subnormal 5e-319, and so is the written 1 - erf(27))
ERF = (-30.0, -26.5, -10.0, -6.0, -1.0, -1e-10, 0.0, 1e-10, 0.5, 3.0, 26.5)
ERF32 = (-9.0, -3.0, -0.5, 0.0, 1e-6, 2.0, 9.0)
LOG_ERF = (-27.0, -26.5, -10.0, -1.0, 0.0, 1.0, 5.0, 30.0)
NDTR = (-40.0, -10.0, -3.0, -1.0, 0.0, 1e-8, 1.0, 5.0, 8.5, 10.0)
NDTR32 = (-13.0, -5.0, -1.0, 0.0, 1.0, 5.0, 9.0)
LINE = (-800.0, -40.0, -1.0, -1e-8, 0.0, 1.0, 20.0, 40.0, 700.0)
LINE32 = (-100.0, -20.0, -1.0, 0.0, 1e-4, 3.0, 17.0, 40.0)
#: (x, e) for a difference at arguments a shift e apart: small shifts, where the written one cancels,
#: and large ones (not next to a zero of the answer or of its derivatives, where either form is
#: as ill-conditioned as the other; at x = -40 a shift that keeps x + e exact: the rounding of
#: x + e, which the written formula has too, moves tan(x + e) by 18 ulps there)
SHIFTS = ((1.0, 1e-10), (1e5, 1.0), (-3.0, 1e-17), (0.5, -1e-12), (2.0, 0.7), (-40.0, 2.0**-20))
SHIFTS32 = ((1.0, 1e-5), (100.0, 1.0), (-3.0, 1e-8), (0.5, -1e-6), (2.0, 0.7), (-40.0, 1e-3))
#: a trigonometric function at a constant shift (none next to a zero or pole of the answers or their derivatives)
SHIFTED = (-1.5, -0.3, 0.0, 1e-200, 1.2, 2.0, 1e3, 1e5, 1e15, -3e15, 1e20)
SHIFTED32 = (-1.5, -0.3, 0.0, 1e-30, 1.2, 2.0, 1e3, 4e4)
#: an odd function less its argument: both sides of the series' edge |x| = 1
ODD = (-3.0, -0.999, -0.3, -1e-8, 1e-200, 1e-5, 0.5, 1.0, 1.5, 30.0)
ODD32 = (-3.0, -0.999, -0.3, -1e-4, 1e-30, 1e-3, 0.5, 1.0, 1.5, 17.0)
NEGATIVE = (-800.0, -40.0, -3.0, -0.5, -1e-10, -1e-300)
NEGATIVE32 = (-100.0, -10.0, -0.5, -1e-5, -1e-30)
PAIRS = ((50.0, 45.0), (-40.0, -45.0), (3.0, -3.0), (800.0, 799.0), (-800.0, -801.0), (1e-8, -1e-8), (40.0, 39.0))
PAIRS32 = ((20.0, 15.0), (-40.0, -45.0), (3.0, -3.0), (800.0, 799.0), (-80.0, -81.0), (1e-4, -1e-4), (17.0, 16.0))
RATIO = (-0.9999999, -0.5, -1e-10, 0.0, 1e-20, 1e-8, 0.3, 0.999999999)
RATIO32 = (-0.999, -0.5, -1e-6, 0.0, 1e-20, 0.25, 0.999)
POSITIVE = (1e-300, 1e-20, 1e-10, 0.5, 3.0, 40.0, 700.0, 800.0)
POSITIVE32 = (1e-30, 1e-6, 0.5, 3.0, 40.0, 100.0)
RULE_ERFC = "erfc_from_one_plus_erf"
RULE_NDTR = "log_ndtr_from_log_of_half_erfc"


def _erf_case(name, build, exact, at_inf, near):
    return Case(name, RULE_ERFC, build, exact, ERF, ERF32, near, at_inf, huge=1e5)


CASES = [
    _erf_case(
        "1 + erf", lambda x: 1.0 + sg.erf(x), lambda x, k: 1 + mp.erf(x), (0, 2), lambda x: 1.0 + 2.0 * sg.erf(x)
    ),
    _erf_case("erf + 1", lambda x: sg.erf(x) + 1.0, lambda x, k: mp.erf(x) + 1, (0, 2), lambda x: sg.erf(x) + 1.5),
    _erf_case("1 - erf", lambda x: 1.0 - sg.erf(x), lambda x, k: 1 - mp.erf(x), (2, 0), lambda x: 1.5 - sg.erf(x)),
    _erf_case("erf - 1", lambda x: sg.erf(x) - 1.0, lambda x, k: mp.erf(x) - 1, (-2, 0), lambda x: sg.erf(x) - 0.5),
    _erf_case("-1 - erf", lambda x: -1.0 - sg.erf(x), lambda x, k: -1 - mp.erf(x), (0, -2), lambda x: -2.0 - sg.erf(x)),
    _erf_case(
        "erf + (-1)", lambda x: sg.erf(x) + (-1.0), lambda x, k: mp.erf(x) - 1, (-2, 0), lambda x: sg.erf(x) + (-1.5)
    ),
    _erf_case(
        "1 + (-erf)", lambda x: 1.0 + (-sg.erf(x)), lambda x, k: 1 - mp.erf(x), (2, 0), lambda x: 2.0 + (-sg.erf(x))
    ),
    Case(
        "exp(x²) erfc(x)",
        "erfcx_from_naive",
        lambda x: sg.exp(x**2) * sg.erfc(x),
        lambda x, k: mp.exp(x**2) * mp.erfc(x),
        (-26.0, -5.0, -1.0, 0.0, 1e-10, 1.0, 10.0, 24.06, 26.0, 30.0, 1e5),
        (-9.0, -2.0, 0.0, 1.0, 9.0, 10.0, 100.0),
        lambda x: sg.exp(x**2) * sg.erfc(-x),
        (INF, 0.0),
        huge=1e5,
    ),
    Case(
        "log(1 + erf)",
        RULE_ERFC,
        lambda x: sg.log(1.0 + sg.erf(x)),
        lambda x, k: _log(1 + mp.erf(x)),
        LOG_ERF,
        ERF32,
        lambda x: sg.log(1.5 + sg.erf(x)),
        (-INF, float(np.log(2.0))),
        huge=1e5,
        far=lambda x, k: _log(mp.erfc(-x)),
    ),
    Case(
        "log(0.5 erfc(-x/√2))",
        RULE_NDTR,
        lambda x: sg.log(0.5 * sg.erfc(-x / SQRT2)),
        lambda x, k: _log(k(0.5) * mp.erfc(-x / k(SQRT2))),
        NDTR,
        NDTR32,
        lambda x: sg.log(0.5 * sg.erfc(-x / 1.5)),
        (-INF, 0.0),
        ulps=64,  # the written √2 is not √2: x²·7e-17 of relative difference in the upper tail
        huge=1e5,
    ),
    Case(
        "log(0.5 (1 + erf(x/√2)))",
        RULE_NDTR,
        lambda x: sg.log(0.5 * (1.0 + sg.erf(x / SQRT2))),
        lambda x, k: _log(k(0.5) * (1 + mp.erf(x / k(SQRT2)))),
        NDTR,
        NDTR32,
        lambda x: sg.log(0.4 * (1.0 + sg.erf(x / SQRT2))),
        (-INF, 0.0),
        ulps=64,
        huge=1e5,
        far=lambda x, k: _log(k(0.5) * mp.erfc(-x / k(SQRT2))),
    ),
    Case(
        "log(erfc(-x (1/√2)) / 2)",
        RULE_NDTR,
        lambda x: sg.log(sg.erfc(-x * (1 / SQRT2)) / 2.0),
        lambda x, k: _log(mp.erfc(-x * k(1 / SQRT2)) / 2),
        NDTR,
        NDTR32,
        lambda x: sg.log(sg.erfc(-x * 0.7) / 2.0),
        (-INF, 0.0),
        ulps=64,
        huge=1e5,
    ),
    Case(
        "log(1 - 0.5 erfc(x/√2))",
        "log_ndtr_from_log1p_of_half_erfc",
        lambda x: sg.log(1.0 - 0.5 * sg.erfc(x / SQRT2)),
        lambda x, k: _log(1 - k(0.5) * mp.erfc(x / k(SQRT2))),
        NDTR,
        NDTR32,
        lambda x: sg.log(1.0 - 0.5 * sg.erfc(x / 2.0)),
        (-INF, 0.0),
        ulps=64,
        huge=1e5,
        far=lambda x, k: _log(k(0.5) * mp.erfc(-x / k(SQRT2))),
    ),
    Case(
        "log(0.5 erfc(x/√2))",
        RULE_NDTR,
        lambda x: sg.log(0.5 * sg.erfc(x / SQRT2)),
        lambda x, k: _log(k(0.5) * mp.erfc(x / k(SQRT2))),
        tuple(-p for p in NDTR),
        tuple(-p for p in NDTR32),
        lambda x: sg.log(0.5 * sg.erfc(x)),
        (0.0, -INF),
        ulps=64,
        huge=1e5,
    ),
    Case(
        "1 - erfc",
        "erf_from_one_minus_erfc",
        lambda x: 1.0 - sg.erfc(x),
        lambda x, k: 1 - mp.erfc(x),
        (-30.0, -3.0, -1e-10, 0.0, 1e-20, 1e-8, 0.5, 3.0, 26.5),
        (-9.0, -1.0, -1e-6, 0.0, 1e-20, 1e-4, 2.0, 9.0),
        lambda x: 1.0 - 2.0 * sg.erfc(x),
        (-1.0, 1.0),
        huge=1e5,
    ),
    Case(
        "erfc + (-1)",
        "erf_from_one_minus_erfc",
        lambda x: sg.erfc(x) + (-1.0),
        lambda x, k: mp.erfc(x) - 1,
        (-30.0, -1e-10, 0.0, 1e-20, 1e-8, 3.0),
        (-9.0, -1e-6, 0.0, 1e-20, 2.0),
        lambda x: sg.erfc(x) + 1.0,
        (1.0, -1.0),
        huge=1e5,
    ),
    Case(
        "1 - ndtr",
        "normal_survival_from_one_minus_ndtr",
        lambda x: 1.0 - sg.ndtr(x),
        lambda x, k: 1 - mp.ncdf(x),
        NDTR,
        NDTR32,
        lambda x: 1.5 - sg.ndtr(x),
        (1.0, 0.0),
        huge=1e5,
    ),
    Case(
        "log(ndtr)",
        "log_ndtr_from_log_of_ndtr",
        lambda x: sg.log(sg.ndtr(x)),
        lambda x, k: _log(mp.ncdf(x)),
        NDTR,
        NDTR32,
        lambda x: sg.log(sg.ndtr(x) + 0.5),
        (-INF, 0.0),
        huge=1e5,
    ),
    Case(
        "log(1 - ndtr)",
        "log_ndtr_from_log_of_ndtr",
        lambda x: sg.log(1.0 - sg.ndtr(x)),
        lambda x, k: _log(1 - mp.ncdf(x)),
        tuple(-p for p in NDTR),
        tuple(-p for p in NDTR32),
        lambda x: sg.log(1.0 - 0.5 * sg.ndtr(x)),
        (0.0, -INF),
        huge=1e5,
        far=lambda x, k: _log(mp.ncdf(-x)),  # (1 - Φ(1e5) = e^-5e9 is 0 at 900 digits)
    ),
    Case(
        "log1p(-ndtr)",
        "log_ndtr_from_log_of_ndtr",
        lambda x: sg.log1p(-sg.ndtr(x)),
        lambda x, k: _log(1 - mp.ncdf(x)),
        tuple(-p for p in NDTR),
        tuple(-p for p in NDTR32),
        lambda x: sg.log1p(-0.5 * sg.ndtr(x)),
        (0.0, -INF),
        huge=1e5,
        far=lambda x, k: _log(mp.ncdf(-x)),  # (1 - Φ(1e5) = e^-5e9 is 0 at 900 digits)
    ),
    Case(
        "log(ndtr(a) - ndtr(b))",
        "log_ndtr_difference_from_naive",
        lambda a, b: sg.log(sg.ndtr(a) - sg.ndtr(b)),
        lambda a, b, k: _log(mp.ncdf(a) - mp.ncdf(b)),
        ((-38.0, -40.0), (40.0, 38.0), (1.0, -1.0), (9.0, 8.5), (-8.5, -9.0), (1e-8, -1e-8), (3.0, 2.5), (0.5, 0.25)),
        ((-12.0, -13.0), (9.0, 8.0), (1.0, -1.0), (5.5, 5.0), (1e-4, -1e-4), (0.5, 0.25)),
        lambda a, b: sg.log(sg.ndtr(a) - 0.5 * sg.ndtr(b)),
        arity=2,
        # the slope in a far out, φ(a)/(Φ(a) - Φ(b)), moves by a·ε per ulp of a: 1270 ulps at a = 40 (the
        # log-CDFs' difference the formula takes carries 300 of them)
        grad_ulps=512,
    ),
    Case(
        "exp(x) σ(-x)",
        "sigmoid_from_exp_times_sigmoid",
        lambda x: sg.exp(x) * sg.sigmoid(-x),
        lambda x, k: mp.exp(x) * _sigmoid(-x),
        LINE,
        LINE32,
        lambda x: sg.exp(x) * sg.sigmoid(x),
        (0.0, NAN),  # (at +inf the written inf·0 is NaN in exact arithmetic too: no limit taken)
    ),
    Case(
        "log1p(-σ)",
        "log_sigmoid_from_log1p_of_minus_sigmoid",
        lambda x: sg.log1p(-sg.sigmoid(x)),
        lambda x, k: _log1p(-_sigmoid(x)),
        LINE,
        LINE32,
        lambda x: sg.log1p(sg.sigmoid(x)),
        (0.0, -INF),
        far=lambda x, k: -_log1p(mp.exp(x)),
    ),
    Case(
        "(1 + ε) - σ",
        "sigmoid_complement_from_c_minus_sigmoid",
        lambda x: _just_above_one(x.dtype) - sg.sigmoid(x),
        lambda x, k: k(_just_above_one(k.dtype)) - _sigmoid(x),
        LINE,
        LINE32,
        lambda x: (1.0 - float(np.finfo(x.dtype).eps) / 2) - sg.sigmoid(x),
    ),
    # (log((1 + ε) - σ) and log(1 + 1e-7 - σ) are not here: for x < 0 it needs log1p((c - 1) - σ(x)), which this rule does
    # not build; what it builds is as accurate as written but not better, 2 % off near x = -40)
    Case(
        "log(cosh)",
        "log_cosh_from_naive",
        lambda x: sg.log(sg.cosh(x)),
        lambda x, k: _log(mp.cosh(x)),
        (-1000.0, -30.0, -1.0, -1e-10, 0.0, 1e-10, 0.5, 1.0, 3.0, 710.0, 1e5),
        (-100.0, -9.0, -1.0, -1e-5, 0.0, 0.01, 0.999, 1.5, 89.0, 1e5),
        lambda x: sg.log(2.0 * sg.cosh(x)),
        (INF, INF),
    ),
    Case(
        "exp(log1mexp)",
        "complement_from_exp_of_log1mexp",
        lambda z: sg.exp(sg.log1mexp(z)),
        lambda z, k: mp.exp(_log1mexp(z)),
        NEGATIVE,
        NEGATIVE32,
        lambda z: sg.exp(sg.log1mexp(z) + 1.0),
        (1.0, NAN),
    ),
    Case(
        "exp(log1p(-exp))",
        "complement_from_exp_of_log1mexp",
        lambda z: sg.exp(sg.log1p(-sg.exp(z))),
        lambda z, k: mp.exp(_log1p(-mp.exp(z))),
        NEGATIVE,
        NEGATIVE32,
        lambda z: sg.exp(sg.log1p(-2.0 * sg.exp(z))),
        (1.0, NAN),
    ),
    Case(
        "exp(log(1 - exp))",
        "complement_from_exp_of_log1mexp",
        lambda z: sg.exp(sg.log(1.0 - sg.exp(z))),
        lambda z, k: mp.exp(_log(1 - mp.exp(z))),
        NEGATIVE,
        NEGATIVE32,
        lambda z: sg.exp(sg.log(1.5 - sg.exp(z))),
        (1.0, NAN),
    ),
    Case(
        "exp(-z) / (1 + exp(-z))**2",
        "logistic_density_from_naive",
        lambda z: sg.exp(-z) / (1.0 + sg.exp(-z)) ** 2,
        lambda z, k: mp.exp(-z) / (1 + mp.exp(-z)) ** 2,
        LINE,
        LINE32,
        lambda z: sg.exp(-z) / (1.0 + sg.exp(z)) ** 2,
        (0.0, 0.0),
        grad_floor=0.0625,  # σ'' = σ'·(σ(-z) - σ(z)): terms of 1/16 cancel at z = 0
    ),
    Case(
        "exp(z) / square(1 + exp(z))",
        "logistic_density_from_naive",
        lambda z: sg.exp(z) / sg.square(1.0 + sg.exp(z)),
        lambda z, k: mp.exp(z) / (1 + mp.exp(z)) ** 2,
        LINE,
        LINE32,
        lambda z: sg.exp(z) / (1.0 + sg.exp(z)) ** 3,
        (0.0, 0.0),
        grad_floor=0.0625,  # σ'' = σ'·(σ(-z) - σ(z)): terms of 1/16 cancel at z = 0
    ),
    Case(
        "exp(z) / ((1 + exp(z)) (1 + exp(z)))",
        "logistic_density_from_naive",
        lambda z: sg.exp(z) / ((1.0 + sg.exp(z)) * (1.0 + sg.exp(z))),
        lambda z, k: mp.exp(z) / (1 + mp.exp(z)) ** 2,
        LINE,
        LINE32,
        lambda z: sg.exp(z) / ((1.0 + sg.exp(z)) * (2.0 + sg.exp(z))),
        (0.0, 0.0),
        grad_floor=0.0625,  # σ'' = σ'·(σ(-z) - σ(z)): terms of 1/16 cancel at z = 0
    ),
    Case(  # already fine before this module: stabilize's 1 - σ(z) → σ(-z)
        "σ (1 - σ)",
        "sigmoid_from_one_minus_sigmoid",
        lambda z: sg.sigmoid(z) * (1.0 - sg.sigmoid(z)),
        lambda z, k: _sigmoid(z) * (1 - _sigmoid(z)),
        LINE,
        LINE32,
        lambda z: sg.sigmoid(z) * (1.5 - sg.sigmoid(z)),
        (0.0, 0.0),
        grad_floor=0.0625,  # σ'' = σ'·(σ(-z) - σ(z)): terms of 1/16 cancel at z = 0
    ),
    Case(
        "log(σ(a) - σ(b))",
        "log_sigmoid_difference_from_naive",
        lambda a, b: sg.log(sg.sigmoid(a) - sg.sigmoid(b)),
        lambda a, b, k: _log(_sigmoid(a) - _sigmoid(b)),
        PAIRS,
        PAIRS32,
        lambda a, b: sg.log(sg.sigmoid(a) - 0.5 * sg.sigmoid(b)),
        arity=2,
    ),
    Case(
        "log(1/(1 + exp(-a)) - 1/(1 + exp(-b)))",
        "log_sigmoid_difference_from_naive",
        lambda a, b: sg.log(1.0 / (1.0 + sg.exp(-a)) - 1.0 / (1.0 + sg.exp(-b))),
        lambda a, b, k: _log(_sigmoid(a) - _sigmoid(b)),
        PAIRS,
        PAIRS32,
        lambda a, b: sg.log(1.0 / (1.0 + sg.exp(-a)) - 1.0 / (2.0 + sg.exp(-b))),
        arity=2,
    ),
    # -- rewrite/exponentials.py
    Case(
        "log((1 + x) / (1 - x))",
        "log1p_difference_from_log_of_ratio",
        lambda x: sg.log((1.0 + x) / (1.0 - x)),
        lambda x, k: _log((1 + x) / (1 - x)),
        RATIO,
        RATIO32,
        lambda x: sg.log((1.0 + x) / (1.0 - 2.0 * x)),
    ),
    Case(
        "log((1 - x) / (x + 1))",
        "log1p_difference_from_log_of_ratio",
        lambda x: sg.log((1.0 - x) / (x + 1.0)),
        lambda x, k: _log((1 - x) / (x + 1)),
        RATIO,
        RATIO32,
        lambda x: sg.log((1.0 - x) / (x + 2.0)),
    ),
    Case(  # (p outside [0, 1] too: the identity holds wherever the sum is positive)
        "log(1 - p + p·exp(t))",
        "log1p_from_bernoulli_cumulant",
        lambda p, t: sg.log((1.0 - p) + p * sg.exp(t)),
        lambda p, t, k: _log(1 - p + p * mp.exp(t)),
        # (past e**t's overflow, t = 800 and 1e5: logaddexp(log1p(-p), log(p) + t))
        ((0.3, 1e-18), (0.3, 5.0), (1e-20, 3.0), (0.5, -800.0), (2.0, 0.1), (-3.0, 0.1), (0.5, 700.0), (0.5, 800.0))
        + ((1e-300, 1e5), (1.0, 1e5), (0.9, -1e-10)),
        ((0.3, 1e-10), (0.3, 5.0), (1e-20, 3.0), (0.5, -80.0), (2.0, 0.1), (-3.0, 0.1), (0.5, 80.0), (0.5, 100.0)),
        lambda p, t: sg.log((1.0 - p) + 2.0 * p * sg.exp(t)),
        arity=2,
    ),
    Case(
        "log(1 + exp(t)·p - p)",
        "log1p_from_bernoulli_cumulant",
        lambda p, t: sg.log(1.0 + sg.exp(t) * p - p),
        lambda p, t, k: _log(1 - p + p * mp.exp(t)),
        ((0.3, 1e-18), (1e-20, 3.0), (0.5, -800.0), (-3.0, 0.1)),
        ((0.3, 1e-10), (1e-20, 3.0), (0.5, -80.0), (-3.0, 0.1)),
        lambda p, t: sg.log(1.0 + sg.exp(t) * p - t),
        arity=2,
    ),
    Case(
        "exp(x) - exp(-x)",
        "hyperbolic_from_opposite_exponentials",
        lambda x: sg.exp(x) - sg.exp(-x),
        lambda x, k: mp.exp(x) - mp.exp(-x),
        (-700.0, -20.0, -1.0, -1e-10, 0.0, 1e-20, 0.5, 30.0, 709.0),
        (-80.0, -10.0, -1.0, -1e-6, 0.0, 1e-20, 3.0, 80.0),
        lambda x: sg.exp(x) - 2.0 * sg.exp(-x),
    ),
    Case(
        "exp(x) - 1 / exp(x)",
        "hyperbolic_from_opposite_exponentials",
        lambda x: sg.exp(x) - 1.0 / sg.exp(x),
        lambda x, k: mp.exp(x) - 1 / mp.exp(x),
        (-700.0, -1.0, -1e-10, 0.0, 1e-20, 0.5, 709.0),
        (-80.0, -1.0, -1e-6, 0.0, 1e-20, 3.0, 80.0),
        lambda x: sg.exp(x) - 2.0 / sg.exp(x),
    ),
    Case(
        "0.5 * exp(2x) + 0.5 / exp(2x)",
        "hyperbolic_from_opposite_exponentials",
        lambda x: 0.5 * sg.exp(2.0 * x) + 0.5 / sg.exp(2.0 * x),
        lambda x, k: mp.exp(2 * x) / 2 + 1 / (2 * mp.exp(2 * x)),
        (-300.0, -1.0, -1e-10, 0.0, 1e-20, 0.5, 300.0),
        (-40.0, -1.0, -1e-6, 0.0, 1e-20, 3.0, 40.0),
        lambda x: 0.5 * sg.exp(2.0 * x) + 0.25 / sg.exp(2.0 * x),
    ),
    Case(
        "exp(x) - 2 + exp(-x)",
        "sinh_squared_from_cosh_minus_one",
        lambda x: sg.exp(x) - 2.0 + sg.exp(-x),
        lambda x, k: mp.exp(x) - 2 + mp.exp(-x),
        (-700.0, -1.0, -1e-10, 0.0, 1e-20, 0.5, 700.0),
        (-80.0, -1.0, -1e-6, 0.0, 1e-20, 3.0, 80.0),
        lambda x: sg.exp(x) - 1.5 + sg.exp(-x),
    ),
    Case(
        "tanh from exponentials",
        "tanh_from_quotient",
        lambda x: (sg.exp(x) - sg.exp(-x)) / (sg.exp(x) + sg.exp(-x)),
        lambda x, k: (mp.exp(x) - mp.exp(-x)) / (mp.exp(x) + mp.exp(-x)),
        LINE,
        LINE32,
        lambda x: (sg.exp(x) - 2.0 * sg.exp(-x)) / (sg.exp(x) + sg.exp(-x)),
        (-1.0, 1.0),
    ),
    Case(
        "2 / (1 + exp(-2x)) - 1",
        "tanh_from_shifted_sigmoid",
        lambda x: 2.0 / (1.0 + sg.exp(-2.0 * x)) - 1.0,
        lambda x, k: 2 / (1 + mp.exp(-2 * x)) - 1,
        LINE,
        LINE32,
        lambda x: 2.0 / (1.0 + sg.exp(-2.0 * x)) - 0.5,
        (-1.0, 1.0),
    ),
    Case(
        "log(exp(x) - exp(-x))",
        "log_of_twice_hyperbolic",
        lambda x: sg.log(sg.exp(x) - sg.exp(-x)),
        lambda x, k: _log(mp.exp(x) - mp.exp(-x)),
        POSITIVE,
        POSITIVE32,
        lambda x: sg.log(2.5 * sg.sinh(x)),
        (NAN, INF),
    ),
    Case(
        "log(exp(x) + exp(-x))",
        "log_of_twice_hyperbolic",
        lambda x: sg.log(sg.exp(x) + sg.exp(-x)),
        lambda x, k: _log(mp.exp(x) + mp.exp(-x)),
        LINE,
        LINE32,
        lambda x: sg.log(2.5 * sg.cosh(x)),
        (INF, INF),
    ),
    Case(
        "exp(a) / (exp(a) + exp(b))",
        "sigmoid_from_two_term_softmax",
        lambda a, b: sg.exp(a) / (sg.exp(a) + sg.exp(b)),
        lambda a, b, k: mp.exp(a) / (mp.exp(a) + mp.exp(b)),
        PAIRS,
        PAIRS32,
        lambda a, b: sg.exp(a) / (sg.exp(b) + sg.exp(-b)),
        arity=2,
    ),
    Case(
        "sqrt(x + 1) - sqrt(x)",
        "conjugate_from_difference_of_roots",
        lambda x: sg.sqrt(x + 1.0) - sg.sqrt(x),
        lambda x, k: _sqrt(x + 1) - _sqrt(x),
        (1e-300, 1e-20, 0.5, 3.0, 1e10, 1e20, 1e300),
        (1e-30, 1e-6, 0.5, 3.0, 1e10, 1e30),
        lambda x: sg.sqrt(x + 1.0) - sg.sqrt(2.0 * x),
        (NAN, 0.0),
    ),
    Case(  # (e is read as e: its float's own rounding moved the written power by x·5e-17)
        "e ** x - 1",
        "exp_from_power_of_e",
        lambda x: np.e**x - 1.0,
        lambda x, k: mp.exp(x) - 1,
        (-700.0, -1.0, -1e-20, 0.0, 1e-20, 0.5, 3.0, 700.0),
        (-80.0, -1.0, -1e-20, 0.0, 1e-20, 0.5, 3.0, 80.0),
        lambda x: 2.718**x - 1.0,
        (-1.0, INF),
    ),
    Case(  # (as 1/sqrt(x) too: a test of its own, for 1/sqrt(-0) = -inf, which mpmath's 0 has no sign for)
        "x ** -0.5 - (x + 1) ** -0.5",
        "expm1_from_difference_of_shifted_powers",
        lambda x: x**-0.5 - (x + 1.0) ** -0.5,
        lambda x, k: _rsqrt(x) - _rsqrt(x + 1),
        (1e-200, 1e-20, 0.5, 3.0, 1e10, 1e20, 1e300),
        (1e-20, 1e-6, 0.5, 3.0, 1e10, 1e30),
        lambda x: x**-0.5 - (2.0 * x + 1.0) ** -0.5,
        (0.0, 0.0),  # (C's pow: (-inf) ** -0.5 is 0, as written)
    ),
    Case(
        "(x + 1) ** 0.25 - x ** 0.25",
        "expm1_from_difference_of_shifted_powers",
        lambda x: (x + 1.0) ** 0.25 - x**0.25,
        lambda x, k: _power(x + 1, k(0.25)) - _power(x, k(0.25)),
        (1e-300, 1e-20, 0.5, 3.0, 1e10, 1e20, 1e300),
        (1e-30, 1e-6, 0.5, 3.0, 1e10, 1e30),
        lambda x: (x + 1.0) ** 0.25 - x**0.5,
        (NAN, NAN),  # (inf - inf, as written)
    ),
    Case(
        "(1 + x) ** 3.5 - 1",
        "expm1_from_power_near_one",
        lambda x: (1.0 + x) ** 3.5 - 1.0,
        lambda x, k: _power(1 + x, 3.5) - 1,
        (-0.5, -1e-10, 0.0, 1e-20, 0.1, 0.3, 2.0, 40.0),
        (-0.5, -1e-6, 0.0, 1e-20, 0.1, 0.3, 2.0, 40.0),
        lambda x: (1.0 + x) ** 3.5 - 2.0,
        (INF, INF),  # (C's pow: (-inf) ** 3.5 is +inf, as written)
    ),
    Case(
        "1 - (1 - x) ** 2.5",
        "expm1_from_power_near_one",
        lambda x: 1.0 - (1.0 - x) ** 2.5,
        lambda x, k: 1 - _power(1 - x, 2.5),
        (-40.0, -0.3, -1e-10, 0.0, 1e-20, 0.1, 0.5, 0.999),
        (-40.0, -0.3, -1e-6, 0.0, 1e-20, 0.1, 0.5, 0.999),
        lambda x: 1.5 - (1.0 - x) ** 2.5,
        (-INF, -INF),
    ),
    Case(
        "log(x + 1) - log(x)",
        "log1p_from_difference_of_shifted_logs",
        lambda x: sg.log(x + 1.0) - sg.log(x),
        lambda x, k: _log(x + 1) - _log(x),
        (1e-300, 1e-20, 0.5, 3.0, 40.0, 1e10, 1e17, 1e300),
        (1e-30, 1e-6, 0.5, 3.0, 40.0, 1e10, 1e30),
        lambda x: sg.log(x + 1.0) - sg.log(2.0 * x),
        (NAN, NAN),  # (-inf: NaN; +inf: inf - inf, as written)
    ),
    Case(
        "log(x) - log(x - 2)",
        "log1p_from_difference_of_shifted_logs",
        lambda x: sg.log(x) - sg.log(x - 2.0),
        lambda x, k: _log(x) - _log(x - 2),
        (2.5, 3.0, 40.0, 1e10, 1e17, 1e300),
        (2.5, 3.0, 40.0, 1e6, 1e10, 1e30),
        lambda x: sg.log(x) - sg.log(2.0 - x),
        (NAN, NAN),
    ),
    Case(
        "(x + 1) log(x + 1) - x log(x)",
        "log1p_from_difference_of_x_log_x",
        lambda x: (x + 1.0) * sg.log(x + 1.0) - x * sg.log(x),
        lambda x, k: _xlogx(x + 1) - _xlogx(x),
        (1e-300, 1e-20, 0.5, 3.0, 40.0, 1e10, 1e17, 1e300),
        (1e-30, 1e-6, 0.5, 3.0, 40.0, 1e10, 1e30),
        lambda x: (x + 1.0) * sg.log(x + 2.0) - x * sg.log(x),
        (NAN, NAN),
    ),
    Case(
        "x log(x) - (x - 3) log(x - 3)",
        "log1p_from_difference_of_x_log_x",
        lambda x: x * sg.log(x) - (x - 3.0) * sg.log(x - 3.0),
        lambda x, k: _xlogx(x) - _xlogx(x - 3),
        (3.5, 4.0, 40.0, 1e10, 1e17, 1e300),
        (3.5, 4.0, 40.0, 1e6, 1e10, 1e30),
        lambda x: x * sg.log(x) - (x - 3.0) * sg.log(x - 2.0),
        (NAN, NAN),
    ),
    # (recognition turns exp(-softplus(x)) into sigmoid(-x) before the sum is seen)
    Case(
        "exp(u) - 2 + exp(-u), u = softplus(x)",
        "hyperbolic_from_opposite_exponentials",
        lambda x: sg.exp(sg.softplus(x)) - 2.0 + sg.exp(-sg.softplus(x)),
        lambda x, k: mp.exp(mp.log1p(mp.exp(x))) - 2 + mp.exp(-mp.log1p(mp.exp(x))),
        LINE,
        LINE32,
        lambda x: sg.exp(sg.softplus(x)) - 2.0 + sg.sigmoid(x),
        (0.0, INF),
    ),
    Case(
        "(exp(x) - 1) / x",
        "exprel_from_quotient",
        lambda x: (sg.exp(x) - 1.0) / x,
        lambda x, k: mp.nan if x == 0 else (mp.exp(x) - 1) / x,
        (-800.0, -40.0, -1.0, -1e-8, 1e-300, 0.5, 1.0, 20.0, 700.0),
        (-100.0, -20.0, -1.0, -1e-4, 1e-30, 0.5, 3.0, 17.0, 80.0),
        lambda x: sg.expm1(x) / (x + 1.0),
        (0.0, NAN),  # (+inf: inf/inf, as written)
        huge=700.0,  # (beyond, exp(x)/x - expm1(x)/x² is inf - inf as written)
    ),
    Case(
        "x / (exp(x) - 1)",
        "exprel_from_quotient",
        lambda x: x / (sg.exp(x) - 1.0),
        lambda x, k: mp.nan if x == 0 else x / (mp.exp(x) - 1),
        (-800.0, -40.0, -1.0, -1e-8, 1e-300, 0.5, 1.0, 20.0, 700.0),
        (-100.0, -20.0, -1.0, -1e-4, 1e-30, 0.5, 3.0, 17.0, 80.0),
        lambda x: x / sg.expm1(2.0 * x),
        (INF, NAN),
    ),
    Case(
        "(exp(2x) - 1) / (exp(x) - 1)",
        "exp_plus_one_from_ratio_of_expm1",
        lambda x: (sg.exp(2.0 * x) - 1.0) / (sg.exp(x) - 1.0),
        lambda x, k: mp.nan if x == 0 else mp.expm1(2 * x) / mp.expm1(x),
        (-800.0, -40.0, -1.0, -1e-8, 1e-300, 0.5, 1.0, 20.0, 400.0, 700.0),
        (-100.0, -20.0, -1.0, -1e-4, 1e-30, 0.5, 3.0, 17.0, 40.0),
        lambda x: sg.expm1(3.0 * x) / sg.expm1(x),
        (1.0, NAN),  # (+inf: inf/inf, as written)
    ),
    Case(
        "expm1(x) / expm1(x + x)",
        "exp_plus_one_from_ratio_of_expm1",
        lambda x: sg.expm1(x) / sg.expm1(x + x),
        lambda x, k: mp.nan if x == 0 else mp.expm1(x) / mp.expm1(2 * x),
        (-800.0, -40.0, -1.0, -1e-8, 1e-300, 0.5, 1.0, 20.0, 400.0, 700.0),
        (-100.0, -20.0, -1.0, -1e-4, 1e-30, 0.5, 3.0, 17.0, 40.0),
        lambda x: sg.expm1(x) / sg.expm1(x + 1.0),
        (1.0, NAN),
    ),
    Case(
        "sigmoid(s)**c",
        "exp_of_log_sigmoid_from_power_of_sigmoid",
        lambda s, c: sg.sigmoid(s) ** c,
        lambda s, c, k: _sigmoid(s) ** c,
        # (σ(40)**1e20 is 1 as written, exp(-4.2e2) exactly; σ(s)**(s - 1), which the scan test takes
        # of the first column, stays finite; underflowing powers: test_powers_of_sigmoids_that_underflow)
        ((0.0, 2.0), (-20.0, 10.0), (40.0, 1e20), (-3.0, -2.0), (1.0, 0.0), (5.0, 1e-8), (-2.0, 10.0)),
        ((0.0, 2.0), (-5.0, 3.0), (20.0, 1e12), (-3.0, -2.0), (1.0, 0.0), (5.0, 1e-4), (-2.0, 2.0)),
        lambda s, c: (sg.sigmoid(s) + 1.0) ** c,
        arity=2,
    ),
    Case(
        "2·(arctan(exp(u)) - π/4)",
        "arctan_of_ratio_from_arctan_minus_quarter_pi",
        lambda x: 2.0 * (sg.arctan(sg.exp(x)) - np.pi / 4),
        lambda x, k: 2 * (mp.atan(mp.exp(x)) - mp.pi / 4),  # (the rule reads the rounded π/4 as π/4)
        (-800.0, -3.0, -1e-8, 0.0, 1e-300, 1e-20, 0.5, 30.0, 700.0),
        (-100.0, -3.0, -1e-4, 0.0, 1e-30, 1e-20, 0.5, 30.0, 80.0),
        lambda x: 2.0 * (sg.arctan(sg.exp(x)) - 0.75),
        (-np.pi / 2, np.pi / 2),
    ),
    Case(
        "arctan(r) - π/4",
        "arctan_of_ratio_from_arctan_minus_quarter_pi",
        lambda x: sg.arctan(x) - np.pi / 4,
        lambda x, k: mp.atan(x) - mp.pi / 4,
        (-1e10, -3.0, -1.0, -0.5, 0.0, 1.0 - 2**-53, 1.0, 1.0 + 2**-51, 1.5, 1e300),
        (-1e10, -3.0, -1.0, -0.5, 0.0, 1.0 - 2**-24, 1.0, 1.0 + 2**-22, 1.5, 1e30),
        lambda x: sg.arctan(x) - 0.75,
        (-3 * np.pi / 4, np.pi / 4),
    ),
    Case(
        "1/x - 1/tan(x)",
        "cot_difference_by_series",
        lambda x: 1.0 / x - 1.0 / sg.tan(x),
        lambda x, k: mp.nan if x == 0 else 1 / x - 1 / mp.tan(x),
        (-3.0, -0.999, -1e-8, 1e-300, 1e-20, 0.5, 1.0, 2.0, 30.0),
        (-3.0, -0.999, -1e-4, 1e-30, 1e-20, 0.5, 1.0, 2.0, 30.0),
        lambda x: 1.0 / x - 1.0 / sg.tan(2.0 * x),
        (NAN, NAN),  # (tan(±inf) is NaN)
        huge=1e5,
    ),
    Case(
        "log(tanh(x))",
        "log_tanh_from_log_of_hyperbolic_ratio",
        lambda x: sg.log(sg.tanh(x)),
        lambda x, k: _log(mp.tanh(x)),
        (1e-300, 1e-10, 0.5, 3.0, 20.0, 300.0, 700.0),
        (1e-30, 1e-5, 0.5, 3.0, 9.0, 40.0, 80.0),
        lambda x: sg.log(sg.tanh(x) + 2.0),
        (NAN, 0.0),
    ),
    Case(
        "log((exp(x) + exp(-x)) / (exp(x) - exp(-x)))",
        "log_tanh_from_log_of_hyperbolic_ratio",
        lambda x: sg.log((sg.exp(x) + sg.exp(-x)) / (sg.exp(x) - sg.exp(-x))),
        lambda x, k: -_log(mp.tanh(x)),
        (1e-300, 1e-10, 0.5, 3.0, 20.0, 300.0, 700.0),
        (1e-30, 1e-5, 0.5, 3.0, 9.0, 40.0, 80.0),
        lambda x: sg.log(sg.cosh(x) / sg.sinh(2.0 * x)),
        (NAN, 0.0),
    ),
    Case(
        "1 - cos(x)",
        "sine_squared_from_one_minus_cos",
        lambda x: 1.0 - sg.cos(x),
        lambda x, k: 1 - mp.cos(x),
        (-1e5, -3.0, -1e-8, 0.0, 1e-20, 0.5, 2.0, 30.0),
        (-1e3, -3.0, -1e-4, 0.0, 1e-20, 0.5, 2.0, 30.0),
        lambda x: 1.0 - 0.5 * sg.cos(x),
        (NAN, NAN),  # (cos(±inf) is NaN)
        huge=1e5,
    ),
    Case(
        "0.5 / exp(2x)",
        "product_from_quotient_by_exp",
        lambda x: 0.5 / sg.exp(2.0 * x),
        lambda x, k: 0.5 / mp.exp(2 * x),
        # (past 355 exp(2x) overflows, where the answer is a number down to 372)
        (-300.0, -1.0, -1e-8, 0.0, 1e-20, 1.0, 20.0, 360.0, 370.0),
        (-40.0, -1.0, 0.0, 1e-4, 3.0, 44.0, 50.0),
        lambda x: 0.5 / (sg.exp(2.0 * x) + 1.0),
        (INF, 0.0),
    ),
    Case(
        "2 / (exp(x) + exp(-x))",
        "sech_from_quotient_by_cosh",
        lambda x: 2.0 / (sg.exp(x) + sg.exp(-x)),
        lambda x, k: 2 / (mp.exp(x) + mp.exp(-x)),
        (-740.0, -1.0, -1e-8, 0.0, 1e-20, 0.5, 20.0, 720.0),
        (-100.0, -1.0, 0.0, 1e-4, 3.0, 17.0, 95.0),
        lambda x: 2.0 / (sg.exp(x) + sg.exp(-2.0 * x)),
        (0.0, 0.0),
    ),
    Case(
        "sinh(x) / x",
        "series_quotient_gradient",
        lambda x: sg.sinh(x) / x,
        lambda x, k: mp.nan if x == 0 else mp.sinh(x) / x,
        (-700.0, -1.0, -1e-8, 1e-300, 0.5, 1.9, 2.1, 20.0, 700.0),
        (-80.0, -1.0, -1e-4, 1e-30, 0.5, 1.9, 2.1, 17.0, 80.0),
        lambda x: sg.sinh(x) / (x + 1.0),
        (NAN, NAN),  # (inf/inf, as written)
        huge=700.0,  # (beyond, sinh overflows and cosh(x)/x - sinh(x)/x² is inf - inf, as written)
    ),
    Case(
        "sin(x) / x",
        "series_quotient_gradient",
        lambda x: sg.sin(x) / x,
        lambda x, k: mp.nan if x == 0 else mp.sin(x) / x,
        (-1e5, -3.0, -1e-8, 1e-300, 0.5, 1.9, 2.1, 30.0),
        (-1e3, -3.0, -1e-4, 1e-30, 0.5, 1.9, 2.1, 30.0),
        lambda x: sg.sin(x) / (x + 1.0),
        (NAN, NAN),  # (sin(±inf) is NaN)
        huge=1e5,
    ),
    Case(
        "1/(x + 1) - 1/(x - 1)",
        "quotient_from_sum_of_shifted_reciprocals",
        lambda x: 1.0 / (x + 1.0) - 1.0 / (x - 1.0),
        lambda x, k: 1 / (x + 1) - 1 / (x - 1),
        # (not near x = 0, where the derivative passes through 0: it cancels there, as written)
        (-1e8, -3.0, -0.5, 0.3, 2.0, 1e8, 1e150),
        (-1e4, -3.0, -0.5, 0.3, 2.0, 1e4, 1e15),
        lambda x: 1.0 / (x + 1.0) - 2.0 / (x - 1.0),
        (0.0, 0.0),
    ),
    Case(
        "1/(x + 1) - 2/(x + 2) + 1/(x + 3)",
        "quotient_from_sum_of_shifted_reciprocals",
        lambda x: 1.0 / (x + 1.0) - 2.0 / (x + 2.0) + 1.0 / (x + 3.0),
        lambda x, k: 1 / (x + 1) - 2 / (x + 2) + 1 / (x + 3),
        (-1e8, -2.5, -0.5, 0.0, 2.0, 1e8, 1e100),
        (-1e4, -2.5, -0.5, 0.0, 2.0, 1e4, 1e12),
        lambda x: 1.0 / (x + 1.0) - 2.0 / (x + 2.0) + 1.5 / (x + 3.0),  # (the leading parts do not cancel)
        (0.0, 0.0),
    ),
    Case(
        "log(sinh(x) / x)",
        "log_sinhc_from_log_of_quotient",
        lambda x: sg.log(sg.sinh(x) / x),
        lambda x, k: mp.nan if x == 0 else _log(mp.sinh(x) / x),
        (-800.0, -25.0, -3.0, -1.0, -1e-8, 1e-300, 0.5, 1.9, 2.5, 20.0, 700.0, 800.0),
        (-100.0, -25.0, -3.0, -1.0, -1e-4, 1e-30, 0.5, 1.9, 2.5, 20.0, 80.0),
        lambda x: sg.log(sg.sinh(x) / (2.0 * x)),
        (NAN, NAN),  # (inf/inf, as written)
    ),
    Case(
        "log(sinh(x))",
        "log_sinh_from_log_of_sinh",
        lambda x: sg.log(sg.sinh(x)),
        lambda x, k: _log(mp.sinh(x)),
        (1e-300, 1e-8, 0.5, 1.5, 3.0, 20.5, 40.0, 700.0, 800.0),
        (1e-30, 1e-4, 0.5, 1.5, 3.0, 20.5, 40.0, 100.0),
        lambda x: sg.log(sg.sinh(x) + 2.5),  # (2.5·sinh(x) is log 2.5 + log(sinh(x)) by the products rule: it fires)
        (NAN, INF),
    ),
    Case(
        "log(1 + x) - x",
        "log1pmx_from_difference",
        lambda x: sg.log(1.0 + x) - x,
        lambda x, k: _log1p(x) - x,
        (-0.9, -0.5, -0.3, -1e-10, 1e-300, 1e-5, 0.5, 0.999, 3.0, 1e300),
        (-0.9, -0.5, -1e-4, 1e-30, 0.5, 0.999, 3.0, 1e30),
        lambda x: sg.log1p(x) - 2.0 * x,
        (NAN, NAN),  # (+inf: inf - inf, as written)
    ),
    Case(
        "sin(x + e) - sin(x)",
        "sine_difference_to_product",
        lambda x, e: sg.sin(x + e) - sg.sin(x),
        lambda x, e, k: mp.sin(x + e) - mp.sin(x),
        SHIFTS,
        SHIFTS32,
        lambda x, e: sg.sin(x + e) - sg.sin(2.0 * x),
        arity=2,
    ),
    Case(
        "cos(x) - cos(x - e)",
        "cosine_difference_to_product",
        lambda x, e: sg.cos(x) - sg.cos(x - e),
        lambda x, e, k: mp.cos(x) - mp.cos(x - e),
        SHIFTS,
        SHIFTS32,
        lambda x, e: sg.cos(x) - sg.cos(e - x),
        arity=2,
    ),
    Case(
        "tan(e + x) - tan(x)",
        "tangent_difference_to_quotient",
        lambda x, e: sg.tan(e + x) - sg.tan(x),
        lambda x, e, k: mp.tan(e + x) - mp.tan(x),
        SHIFTS,
        SHIFTS32,
        lambda x, e: sg.tan(e + x) - sg.tan(1.5 * x),
        arity=2,
    ),
    Case(
        "arctan(x + e) - arctan(x)",
        "arctan_difference_to_arctan",
        lambda x, e: sg.arctan(x + e) - sg.arctan(x),
        lambda x, e, k: mp.atan(x + e) - mp.atan(x),
        ((1e10, 1.0), (-1e8, 2.0), (3.0, 1e-9), (-0.5, 3.0), (1e150, 1e140), (0.25, -1e-20)),
        ((1e5, 1.0), (-1e4, 2.0), (3.0, 1e-5), (-0.5, 3.0), (1e15, 1e14), (0.25, -1e-10)),
        lambda x, e: sg.arctan(x + e) - sg.arctan(x + 1.0),
        arity=2,
    ),
    Case(
        "x - sin(x)",
        "odd_function_less_argument_by_series",
        lambda x: x - sg.sin(x),
        lambda x, k: x - mp.sin(x),
        ODD,
        ODD32,
        lambda x: 2.0 * x - sg.sin(x),
        (NAN, NAN),  # (sin(±inf) is NaN)
    ),
    Case(
        "sinh(x) - x",
        "odd_function_less_argument_by_series",
        lambda x: sg.sinh(x) - x,
        lambda x, k: mp.sinh(x) - x,
        ODD,
        ODD32,
        lambda x: sg.sinh(x) - sg.sin(x),
        (NAN, NAN),  # (inf - inf, as written)
        huge=700.0,
    ),
    Case(
        "x - tan(x)",
        "odd_function_less_argument_by_series",
        lambda x: x - sg.tan(x),
        lambda x, k: x - mp.tan(x),
        # (not next to x = ±π, where the written derivative 1 - (1 + tan²(x)) that the rule leaves
        # alone beyond |x| = 1 cancels)
        tuple(x for x in ODD if abs(x) != 3.0) + (-2.0,),
        tuple(x for x in ODD32 if abs(x) != 3.0) + (-2.0,),
        lambda x: x - sg.tan(x + 1.0),
        (NAN, NAN),  # (tan(±inf) is NaN)
    ),
    Case(
        "tanh(x) - x",
        "odd_function_less_argument_by_series",
        lambda x: sg.tanh(x) - x,
        lambda x, k: mp.tanh(x) - x,
        ODD,
        ODD32,
        lambda x: sg.tanh(x) - x / 2.0,
        (INF, -INF),
    ),
    # Kepler's hyperbolic Newton step: inf/inf past |N| ≈ 710 as written (at e = 1e150, past 365)
    Case(
        "(e*sinh(N) - 2N) / (e*cosh(N) - 1)",
        "quotient_scaled_by_cosh",
        lambda n, e: (e * sg.sinh(n) - n - n) / (e * sg.cosh(n) - 1.0),
        lambda n, e, k: (e * mp.sinh(n) - 2 * n) / (e * mp.cosh(n) - 1),
        # (not where sech(N) is small against e yet not 0, N = 5..40 at e = 2, and not at e ≫ 1, N ≪ 1:
        # there the partial in e, sech(N)·(2N - tanh(N))/(e - sech(N))², is the difference of two
        # terms of the quotient rule about 1/e each, as written too)
        ((800.0, 3.0), (-1e5, 2.0), (2.0, 1.5), (0.5, 1e-3), (400.0, 1e150), (-720.0, 0.5), (30.0, 1e-20)),
        ((100.0, 3.0), (-1e4, 2.0), (2.0, 1.5), (0.5, 1e-3), (50.0, 1e30), (-90.0, 0.5)),
        lambda n, e: (e * sg.sinh(n) - n - n) / (e * sg.cosh(2.0 * n) - 1.0),
        arity=2,
        grad_floor=1e-30,  # (float32 at N = 100: the partial in N, 5e-42, is a subnormal number)
    ),
    # Lambert W's Newton step: inf/inf past w ≈ 710 as written
    Case(
        "(w*exp(w) - x) / (exp(w) + w*exp(w))",
        "quotient_scaled_by_exp",
        lambda w, x: (w * sg.exp(w) - x) / (sg.exp(w) + w * sg.exp(w)),
        lambda w, x, k: (w * mp.exp(w) - x) / (mp.exp(w) + w * mp.exp(w)),
        ((1e5, 3.0), (800.0, 3.0), (2.0, 1.0), (0.5, -2.0), (-3.0, 1.0), (30.0, 1e10), (1e300, -1.0)),
        ((1e4, 3.0), (100.0, 3.0), (2.0, 1.0), (0.5, -2.0), (-3.0, 1.0), (20.0, 1e5)),
        lambda w, x: (w * sg.exp(w) - x) / (sg.exp(2.0 * w) + w * sg.exp(w)),
        arity=2,
    ),
    # a constant shift, by the addition formulas: far out (1e15, 1e20) the written sum has lost it
    Case(
        "sin(x + 1)",
        "addition_formula_at_constant_shift",
        lambda x: sg.sin(x + 1.0),
        lambda x, k: mp.sin(x + k(1.0)),
        SHIFTED,
        SHIFTED32,
        lambda x: sg.sin(2.0 * x),
        (NAN, NAN),
    ),
    Case(
        "cos(pi/2 - x)",
        "addition_formula_at_constant_shift",
        lambda x: sg.cos(np.pi / 2 - x),
        lambda x, k: mp.cos(k(np.pi / 2) - x),
        # (not next to x = 0, where the answer is cos of the float π/2, 6e-17, and its derivative 1)
        tuple(x for x in SHIFTED if abs(x) > 0.1),
        tuple(x for x in SHIFTED32 if abs(x) > 0.1),
        lambda x: sg.cos(np.pi / 2 * x),
        (NAN, NAN),
    ),
    Case(
        "tan(3 - x)",
        "addition_formula_at_constant_shift",
        lambda x: sg.tan(3.0 - x),
        lambda x, k: mp.tan(k(3.0) - x),
        SHIFTED,
        SHIFTED32,
        lambda x: sg.tan(3.0 * x),
        (NAN, NAN),
    ),
    # (the tangent at a shift of π/4 reads the written π/4 as π/4, as inverse_gudermannian_from_log_tan does)
    Case(
        "tan(x/2 + pi/4)",
        "addition_formula_at_constant_shift",
        lambda x: sg.tan(0.5 * x + np.pi / 4),
        lambda x, k: mp.tan(x / 2 + mp.pi / 4),
        SHIFTED,
        SHIFTED32,
        lambda x: sg.tan(0.5 * x),
        (NAN, NAN),
    ),
    Case(
        "tan(0.5*(pi/2 - x))",
        "addition_formula_at_constant_shift",
        lambda x: sg.tan(0.5 * (np.pi / 2 - x)),
        lambda x, k: mp.tan((mp.pi / 2 - x) / 2),
        SHIFTED,
        SHIFTED32,
        lambda x: sg.tan(0.5 * (np.pi / 2) * x),
        (NAN, NAN),
    ),
    Case(
        "-b + sqrt(b*b - p)",
        "quadratic_root_from_conjugate",
        lambda b, p: -b + sg.sqrt(b * b - p),
        lambda b, p, k: -b + _sqrt(b * b - p),
        ((1e8, 1.0), (-1e8, 1.0), (3.0, 2.0), (1e150, 1e150), (0.5, -1.0), (-2.0, 3.0)),
        ((1e4, 1.0), (-1e4, 1.0), (3.0, 2.0), (1e15, 1e15), (0.5, -1.0), (-2.0, 3.0)),
        lambda b, p: -b + sg.sqrt(p * p - b),
        arity=2,
    ),
    Case(
        "-b - (b**2 - p) ** 0.5",
        "quadratic_root_from_conjugate",
        lambda b, p: -b - (b**2 - p) ** 0.5,
        lambda b, p, k: -b - _sqrt(b * b - p),
        ((-1e8, 1.0), (1e8, 1.0), (-3.0, 2.0), (-1e150, 1e150), (0.5, -1.0), (2.0, 3.0)),
        ((-1e4, 1.0), (1e4, 1.0), (-3.0, 2.0), (-1e15, 1e15), (0.5, -1.0), (2.0, 3.0)),
        lambda b, p: -b - (b**2 + p) ** 0.5,
        arity=2,
    ),
    Case(
        "exp(log(a) + log(b))",
        "product_from_exp_of_sum_of_logs",
        lambda a, b: sg.exp(sg.log(a) + sg.log(b)),
        lambda a, b, k: mp.exp(_log(a) + _log(b)),
        ((2.0, 3.0), (1e10, 1e-200), (1e150, 1e150), (1.5, 1e-300), (4.0, 7.0), (1e100, 1e-10)),
        ((2.0, 3.0), (1e10, 1e-20), (1e15, 1e15), (1.5, 1e-30), (4.0, 7.0), (1e30, 1e-10)),
        lambda a, b: sg.exp(sg.log(a) + sg.log_sigmoid(b)),
        arity=2,
    ),
    Case(
        "exp(a) - exp(b)",
        "expm1_from_difference_of_exps",
        lambda a, b: sg.exp(a) - sg.exp(b),
        lambda a, b, k: mp.exp(a) - mp.exp(b),
        ((1e-10, 2e-10), (3.0, 3.0 + 1e-12), (-700.0, -700.5), (-1e-300, 1e-300), (2.0, -3.0), (-5.0, 4.0)),
        ((1e-5, 2e-5), (3.0, 3.0001), (-80.0, -80.5), (-1e-30, 1e-30), (2.0, -3.0), (-5.0, 4.0)),
        lambda a, b: sg.exp(a) - sg.exp2(b),
        arity=2,
    ),
    Case(
        "(1 + 1/e)·exp(-(1 - e)·x) - (1/e - 1)·exp(-(1 + e)·x)",
        "difference_of_exps_from_shared_coefficient",
        lambda x, e: (1.0 + 1.0 / e) * sg.exp(-(1.0 - e) * x) - (1.0 / e - 1.0) * sg.exp(-(1.0 + e) * x),
        lambda x, e, k: (1 + 1 / e) * mp.exp(-(1 - e) * x) - (1 / e - 1) * mp.exp(-(1 + e) * x),
        ((-0.768, 8.29e-202), (0.5, 1e-3), (2.0, 0.5), (1e-5, 1e-20), (3.0, 1e-8), (-2.0, -1e-12)),
        ((-0.768, 1e-30), (0.5, 1e-3), (2.0, 0.5), (1e-3, 1e-6), (3.0, 1e-4), (-2.0, -1e-5)),
        lambda x, e: (1.0 + 2.0 / e) * sg.exp(-(1.0 - e) * x) - (1.0 / e - 1.0) * sg.exp(-(1.0 + e) * x),
        arity=2,
        # the answer is (1 + x)·exp(-x) + O(e): its derivative in x, -x·exp(-x), is the sum of parts
        # of about 2 (of w·(exp - exp) and of the exps), as accurate as they are
        grad_floor=4.0,
    ),
    Case(
        "exp(log(a) + log1p(b))",
        "product_from_exp_of_sum_of_logs",
        lambda a, b: sg.exp(sg.log(a) + sg.log1p(b)),
        lambda a, b, k: mp.exp(_log(a) + _log1p(b)),
        ((2.0, 3.0), (1e-300, 1e-20), (1e150, 1e150), (1.5, -0.75), (4.0, 7.0), (1e100, -1e-10)),
        ((2.0, 3.0), (1e-30, 1e-10), (1e15, 1e15), (1.5, -0.75), (4.0, 7.0), (1e30, -1e-5)),
        lambda a, b: sg.exp(sg.log(a) + sg.log_sigmoid(b)),
        arity=2,
    ),
    Case(
        "log(x + sqrt(x*x + 1))",
        "inverse_hyperbolic_from_log",
        lambda x: sg.log(x + sg.sqrt(x * x + 1.0)),
        lambda x, k: _log(x + mp.sqrt(x * x + 1)),
        LINE,
        LINE32,
        lambda x: sg.log(x + sg.sqrt(x * x + 2.0)),
        (-INF, INF),
    ),
    Case(
        "log(x + (x**2 - 1) ** 0.5)",
        "inverse_hyperbolic_from_log",
        lambda x: sg.log(x + (x**2 - 1.0) ** 0.5),
        lambda x, k: _log(x + _sqrt(x * x - 1)),
        (1.0000001, 1.5, 3.0, 40.0, 1e10, 1e160),
        (1.001, 1.5, 3.0, 40.0, 1e10, 1e30),
        lambda x: sg.log(x + (x**2 - 2.0) ** 0.5),
        (NAN, INF),
    ),
    # (the written π/4 is rounded; the rule takes it for π/4, as log_ndtr takes a written 1/√2)
    Case(
        "log(tan(pi/4 + x/2))",
        "inverse_gudermannian_from_log_tan",
        lambda x: sg.log(sg.tan(np.pi / 4 + 0.5 * x)),
        lambda x, k: _log(mp.tan(mp.pi / 4 + x / 2)),
        (-1.5, -0.5, -1e-10, 0.0, 1e-20, 0.3, 1.2, 1.5),
        (-1.5, -0.5, -1e-5, 0.0, 1e-20, 0.3, 1.2),
        lambda x: sg.log(sg.tan(np.pi / 3 + 0.5 * x)),
        (NAN, NAN),
        huge=1e5,
    ),
    Case(
        "log(tan(pi/4 - x/2))",
        "inverse_gudermannian_from_log_tan",
        lambda x: sg.log(sg.tan(np.pi / 4 - x / 2.0)),
        lambda x, k: _log(mp.tan(mp.pi / 4 - x / 2)),
        (-1.5, -0.5, -1e-10, 0.0, 1e-20, 0.3, 1.2, 1.5),
        (-1.5, -0.5, -1e-5, 0.0, 1e-20, 0.3, 1.2),
        # (not π/4 - x/3: the tangent at a shift of π/4 is (1 - t)/(1 + t), which reads π/4 as π/4 too)
        lambda x: sg.log(sg.tan(np.pi / 3 - x / 2.0)),
        (NAN, NAN),
        huge=1e5,
    ),
    Case(
        "exp(log_sigmoid)",
        "primitive_from_exp_of_its_log",
        lambda x: sg.exp(sg.log_sigmoid(x)),
        lambda x, k: _sigmoid(x),
        LINE,
        LINE32,
        lambda x: sg.exp(2.0 * sg.log_sigmoid(x)),
        (0.0, 1.0),
    ),
    Case(
        "exp(log_erfc)",
        "primitive_from_exp_of_its_log",
        lambda x: sg.exp(sg.log_erfc(x)),
        lambda x, k: mp.erfc(x),
        ERF,
        ERF32,
        lambda x: sg.exp(sg.log_erfc(x) - 1.0),
        (2.0, 0.0),
        huge=1e5,
    ),
]
IDS = [c.name for c in CASES]
UNARY = [c for c in CASES if c.arity == 1]


def _symbols(case: Case, dtype: str):
    return [sg.vector(f"x{i}", dtype=dtype) for i in range(case.arity)]


@functools.cache
def _compiled(case: Case, dtype: str, recognition: bool = True):
    xs = _symbols(case, dtype)
    y = case.build(*xs)
    return sg.function(xs, [y, *sg.grad(sg.sum(y), xs, recognition=recognition)], recognition=recognition)


def _columns(case: Case, points) -> list[np.ndarray]:
    return [np.array(column) for column in zip(*points)] if case.arity == 2 else [np.array(points)]


def _exact(case: Case, dtype: str, args: list[float]) -> list[float]:
    """The written formula and its partial derivatives at `args`, exactly (NaN outside the domain)."""
    k = _k(dtype)
    k.dtype = dtype  # type: ignore[attr-defined]

    def f(*xs):
        return case.exact(*xs, k)

    with mp.workdps(case.dps):
        xs = [mp.mpf(a) for a in args]
        value = f(*xs)
        if not mp.isfinite(value):
            return [float(value)] + [float("nan")] * case.arity
        partials = [mp.diff(f, xs, tuple(int(i == j) for j in range(case.arity))) for i in range(case.arity)]
        return [float(value)] + [float(p) for p in partials]


# -- the rules fire, and give the written formula's exact value and gradient ---------------------------------
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_explain_names_the_rule(case):
    assert f"[{case.rule}]" in _compiled(case, "float64").explain()
    assert f"[{case.rule}]" in _compiled(case, "float32").explain()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_value_and_gradient_match_the_written_formula_exactly(case, dtype):
    points = case.points if dtype == "float64" else case.points32
    args = [a.astype(dtype) for a in _columns(case, points)]
    got = _compiled(case, dtype)(*args)
    exact = np.array([_exact(case, dtype, [float(a[i]) for a in args]) for i in range(len(args[0]))]).T
    for i, (g, e) in enumerate(zip(got, exact)):
        assert g.dtype == np.dtype(dtype)
        assert np.all(np.isfinite(g)), (i, args, g)
        ulps = _ulps(g, e, dtype, floor=case.grad_floor if i else 0.0)
        limit = case.ulps if i == 0 or case.grad_ulps is None else case.grad_ulps
        assert np.all(ulps <= limit), (i, [a[ulps > limit] for a in args], g[ulps > limit], e[ulps > limit])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_written_formula_breaks_where_the_recognised_one_does_not(case):
    points = case.points
    args = _columns(case, points)
    with np.errstate(all="ignore"):
        written = _compiled(case, "float64", recognition=False)(*args)
    recognised = _compiled(case, "float64")(*args)
    assert all(np.all(np.isfinite(r)) for r in recognised)
    exact = np.array([_exact(case, "float64", [float(a[i]) for a in args]) for i in range(len(args[0]))]).T
    with np.errstate(invalid="ignore"):
        worse = [np.max(np.where(np.isfinite(w), _ulps(w, e, "float64"), np.inf)) for w, e in zip(written, exact)]
    # σ(1 - σ) was recognised before this module; exp(log_sigmoid(x)) as written is at most ~16 ulps
    # off (|log σ(x)|·ε, where log1p(e^x) is above x's ulp: x in -37..-2), which the rule removes
    if case.name not in ("σ (1 - σ)", "exp(log_sigmoid)"):
        assert max(worse) > 2 * case.ulps, f"{case.name}: no point here where the written formula is off"


# -- edges: 0, ±tiny, ±huge, ±inf, NaN ------------------------------------------------------------------------
@pytest.mark.parametrize("case", UNARY, ids=[c.name for c in UNARY])
def test_edges(case):
    finite = [0.0, -0.0, 1e-300, -1e-300, case.huge, -case.huge]
    x = np.array(finite + [-INF, INF, NAN])
    with np.errstate(all="ignore"):
        value, grad = _compiled(case, "float64")(x)
    far = case if case.far is None else replace(case, exact=case.far)
    for i, point in enumerate(finite):
        expected = _exact(far, "float64", [point])[0]
        if np.isnan(expected):
            assert np.isnan(value[i]), (point, value[i])  # outside the domain as written: NaN stays
            continue
        assert _ulps(value[i], expected, "float64") <= case.ulps or value[i] == expected, (point, value[i], expected)
        assert not np.isnan(grad[i]), (point, grad[i])
    at_inf = case.at_inf if case.at_inf != (None, None) else _limits(case)
    for got, limit in zip(value[6:8], at_inf):
        if np.isnan(limit):
            assert np.isnan(got)  # (exp(log1mexp(+inf)): outside the domain)
        else:
            assert got == limit or _ulps(got, limit, "float64") <= case.ulps, (got, limit)
    assert np.isnan(value[8]) and np.isnan(grad[8])


def _limits(case: Case) -> tuple[float, float]:
    """The exact limits at ∓inf, read off the formula at ∓1e300 (for cases whose constant depends on the dtype)."""
    return tuple(_exact(case, "float64", [s * 1e300])[0] for s in (-1.0, 1.0))  # type: ignore[return-value]


DIFFERENCES = [c for c in CASES if c.rule == "log_sigmoid_difference_from_naive"]


@pytest.mark.parametrize("case", DIFFERENCES, ids=[c.name for c in DIFFERENCES])
def test_edges_of_two_operands(case):
    a = np.array([INF, 0.0, INF, 1.0, 1.0, NAN, 1e-300, 0.0, 1e300, -INF])
    b = np.array([0.0, -INF, -INF, 1.0, 2.0, 0.0, -1e-300, 0.0, -1e300, -INF])
    with np.errstate(all="ignore"):
        value, ga, gb = _compiled(case, "float64")(a, b)
        written = _compiled(case, "float64", recognition=False)(a, b)[0]
    log_half = float(np.log(0.5))
    expected = [log_half, log_half, 0.0, -INF, NAN, NAN, float(np.log(5e-301)), -INF, 0.0, -INF]
    np.testing.assert_allclose(value, expected, rtol=1e-15)
    np.testing.assert_array_equal(np.isnan(value), np.isnan(written))  # NaN exactly where written
    assert ga[3] == INF and gb[3] == -INF  # a = b: as the written formula's σ'(a) / 0
    assert np.isnan(ga[4]) and np.isnan(gb[4])


def test_edges_of_the_two_term_softmax():
    a, b = sg.vector("a"), sg.vector("b")
    y = sg.exp(a) / (sg.exp(a) + sg.exp(b))
    f = sg.function([a, b], [y, *sg.grad(sg.sum(y), [a, b])])
    pa = np.array([INF, -INF, 800.0, -800.0, 0.0, NAN, -INF, 1e300])
    pb = np.array([0.0, 0.0, 800.0, -800.0, -INF, 0.0, -INF, -1e300])
    with np.errstate(all="ignore"):
        value, ga, gb = f(pa, pb)
        written = sg.function([a, b], y, recognition=False)(pa, pb)
    np.testing.assert_array_equal(value[:5], [1.0, 0.0, 0.5, 0.5, 1.0])  # written: NaN, 0, NaN, NaN, 1
    assert np.isnan(written[2]) and np.isnan(written[3])
    assert np.isnan(value[5]) and np.isnan(value[6])  # NaN in, and -inf - -inf: NaN as written (0/0)
    assert value[7] == 1.0 and ga[7] == 0.0 and gb[7] == 0.0
    np.testing.assert_array_equal(ga[2:4], [0.25, 0.25])
    np.testing.assert_array_equal(gb[2:4], [-0.25, -0.25])


# -- inside user composites and loop bodies ---------------------------------------------------------------------
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


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_fires_inside_a_scan_body(case):
    def step(total, xt):
        operands = (xt, xt - 1.0) if case.arity == 2 else (xt,)
        return total + case.build(*operands), None

    args = _columns(case, case.points)
    rows = np.stack([args[0], args[0][::-1]])  # two steps
    xs = sg.matrix("xs")
    final, _ = sg.scan(step, sg.zeros(rows.shape[1]), xs)
    f = sg.function([xs], [final, sg.grad(sg.sum(final), xs)])
    assert f"[{case.rule}]" in f.explain()
    value, grad = f(rows)
    assert np.all(np.isfinite(value)) and np.all(np.isfinite(grad))
    if case.arity == 1:
        single = _compiled(case, "float64")
        expected = single(rows[0])[0] + single(rows[1])[0]
        np.testing.assert_allclose(value, expected, rtol=1e-14)


# -- near misses ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_near_miss_is_left_alone(case, dtype):
    xs = _symbols(case, dtype)
    y = case.near(*xs)
    f = sg.function(xs, y)
    assert f"[{case.rule}]" not in f.explain(), f.explain()
    # at moderate points, where the near miss as written is itself accurate (other rules may repair it elsewhere)
    points = [p for p in (case.points if dtype == "float64" else case.points32) if np.max(np.abs(p)) <= 3]
    args = [a.astype(dtype) for a in _columns(case, points)]
    with np.errstate(all="ignore"):
        written = sg.function(xs, y, recognition=False)(*args)
    np.testing.assert_allclose(f(*args), written, rtol=1e-12 if dtype == "float64" else 1e-5, equal_nan=True)


def test_exp_of_a_sum_of_logs_keeps_the_written_domain():
    a, b = sg.vector("a"), sg.vector("b")
    formulas = [sg.exp(sg.log(a) + sg.log(b)), sg.exp(sg.log(a) - sg.log(b))]
    formulas += [sg.exp(sg.log(a) + sg.log1p(b)), sg.exp(sg.log(a) - sg.log1p(b))]
    f = sg.function([a, b], formulas)
    assert f.explain().count("[product_from_exp_of_sum_of_logs]") == 4
    pa = np.array([-1.0, 2.0, 0.0, 0.0, INF, NAN, 3.0, 2.0, 2.0, INF, 0.0])
    pb = np.array([2.0, -0.5, INF, 0.0, 0.0, 1.0, 0.0, -1.0, -1.5, -1.0, -1.0])
    with np.errstate(all="ignore"):
        got = f(pa, pb)
        written = sg.function([a, b], formulas, recognition=False)(pa, pb)
    for g, w in zip(got, written):
        # NaN, 0 and inf exactly where the logs make them; the rest is the written value, better rounded
        np.testing.assert_array_equal(np.isfinite(g) & (g != 0), np.isfinite(w) & (w != 0))
        np.testing.assert_array_equal(g[~np.isfinite(g) | (g == 0)], w[~np.isfinite(w) | (w == 0)])
        np.testing.assert_allclose(g, w, rtol=1e-15)


def test_a_difference_of_exps_keeps_the_written_edges():
    a, b = sg.vector("a"), sg.vector("b")
    y = sg.exp(a) - sg.exp(b)
    f = sg.function([a, b], [y, *sg.grad(sg.sum(y), [a, b])])
    assert "[expm1_from_difference_of_exps]" in f.explain()
    pa = np.array([-INF, -INF, INF, INF, 0.0, NAN, 1.0, -INF])
    pb = np.array([-INF, 0.0, 1.0, INF, -INF, 0.0, 1.0, 800.0])
    with np.errstate(all="ignore"):
        value, da, db = f(pa, pb)
        written = sg.function([a, b], y, recognition=False)(pa, pb)
    np.testing.assert_array_equal(value, written)  # 0, -1, inf, NaN, 1, NaN, 0 and -inf as written
    np.testing.assert_array_equal(da[[1, 4, 6]], [0.0, 1.0, np.e])
    np.testing.assert_array_equal(db[[1, 4, 6]], [-1.0, -0.0, -np.e])


def test_exp_of_a_sum_of_logs_has_its_derivative_at_zero():
    # written, d/da exp(log(a) + log1p(b)) at a = 0 is exp(-inf)·(1/0) = NaN; the product's is 1 + b
    a, b = sg.vector("a"), sg.vector("b")
    y = sg.exp(sg.log(a) + sg.log1p(b))
    da, db = sg.function([a, b], sg.grad(sg.sum(y), [a, b]))(np.array([0.0, 0.0, 2.0]), np.array([0.5, -1.0, 3.0]))
    np.testing.assert_array_equal(da, [1.5, 0.0, 4.0])
    np.testing.assert_array_equal(db, [0.0, 0.0, 2.0])


def test_log_of_abs_sinh_of_a_product_that_underflows():
    # GERG's log|sinh(t·τ)|: written, t·τ = 1e-400 is 0 and the log -inf; the answer is log|t| + log|τ|
    t, tau = sg.vector("t"), sg.vector("tau")
    y = sg.log(sg.abs(sg.sinh(t * tau)))
    f = sg.function([t, tau], [y, *sg.grad(sg.sum(y), [t, tau])])
    assert "[log_sinh_from_log_of_sinh]" in f.explain() and "[sum_of_logs_from_log_of_product]" in f.explain()
    t_, tau_ = np.array([1e-200, -3e-160, 0.3, 2.0, -1e-3]), np.array([1e-200, 2e-170, 0.5, 0.6, 1e-300])
    value, gt, gtau = f(t_, tau_)
    with mp.workdps(60):
        u = [mp.mpf(a) * mp.mpf(b) for a, b in zip(t_, tau_)]
        exact = [float(mp.log(abs(mp.sinh(v)))) for v in u]
        coth = [mp.cosh(v) / mp.sinh(v) for v in u]
        dt = [float(c * mp.mpf(b)) for c, b in zip(coth, tau_)]
        dtau = [float(c * mp.mpf(a)) for c, a in zip(coth, t_)]
    assert np.all(_ulps(value, exact, "float64") <= 4), (value, exact)
    assert np.all(_ulps(gt, dt, "float64") <= 4) and np.all(_ulps(gtau, dtau, "float64") <= 4), (gt, dt, gtau, dtau)
    with np.errstate(all="ignore"):
        written = sg.function([t, tau], y, recognition=False)(t_, tau_)
    assert np.isinf(written[0]) and np.isinf(written[1])


def test_log_of_abs_sinh_far_out():
    # log(|sinh(x)|) of either sign (the GERG form): finite past overflow, as written near 0
    x = sg.vector("x")
    y = sg.log(sg.abs(sg.sinh(x)))
    f = sg.function([x], [y, sg.grad(sg.sum(y), x)])
    assert "[log_sinh_from_log_of_sinh]" in f.explain()
    points = np.array([-800.0, -30.0, -0.5, 1e-8, 3.0, 21.0, 750.0])
    value, grad = f(points)
    with mp.workdps(50):
        exact = [float(mp.log(abs(mp.sinh(mp.mpf(p))))) for p in points]
        slope = [float(mp.cosh(p) / mp.sinh(p)) for p in map(mp.mpf, points)]
    assert np.all(_ulps(value, exact, "float64") <= 4) and np.all(_ulps(grad, slope, "float64") <= 4)
    with np.errstate(all="ignore"):
        written = sg.function([x], y, recognition=False)(points)
    assert np.isinf(written[0]) and np.isinf(written[-1])


def test_powers_of_sigmoids_that_underflow():
    """σ(-800)**0.5 is e^-400 (σ(-800) itself underflows), σ(-30)**25 is e^-750 (the power does),
    σ(-40)**0.01 keeps the written power: exp(c·log σ) would err by |c·log σ| ulps there too, but
    the written one is a normal number."""
    s, c = sg.vector("s"), sg.vector("c")
    y = sg.sigmoid(s) ** c
    points = [(-800.0, 0.5), (-30.0, 25.0), (-40.0, 0.01), (-700.0, 1.0)]
    args = [np.array(column) for column in zip(*points)]
    value, gs, gc = sg.function([s, c], [y, *sg.grad(sg.sum(y), [s, c])])(*args)
    with mp.workdps(60):
        exact = [mp.exp(pc * -mp.log1p(mp.exp(-mp.mpf(ps)))) for ps, pc in points]
        exact_gs = [float(e * pc / (1 + mp.exp(mp.mpf(ps)))) for e, (ps, pc) in zip(exact, points)]
    np.testing.assert_allclose(value, [float(e) for e in exact], rtol=1e-13)
    np.testing.assert_allclose(gs, exact_gs, rtol=1e-13)
    assert np.isfinite(gc).all()
    with np.errstate(all="ignore"):
        written = sg.function([s, c], y, recognition=False)(*args)
    assert written[0] == 0.0 and written[1] == 0.0


def test_reciprocal_roots_of_shifted_arguments():
    """1/√x - 1/√(x + 1) as written in Herbie's 2isqrt: the value and derivative to a few ulps of
    the exact ones where the written difference keeps no digit (x = 1e20), and 1/√(±0) as written."""
    x = sg.vector("x")
    y = 1.0 / sg.sqrt(x) - 1.0 / sg.sqrt(x + 1.0)
    f = sg.function([x], [y, *sg.grad(sg.sum(y), [x])])
    assert "[expm1_from_difference_of_shifted_powers]" in f.explain()
    points = [1e-200, 0.5, 3.0, 1e10, 1e20, 1e300]
    value, grad = f(np.array(points))
    with mp.workdps(700):
        xs = [mp.mpf(p) for p in points]
        exact = [1 / mp.sqrt(v) - 1 / mp.sqrt(v + 1) for v in xs]
        slope = [(-1 / mp.sqrt(v) ** 3 + 1 / mp.sqrt(v + 1) ** 3) / 2 for v in xs]
    np.testing.assert_allclose(value, [float(e) for e in exact], rtol=8 * np.finfo(float).eps)
    np.testing.assert_allclose(grad, [float(e) for e in slope], rtol=8 * np.finfo(float).eps)
    with np.errstate(all="ignore"):
        at_zero = f(np.array([0.0, -0.0]))[0]
    assert at_zero[0] == np.inf and at_zero[1] == -np.inf  # 1/√0 - 1 and 1/√(-0) - 1, as written
    assert sg.function([x], 1.0 / (x + 1.0) ** 0.5 - 1.0 / x**0.5).explain().count("shifted_powers") == 0


def test_difference_of_powers_with_a_variable_exponent():
    """(x + 1)**(1/n) - x**(1/n) (Herbie's 2nthrt): the value and both partials, also for a tiny
    exponent below x = 1 (where the powers sit within an ulp of each other too) and for x = 1e-300,
    where the chain rule's (1/x)/x would overflow; two different exponents do not fire."""
    x, n = sg.vector("x"), sg.vector("n")
    y = (x + 1.0) ** (1.0 / n) - x ** (1.0 / n)
    f = sg.function([x, n], [y, *sg.grad(sg.sum(y), [x, n])])
    assert "[expm1_from_difference_of_shifted_powers]" in f.explain()
    points = [(1e16, 3.0), (1e300, 5.0), (0.5, 1e20), (1e-300, 1e20), (3.0, -2.0)]
    args = [np.array(column) for column in zip(*points)]
    got = f(*args)
    with mp.workdps(700):
        for i, (px, pn) in enumerate(points):
            X, N, P = mp.mpf(px), mp.mpf(pn), mp.mpf(1.0 / pn)  # (the exponent as the program rounds it)
            exact = (X + 1) ** P - X**P
            d_x = P * ((X + 1) ** (P - 1) - X ** (P - 1))
            d_n = -((X + 1) ** P * mp.log(X + 1) - X**P * mp.log(X)) / N**2
            for computed, e in zip((got[0][i], got[1][i], got[2][i]), (exact, d_x, d_n)):
                assert abs(computed - float(e)) <= 16 * np.finfo(float).eps * abs(float(e)), (px, pn, computed, e)
    other = (x + 1.0) ** (1.0 / n) - x ** (2.0 / n)
    assert "shifted_powers" not in sg.function([x, n], other).explain()


def test_one_is_not_the_only_constant_near_one():
    x = sg.vector("x")
    for c in (0.9999999999999999, 1.0, 2.0000000000000004):  # below one, one itself, past two
        assert "[sigmoid_complement_from_c_minus_sigmoid]" not in sg.function([x], c - sg.sigmoid(x)).explain()
    assert "[sigmoid_complement_from_c_minus_sigmoid]" in sg.function([x], 2.0 - sg.sigmoid(x)).explain()


def test_a_float16_root_two_under_a_float32_result_is_not_taken_for_root_two():
    h = sg.vector("h", dtype="float16")
    y = sg.log(0.5 * sg.erfc(-h / SQRT2))  # x / 1.414 (float16): log_ndtr would take the exact √2
    f = sg.function([h], y)
    assert f"[{RULE_NDTR}]" not in f.explain()


# -- the numbers the issue names --------------------------------------------------------------------------------
def test_log_sigmoid_difference_at_the_issue_points():
    a, b = sg.vector("a"), sg.vector("b")
    y = sg.log(sg.sigmoid(a) - sg.sigmoid(b))
    f = sg.function([a, b], [y, *sg.grad(sg.sum(y), [a, b])])
    pa, pb = (np.array(v) for v in zip(*PAIRS[:6]))
    value, ga, gb = f(pa, pb)
    with np.errstate(all="ignore"):
        written = sg.function([a, b], y, recognition=False)(pa, pb)
    assert not np.isfinite(written[0]) and not np.isfinite(written[3])  # (50, 45) and (800, 799): log(0)
    assert np.all(np.isfinite(value)) and np.all(np.isfinite(ga)) and np.all(np.isfinite(gb))
    np.testing.assert_allclose(value[3], -799.0 + float(np.log1p(-np.exp(-1.0))), rtol=1e-15)


def test_log_cosh_keeps_tiny_values_and_huge_ones():
    x = sg.vector("x")
    f = sg.function([x], sg.log(sg.cosh(x)))
    np.testing.assert_allclose(f(np.array([1e-10, 1e300])), [5e-21, 1e300], rtol=1e-15)


def test_log_of_guarded_complement_of_sigmoid_is_finite_and_accurate_far_out():
    x = sg.vector("x")
    c = 1.0000000000000002
    f = sg.function([x], sg.log(c - sg.sigmoid(x)))
    with mp.workdps(60):
        exact = [float(mp.log(mp.mpf(c) - _sigmoid(mp.mpf(v)))) for v in (36.0, 40.0, 800.0)]
    np.testing.assert_allclose(f(np.array([36.0, 40.0, 800.0])), exact, rtol=1e-15)


# -- other backends -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["jax", "numba"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_recognised_formulas_run_on_other_backends(case, backend):
    pytest.importorskip(backend)
    xs = _symbols(case, "float64")
    y = case.build(*xs)
    f = sg.function(xs, [y, *sg.grad(sg.sum(y), xs)], backend=backend)
    assert f"[{case.rule}]" in f.explain()
    # (XLA flushes subnormal numbers to zero: compared down to the smallest normal one; a gradient
    # that sums parts of about grad_floor to less is compared to their roundings)
    args = _columns(case, case.points)
    for i, (got, want) in enumerate(zip(f(*args), _compiled(case, "float64")(*args))):
        floor = (
            float(np.finfo(np.float64).tiny)
            if i == 0
            else max(float(np.finfo(np.float64).tiny), case.grad_floor * 1e-14)
        )
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=floor)


@pytest.mark.parametrize("backend", ["numpy", "numba", "jax"])
def test_the_quadratic_formula_keeps_both_roots(backend):
    if backend != "numpy":
        pytest.importorskip(backend)
    a, b, c = sg.vector("a"), sg.vector("b"), sg.vector("c")
    root = sg.sqrt(b * b - 4.0 * a * c)
    plus, minus = (-b + root) / (2.0 * a), (-b - root) / (2.0 * a)
    f = sg.function([a, b, c], [plus, minus], backend=backend)
    assert "[quadratic_root_from_conjugate]" in f.explain()
    a_, b_, c_ = np.array([1.0, 1.0, 3.0, -2.0]), np.array([1e8, -1e8, 1e-3, 7.0]), np.array([1.0, 2.0, -5.0, 1.0])
    got = f(a_, b_, c_)
    with mp.workdps(60):
        for sign, g in zip((1, -1), got):
            exact = [
                float((-mp.mpf(y) + sign * mp.sqrt(mp.mpf(y) ** 2 - 4 * mp.mpf(x) * mp.mpf(z))) / (2 * mp.mpf(x)))
                for x, y, z in zip(a_, b_, c_)
            ]
            assert np.all(_ulps(g, np.array(exact), "float64") <= 4), (g, exact)


@pytest.mark.parametrize("backend", ["numpy", "numba", "jax"])
def test_a_constant_shift_keeps_exact_sums_and_the_written_constant(backend):
    if backend != "numpy":
        pytest.importorskip(backend)
    x = sg.vector("x")
    f = sg.function([x], [sg.sin(x + 1.5), sg.tan(x + np.pi / 2), sg.cos(3.0 - x)], backend=backend)
    assert "[addition_formula_at_constant_shift]" in f.explain()
    xs = np.array([0.0, 15.0, 0.25, -3.0, 1e20, 12345.678])
    sine, tangent, cosine = f(xs)
    # exact sums (the first four) are the written functions of them, bit for bit; tan of the float
    # π/2 is 1.6e16, not a pole
    np.testing.assert_array_equal(sine[:4], np.sin(xs[:4] + 1.5))
    np.testing.assert_array_equal(cosine[:4], np.cos(3.0 - xs[:4]))
    assert tangent[0] == np.tan(np.pi / 2)
    # inexact ones (the last two) keep the shift's digits, which the written sums lose
    with mp.workdps(80):
        shift = mp.mpf(np.pi / 2)
        exact = [
            np.array([float(fn(mp.mpf(v))) for v in xs[4:]])
            for fn in (lambda v: mp.sin(v + 1.5), lambda v: mp.tan(v + shift), lambda v: mp.cos(3 - v))
        ]
    for got, want, written in zip(
        (sine, tangent, cosine), exact, (np.sin(xs + 1.5), np.tan(xs + np.pi / 2), np.cos(3.0 - xs))
    ):
        assert np.all(_ulps(got[4:], want, "float64") <= 4), (got[4:], want)
        assert np.max(_ulps(written[4:], want, "float64")) > 100


def test_a_difference_at_a_constant_shift_is_sum_to_products_then_its_cosine_the_addition_formulas():
    x = sg.vector("x")
    f = sg.function([x], sg.sin(x + 1e-3) - sg.sin(x))
    explained = f.explain()
    # 2·cos(x + 5e-4)·sin(5e-4): at x = 1e5 the written x + 5e-4 is 1e-11 off
    assert "[sine_difference_to_product]" in explained and "[addition_formula_at_constant_shift]" in explained
    with mp.workdps(60):
        exact = [float(mp.sin(mp.mpf(v) + mp.mpf(1e-3)) - mp.sin(mp.mpf(v))) for v in (0.5, 1e5)]
    assert np.all(_ulps(f(np.array([0.5, 1e5])), np.array(exact), "float64") <= 8)
