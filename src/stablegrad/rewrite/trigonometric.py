"""Identities of the trigonometric functions (and their hyperbolic twins) that remove a
cancellation the written formula makes (Hamming's chapter 3 in Herbie's benchmark suite:
"2sin", "2cos", "2tan", "2atan", "sintan"):

- a difference at two arguments a shift e apart, by sum-to-product: `sin(x + e) - sin(x)` is
  `2·cos(x + e/2)·sin(e/2)`, `cos(x + e) - cos(x)` is `-2·sin(x + e/2)·sin(e/2)`,
  `tan(x + e) - tan(x)` is `sin(e)/(cos(x)·cos(x + e))` and `arctan(x + e) - arctan(x)` is
  `arctan(e/(1 + x·(x + e)))`: the shift e is read off the graph, exactly, instead of being
  recovered from two rounded function values;
- an odd function less its argument: `x - sin(x)`, `x - sinh(x)`, `x - tan(x)` and
  `x - tanh(x)` by their Taylor series below |x| = 1 (the quotients `(x·cos(x) - sin(x))/cos(x)`
  for tan, the same with cosh and sinh for tanh, whose numerator's series converges as the
  factorials do);
- sin, cos or tan of an argument shifted by a constant, `sin(x + 1)`, `tan(φ/2 + π/4)`, by
  the addition formulas, so that the constant is not rounded into a large argument (after
  STABILIZE: LATE_RULES; the Mercator projection's `log(tan(π/4 + φ/2))` is exponentials'
  inverse_gudermannian_from_log_tan's first).

Every rule keeps the written formula's domain (NaN stays NaN), and the written formula stays
wherever it is accurate.  RULES run in the STABILIZE phase with exponentials.RULES, LATE_RULES
in the GRADIENT and RANGE phases.
"""

from __future__ import annotations

import math

import numpy as np

from ..graph.basic import Variable
from ..graph.types import is_floating
from ..ops.elementwise import (
    Add,
    Subtract,
    absolute,
    equal,
    greater,
    isfinite,
    less,
    logical_and,
    where,
)
from ..ops.math import Arctan, Cos, Sin, Sinh, Tan, Tanh, arctan, cos, cosh, sin, tan
from .engine import Kind, Phase, rewrite
from .patterns import (
    constant_value,
    fits,
    horner,
    negate,
    owner,
    reads_as,
    scaled_core,
    terms_with_signs,
    with_sign,
    written_difference,
)

_S = Phase.STABILIZE
_REC = Kind.RECOGNITION


def _offset(shifted: Variable, plain: Variable) -> Variable | None:
    """e for shifted = plain + e (`plain + e`, `e + plain`; `plain - e` gives -e), else None."""
    total = owner(shifted, Add)
    if total is not None:
        a, b = total.inputs
        if a is plain or b is plain:
            return b if a is plain else a
    difference = owner(shifted, Subtract)
    if difference is not None and difference.inputs[0] is plain:
        return negate(difference.inputs[1])
    return None


def _shifted_pair(node, op_class: type) -> tuple[Variable, Variable, Variable, float] | None:
    """(x, e, x + e as written, sign) for node = sign·(f(x + e) - f(x)), f of `op_class`."""
    a, b = node.inputs
    for shifted, plain, sign in ((a, b, 1.0), (b, a, -1.0)):
        top, bottom = owner(shifted, op_class), owner(plain, op_class)
        if top is None or bottom is None or not is_floating(node.outputs[0].dtype):
            continue
        e = _offset(top.inputs[0], bottom.inputs[0])
        if e is not None:
            return bottom.inputs[0], e, top.inputs[0], sign
    return None


@rewrite(_S, _REC, Subtract)
def sine_difference_to_product(node):
    """sin(x + e) - sin(x) → 2·cos(x + e/2)·sin(e/2) (and sin(x) - sin(x + e) its negation), e any
    term (`x - e` as a shift of -e).

    Written, the two sines agree in their leading digits when |e| is small against 1: the
    difference, about e·cos(x), keeps only their rounding (all of it gone by |e| ≈ 1e-16 at
    x = 1), and so does its derivative in x, cos(x + e) - cos(x). The product rounds each
    factor once: e/2 is exact, x + e/2 rounds as x + e did. NaN as written where x or e is
    ±inf or NaN. Two sines of unrelated arguments must not fire.
    """
    found = _shifted_pair(node, Sin)
    if found is None:
        return None
    x, e, _, sign = found
    half = e / 2.0
    return fits(with_sign(sign, 2.0 * cos(x + half) * sin(half)), node)


@rewrite(_S, _REC, Subtract)
def cosine_difference_to_product(node):
    """cos(x + e) - cos(x) → -2·sin(x + e/2)·sin(e/2) (and cos(x) - cos(x + e) its negation), e
    any term.

    Written, the two cosines cancel as the sines do (Hamming's "2cos"): the difference, about
    -e·sin(x), has lost every digit by |e| ≈ 1e-16 at x = 1, and the derivative
    sin(x) - sin(x + e) with it. NaN as written where x or e is ±inf or NaN. Cosines of unrelated
    arguments must not fire; `1 - cos(x)` is sine_squared_from_one_minus_cos's.
    """
    found = _shifted_pair(node, Cos)
    if found is None:
        return None
    x, e, _, sign = found
    half = e / 2.0
    return fits(with_sign(sign, -2.0 * sin(x + half) * sin(half)), node)


@rewrite(_S, _REC, Subtract)
def tangent_difference_to_quotient(node):
    """tan(x + e) - tan(x) → sin(e)/(cos(x)·cos(x + e)) (and tan(x) - tan(x + e) its negation), e
    any term.

    Written, the two tangents cancel as the sines do (Hamming's "2tan"); the quotient is
    sin((x + e) - x) over the product of cosines, every factor of it rounded once (a float's
    cosine is never 0, so no pole is added). NaN as written where x or e is ±inf or NaN.
    Tangents of unrelated arguments must not fire.
    """
    found = _shifted_pair(node, Tan)
    if found is None:
        return None
    x, e, shifted, sign = found
    return fits(with_sign(sign, sin(e) / (cos(x) * cos(shifted))), node)


@rewrite(_S, _REC, Subtract)
def arctan_difference_to_arctan(node):
    """arctan(x + e) - arctan(x) → arctan(e/(1 + x·(x + e))) where x and x + e are finite and
    1 + x·(x + e) > 0; elsewhere the written difference (and arctan(x) - arctan(x + e) the
    negation).

    Written, the two arctangents of large arguments both round to about ±π/2 and their
    difference, about e/x², loses everything past |x| ≈ 1e8 (Hamming's "2atan",
    `atan(N + 1) - atan(N)`), as does its derivative 1/(1 + (x + e)²) - 1/(1 + x²). The
    tangent-of-a-difference form divides the exact shift by a sum of positive terms (it is
    positive unless |e| > 2). Where 1 + x·(x + e) ≤ 0 the two arctangents have opposite signs
    and the written difference is accurate; where x or x + e is ±inf the written difference
    keeps its limit (and a NaN stays NaN). Arctangents of unrelated arguments must not fire.
    """
    found = _shifted_pair(node, Arctan)
    if found is None:
        return None
    x, e, shifted, sign = found
    denominator = 1.0 + x * shifted
    taken = logical_and(logical_and(isfinite(x), isfinite(shifted)), greater(denominator, 0.0))
    one = np.ones((), denominator.dtype)
    # past |x| = 1 as (e/x)/(x + e + 1/x): the derivative's e/d² would overflow in d² where the
    # answer's is (2x + e)·e/d², about 2e/x³, a normal number up to |x| ≈ 1e100 (Hamming's N)
    big = greater(absolute(x), 1.0)
    xb = where(big, x, one)  # (no 1/0 where not selected)
    far = (e / xb) / where(taken, shifted + 1.0 / xb, one)
    # (of 1 where not taken: no 0/0 or inf/inf where the written difference is selected)
    near = e / where(taken, denominator, one)
    ratio = where(big, far, near)
    return fits(where(taken, with_sign(sign, arctan(ratio)), written_difference(node)), node)


def _series_coefficients(term) -> list[float]:
    """term(k) for k = 1, 2, ... while it is above 2⁻⁶⁰ of term(1): the Taylor coefficients of t = x²
    that reach float64's precision on |x| < 1 (the terms fall as the factorials do)."""
    first = abs(term(1))
    coefficients = []
    k = 1
    while abs(term(k)) >= first * 2.0**-60:
        coefficients.append(term(k))
        k += 1
    return coefficients


#: (x - sin(x))/x³ and (x - sinh(x))/x³ in t = x²: ∓Σ (∓t)^(k-1)/(2k+1)!
_SIN = _series_coefficients(lambda k: (-1.0) ** (k + 1) / math.factorial(2 * k + 1))
_SINH = _series_coefficients(lambda k: -1.0 / math.factorial(2 * k + 1))
#: (x·cos(x) - sin(x))/x³ and (x·cosh(x) - sinh(x))/x³ in t = x²: Σ (∓t)^(k-1)·(∓2k)/(2k+1)!
_XCOS_SIN = _series_coefficients(lambda k: (-1.0) ** k * 2 * k / math.factorial(2 * k + 1))
_XCOSH_SINH = _series_coefficients(lambda k: 2.0 * k / math.factorial(2 * k + 1))


#: f → (x - f(x)) for |x| < 1, of xs (x there, 0 elsewhere)
_LESS_ARGUMENT = {
    Sin: lambda xs: xs * xs * xs * horner(xs * xs, _SIN),
    Sinh: lambda xs: xs * xs * xs * horner(xs * xs, _SINH),
    Tan: lambda xs: xs * xs * xs * horner(xs * xs, _XCOS_SIN) / cos(xs),
    Tanh: lambda xs: xs * xs * xs * horner(xs * xs, _XCOSH_SINH) / cosh(xs),
}


@rewrite(_S, _REC, Subtract)
def odd_function_less_argument_by_series(node):
    """x - f(x) → x³·Σ cₖ·x^(2k-2) (and f(x) - x its negation) for f = sin, sinh, tan, tanh, where
    |x| < 1; the written difference elsewhere (tan and tanh as (x·cos(x) - sin(x))/cos(x) and
    (x·cosh(x) - sinh(x))/cosh(x), whose numerators' series fall as the factorials do).

    Written, f(x) and x agree to the first order: the difference, about ∓x³/6 or ∓x³/3, has lost
    every digit for |x| below 1e-8 (f(x) rounds to x), and its derivative 1 - f'(x) with it
    (Hamming's "sintan", `(x - sin(x))/(x - tan(x))`). At |x| ≥ 1 the written difference loses at
    most 2 bits and stays (with its derivative, which for tan, 1 - (1 + tan²(x)), cancels next to
    multiples of π), and so do ±inf (where it is NaN) and NaN. Another operand than f's own x must
    not fire.
    """
    a, b = node.inputs
    for function, x, sign in ((b, a, 1.0), (a, b, -1.0)):
        call = owner(function, *_LESS_ARGUMENT)
        if call is None or call.inputs[0] is not x or not is_floating(x.dtype):
            continue
        near = less(absolute(x), 1.0)
        xs = where(near, x, np.zeros((), x.dtype))  # (no overflow of x³ where not selected)
        series = _LESS_ARGUMENT[type(call.op)](xs)
        return fits(where(near, with_sign(sign, series), written_difference(node)), node)
    return None


def _constant_shift(argument: Variable) -> tuple[Variable, float] | None:
    """(y, c) for argument = y + c, c a nonzero scalar constant: a sum or difference with constant
    terms, perhaps times a constant (`0.5·(π/2 - φ)` is -0.5·φ + π/4), else None."""
    core, scale = scaled_core(argument)
    terms = terms_with_signs(core, limit=8)
    if terms is None:
        return None
    shift, rest = 0.0, []
    for sign, term in terms:
        value = constant_value(term)
        if value is None or np.ndim(term.data) != 0:  # type: ignore[attr-defined]
            rest.append((sign, term))
        else:
            shift += sign * value
    if not rest or len(rest) == len(terms) or shift == 0:
        return None
    y = with_sign(rest[0][0], rest[0][1])
    for sign, term in rest[1:]:
        y = y + term if sign > 0 else y - term
    return (y if scale == 1 else scale * y), scale * shift


@rewrite(Phase.GRADIENT, _REC, Sin, Cos, Tan)
def addition_formula_at_constant_shift(node):
    """sin(y + c) → sin(y)·cos(c) + cos(y)·sin(c), cos(y + c) → cos(y)·cos(c) - sin(y)·sin(c) and
    tan(y + c) their quotient, for a constant c (terms in any order, `c - y`, and a constant
    factor over the sum: `tan(0.5·(π/2 - φ))` is at y = -0.5·φ, c = π/4), where the written sum
    y + c is inexact; tan(y ± π/4) → (1 ± tan(y))/(1 ∓ tan(y)) everywhere.

    Written, y + c rounds to the spacing of floats at y, so past |y| ≈ 2⁵³·|c| the shift is lost
    altogether (`tan(0.5·u + π/4)` at u = 1e20 is tan(0.5·u)), and at |y| ≈ 1e3 it is off by
    hundreds of ulps. The formulas take the sine and cosine of the float c as written, computed
    once (c = π/2 in floats has cosine 6.1e-17, not 0: `tan(y + π/2)` stays finite, as written).
    Where the sum is exact (y = 0, 15 - 1.5) the written function of it stays, bit for bit. The
    tangent at a shift that reads as ±π/4 (modulo π) reads it as π/4, as
    inverse_gudermannian_from_log_tan does: tan(float π/4) is 1 - 2⁻⁵³, and the form's 1 is half
    an ulp from it, so `tan(φ/2 + π/4)` is above 1 for every positive φ, as the answer is (a map
    projection's `tan(φ/2 + π/4)^α` is far from 1 where the tangent is within an ulp of it).
    ±inf and NaN stay NaN.

    It runs after STABILIZE (with the GRADIENT and RANGE phases' rules, as the monomials do), so
    that a difference at shifted arguments, `sin(x + 1e-3) - sin(x)`, is the sum-to-product
    rule's first.
    """
    found = _constant_shift(node.inputs[0])
    if found is None or not is_floating(node.outputs[0].dtype):
        return None
    y, c = found
    dtype = node.outputs[0].dtype
    quarters = round(c / (math.pi / 4))
    if isinstance(node.op, Tan) and quarters % 2 and reads_as(c, quarters * math.pi / 4, dtype):
        t = tan(y)
        return fits((1.0 + t) / (1.0 - t) if quarters % 4 == 1 else (t - 1.0) / (t + 1.0), node)
    cosine, sine = (np.asarray(f(c), dtype) for f in (math.cos, math.sin))
    over = sin(y) * cosine + cos(y) * sine
    beside = cos(y) * cosine - sin(y) * sine
    formula = {Sin: over, Cos: beside, Tan: over / beside}[type(node.op)]
    # where the written sum is exact (y = 0, 15 - 1.5) it stays, bit for bit: the formula rounds
    # the constant's sine and cosine and its own sum, a few ulps. ((y + c) - y is exact for
    # |y| ≥ |c|; below, it may take an inexact sum for exact, whose rounding is then at most half
    # an ulp of c: as accurate as the formula.) The written function is of a `where`, which this
    # rule does not match again; its unselected entries read 0.
    total = y + c
    exact = equal(total - y, np.asarray(c, dtype))
    written = type(node.op)()(where(exact, total, np.zeros((), dtype)))
    return fits(where(exact, written, formula), node)


RULES = (
    sine_difference_to_product,
    cosine_difference_to_product,
    tangent_difference_to_quotient,
    arctan_difference_to_arctan,
    odd_function_less_argument_by_series,
)

#: after STABILIZE: they would hide a shifted argument from the rules above
LATE_RULES = (addition_formula_at_constant_shift,)
