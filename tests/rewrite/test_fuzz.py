"""The rewrite fuzzer: random naive formulas, recognised, against the same formulas as written.

Graphs are drawn from the recognition catalogue's patterns and from near misses (one
constant changed, so the pattern must not fire), composed one to three deep, with
broadcasting constants (NumPy arrays, `sg.constant`, Python scalars, in either operand
order), unknown extents, float32 and float64, and inputs that include 0, ±tiny, ±huge,
±inf, NaN and ties.  For every graph and input, against the written formula evaluated
exactly (mpmath) and in floating point:

(a) the recognised outputs have the written formula's shape and dtype;
(b, c) where the exact value is finite and representable, the recognised value is no
    further from it than the written one, beyond a few ulps;
(d) NaN exactly where the exact value is NaN (outside the domain, with finite inputs);
(e) for the gradient of a weighted sum of the outputs: no NaN where the exact gradient is a
    number (unless the written one is not finite either: a formula recognition does not
    repair yet), and no less accurate than the written one.

Every graph runs on the NumPy backend, a quarter of them on Numba and (fewer, each is an
XLA compilation) on JAX.  A
test plants an unsound rule and shows the fuzzer catching it.  `STABLEGRAD_FUZZ_EXAMPLES`
sets how many graphs a round draws (the default: a fixed round in well under a minute);
`pytest --soak SECONDS` adds freshly seeded rounds until that much time is spent.
"""

from __future__ import annotations

import functools
import gc
import importlib.util
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, seed, settings
from hypothesis import strategies as st

import stablegrad as sg
from stablegrad.audit.mpmath_eval import DEFAULT_DPS, evaluate, to_float
from stablegrad.graph.basic import toposort
from stablegrad.graph.printing import expression
from stablegrad.ops.stable import Softplus
from stablegrad.rewrite import pipeline
from stablegrad.rewrite.engine import Kind, Phase, rewrite
from stablegrad.rewrite.extents import Extents

pytest.importorskip("mpmath")

EXAMPLES = int(os.environ.get("STABLEGRAD_FUZZ_EXAMPLES", "2000"))
JAX_EXAMPLES = max(EXAMPLES // 20, 10)
FUSED_EXAMPLES = max(EXAMPLES // 20, 10)
N = 3  # entries along the last axis
REFERENCE_SECONDS = 2.0
ULPS = 64  # how much less accurate than the written formula a recognised one may be, in ulps of the answer


# -- the formulas -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Piece:
    name: str
    build: Callable  # (x, const) -> tensor of x's shape, or of its shape with the last axis kept as 1


def _sum(v):
    return sg.sum(v, axis=-1, keepdims=True)


#: N × N matrices for products in probability space (summed to one entry, as a piece's result may
#: be: its last axis kept as 1): one with zeros, one with negative entries
TRANSITIONS = np.array([[0.5, 0.0, 0.5], [0.25, 0.5, 0.25], [0.0, 0.125, 0.875]])
SIGNED = np.array([[1.0, -1.0, 0.5], [-0.5, 1.0, 1.0], [1.0, 1.0, -2.0]])


def _widened(x):
    """x with its last axis broadcast to N (it may be 1 at run time), to multiply an N × N matrix."""
    return x + sg.zeros(N, dtype=x.dtype)


def _matrix(x, values: np.ndarray):
    """`values` in the dtype exp(x) has, so that the product does not widen it."""
    return sg.constant(values.astype(x.dtype if np.dtype(x.dtype).kind == "f" else np.float64))


#: a symmetric positive definite matrix: det(diag(s) @ SPD) = prod(s)·det(SPD) > 0 for s > 0
SPD = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.25], [0.5, 0.25, 2.0]])


def _log_det_of_scaled(x):
    """log det of SPD with its rows scaled by 1 + |x| (its last axis kept as 1): the det overflows from
    |x| ≈ 1e103. The scale is at least 1 and finite (a non-finite x reads as 0): a singular or NaN
    matrix has no gradient as written (det's pullback is a solve, which fails there)."""
    t = sg.where(sg.isfinite(x), x, 0)
    rows = (1 + sg.abs(_widened(t)))[..., :, None] * _matrix(x, SPD)
    return sg.log(sg.linalg.det(rows))[..., None]


PIECES = [
    # the catalogue's naive formulas
    Piece("log(c + exp(x))", lambda x, c: sg.log(c(1.0) + sg.exp(x))),
    Piece("log(exp(x) + c)", lambda x, c: sg.log(sg.exp(x) + c(1.0))),
    Piece("log(c + x)", lambda x, c: sg.log(c(1.0) + x)),
    Piece("log(c - x)", lambda x, c: sg.log(c(1.0) - x)),
    Piece("exp(x) - c", lambda x, c: sg.exp(x) - c(1.0)),
    Piece("c / (c + exp(-x))", lambda x, c: c(1.0) / (c(1.0) + sg.exp(-x))),
    Piece("c - sigmoid(x)", lambda x, c: c(1.0) - sg.sigmoid(x)),
    Piece("log(c - exp(x))", lambda x, c: sg.log(c(1.0) - sg.exp(x))),
    Piece("log(sum(exp(x)))", lambda x, c: sg.log(_sum(sg.exp(x)))),
    Piece("log(sum(c * exp(x)))", lambda x, c: sg.log(_sum(c(2.0) * sg.exp(x)))),
    Piece("exp(x) / sum(exp(x))", lambda x, c: sg.exp(x) / _sum(sg.exp(x))),
    Piece("x - log(sum(exp(x)))", lambda x, c: x - sg.log(_sum(sg.exp(x)))),
    Piece("log(exp(x) / sum(exp(x)))", lambda x, c: sg.log(sg.exp(x) / _sum(sg.exp(x)))),
    Piece("log(exp(x) + exp(c))", lambda x, c: sg.log(sg.exp(x) + sg.exp(c(0.5)))),
    Piece("where(m, exp(x), c)", lambda x, c: sg.where(x > 0, sg.exp(x), c(0.0))),
    Piece("x * (c / (x + 2))", lambda x, c: x * (c(1.0) / (x + 2.0))),
    Piece("c/(x + 1) - 2c/x + c/(x - 1)", lambda x, c: c(1.0) / (x + 1.0) - c(2.0) / x + c(1.0) / (x - 1.0)),
    # quotients of affine forms in a shared term (their gradient is taken with the term cancelled)
    Piece("(x - c) / (x + c)", lambda x, c: (x - c(0.5)) / (x + c(0.5))),
    Piece("x / (c - x)", lambda x, c: x / (c(1.0) - x)),
    Piece("(c + x*x) / (2c + x*x)", lambda x, c: (c(1.0) + x * x) / (c(2.0) + x * x)),
    Piece("(x + c) * (x - c)", lambda x, c: (x + c(0.5)) * (x - c(0.5))),
    Piece("sinh(x) / x", lambda x, c: sg.sinh(x) / x),
    Piece("sin(x) / x", lambda x, c: sg.sin(x) / x),
    Piece("c - c * cos(x)", lambda x, c: c(1.0) - c(1.0) * sg.cos(x)),
    Piece("log(tanh(x))", lambda x, c: sg.log(sg.tanh(x))),
    Piece("c / x - c / tan(x)", lambda x, c: c(1.0) / x - c(1.0) / sg.tan(x)),
    Piece("sigmoid(x) ** c", lambda x, c: sg.sigmoid(x) ** c(2.5)),
    Piece("arctan(x) - pi/4", lambda x, c: sg.arctan(x) - c(np.pi / 4)),
    Piece("log(cosh(x) / sinh(x))", lambda x, c: sg.log(sg.cosh(x) / sg.sinh(x))),
    # differences at shifted arguments, and odd functions less their argument (rewrite/trigonometric.py)
    Piece("sin(x + c) - sin(x)", lambda x, c: sg.sin(x + c(1e-3)) - sg.sin(x)),
    Piece("cos(x) - cos(x - c)", lambda x, c: sg.cos(x) - sg.cos(x - c(1e-3))),
    Piece("tan(x + c) - tan(x)", lambda x, c: sg.tan(x + c(1e-3)) - sg.tan(x)),
    Piece("arctan(x + c) - arctan(x)", lambda x, c: sg.arctan(x + c(1.0)) - sg.arctan(x)),
    Piece("x - sin(x)", lambda x, c: x - sg.sin(x)),
    Piece("sinh(x) - x", lambda x, c: sg.sinh(x) - x),
    Piece("x - tan(x)", lambda x, c: x - sg.tan(x)),
    Piece("tanh(x) - x", lambda x, c: sg.tanh(x) - x),
    Piece(
        "(c * sinh(x) - x) / (c * cosh(x) - c2)",
        lambda x, c: (c(2.0) * sg.sinh(x) - x) / (c(2.0) * sg.cosh(x) - c(1.0)),
    ),
    Piece(
        "(x * exp(x) - c) / (exp(x) + x * exp(x))", lambda x, c: (x * sg.exp(x) - c(2.0)) / (sg.exp(x) + x * sg.exp(x))
    ),
    Piece("log(abs(sinh(c * x)))", lambda x, c: sg.log(sg.abs(sg.sinh(c(0.5) * x)))),
    Piece("log(abs(c * x))", lambda x, c: sg.log(sg.abs(c(-3.0) * x))),
    # at a constant shift, by the addition formulas (not π/4, whose tangent reads it as π/4)
    Piece("sin(x + c)", lambda x, c: sg.sin(x + c(1.0))),
    Piece("cos(c - x)", lambda x, c: sg.cos(c(np.pi / 2) - x)),
    Piece("tan(c * (x - c2))", lambda x, c: sg.tan(c(0.5) * (x - c(3.0)))),
    # products and quotients whose partial results leave the range (rewrite/monomials.py)
    Piece("(c - cos(x)) / (x * x)", lambda x, c: (c(1.0) - sg.cos(x)) / (x * x)),
    Piece("x * x / (x + c)", lambda x, c: x * x / (x + c(1.0))),
    Piece("x * x * x * (x + c)", lambda x, c: x * x * x * (x + c(0.5))),
    Piece("sqrt(x * x - c * x) - x", lambda x, c: sg.sqrt(x * x - c(1.0) * x) - x),
    # a constant minus a quotient of forms in a shared term, over a common numerator
    Piece("c - (x + c) / (x - c)", lambda x, c: c(1.0) - (x + c(1.0)) / (x - c(1.0))),
    Piece("log(c - (x + c) / (x + c2))", lambda x, c: sg.log(c(1.0) - (x + c(0.5)) / (x + c(2.0)))),
    # vanishing functions whose arguments' bases cancel, read through f(u)/u
    Piece("log(c - x) / log(c + x)", lambda x, c: sg.log(c(1.0) - x) / sg.log(c(1.0) + x)),
    Piece("x * expm1(x) / expm1(c * x)", lambda x, c: x * sg.expm1(x) / sg.expm1(c(3.0) * x)),
    Piece("x / tanh(c * x)", lambda x, c: x / sg.tanh(c(0.5) * x)),
    Piece("sinh(c * x) / (log1p(x) * log1p(x))", lambda x, c: sg.sinh(c(2.0) * x) / (sg.log1p(x) * sg.log1p(x))),
    # quotients by exp and cosh
    Piece("c / exp(x)", lambda x, c: c(0.5) / sg.exp(x)),
    Piece("c / (exp(x) + exp(-x))", lambda x, c: c(2.0) / (sg.exp(x) + sg.exp(-x))),
    Piece("log(exp(x))", lambda x, c: sg.log(sg.exp(x))),
    Piece("logsumexp(log(c) + x)", lambda x, c: sg.logsumexp(sg.log(c(0.5)) + x, axis=-1, keepdims=True)),
    Piece("log(mean(exp(x)))", lambda x, c: sg.log(sg.mean(sg.exp(x), axis=-1, keepdims=True))),
    Piece("exp(x) * exp(c)", lambda x, c: sg.exp(x) * sg.exp(c(0.5))),
    Piece("exp(c) / exp(x)", lambda x, c: sg.exp(c(0.5)) / sg.exp(x)),
    Piece("where(x > c, log(x), c)", lambda x, c: sg.where(x > c(0.0), sg.log(x), c(0.0))),
    Piece("where(x <= c, c, sqrt(x))", lambda x, c: sg.where(x <= c(0.0), c(0.0), sg.sqrt(x))),
    Piece("log(softmax(x)[::-1])", lambda x, c: sg.log(sg.softmax(x, axis=-1)[..., ::-1])),
    Piece("log(sigmoid(x)[..., None])[..., 0]", lambda x, c: sg.log(sg.sigmoid(x)[..., None])[..., 0]),
    Piece(
        "logaddexp(log(c) + x, log1p(-c) - x)", lambda x, c: sg.logaddexp(sg.log(c(0.25)) + x, sg.log1p(-c(0.25)) - x)
    ),
    Piece("exp(x**2) * erfc(x)", lambda x, c: sg.exp(x**2) * sg.erfc(x)),
    # (√2 as sqrt(2): the exact reference then holds √2 itself, which the rule takes a rounded √2 for;
    # under an exp the two differ by the erfc's conditioning, 2x²·ε: 1e-13 at x = -30)
    Piece("log(c * erfc(-x / sqrt(2)))", lambda x, c: sg.log(c(0.5) * sg.erfc(-x / sg.sqrt(2.0)))),
    Piece("exp(x) * sigmoid(-x)", lambda x, c: sg.exp(x) * sg.sigmoid(-x)),
    Piece("log1p(-sigmoid(x))", lambda x, c: sg.log1p(-sg.sigmoid(x))),
    Piece("c1 - sigmoid(x)", lambda x, c: c(1.0000001) - sg.sigmoid(x)),
    Piece("log(c1 - sigmoid(x))", lambda x, c: sg.log(c(1.0000001) - sg.sigmoid(x))),
    Piece("log(cosh(x))", lambda x, c: sg.log(sg.cosh(x))),
    Piece("exp(log(c - exp(x)))", lambda x, c: sg.exp(sg.log(c(1.0) - sg.exp(x)))),
    Piece("exp(-x) / (c + exp(-x))**2", lambda x, c: sg.exp(-x) / (c(1.0) + sg.exp(-x)) ** 2),
    Piece("exp(log_sigmoid(x))", lambda x, c: sg.exp(sg.log_sigmoid(x))),
    Piece("exp(log_erfc(x))", lambda x, c: sg.exp(sg.log_erfc(x))),
    Piece("where(x != c, x * log(x), c)", lambda x, c: sg.where(x != c(0.0), x * sg.log(x), c(0.0))),
    # (the Bessel functions' arguments kept off their poles at 0: an infinite value of a finite
    # input makes a softmax over it inf/inf as written, where the recognised one takes the limit)
    Piece("log(kv(c, x * x + c))", lambda x, c: sg.log(sg.kv(c(1.5), x * x + c(1.0)))),
    Piece("log(iv(c, x * x + c))", lambda x, c: sg.log(sg.iv(c(2.0), x * x + c(1.0)))),
    Piece("where(x == c, c, x * log1p(x))", lambda x, c: sg.where(x == c(0.0), c(0.0), x * sg.log1p(x))),
    Piece("log(exp(x) @ M)", lambda x, c: _sum(sg.log(sg.exp(_widened(x)) @ _matrix(x, TRANSITIONS)))),
    Piece("log(exp(x) @ M_signed)", lambda x, c: _sum(sg.log(sg.exp(_widened(x)) @ _matrix(x, SIGNED)))),
    Piece(
        "log(c * softmax(x) + c2 * softmax(-x))",
        lambda x, c: sg.log(c(0.25) * sg.softmax(x) + c(0.75) * sg.softmax(-x)),
    ),
    Piece(
        "sum(where(x > c, exp(x), c)) / sum(exp(x))",
        lambda x, c: _sum(sg.where(x > c(0.0), sg.exp(x), c(0.0))) / _sum(sg.exp(x)),
    ),
    Piece("log(sigmoid(x) + c * sigmoid(-x))", lambda x, c: sg.log(sg.sigmoid(x) + c(0.5) * sg.sigmoid(-x))),
    Piece("log((c + x) / (c - x))", lambda x, c: sg.log((c(1.0) + x) / (c(1.0) - x))),
    Piece("exp(x) - exp(-x)", lambda x, c: sg.exp(x) - sg.exp(-x)),
    Piece("exp(x) + c / exp(x)", lambda x, c: sg.exp(x) + c(1.0) / sg.exp(x)),
    Piece("(exp(x) - exp(-x)) / (exp(x) + exp(-x))", lambda x, c: (sg.exp(x) - sg.exp(-x)) / (sg.exp(x) + sg.exp(-x))),
    Piece("c2 / (c + exp(-c2 * x)) - c", lambda x, c: c(2.0) / (c(1.0) + sg.exp(-c(2.0) * x)) - c(1.0)),
    Piece("log(exp(x) - exp(-x))", lambda x, c: sg.log(sg.exp(x) - sg.exp(-x))),
    Piece("log(exp(x) + exp(-x))", lambda x, c: sg.log(sg.exp(x) + sg.exp(-x))),
    Piece("exp(x) / (exp(x) + exp(c - x))", lambda x, c: sg.exp(x) / (sg.exp(x) + sg.exp(c(0.5) - x))),
    Piece("log(x + sqrt(x * x + c))", lambda x, c: sg.log(x + sg.sqrt(x * x + c(1.0)))),
    Piece("exp(x) - c + exp(-x)", lambda x, c: sg.exp(x) - c(2.0) + sg.exp(-x)),
    Piece("sqrt(x + c) - sqrt(x)", lambda x, c: sg.sqrt(x + c(1.0)) - sg.sqrt(x)),
    Piece("(x + c) ** c2 - x ** c2", lambda x, c: (x + c(1.0)) ** c(0.25) - x ** c(0.25)),
    Piece("e ** x - c", lambda x, c: c(np.e) ** x - c(1.0)),
    Piece("log(c + tanh(x) * exp(x) - tanh(x))", lambda x, c: sg.log(c(1.0) + sg.tanh(x) * sg.exp(x) - sg.tanh(x))),
    Piece("c / sqrt(x) - c / sqrt(x + c)", lambda x, c: c(1.0) / sg.sqrt(x) - c(1.0) / sg.sqrt(x + c(1.0))),
    Piece("c * exp(x) + c / exp(x)", lambda x, c: c(0.5) * sg.exp(x) + c(0.5) / sg.exp(x)),
    Piece("log(x + sqrt(x**2 - c))", lambda x, c: sg.log(x + sg.sqrt(x**2 - c(1.0)))),
    Piece("log(x + c) - log(x)", lambda x, c: sg.log(x + c(1.0)) - sg.log(x)),
    Piece("log(x) - log(x - c)", lambda x, c: sg.log(x) - sg.log(x - c(2.0))),
    # (inside a where that keeps x = 0 out: x·log(x) there is the xlogy limit 0, not the written NaN)
    Piece(
        "where(x > c, (x + c2) * log(x + c2) - x * log(x), c)",
        lambda x, c: sg.where(x > c(0.0), (x + c(1.0)) * sg.log(x + c(1.0)) - x * sg.log(x), c(0.0)),
    ),
    Piece("log(c + x) - x", lambda x, c: sg.log(c(1.0) + x) - x),
    Piece("x - log1p(x)", lambda x, c: x - sg.log1p(x)),
    Piece("exp(log(x) + log(c))", lambda x, c: sg.exp(sg.log(x) + sg.log(c(2.0)))),
    Piece("exp(log(x) - log(x + c))", lambda x, c: sg.exp(sg.log(x) - sg.log(x + c(1.0)))),
    Piece("expm1(x) / x", lambda x, c: sg.expm1(x) / x),
    Piece("c / (x + c) - c / (x - c)", lambda x, c: c(1.0) / (x + c(1.0)) - c(1.0) / (x - c(1.0))),
    Piece("(exp(c * x) - c2) / (exp(x) - c2)", lambda x, c: (sg.exp(c(2.0) * x) - c(1.0)) / (sg.exp(x) - c(1.0))),
    Piece("x / (exp(x) - c)", lambda x, c: x / (sg.exp(x) - c(1.0))),
    Piece("log(sinh(x) / x)", lambda x, c: sg.log(sg.sinh(x) / x)),
    Piece("log(sinh(x))", lambda x, c: sg.log(sg.sinh(x))),
    Piece("log(abs(sinh(x)))", lambda x, c: sg.log(sg.abs(sg.sinh(x)))),
    Piece(
        "exp(softplus(x)) - c + exp(-softplus(x))",
        lambda x, c: sg.exp(sg.softplus(x)) - c(2.0) + sg.exp(-sg.softplus(x)),
    ),
    Piece("sqrt(sum(x * x))", lambda x, c: sg.sqrt(_sum(x * x))),
    Piece("log(ndtr(x))", lambda x, c: sg.log(sg.ndtr(x))),
    Piece("log(cumsum(exp(x)))", lambda x, c: sg.log(sg.cumsum(sg.exp(x), axis=-1))),
    Piece("logit(sigmoid(x))", lambda x, c: sg.logit(sg.sigmoid(x))),
    Piece("log(c - ndtr(x))", lambda x, c: sg.log(c(1.0) - sg.ndtr(x))),
    Piece("log(ndtr(x) - ndtr(x - c))", lambda x, c: sg.log(sg.ndtr(x) - sg.ndtr(x - c(1.0)))),
    Piece("sqrt(mean(x**2))", lambda x, c: sg.sqrt(sg.mean(x**2, axis=-1, keepdims=True))),
    Piece("sqrt(x * x)", lambda x, c: sg.sqrt(x * x)),
    # products and quotients that leave the float range (rewrite/products.py)
    Piece("log(c / x)", lambda x, c: sg.log(c(1.0) / x)),
    Piece("log(x * x)", lambda x, c: sg.log(x * x)),
    Piece("log1p(x * x / c)", lambda x, c: sg.log1p(x * x / c(3.0))),
    Piece("log(x / c)", lambda x, c: sg.log(x / c(0.1))),
    Piece("log(sigmoid(x) * sigmoid(-x))", lambda x, c: sg.log(sg.sigmoid(x) * sg.sigmoid(-x))),
    Piece("log(exp(x) * sigmoid(x) / c)", lambda x, c: sg.log(sg.exp(x) * sg.sigmoid(x) / c(3.0))),
    Piece("log(softmax(x) * softmax(-x))", lambda x, c: sg.log(sg.softmax(x) * sg.softmax(-x))),
    Piece("log(det(exp(x) * M))", lambda x, c: _log_det_of_scaled(x)),
    Piece("exp(x) * where(x > c, 0, c2)", lambda x, c: sg.exp(x) * sg.where(x > c(700.0), c(0.0), c(2.0))),
    Piece("where(x < c, x, 0) * exp(x)", lambda x, c: sg.where(x < c(30.0), x, c(0.0)) * sg.exp(x)),
    Piece("where(x < c, 0, x) / exp(x)", lambda x, c: sg.where(x < c(-30.0), c(0.0), x) / sg.exp(x)),
    Piece("exp(log(x))", lambda x, c: sg.exp(sg.log(x))),
    Piece("expm1(log1p(x))", lambda x, c: sg.expm1(sg.log1p(x))),
    Piece("exp(log1p(x))", lambda x, c: sg.exp(sg.log1p(x))),
    Piece("c ** x * c ** (-x)", lambda x, c: c(10.0) ** x * c(10.0) ** (-x)),
    Piece("c ** x / c ** (c2 - x)", lambda x, c: c(2.0) ** x / c(2.0) ** (c(3.0) - x)),
    # (the erf-complement, normal-CDF-from-erf, sigmoid-difference and inverse-Gudermannian identities
    # are tested in test_identities (the last takes a written π/4 for π/4, which the fuzzer's exact
    # reference of the written formula does not): their exact values, 1 + erf(-30) say, need more digits than the reference has)
    # (not here: `x * exp(x)` and `x * log(y)`, whose rules take the limit 0 of -inf · 0 by design,
    # like scipy's xlogy; the domain rule (d) would count that NaN → 0 as a change of domain.
    # tests/ops/stable/test_xlogy.py holds them to their definition instead.)
    # near misses: one constant changed, so no rule may fire
    Piece("c2 + erf(x)", lambda x, c: c(2.0) + sg.erf(x)),
    Piece("log(c * erfc(-x / c2))", lambda x, c: sg.log(c(0.5) * sg.erfc(-x / c(1.5)))),
    Piece("c2 - sigmoid(x)", lambda x, c: c(2.5) - sg.sigmoid(x)),
    Piece("exp(x) * sigmoid(x)", lambda x, c: sg.exp(x) * sg.sigmoid(x)),
    Piece("exp(x**2) * erfc(-x)", lambda x, c: sg.exp(x**2) * sg.erfc(-x)),
    Piece("(x + c) * exp(x)", lambda x, c: (x + c(1.0)) * sg.exp(x)),
    Piece("log(c * exp(x) - exp(-x))", lambda x, c: sg.log(c(2.0) * sg.exp(x) - sg.exp(-x))),
    Piece("log(c2 + exp(x))", lambda x, c: sg.log(c(2.0) + sg.exp(x))),
    Piece("exp(x) - c2", lambda x, c: sg.exp(x) - c(2.0)),
    Piece("c / (c2 + exp(-x))", lambda x, c: c(1.0) / (c(2.0) + sg.exp(-x))),
    Piece("log(sum(exp(x)) + c)", lambda x, c: sg.log(_sum(sg.exp(x)) + c(1.0))),
    Piece("log(c - x2)", lambda x, c: sg.log(c(1.5) - x)),
    Piece("log(kv(c, x * x + c) + c)", lambda x, c: sg.log(sg.kv(c(1.5), x * x + c(1.0)) + c(1.0))),
    Piece("where(x > c, x * log(x), c)", lambda x, c: sg.where(x > c(0.0), x * sg.log(x), c(0.0))),
    Piece("where(x != c, x * log(x), c2)", lambda x, c: sg.where(x != c(0.0), x * sg.log(x), c(1.0))),
    Piece("log(exp(x) @ M + c)", lambda x, c: _sum(sg.log(sg.exp(_widened(x)) @ _matrix(x, TRANSITIONS) + c(1.0)))),
    Piece("log((c + x) / (c2 - x))", lambda x, c: sg.log((c(1.0) + x) / (c(2.0) - x))),
    Piece("exp(x) - exp(c * x)", lambda x, c: sg.exp(x) - sg.exp(c(-2.0) * x)),
    Piece("c2 / (c + exp(-c2 * x)) - c3", lambda x, c: c(2.0) / (c(1.0) + sg.exp(-c(2.0) * x)) - c(0.5)),
    Piece("log(c * sinh(x))", lambda x, c: sg.log(c(2.5) * sg.sinh(x))),
    Piece("exp(x) / (exp(c) + exp(-x))", lambda x, c: sg.exp(x) / (sg.exp(c(0.5)) + sg.exp(-x))),
    Piece("log(x + sqrt(x * x + c2))", lambda x, c: sg.log(x + sg.sqrt(x * x + c(2.0)))),
    Piece("c * exp(x) - c2 / exp(x)", lambda x, c: c(0.5) * sg.exp(x) - c(0.25) / sg.exp(x)),
    Piece("c * cosh(x) - c2", lambda x, c: c(2.0) * sg.cosh(x) - c(1.0)),
    Piece("sqrt(x + c) - sqrt(c2 * x)", lambda x, c: sg.sqrt(x + c(1.0)) - sg.sqrt(c(2.0) * x)),
    Piece("(x + c) ** c2 - x ** c3", lambda x, c: (x + c(1.0)) ** c(0.25) - x ** c(0.5)),
    Piece("log(x + c) - log(c2 * x)", lambda x, c: sg.log(x + c(1.0)) - sg.log(c(2.0) * x)),
    Piece(
        "where(x > c, (x + c2) * log(x + c3) - x * log(x), c)",
        lambda x, c: sg.where(x > c(0.0), (x + c(1.0)) * sg.log(x + c(2.0)) - x * sg.log(x), c(0.0)),
    ),
    Piece("log1p(x) - c * x", lambda x, c: sg.log1p(x) - c(2.0) * x),
    Piece("exp(log(x) + log1p(x))", lambda x, c: sg.exp(sg.log(x) + sg.log1p(x))),
    Piece(
        "(c + c2 / x) * exp(x) - (c2 / x - c) * exp(-x)",
        lambda x, c: (c(1.0) + c(2.0) / x) * sg.exp(x) - (c(2.0) / x - c(1.0)) * sg.exp(-x),
    ),
    Piece("expm1(x) / (c * x)", lambda x, c: sg.expm1(x) / (c(2.0) * x)),
    Piece("expm1(c * x) / expm1(x)", lambda x, c: sg.expm1(c(3.0) * x) / sg.expm1(x)),
    Piece("log(sinh(x) / (c * x))", lambda x, c: sg.log(sg.sinh(x) / (c(2.0) * x))),
    Piece("exp(softplus(x)) - c + sigmoid(x)", lambda x, c: sg.exp(sg.softplus(x)) - c(2.0) + sg.sigmoid(x)),
    Piece("sqrt(sum(x * x) + c)", lambda x, c: sg.sqrt(_sum(x * x) + c(1.0))),
    Piece("log(x * x + square(c))", lambda x, c: sg.log(x * x + sg.square(c(3.0)))),
    Piece("log(sqrt(square(x) + square(c)))", lambda x, c: sg.log(sg.sqrt(sg.square(x) + sg.square(c(0.5))))),
    Piece("log(c2 - ndtr(x))", lambda x, c: sg.log(c(1.5) - sg.ndtr(x))),
    Piece("log(cumsum(exp(x)) + c)", lambda x, c: sg.log(sg.cumsum(sg.exp(x), axis=-1) + c(1.0))),
    Piece("sqrt(x * x - c * x)", lambda x, c: sg.sqrt(x * x - c(0.5) * x)),
    Piece("log(x * (x - c))", lambda x, c: sg.log(x * (x - c(1.0)))),
    Piece("log(c / x) with c < 0", lambda x, c: sg.log(c(-1.0) / x)),
    Piece("log(sigmoid(x) * (x - c))", lambda x, c: sg.log(sg.sigmoid(x) * (x - c(1.0)))),
    Piece("exp(x) * where(x > c, c2, c3)", lambda x, c: sg.exp(x) * sg.where(x > c(700.0), c(0.5), c(2.0))),
    Piece("exp(log(x) + c)", lambda x, c: sg.exp(sg.log(x) + c(1.0))),
    Piece("c ** x * c2 ** (-x)", lambda x, c: c(10.0) ** x * c(9.0) ** (-x)),
    Piece("sin(x + c) - sin(c2 * x)", lambda x, c: sg.sin(x + c(1e-3)) - sg.sin(c(2.0) * x)),
    Piece("x - tan(c * x)", lambda x, c: x - sg.tan(c(0.5) * x)),
    Piece(
        "(c * sinh(x) - x) / (c * cosh(c2 * x) - c)",
        lambda x, c: (c(2.0) * sg.sinh(x) - x) / (c(2.0) * sg.cosh(c(2.0) * x) - c(1.0)),
    ),
]

SPECIAL = [0.0, -0.0, 1e-300, -1e-300, 1e-30, -1e-30, 1.0, -1.0, 0.5, 30.0, -30.0, 100.0, -100.0]
SPECIAL += [800.0, -800.0, 1e5, -1e5, np.inf, -np.inf, np.nan]
INTEGERS = [0, 1, -1, 30, -30, 800, -800, 100_000, -100_000]
DTYPES = ["float64", "float32", "float16", "int64"]


@dataclass
class Case:
    """A drawn graph: its input, the formula, and the input values."""

    pieces: list[str]
    declared: tuple
    dtype: str
    const_kind: str
    values: np.ndarray

    @property
    def differentiable(self) -> bool:
        return np.dtype(self.dtype).kind == "f"

    @property
    def precision(self) -> np.dtype:
        """The input's float dtype (an integer input's formula computes in float64)."""
        return np.dtype(self.dtype if self.differentiable else "float64")

    def build(self, x):
        const = _constant_maker(self.const_kind, self.dtype if self.differentiable else "float64")
        out = x
        for name in self.pieces:
            out = PIECES_BY_NAME[name].build(out, const)
        return out


PIECES_BY_NAME = {p.name: p for p in PIECES}


def _constant_maker(kind: str, dtype: str):
    """How a constant operand is written: a Python scalar, or broadcasting arrays of several shapes."""

    def make(value: float):
        if kind == "scalar":
            return value
        if kind == "0-d constant":
            return sg.constant(np.array(value, dtype))
        if kind == "row":
            return np.full((N,), value, dtype)
        if kind == "column constant":
            return sg.constant(np.full((2, 1), value, dtype))
        return np.full((2, N), value, dtype)  # "matrix"

    return make


@st.composite
def cases(draw, pieces_from: tuple[str, ...] | None = None) -> Case:
    names = pieces_from if pieces_from is not None else [p.name for p in PIECES]
    pieces = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3))
    dtype = draw(st.sampled_from(DTYPES))
    ndim = draw(st.sampled_from([1, 2]))
    shape = (2, N)[-ndim:]
    declared = tuple(draw(st.sampled_from([n, None])) for n in shape)
    # an unknown extent may be 1 at run time, where a constant operand broadcasts it
    shape = tuple(n if d is not None else draw(st.sampled_from([n, 1])) for n, d in zip(shape, declared))
    const_kind = draw(st.sampled_from(["scalar", "0-d constant", "row", "column constant", "matrix"]))
    if np.dtype(dtype).kind == "f":
        entries = st.one_of(st.sampled_from(SPECIAL), st.floats(-50, 50))
    else:
        entries = st.one_of(st.sampled_from(INTEGERS), st.integers(-50, 50))
    values = np.array(draw(st.lists(entries, min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))))
    if draw(st.booleans()):  # ties at the max
        values[...] = values.flat[0]
    with np.errstate(over="ignore"):  # 1e5 is inf in float16, as the user's array would be
        values = values.reshape(shape).astype(dtype)
    return Case(pieces, declared, dtype, const_kind, values)


# -- the properties ---------------------------------------------------------------------------------------------
def check(case: Case, backend: str = "numpy") -> None:
    x = sg.tensor("x", shape=case.declared, dtype=case.dtype)
    try:
        out = case.build(x)
    except sg.StableGradError:
        return  # shapes that do not broadcast: an error either way
    with np.errstate(all="ignore"):
        shape = sg.function([x], out, recognition=False)(case.values).shape
    written, recognised = [out], [out]
    if case.differentiable:  # (integers have no gradient)
        weights = np.linspace(0.5, 1.5, int(np.prod(shape))).reshape(shape).astype(case.dtype)  # a fixed cotangent
        cost = sg.sum(out * weights)
        written.append(sg.grad(cost, x, recognition=False))
        recognised.append(sg.grad(cost, x))
    with np.errstate(all="ignore"):
        got = sg.function([x], recognised, backend=backend)(case.values)
        naive = sg.function([x], written, recognition=False)(case.values)
    exact = _reference(x, written, case.values)
    formula = expression(out)
    where = (
        f"{formula} at x = {case.values.tolist()!r} ({case.dtype}, declared {case.declared}, {case.const_kind}, "
        f"backend {backend})"
    )
    limits = not np.isfinite(case.values).all()
    # at an infinite input the recognised formulas take limits (softmax([inf]) = 1) where the written
    # one meets inf/inf: the written formula at the largest finite number stands in for the limit
    limit = [None, None]
    if np.isinf(case.values).any():
        largest = np.finfo(case.values.dtype).max
        limit = _reference(x, written, np.clip(case.values, -largest, largest))
    # outside the domain the value is NaN, and a NaN gradient is the honest one there (the written
    # gradient's formula may itself be finite: d log(1 - e^x) = -e^x / (1 - e^x) at x > 0)
    outside = bool(np.isnan(exact[0]).any())
    for label, g, n, e, lim, nan_allowed in zip(("value", "gradient"), got, naive, exact, limit, (False, outside)):
        assert g.shape == n.shape and g.dtype == n.dtype, f"{label}: {g.dtype}{g.shape} for {n.dtype}{n.shape}: {where}"
        # (domain is the value's: an exactly-NaN gradient where the value is a number comes from 0 · NaN
        # in a branch not taken, as in where(x > 0, log(x), 0), and 0 is the better answer there)
        takes_limits = limits or label == "gradient"
        compare = functools.partial(_compare, label, g, n, e, where, takes_limits, nan_allowed, case.precision)
        try:
            compare(backend == "jax", lim)
        except AssertionError:
            if not limits:
                # the reference's digits may have run out on the way and been absorbed after
                # (1 - sigmoid(1e5) is 0 at 1,320 digits, and expm1(log(0))/log(0) a finite 0):
                # held to the written formula evaluated with far more digits instead, where that is cheap
                precise = _reference(x, written, case.values, dps=256 * DEFAULT_DPS["float64"])
                better = precise[0 if label == "value" else 1]
                if not np.array_equal(better, e, equal_nan=True):
                    _compare(
                        label, g, n, better, where, takes_limits, nan_allowed, case.precision, backend == "jax", lim
                    )
                    continue
            if label == "value":
                if limits or not _passes_through_infinity_or_zero(x, out, case.values):
                    raise
                # an infinite value on the way (log(1 - x) at x = 1): the exact NaN after it is
                # an indeterminate form, whose limit the recognised formula may take, as it does
                # for an infinite input; and a value on the way too small for its dtype (σ(x)·σ(-x)
                # at x = -31 in float16): its float is ±0, where the exact NaN of a log after it
                # (of a negative tiny number) is within the dtype's rounding of the log's -inf
                _compare(label, g, n, e, where, True, nan_allowed, case.precision, backend == "jax", lim)
                continue
            # held to the conditioning instead: what rounding the input by an ulp does to the exact
            # gradient (where terms of size e^x cancel to 0 at a tie, rounding of their order is
            # the answer's uncertainty, and a floor of 1 does not cover it)
            wobbled = _reference(x, written[1:], _one_ulp_off(case.values))[0]
            compare(backend == "jax", lim, conditioning=np.abs(wobbled - e))


def _passes_through_infinity_or_zero(x, out, values: np.ndarray) -> bool:
    """Whether some node of the written formula is exactly ±inf at these (finite) inputs, or a
    nonzero number below half its dtype's smallest subnormal one (which no float of it holds: 0)."""
    inner = [o for node in toposort([out]) for o in node.outputs if o.dtype.kind == "f"]
    exact = _reference(x, inner, values)
    for o, v in zip(inner, exact):
        below = float(np.finfo(o.dtype).smallest_subnormal) / 2
        with np.errstate(invalid="ignore"):
            if np.isinf(v).any() or ((v != 0) & (np.abs(v) < below)).any():
                return True
    return False


def _one_ulp_off(values: np.ndarray) -> np.ndarray:
    """values moved by one ulp, up and down in turn (so that a tie is broken, not kept)."""
    step = np.where(np.indices(values.shape).sum(axis=0) % 2 == 0, np.inf, -np.inf)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(values), np.nextafter(values, step.astype(values.dtype)), values)


class _TooCostly(Exception):
    pass


def _reference(x, outputs, values, dps: int | None = None) -> list[np.ndarray]:
    """The written formula evaluated exactly (mpmath), where that is cheap: exp(exp(exp(30))) has
    a billion-digit exponent, so a reference that takes over two seconds rejects the case.

    A non-finite result is evaluated again with four times the digits: it may come from digits
    run out rather than from the formula (1 - sigmoid(800) needs 350, and is 0 with 330)."""

    def give_up(signum, frame):
        raise _TooCostly

    previous = signal.signal(signal.SIGALRM, give_up)
    # no garbage collection while the alarm is set: raised inside a gc callback (hypothesis keeps
    # one), the alarm would be an "exception ignored" warning, which the test settings make an error
    collecting = gc.isenabled()
    gc.disable()
    signal.setitimer(signal.ITIMER_REAL, REFERENCE_SECONDS)
    try:
        exact = evaluate([x], outputs, [values], dps=dps or DEFAULT_DPS["float64"])
        if dps is None and not all(np.isfinite(to_float(e, "float64")).all() for e in exact):
            exact = evaluate([x], outputs, [values], dps=4 * DEFAULT_DPS["float64"])
    except (_TooCostly, OverflowError, MemoryError, ZeroDivisionError):
        # (mpmath's own precision bookkeeping overflows past ~1e(1e300), and cosh(exp(exp(30)))
        # asks for an integer of 2^(1e13) bits before the alarm can interrupt it; a log-det's
        # gradient at a singular matrix is a solve mpmath refuses: no exact answer to hold it to)
        reject()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if collecting:
            gc.enable()
    return [to_float(e, "float64") for e in exact]


def _compare(
    label: str,
    got,
    naive,
    exact,
    where: str,
    limits: bool,
    nan_allowed: bool,
    precision: np.dtype,
    flushes: bool,
    limit=None,
    conditioning=0.0,
) -> None:
    """`limits`: the input has an inf or NaN, so an exact NaN may be an indeterminate form (inf/inf,
    0·NaN in a branch not taken) whose limit the recognised formula takes; with finite inputs an
    exact NaN is outside the domain, and the recognised formula must give NaN there too.
    `nan_allowed`: a gradient where the value is outside the domain, so NaN is honest.
    `precision`: the least precise float the formula computes in (float32 pieces of a float64
    result round as float32).  `flushes`: the backend flushes subnormal numbers to zero (XLA on
    CPU), an error below `tiny`.  `limit`: for an infinite input, the exact value at the largest
    finite number instead, which the recognised value may match instead.  `conditioning`: an error
    the answer's own conditioning allows on top (see `check`)."""
    info = np.finfo(got.dtype)
    eps = max(info.eps, np.finfo(precision).eps)
    e = np.broadcast_to(exact, got.shape)
    nan, got_nan = np.isnan(e), np.isnan(got)
    if not nan_allowed:
        # (a NaN where the written formula is not finite either is a formula recognition does not
        # repair yet, not one it breaks)
        broken = got_nan & ~nan & np.isfinite(naive)
        assert not broken.any(), f"{label}: NaN at {got_nan}, where exactly {e.tolist()}: {where}"
    if not limits:
        # outside the domain, NaN; at its edge within rounding (1 - exp(6e-37) is 0 in floats) the
        # written formula's -inf is as good, but never a finite number the written formula lacks
        widened = nan & ~got_nan & (np.isnan(naive) | (np.isfinite(got) & ~np.isfinite(naive)))
        assert not widened.any(), f"{label}: {got.tolist()} outside the domain (exactly NaN): {where}"
    representable = np.isfinite(e) & (np.abs(e) <= info.max)
    allowed = np.abs(np.where(representable, naive, 0.0) - np.where(representable, e, 0.0))
    allowed = np.where(np.isfinite(allowed), allowed, np.inf)
    # relative to max(|answer|, 1): near a zero of the formula (log(s) at s = 1, a gradient that
    # cancels) rounding of the order of the terms is the conditioning, not an error
    scale = np.maximum(np.abs(e), 1.0)
    slack = ULPS * eps * np.maximum(scale, info.tiny) + (info.tiny if flushes else 4 * info.smallest_subnormal)
    slack = slack + np.where(np.isfinite(conditioning), conditioning, 0.0)
    error = np.abs(np.where(representable, got, 0.0) - np.where(representable, e, 0.0))
    # no worse than written, and accurate where the written formula overflows (or left as written: a gap)
    ok = (error <= allowed + slack) | (got_nan & nan_allowed) | (~np.isfinite(got) & ~np.isfinite(naive))
    if limit is not None:
        at_limit = np.broadcast_to(limit, got.shape)
        with np.errstate(invalid="ignore"):
            near = np.abs(got - at_limit) <= ULPS * eps * np.maximum(np.abs(at_limit), 1.0) + info.tiny
        ok |= near | (got == at_limit)
    worse = representable & ~ok
    assert not worse.any(), (
        f"{label}: {got[worse].tolist()} where exactly {e[worse].tolist()} and as written {naive[worse].tolist()}: "
        f"{where}"
    )


def fuzz(
    examples: int, backend: str = "numpy", round_: int | None = None, pieces: tuple[str, ...] | None = None
) -> Callable[[], None]:
    """The property over `examples` drawn graphs: the fixed ones (round None), or round n's; of
    `pieces` only, if given."""

    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=round_ is None,
        suppress_health_check=[HealthCheck.too_slow],
        database=None,
    )
    @given(case=cases(pieces))
    def run(case):
        check(case, backend)

    return run if round_ is None else seed(round_)(run)


def _soak(request, examples: int, backend: str = "numpy") -> None:
    """The fixed graphs, then (under `--soak SECONDS`) fresh rounds until the time is spent."""
    fuzz(examples, backend)()
    deadline = time.monotonic() + request.config.getoption("soak")
    round_ = 0
    while time.monotonic() < deadline:
        fuzz(examples, backend, round_)()
        round_ += 1


def test_recognition_never_changes_shape_domain_or_a_finite_answer(request):
    _soak(request, EXAMPLES)


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="the jax extra is not installed")
def test_on_the_jax_backend_too(request):
    _soak(request, JAX_EXAMPLES, "jax")  # fewer: each graph is an XLA compilation


@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="the numba extra is not installed")
def test_on_the_numba_backend_too(request):
    _soak(request, EXAMPLES // 4, "numba")


@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="the numba extra is not installed")
def test_on_the_numba_backend_with_every_chain_fused_into_a_loop(request, monkeypatch):
    """The fuzzer's arrays are below the size where the Numba backend fuses loops: here it
    fuses at any size, so every generated chain runs as a compiled loop nest (fewer graphs:
    each loop is a Numba compilation)."""
    from stablegrad.backends.numba_backend import loops

    monkeypatch.setattr(loops, "SMALLEST", 1)
    _soak(request, FUSED_EXAMPLES, "numba")


# -- the fuzzer can fail ----------------------------------------------------------------------------------------
@rewrite(Phase.STABILIZE, Kind.RECOGNITION, Softplus)
def unsound_softplus(node):
    """softplus(x) → max(x, 0): right only far from 0 (planted: the fuzzer must catch it)."""
    return sg.maximum(node.inputs[0], 0)


#: the pieces that meet a softplus and a broadcasting constant: the planted defects' class (drawn among
#: these, so that a piece added elsewhere cannot move the fixed draws off it)
SOFTPLUS_PIECES = ("log(c + exp(x))", "log(exp(x) + c)", "log(sum(c * exp(x)))")


def _fuzz_expecting_a_failure() -> None:
    with pytest.raises(AssertionError, match=r"(value|gradient)(: |.*\n.*)[\s\S]* at x = "):
        fuzz(500, pieces=SOFTPLUS_PIECES)()


def test_the_fuzzer_catches_a_planted_unsound_rewrite(monkeypatch):
    planted = tuple(
        (phase, rules + (unsound_softplus,) if phase is Phase.STABILIZE else rules)
        for phase, rules in pipeline.PIPELINE
    )
    monkeypatch.setattr(pipeline, "PIPELINE", planted)
    _fuzz_expecting_a_failure()


def test_the_fuzzer_catches_rewrites_that_ignore_broadcasting(monkeypatch):
    """The class it was built after: with the engine's extent check off, `log(ones(3) + exp(x))`
    of a one-entry x is softplus(x) again, one entry for three."""
    monkeypatch.setattr(Extents, "conform", lambda self, new, old: new)
    _fuzz_expecting_a_failure()
