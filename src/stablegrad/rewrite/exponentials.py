"""Identities of the exp/log family that remove a cancellation the written formula makes
(Herbie's benchmark suite has each: its atanh, hyperbolic, logistic, map-projection and
root-difference benchmarks):

- the log of the atanh ratio: `log((1 + x) / (1 - x))` is `log1p(x) - log1p(-x)`, and the
  Bernoulli cumulant `log(1 - p + p·exp(t))` is `log1p(p·expm1(t))`;
- opposite exponentials: `c·exp(x) ∓ c·exp(-x)` is `2c·sinh(x)` / `2c·cosh(x)` (also among the
  terms of a longer sum), `c·cosh(x) - c` is `2c·sinh(x/2)²` (and `c - c·cos(x)` is
  `2c·sin(x/2)²`), sinh/cosh is `tanh`, so is
  `2·sigmoid(2x) - 1`, and the logs of `2·sinh(x)` and `2·cosh(x)` are `logdiffexp(x, -x)`
  and `log(2) + log_cosh(x)`, those of tanh(x) and coth(x) `±(log1mexp(-2x) - softplus(-2x))`;
- the two-term softmax: `exp(a) / (exp(a) + exp(b))` is `sigmoid(a - b)`, and `sigmoid(s)**c` is
  `exp(c·log_sigmoid(s))` (so products of such powers meet as exp_of_sum);
- quotients by exp and cosh: `a / exp(x)` is `a·exp(-x)`, `a / (c·cosh(x))` is `a·sech(x)/c`;
- a difference of square roots: `√(x + c) - √x` is `c / (√(x + c) + √x)`;
- powers of e: `e**x` is `exp(x)`, so that the rules reading exp see it;
- a power near one: `(1 + t)**a - 1` is `expm1(a·log1p(t))` where |a·log1p(t)| < 1, and a
  difference of powers `(x + c)**p - x**p` is `x**p·expm1(p·log1p(c/x))` where |p·log1p(c/x)| ≤ 1;
- logs of shifted arguments: `log(x + c) - log(x)` is `log1p(c/x)`, and the difference of
  entropy-like terms `(x + c)·log(x + c) - x·log(x)` is `c·log(x + c) + x·log1p(c/x)`, both where
  x > |c| (elsewhere the written difference is accurate, or -inf/NaN as written);
- a difference of squares: `expm1(2x)/expm1(x)` is `exp(x) + 1` (and its inverse `sigmoid(-x)`);
- near-0 quotients by series: `expm1(x)/x` (SciPy's exprel) and `x/expm1(x)`, `1/x - 1/tan(x)`, and
  `log(sinh(x)/x)`, by their Taylor series for |x| below 1 (2), whose derivatives do not cancel
  as the quotient rule's do; `log(sinh(x))` past x = 20 as x - log 2 + log1p(-exp(-2x));
  `log1p(x) - x` by the atanh series for -0.5 < x < 1;
- `exp(log(a) ± log(b))` is `a·b` (`a/b`), NaN where a log is;
- inverse hyperbolic functions written as logs: `log(x + √(x² ± 1))` is arcsinh / arccosh, and
  `log(tan(π/4 + x/2))` is the inverse Gudermannian `arcsinh(tan(x))`; `arctan(r) - π/4` is
  `arctan((r - 1)/(r + 1))` for r > -1 (the Gudermannian `2·arctan(exp(u)) - π/2`).

Every rule keeps the written formula's domain (NaN stays NaN) and fires only on the exact
constants it names.  They run in the STABILIZE phase after identities.RULES and chain with
them (a replacement is rewritten again).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..graph.basic import Apply, Variable, constant
from ..graph.types import is_floating
from ..ops import stable
from ..ops.base import astype
from ..ops.elementwise import (
    Abs,
    Add,
    Divide,
    Multiply,
    Reciprocal,
    Sqrt,
    Subtract,
    absolute,
    divide,
    equal,
    greater,
    greater_equal,
    isfinite,
    less,
    less_equal,
    logical_and,
    logical_not,
    logical_or,
    multiply,
    where,
)
from ..ops.math import (
    Arctan,
    Cos,
    Cosh,
    Exp,
    Expm1,
    Log,
    Log1p,
    Power,
    Sinh,
    Tan,
    Tanh,
    arccosh,
    arcsinh,
    arctan,
    cos,
    cosh,
    exp,
    expm1,
    log,
    log1p,
    sin,
    sinh,
    tan,
    tanh,
)
from ..ops.partials import SINH_REMAINDER
from .branches import masked_where
from .engine import Kind, Phase, rewrite
from .partials import affine_form, polynomial_difference
from .patterns import (
    constant_value,
    entrywise_operand,
    fits,
    horner,
    is_constant,
    is_negation,
    negate,
    owner,
    reads_as,
    root_of,
    scaled,
    scaled_core,
    square_of,
    terms_with_signs,
    written_difference,
)

_S = Phase.STABILIZE
_REC = Kind.RECOGNITION


# -- the log of a ratio near one ------------------------------------------------------------------------
def _one_plus(v: Variable) -> tuple[int, Variable] | None:
    """(s, t) for v = 1 + s·t with s = ±1: `1 + t`, `t + 1`, `1 - t`."""
    total = owner(v, Add)
    if total is not None:
        for one, t in (total.inputs, total.inputs[::-1]):
            if is_constant(one, 1.0):
                return 1, t
    difference = owner(v, Subtract)
    if difference is not None and is_constant(difference.inputs[0], 1.0):
        return -1, difference.inputs[1]
    return None


@rewrite(_S, _REC, Log)
def log1p_difference_from_log_of_ratio(node):
    """log((1 + x) / (1 - x)) → log1p(x) - log1p(-x), and log((1 - x) / (1 + x)) → log1p(-x) - log1p(x)
    (`x + 1` and `1 + x` alike): the log of the Fisher/atanh ratio.

    Written, the ratio rounds 1 ± x, so for |x| below a few ulps the log is of 1 exactly (0, or
    a multiple of 2⁻⁵²) where the answer is about 2x. Fires only where both sides hold the same
    x with opposite signs: then the ratio is negative exactly where one log1p is NaN (|x| > 1),
    and ±inf at x = ±1 as written. `log((1 + a) / (1 + b))` for other a, b must not fire: both
    sides negative make the written ratio positive where log1p(a) is NaN.
    """
    ratio = owner(node.inputs[0], Divide)
    if ratio is None:
        return None
    top, bottom = _one_plus(ratio.inputs[0]), _one_plus(ratio.inputs[1])
    if top is None or bottom is None or top[1] is not bottom[1] or top[0] != -bottom[0]:
        return None
    x = top[1]
    signed = x if top[0] == 1 else negate(x)
    return fits(log1p(signed) - log1p(negate(signed)), node)


# -- the Bernoulli cumulant -------------------------------------------------------------------------------
def _times_exp(v: Variable) -> tuple[Variable, Variable] | None:
    """(y, z) for v = y·exp(z) or exp(z)·y."""
    product = owner(v, Multiply)
    if product is None:
        return None
    for y, e in (product.inputs, product.inputs[::-1]):
        z = _exp_argument(e)
        if z is not None:
            return y, z
    return None


@rewrite(_S, _REC, Log)
def log1p_from_bernoulli_cumulant(node):
    """log(1 - p + p·exp(t)) → log1p(p·expm1(t)), its terms in any order and sign (`(1 - p) +
    exp(t)·p`, `1 + p·exp(t) - p`): the cumulant generating function of a Bernoulli (a
    binomial's per trial), and the log of a two-point mixture's likelihood ratio.

    Written, the sum cancels where p·(e^t - 1) is small against 1: for t below about 1e-16
    (or p below it) the log is of 1 exactly, 0 where the answer is p·t, and its gradient
    p·e^t/(1 - p + p·e^t) keeps the sum's rounding. Where e^t overflows, written and
    log1p alike give inf; for 0 < p <= 1 the answer is t + log(p) + log1p((1 - p)/(p·e^t)),
    taken there as logaddexp(log1p(-p), log(p) + t). The replacement is negative, NaN in the
    log, exactly where the written sum is (and NaN from inf·0 where e^t overflows and p = 0,
    as written). Another p in the two terms, or another constant than 1, must not fire.
    """
    terms = terms_with_signs(node.inputs[0], 3)
    if terms is None or len(terms) != 3:
        return None
    for i, (sign_one, one) in enumerate(terms):
        if not is_constant(one, sign_one):  # the constant 1, added
            continue
        rest = [terms[j] for j in range(3) if j != i]
        for (sign_p, p_side), (sign_mixed, mixed) in (rest, rest[::-1]):
            pair = _times_exp(mixed)
            if pair is None:
                continue
            core, scale = scaled_core(p_side)
            y, z = pair
            if y is core and sign_p * scale == -sign_mixed:
                p = y if sign_mixed > 0 else negate(y)
                near = log1p(p * expm1(z))
                # past e**t's overflow (z > 709.78 in float64) the answer t + log(p) + ... is a
                # number for 0 < p <= 1: there logaddexp(log(1 - p), log(p) + t), which the
                # near branch's cancellation no longer concerns
                # (its p held at 1/2 elsewhere: a NaN in the unselected branch's logaddexp
                # would reach the gradient through its pullback, even with a zero cotangent)
                inside = logical_and(greater(p, 0.0), less_equal(p, 1.0))
                held = where(inside, p, np.full((), 0.5, p.dtype))
                far = stable.logaddexp(log1p(negate(held)), log(held) + z)
                return fits(where(logical_and(equal(near, np.inf), inside), far, near), node)
    return None


# -- opposite exponentials ----------------------------------------------------------------------------
def _exp_argument(v: Variable) -> Variable | None:
    return entrywise_operand(v, Exp)


def _opposite(u: Variable, v: Variable) -> bool:
    """v = -u, as `-u` or `0 - u` (or u = -v)."""
    if is_negation(u, v):
        return True
    for p, q in ((u, v), (v, u)):
        difference = owner(q, Subtract)
        if difference is not None and is_constant(difference.inputs[0], 0.0) and difference.inputs[1] is p:
            return True
    return False


def _scaled_exp(t: Variable) -> tuple[float, Variable, int] | None:
    """(c, u, e) for t = c·exp(e·u), e = ±1: `exp(u)`, `c * exp(u)`, `exp(u) / c`, `c / exp(u)`,
    `reciprocal(exp(u))`, negated or not (c a constant, 1 where there is none)."""
    core, scale = scaled_core(t)
    u = _exp_argument(core)
    if u is not None:
        return scale, u, 1
    inverse = owner(core, Reciprocal)
    if inverse is not None:
        u = _exp_argument(inverse.inputs[0])
        return (scale, u, -1) if u is not None else None
    quotient = owner(core, Divide)
    c = constant_value(quotient.inputs[0]) if quotient is not None else None
    u = _exp_argument(quotient.inputs[1]) if quotient is not None and c is not None else None
    return (scale * c, u, -1) if u is not None and c is not None else None


#: how many terms of a sum the pairing looks at (a longer sum is left as it is: linear, not quadratic)
_MAX_TERMS = 8


def _scaled_sigmoid_as_exp(
    t: Variable, partner: tuple[float, Variable, int] | None
) -> tuple[float, Variable, int] | None:
    """(c, u, -1) for t = c·sigmoid(z) where the partner term is c'·exp(u) with u = softplus(-z):
    σ(z) = exp(-softplus(-z)), so `exp(softplus(x))` pairs with `σ(-x)`, what recognition has
    made of `exp(-softplus(x))` by the time the sum is seen."""
    if partner is None:
        return None
    core, scale = scaled_core(t)
    z = entrywise_operand(core, stable.Sigmoid)
    soft = owner(partner[1], stable.Softplus)
    if z is None or soft is None:
        return None
    if _opposite(z, soft.inputs[0]):
        return scale, partner[1], -1
    return None


def _hyperbolic_pair(first: tuple[float, Variable], second: tuple[float, Variable]) -> Variable | None:
    """2c·sinh(w) or 2c·cosh(w) for the signed terms c·exp(w) and ±c·exp(-w), else None."""
    a, b = _scaled_exp(first[1]), _scaled_exp(second[1])
    a = a if a is not None else _scaled_sigmoid_as_exp(first[1], b)
    b = b if b is not None else _scaled_sigmoid_as_exp(second[1], a)
    if a is None or b is None:
        return None
    (ca, ua, ea), (cb, ub, eb) = a, b
    if ub is not ua and _opposite(ua, ub):
        eb = -eb  # exp(e·(-u)) = exp(-e·u)
    elif ub is not ua:
        return None
    ca, cb = ca * first[0], cb * second[0]
    if ea != -eb or abs(ca) != abs(cb) or ca == 0:
        return None
    w = ua if ea == 1 else negate(ua)
    f = cosh(w) if ca == cb else sinh(w)
    return f if 2.0 * ca == 1.0 else (2.0 * ca) * f


@rewrite(_S, _REC, Subtract, Add)
def hyperbolic_from_opposite_exponentials(node):
    """c·exp(x) - c·exp(-x) → 2c·sinh(x); c·exp(x) + c·exp(-x) → 2c·cosh(x), among up to 8 terms
    of a sum (`exp(x) - 2 + exp(-x)` → `2·cosh(x) - 2`; also `c / exp(x)`, `exp(0 - x)`, `exp(x) / c`,
    and `sigmoid(-z)` read as `exp(-u)` next to `exp(u)` for u = softplus(z)).

    Written, the difference cancels for |x| small: it is 0 below x ≈ 1e-16 and loses every
    digit near there, where sinh keeps the relative accuracy (2x); so does the derivative of
    the sum (exp(x) - exp(-x), where cosh's is sinh). As cosh, the sum also meets
    `tanh_from_quotient`, `cosh_minus_one` and the log rule below. Both overflow at the same x.
    Factors that differ (`2·exp(x) - exp(-x)`) must not fire.
    """
    terms = terms_with_signs(node.outputs[0], _MAX_TERMS)
    if terms is None or len(terms) < 2:
        return None
    for i, first in enumerate(terms):
        for j in range(i + 1, len(terms)):
            pair = _hyperbolic_pair(first, terms[j])
            if pair is None:
                continue
            rest = [(sign, t) for k, (sign, t) in enumerate(terms) if k not in (i, j)]
            total = pair
            for sign, t in rest:
                total = total + t if sign > 0 else total - t
            return fits(total, node)
    return None


@rewrite(_S, _REC, Subtract, Add)
def sinh_squared_from_cosh_minus_one(node):
    """c·cosh(x) - c → 2c·sinh(x/2)² (also `c·cosh(x) + (-c)`, `-c + c·cosh(x)`), so
    `exp(x) - 2 + exp(-x)` → `4·sinh(x/2)²`.

    Written, cosh(x) - 1 cancels for |x| small (0 below x ≈ 1e-8, where the answer is x²/2),
    and so does its derivative's partner in the sum. Fires only where the constant is the
    cosh's own factor.
    """
    return _squared_half_angle(node, Cosh, sinh, 1.0)


@rewrite(_S, _REC, Subtract, Add)
def sine_squared_from_one_minus_cos(node):
    """c - c·cos(x) → 2c·sin(x/2)² (and c·cos(x) - c → -2c·sin(x/2)²), the twin of the rule above.

    Written, 1 - cos(x) is 0 below |x| ≈ 1e-8, where the answer is x²/2, and loses digits up
    to |x| ≈ 1; its derivative's partner in the sum likewise. NaN as written: cos(±inf) and
    sin(±inf) are NaN. Fires only where the constant is the cos's own factor.
    """
    return _squared_half_angle(node, Cos, sin, -1.0)


def _squared_half_angle(node, op_class: type, half_of, sign: float) -> Variable | None:
    """sign·2c·f(x/2)² for the two-term sum c·g(x) - c, g of `op_class` (cosh or cos), f = half_of."""
    terms = terms_with_signs(node.outputs[0], _MAX_TERMS)
    if terms is None or len(terms) != 2:
        return None
    for (s1, t1), (s2, t2) in (terms, terms[::-1]):
        scaled = _scaled_call(t1, op_class)
        k = constant_value(t2)
        if scaled is not None and k is not None and scaled[0] != 0 and s1 * scaled[0] == -s2 * k:
            c = sign * s1 * scaled[0]
            half = half_of(scaled[1] / 2.0)
            return fits((2.0 * c) * (half * half), node)
    return None


def _scaled_call(v: Variable, op_class: type) -> tuple[float, Variable] | None:
    """(c, x) for v = c·f(x), f an op of `op_class` (sinh, cosh, sigmoid), c a constant (1 if absent)."""
    direct = owner(v, op_class)
    if direct is not None:
        return 1.0, direct.inputs[0]
    product = owner(v, Multiply)
    if product is not None:
        for c, f in (product.inputs, product.inputs[::-1]):
            inner, value = owner(f, op_class), constant_value(c)
            if inner is not None and value is not None:
                return value, inner.inputs[0]
    return None


@rewrite(_S, _REC, Divide)
def tanh_from_quotient(node):
    """c·sinh(x) / (d·cosh(x)) → (c/d)·tanh(x), so (exp(x) - exp(-x)) / (exp(x) + exp(-x)) → tanh(x).

    Written with exponentials (or sinh and cosh), the quotient is inf/inf = NaN past |x| ≈ 710,
    where tanh is ±1, and the exponentials' difference cancels near 0. Fires only for the same
    x above and below.
    """
    top, bottom = _scaled_call(node.inputs[0], Sinh), _scaled_call(node.inputs[1], Cosh)
    if top is None or bottom is None or top[1] is not bottom[1] or bottom[0] == 0:
        return None
    ratio = top[0] / bottom[0]
    t = tanh(top[1])
    return fits(t if ratio == 1.0 else ratio * t, node)


@rewrite(_S, _REC, Subtract, Add)
def tanh_from_shifted_sigmoid(node):
    """2·sigmoid(2x) - 1 → tanh(x) (so 2 / (1 + exp(-2x)) - 1, the logistic form of tanh; also
    `-1 + 2·sigmoid(2x)`).

    Written, the difference cancels near x = 0: relative error about 2⁻⁵³/|x|, all digits gone
    below x ≈ 1e-16, where tanh(x) ≈ x. Fires only for the constants 2 and ±1 exactly (2·y
    halves exactly, barring subnormals, where tanh(y/2) is y/2 either way).
    """
    a, b = node.inputs
    minus_one = -1.0 if isinstance(node.op, Add) else 1.0
    for s, one in ((a, b), (b, a)) if isinstance(node.op, Add) else ((a, b),):
        scaled = _scaled_call(s, stable.Sigmoid)
        if scaled is not None and scaled[0] == 2.0 and is_constant(one, minus_one):
            return fits(tanh(scaled[1] / 2.0), node)
    return None


@rewrite(_S, _REC, Log)
def log_of_twice_hyperbolic(node):
    """log(2·sinh(x)) → logdiffexp(x, -x); log(2·cosh(x)) → log(2) + log_cosh(x): what
    `log(exp(x) ∓ exp(-x))` becomes once the opposite exponentials are sinh/cosh.

    Written, 2·sinh(x) and 2·cosh(x) overflow past x ≈ 710 where their logs are about |x|.
    (Not logaddexp(x, -x) for the cosh: its gradient σ(2x) - σ(-2x) cancels near 0, where
    log_cosh's is tanh(x).) Fires only for the factor 2 (the written sum of exponentials);
    log(sinh(x)) alone stays as written.
    """
    sinh_of = _scaled_call(node.inputs[0], Sinh)
    if sinh_of is not None and sinh_of[0] == 2.0:
        x = sinh_of[1]
        return fits(stable.logdiffexp(x, negate(x)), node)
    cosh_of = _scaled_call(node.inputs[0], Cosh)
    if cosh_of is not None and cosh_of[0] == 2.0:
        return fits(float(np.log(2.0)) + stable.log_cosh(cosh_of[1]), node)
    return None


@rewrite(_S, _REC, Log)
def log_tanh_from_log_of_hyperbolic_ratio(node):
    """log(tanh(x)) → log1mexp(-2x) - softplus(-2x); log(coth(x)), written `cosh(x)/sinh(x)` (so
    `log((exp(x) + exp(-x))/(exp(x) - exp(-x)))`) or `1/tanh(x)`, → softplus(-2x) - log1mexp(-2x).

    Written, tanh(x) rounds to 1 past x ≈ 19 and its log to 0, where the answer is -2e^(-2x)
    down to 1e-308 (x ≈ 355), and the ratio of exponentials is inf/inf past 710. Both terms of
    the replacement have one sign, so nothing cancels; its derivative is ±2/sinh(2x). NaN as
    written for x < 0 (log1mexp of a positive number), -inf (+inf) at 0.
    """
    found = _tanh_or_coth(node.inputs[0])
    if found is None:
        return None
    x, sign = found
    doubled = -2.0 * x
    log_tanh = stable.log1mexp(doubled) - stable.softplus(doubled)
    return fits(log_tanh if sign > 0 else negate(log_tanh), node)


def _tanh_or_coth(v: Variable) -> tuple[Variable, int] | None:
    """(x, 1) for v = tanh(x); (x, -1) for v = c·cosh(x)/(c·sinh(x)), 1/tanh(x) or reciprocal(tanh(x))."""
    t = owner(v, Tanh)
    if t is not None and _float(t.inputs[0]):
        return t.inputs[0], 1
    inverse = owner(v, Reciprocal)
    if inverse is not None:
        t = owner(inverse.inputs[0], Tanh)
        return (t.inputs[0], -1) if t is not None and _float(t.inputs[0]) else None
    quotient = owner(v, Divide)
    if quotient is None:
        return None
    top, bottom = quotient.inputs
    t = owner(bottom, Tanh)
    if t is not None and is_constant(top, 1.0) and _float(t.inputs[0]):
        return t.inputs[0], -1
    c, s = _scaled_call(top, Cosh), _scaled_call(bottom, Sinh)
    if c is not None and s is not None and c[1] is s[1] and c[0] == s[0] != 0 and _float(c[1]):
        return c[1], -1
    return None


# -- a power near one -----------------------------------------------------------------------------------
@rewrite(_S, _REC, Subtract)
def expm1_from_power_near_one(node):
    """(1 + t)**a - 1 → expm1(a·log1p(t)) and 1 - (1 + t)**a → -expm1(a·log1p(t)) (`1 - t` and
    `t + 1` alike), where |a·log1p(t)| < 1; elsewhere the formula as written (`(1 + t)**a + (-1)`).

    Written, 1 + t rounds t (all of it below t ≈ 1e-16) and the power then sits within an ulp
    of 1, so the difference keeps only the rounding: "compound interest" (1 + i/n)**n - 1 and
    1 - (1 - p)**a lose every digit for small i/n, p. Where |a·log1p(t)| ≥ 1 the power is at
    least e or at most 1/e, the written difference is accurate, and the replacement's
    exp(a·log1p(t)) would be less so (|a·log1p(t)| ulps): the written formula stays there, as
    it does where 1 + t < 0 (an integer power of a negative base). Other constants than 1 must
    not fire.
    """
    a, b = node.inputs
    for power_side, one, sign in ((a, b, 1.0), (b, a, -1.0)):
        power = owner(power_side, Power)
        base = _one_plus(power.inputs[0]) if power is not None and is_constant(one, 1.0) else None
        if base is None:
            continue
        t = base[1] if base[0] == 1 else negate(base[1])
        y = power.inputs[1] * log1p(t)
        near_one = expm1(y) if sign == 1.0 else negate(expm1(y))
        # (an Add, which this rule does not match: the written branch is not rewritten again)
        written = power_side + (-1.0) if sign == 1.0 else negate(power_side) + 1.0
        return fits(where(less(absolute(y), 1.0), near_one, written), node)
    return None


# -- powers of e -----------------------------------------------------------------------------------------
@rewrite(_S, _REC, Power)
def exp_from_power_of_e(node):
    """e ** x → exp(x), e the constant `math.e` (to a few ulps of the result's dtype).

    Written as a power, the exponential is not one to the rules that read exp: `e**x - 1` cancels
    below |x| ≈ 1e-16 (0 at x = 1e-20, where expm1 gives 1e-20), and `log(e**x)` overflows past
    x ≈ 709. The constant is read as e, as the user meant it: the float's own rounding (a relative
    5e-17) moved pow's answer by x·5e-17, within the power's conditioning of |x| ulps. Another base
    must not fire, nor an integer result.
    """
    base, x = node.inputs
    dtype = node.outputs[0].dtype
    value = constant_value(base)
    if not is_floating(dtype) or not reads_as(value, math.e, dtype):
        return None
    return fits(exp(x if x.dtype == dtype else astype(x, dtype)), node)


# -- a difference of powers of shifted bases ------------------------------------------------------------
def _power_form(v: Variable) -> tuple[Variable, Variable] | None:
    """(base, exponent) for v = base ** exponent or 1/√base (exponent -1/2); not √base, whose
    differences `conjugate_from_difference_of_roots` takes."""
    power = owner(v, Power)
    if power is not None:
        return None if is_constant(power.inputs[1], 0.5) else (power.inputs[0], power.inputs[1])
    reciprocal, quotient = owner(v, Reciprocal), owner(v, Divide)
    if reciprocal is not None:
        root = owner(reciprocal.inputs[0], Sqrt)
    elif quotient is not None and is_constant(quotient.inputs[0], 1.0):
        root = owner(quotient.inputs[1], Sqrt)
    else:
        return None
    return None if root is None else (root.inputs[0], constant(-0.5, v.dtype))


def _same_exponent(p: Variable, q: Variable) -> bool:
    if p is q:
        return True
    value = constant_value(p)
    return value is not None and value == constant_value(q)


@rewrite(_S, _REC, Subtract)
def expm1_from_difference_of_shifted_powers(node):
    """(x + c)**p - x**p → x**p · expm1(p·log1p(c/x)) (and x**p - (x + c)**p its negation), c a
    non-zero constant, p any exponent (a constant or a variable, `1/sqrt(·)` as p = -1/2), where
    |p·log1p(c/x)| ≤ 1; elsewhere the difference as written.

    Written, the two powers agree in their leading digits for x >> |p·c| and the difference keeps
    only their rounding: (x + 1)**(1/n) - x**(1/n) and 1/√x - 1/√(x + 1) lose every digit by
    x ≈ 2⁵³ (Herbie's "2nthrt" and "2isqrt"), and their derivatives, differences of the same kind,
    with them. Where |p·log1p(c/x)| > 1 the powers differ by a factor e or more, the written
    difference is accurate, and expm1's argument would carry |p·log1p(c/x)| ulps: it stays there,
    as it does where 1 + c/x ≤ 0 or x = 0 (where the log of 1 + c/x is NaN or ±inf). √(x + c) - √x
    is the conjugate rule's. A base that is not x plus a constant, or two different exponents, must
    not fire.
    """
    if not is_floating(node.outputs[0].dtype):
        return None
    a, b = node.inputs
    for shifted, plain, sign in ((a, b, 1.0), (b, a, -1.0)):
        top, bottom = _power_form(shifted), _power_form(plain)
        if top is None or bottom is None or not _same_exponent(top[1], bottom[1]):
            continue
        pair = _shift(top[0])
        if pair is None or pair[0] is not bottom[0]:
            continue
        x, c = pair
        # log(1 + c/x): below |x| = |c| as the difference of logs, whose derivative 1/(x + c) - 1/x
        # does not overflow as the chain rule's (c/x)/x does at x = 1e-300
        ratio = where(greater_equal(absolute(x), absolute(c)), log1p(c / x), log(x + c) - log(x))
        y = bottom[1] * ratio
        near = plain * expm1(y)
        close = less_equal(absolute(y), 1.0)
        # (a difference of two wheres, which this rule does not match: the written branch stays)
        written = where(close, 0.0, a) - where(close, 0.0, b)
        return fits(where(close, near if sign == 1.0 else negate(near), written), node)
    return None


# -- logs of shifted arguments ------------------------------------------------------------------------
def _shift(v: Variable) -> tuple[Variable, Variable] | None:
    """(x, c) for v = x + c (either order) or x - c (then c negated), c a non-zero finite constant."""
    total = owner(v, Add)
    if total is not None:
        for x, c in (total.inputs, total.inputs[::-1]):
            value = constant_value(c)
            if value is not None and value != 0 and np.isfinite(value):
                return x, c
    difference = owner(v, Subtract)
    value = constant_value(difference.inputs[1]) if difference is not None else None
    if difference is not None and value is not None and value != 0 and np.isfinite(value):
        return difference.inputs[0], negate(difference.inputs[1])
    return None


def _log_of_shift(v: Variable) -> tuple[Variable, Variable] | None:
    """(x, c) for v = log(x + c) or log1p(x) (c = 1: what log1p_from_naive has made of log(x + 1))."""
    logarithm = owner(v, Log)
    if logarithm is not None:
        return _shift(logarithm.inputs[0])
    plus_one = owner(v, Log1p)
    if plus_one is not None:
        x = plus_one.inputs[0]
        return x, constant(np.ones((), x.dtype))
    return None


def _log_operand(v: Variable) -> Variable | None:
    logarithm = owner(v, Log)
    return logarithm.inputs[0] if logarithm is not None else None


def _above_shift(x: Variable, c: Variable) -> Variable:
    """Where x > |c| and finite: there 1 + c/x is in (0, 2), and log1p(c/x) neither overflows nor
    meets the written form's -inf or NaN."""
    return logical_and(greater(x, absolute(c)), isfinite(x))


@rewrite(_S, _REC, Subtract)
def log1p_from_difference_of_shifted_logs(node):
    """log(x + c) - log(x) → log1p(c/x), and log(x) - log(x + c) → -log1p(c/x), c a non-zero constant
    (`x - c`, `c + x`, and `log1p(x)` for log(x + 1) alike), where x > |c|; elsewhere the formula
    as written (`log(N + 1) - log(N)`).

    Written, the two logs cancel for x >> |c|: the answer is about c/x and every digit is gone by
    x ≈ |c|·2⁵³ (the gradient 1/(x + c) - 1/x as well). Where x ≤ |c| the logs are at least log 2
    apart and the written difference is accurate, and it is also where it is ±inf or NaN (x = 0,
    x + c ≤ 0, x < 0, which log1p(c/x) would not keep: log1p(1/0) is inf, but its gradient is NaN
    where the written one is -inf): the written formula stays there, and at x = ±inf and NaN.
    A non-constant shift, or logs of unrelated arguments, must not fire.
    """
    a, b = node.inputs
    for shifted, plain, sign in ((a, b, 1.0), (b, a, -1.0)):
        found = _log_of_shift(shifted)
        if found is None or _log_operand(plain) is not found[0]:
            continue
        x, c = found
        near = log1p(divide(c, x))
        near = near if sign == 1.0 else negate(near)
        return fits(where(_above_shift(x, c), near, written_difference(node)), node)
    return None


def _x_log_x(v: Variable) -> Variable | None:
    """a for v = a·log(a): `a * log(a)`, or what xlogy_from_naive makes of it, xlogy(a, a), and of
    `(b + 1)·log(b + 1)` once log1p_from_naive has run, xlog1py(b + 1, b)."""
    f = owner(v, stable.XLogY)
    if f is not None and f.inputs[0] is f.inputs[1]:
        return f.inputs[0]
    f = owner(v, stable.XLog1PY)
    if f is not None:
        a, b = f.inputs
        shifted = _shift(a)
        return a if shifted is not None and shifted[0] is b and is_constant(shifted[1], 1.0) else None
    product = owner(v, Multiply)
    if product is not None:
        for a, term in (product.inputs, product.inputs[::-1]):
            if _log_operand(term) is a:
                return a
    return None


@rewrite(_S, _REC, Subtract)
def log1p_from_difference_of_x_log_x(node):
    """(x + c)·log(x + c) - x·log(x) → c·log(x + c) + x·log1p(c/x) (and the negation for the
    terms the other way round), c a non-zero constant, where x > |c|; elsewhere the formula as
    written (Hamming's `(n + 1)·log(n + 1) - n·log(n) - 1`, a difference of entropy terms).

    Written, the two terms are about x·log(x) each and cancel to about c·(log(x) + 1): for
    x ≈ 1e16 the terms are 6e17 and their rounding alone (64) is more than the answer (38); the
    derivative log((x + c)/x) cancels the same way. Where x ≤ |c| the written terms do not cancel
    (or are -inf, 0·log(0) or NaN, which the written formula keeps). Different shifts or
    unrelated bases must not fire.
    """
    a, b = node.inputs
    for shifted_side, plain_side, sign in ((a, b, 1.0), (b, a, -1.0)):
        shifted, plain = _x_log_x(shifted_side), _x_log_x(plain_side)
        found = _shift(shifted) if shifted is not None and plain is not None else None
        if found is None or found[0] is not plain:
            continue
        x, c = found
        c_log = log(shifted) if is_constant(c, 1.0) else multiply(c, log(shifted))
        near = c_log + x * log1p(divide(c, x))
        near = near if sign == 1.0 else negate(near)
        return fits(where(_above_shift(x, c), near, written_difference(node)), node)
    return None


# -- near-0 quotients, by series ------------------------------------------------------------------------
#: exprel(x) = expm1(x)/x = Σ x^k/(k+1)!: 18 terms leave the 19th below 2⁻⁵⁵ of the sum for |x| < 1
_EXPREL = [1.0 / math.factorial(k + 1) for k in range(18)]


def _bernoulli(n: int) -> Fraction:
    """The Bernoulli number B_n (B_1 = +1/2), exactly (Akiyama–Tanigawa)."""
    row = [Fraction(0)] * (n + 1)
    for m in range(n + 1):
        row[m] = Fraction(1, m + 1)
        for j in range(m, 0, -1):
            row[j - 1] = j * (row[j - 1] - row[j])
    return row[0]


#: (1/x - cot(x))/x = Σ 2^(2n)·|B_2n|·x^(2n-2)/(2n)!, n ≥ 1: 18 terms for |x| < 1 (each ≈ (x/π)² of the last)
_INVCOT = [float(2 ** (2 * n) * abs(_bernoulli(2 * n)) / math.factorial(2 * n)) for n in range(1, 19)]


def _nan_at(x: Variable, *points: float) -> Variable:
    """0, or NaN where x is one of `points`: added, so a written 0/0 (or inf/inf) stays NaN there
    (and a NaN x keeps its NaN gradient)."""
    at = equal(x, points[0])
    for point in points[1:]:
        at = logical_or(at, equal(x, point))
    return where(at, np.full((), np.nan, x.dtype), np.zeros((), x.dtype))


def _float(x: Variable) -> bool:
    return is_floating(x.dtype)


@rewrite(_S, _REC, Divide)
def exprel_from_quotient(node):
    """expm1(x) / x → exprel(x), x / expm1(x) → 1 / exprel(x): the Taylor series Σ x^k/(k+1)! where
    |x| < 1, the quotient as written elsewhere (`(exp(x) - 1) / x` once expm1_from_naive has run).

    Written, the value is accurate (expm1 keeps its digits) but its derivative, by the quotient
    rule, is exp(x)/x - expm1(x)/x², two terms of about 1/x that cancel to about 1/2: every
    digit is gone for |x| below 1e-8. The series' derivative has no such difference. At |x| ≥ 1
    the written derivative loses at most 2 bits and stays. At x = 0 the written 0/0 is NaN and
    stays NaN. Other numerators than expm1 of the same x must not fire.
    """
    top, bottom = node.inputs
    for numerator, denominator, inverted in ((top, bottom, False), (bottom, top, True)):
        inner = owner(numerator, Expm1)
        if inner is None or inner.inputs[0] is not denominator or not _float(denominator):
            continue
        x = denominator
        small = less(absolute(x), 1.0)
        series = horner(x, _EXPREL)
        # the written quotient where |x| >= 1, by x read as 1 elsewhere: the same value there, no
        # 0/0 where it is not selected, and a denominator this rule does not match again
        safe = where(small, np.ones((), x.dtype), x)
        if not inverted:
            return fits(where(small, series, numerator / safe) + _nan_at(x, 0), node)
        # x/expm1(x) past x = 40 is x·exp(-x) to 2⁻⁵⁷: written, its derivative's path through
        # expm1 underflows ((g/expm1)·x/expm1 ≈ 1e-606 at x = 700) where the answer is (1 - x)·e⁻ˣ
        far = greater(x, 40.0)
        tail = where(far, x * exp(negate(x)), safe / numerator)
        return fits(where(small, 1.0 / series, tail) + _nan_at(x, 0), node)
    return None


def _doubled(u: Variable, v: Variable) -> bool:
    """Whether u is written as 2·v (`2 * v`, `v * 2` or `v + v`)."""
    node = owner(u, Multiply, Add)
    if node is None:
        return False
    a, b = node.inputs
    if isinstance(node.op, Add):
        return a is v and b is v
    return (a is v and is_constant(b, 2.0)) or (b is v and is_constant(a, 2.0))


@rewrite(_S, _REC, Subtract)
def cot_difference_by_series(node):
    """c/x - c/tan(x) → c·x·Σ 2^(2n)·|B_2n|·x^(2n-2)/(2n)! where |x| < 1, as written elsewhere
    (and c/tan(x) - c/x, its negation).

    Written, the two reciprocals are about c/x and cancel to c·x/3: every digit is gone below
    |x| ≈ 1e-8, and so it is in the derivative. The series' terms fall by (x/π)² each. At
    x = 0 the written inf - inf is NaN and stays NaN. Another argument of tan, or another
    numerator, must not fire.
    """
    for first, second, sign in ((*node.inputs, 1.0), (*node.inputs[::-1], -1.0)):
        a, b = _constant_over(first), _constant_over(second)
        tangent = owner(b[1], Tan) if b is not None else None
        if a is None or tangent is None or a[0] != b[0] or tangent.inputs[0] is not a[1] or not _float(a[1]):
            continue
        c, x = a
        small = less(absolute(x), 1.0)
        series = x * horner(x * x, _INVCOT)
        # the difference where |x| >= 1, of 1 elsewhere (no inf - inf where it is not selected), with
        # cot as cos/sin: as accurate there, and not this rule's pattern again
        safe = where(small, np.ones((), x.dtype), x)
        written = c / safe - c * cos(safe) / sin(safe)
        result = where(small, scaled(c, series), written) + _nan_at(x, 0)
        return fits(result if sign > 0 else negate(result), node)
    return None


def _constant_over(v: Variable) -> tuple[float, Variable] | None:
    """(c, y) for v = c / y with c a constant (`reciprocal(y)`: c = 1)."""
    inverse = owner(v, Reciprocal)
    if inverse is not None:
        return 1.0, inverse.inputs[0]
    quotient = owner(v, Divide)
    if quotient is None or quotient.inputs[0].ndim != 0:
        return None
    c = constant_value(quotient.inputs[0])
    return (c, quotient.inputs[1]) if c is not None and c != 0 and math.isfinite(c) else None


@rewrite(_S, _REC, Divide)
def exp_plus_one_from_ratio_of_expm1(node):
    """expm1(2x) / expm1(x) → exp(x) + 1, expm1(x) / expm1(2x) → sigmoid(-x): a difference
    of squares, e^{2x} - 1 = (e^x - 1)(e^x + 1) (so `(exp(2x) - 1) / (exp(x) - 1)` once
    expm1_from_naive has run).

    Written, each expm1 keeps its digits and so does the quotient, but its derivative by the
    quotient rule is two terms of about 2/x that cancel to about 1/2 (every digit gone below
    x ≈ 1e-8), and expm1(2x) overflows past x = 354 where the answer is finite.  At x = 0
    the written 0/0 stays NaN, at x = +inf the written inf/inf too.
    """
    top, bottom = node.inputs
    for numerator, denominator, inverted in ((top, bottom, False), (bottom, top, True)):
        twice, once = owner(numerator, Expm1), owner(denominator, Expm1)
        if twice is None or once is None or not _float(once.inputs[0]):
            continue
        x = once.inputs[0]
        if not _doubled(twice.inputs[0], x):
            continue
        ratio = stable.sigmoid(negate(x)) if inverted else exp(x) + 1.0
        return fits(ratio + _nan_at(x, 0, np.inf), node)
    return None


@rewrite(_S, _REC, Log)
def log_sinhc_from_log_of_quotient(node):
    """log(sinh(x) / x) → log1p(x²·Σ x^(2k-2)/(2k+1)!) where |x| < 2; log(sinh(x)/x) as written for
    2 ≤ |x| ≤ 20; |x| - log(2|x|) + log1p(-exp(-2|x|)) beyond (NaN at x = 0 as written).

    Written, sinh(x)/x is within an ulp of 1 for |x| below 1e-8, where the answer is x²/6, and
    the log keeps only rounding; its derivative coth(x) - 1/x cancels likewise (at x = 1e-3 it
    has lost 20 bits). Past |x| ≈ 710 sinh overflows and the written log is inf. Between 2 and
    20 the written formula loses at most a bit and stays. sinh of another x, or another
    divisor, must not fire.
    """
    quotient = owner(node.inputs[0], Divide)
    if quotient is None:
        return None
    hyperbolic = owner(quotient.inputs[0], Sinh)
    x = quotient.inputs[1]
    if hyperbolic is None or hyperbolic.inputs[0] is not x or not _float(x):
        return None
    t = x * x
    near = log1p(t * horner(t, SINH_REMAINDER))
    a = absolute(x)
    far = a - log(2.0 * a) + log1p(negate(exp(-2.0 * a)))
    small = less(a, 2.0)
    inside = logical_and(logical_not(small), less_equal(a, 20.0))
    # the written log where 2 <= |x| <= 20, of 1 elsewhere (no 0/0 or overflow where not selected,
    # and a log of a where, which this rule does not match again)
    written = log(where(inside, quotient.outputs[0], np.ones((), x.dtype)))
    return fits(where(small, near, where(inside, written, far)) + _nan_at(x, 0), node)


@rewrite(_S, _REC, Log)
def log_sinh_from_log_of_sinh(node):
    """log(sinh(x)) → x - log(2) + log1p(-exp(-2x)) where x > 20, and log(|sinh(x)|) the same of
    |x| where |x| > 20 (the GERG equation of state's `log(fabs(sinh(t·τ)))`); → log(x) (log|x|) +
    log1p(x²·Σ x^(2k-2)/(2k+1)!) where |x| < 1/2; as written between.

    Written, sinh overflows past |x| ≈ 710, where the log is about |x| - log 2, and its derivative
    cosh/sinh is inf/inf. Near 0 the log is of x's own value, so a product t·τ that underflowed
    to 0 gives -inf where the answer is about log|t| + log|τ|: log|x| of a product is then the
    sum of its factors' logs (sum_of_logs_from_log_of_product). Between, the written log is
    accurate, and x - log(2) would cancel near x = 0.88 where log(sinh(x)) = 0: it stays.
    log(sinh(x)) of x < 0 is NaN as written (log(x) is).
    `log(2·sinh(x))` is log_of_twice_hyperbolic's.
    """
    inner = node.inputs[0]
    magnitude = owner(inner, Abs)
    hyperbolic = owner(magnitude.inputs[0] if magnitude is not None else inner, Sinh)
    if hyperbolic is None or not _float(hyperbolic.inputs[0]):
        return None
    x = hyperbolic.inputs[0]
    a = absolute(x) if magnitude is not None else x
    far = a - float(np.log(2.0)) + log1p(negate(exp(-2.0 * a)))
    far_out = greater(a, 20.0)
    near = less(absolute(x), 0.5)
    xs = where(near, x, np.zeros((), x.dtype))  # (no overflow of x² where not selected)
    t = xs * xs
    # log|x| itself: the log of a product that underflowed is the sum of its factors' logs
    close = log(a) + log1p(t * horner(t, SINH_REMAINDER))
    # the written log of 1 where not taken: a log of a where, which this rule does not match again
    written = log(where(logical_or(far_out, near), np.ones((), x.dtype), inner))
    return fits(where(far_out, far, where(near, close, written)), node)


#: (log1p(x) - x + x²/(2 + x)) / (2u³) = Σ u^(2k)/(2k + 3), u = x/(2 + x): 18 terms for u² ≤ 1/9
_LOG1PMX = [1.0 / (2 * k + 3) for k in range(18)]


@rewrite(_S, _REC, Subtract)
def log1pmx_from_difference(node):
    """log1p(x) - x → -x²/(2 + x) + 2u³·Σ u^(2k)/(2k + 3) with u = x/(2 + x) where -0.5 < x < 1, the
    written difference elsewhere; x - log1p(x) the negation (`log(1 + x) - x` once log1p_from_naive
    has run: SciPy's log1pmx, the Poisson and Stirling remainders).

    Written, log1p(x) and x agree to the first order: the difference, about -x²/2, loses every
    digit for |x| below 1e-8 (log1p(x) then rounds to x), and its derivative 1/(1 + x) - 1 does
    the same. The series is log1p(x) = 2·atanh(u) with its first term taken out exactly
    (2u - x = -x²/(2 + x)); |u| ≤ 1/3 on the interval. Outside it the written difference loses
    at most 2 bits, and keeps its -inf at x = -1 and NaN below. Another operand than log1p's own
    x must not fire.
    """
    a, b = node.inputs
    for logarithm, x, sign in ((a, b, 1.0), (b, a, -1.0)):
        inner = owner(logarithm, Log1p)
        if inner is None or inner.inputs[0] is not x or not _float(x):
            continue
        near = logical_and(greater(x, -0.5), less(x, 1.0))
        xs = where(near, x, np.zeros((), x.dtype))  # (no 0/0 at x = -2 where it is not selected)
        u = xs / (xs + 2.0)
        series = negate(xs * xs / (xs + 2.0)) + 2.0 * (u * u * u) * horner(u * u, _LOG1PMX)
        # (a sum with the negation: the difference itself would be matched again)
        written = logarithm + negate(x) if sign == 1.0 else x + negate(logarithm)
        return fits(where(near, series if sign == 1.0 else negate(series), written), node)
    return None


# -- differences of exponentials ---------------------------------------------------------------------------
@rewrite(Phase.GRADIENT, _REC, Subtract)
def expm1_from_difference_of_exps(node):
    """exp(a) - exp(b) → -exp(a)·expm1(b - a) where a ≥ b, exp(b)·expm1(a - b) elsewhere (the larger
    exponent outside, so expm1 stays in [-1, 0]), with a - b summed product by product where they
    share products that cancel (`polynomial_difference`: `-(1 - e)·x` and `-(1 + e)·x` are 2·e·x
    apart); as written where a or b is not finite.  One of the LATE_RULES, so that `log(exp(a) -
    exp(b))` is logdiffexp's first.

    Written, the two exps cancel where a ≈ b and keep none of the difference's digits past
    |a - b| < 1e-16·|a| (and a or b rounded first, `(1 + e)·x` for e below 1e-16, lose it all).
    """
    if owner(node.inputs[0], Exp) is None or owner(node.inputs[1], Exp) is None:
        return None
    return fits(_difference_of_exps(*node.inputs, written_difference(node), select=masked_where), node)


def _difference_of_exps(first: Variable, second: Variable, written: Variable, scale=None, select=where):
    """scale·(exp(a) - exp(b)) for first = exp(a), second = exp(b), with the larger exponent outside
    (see `expm1_from_difference_of_exps`); `written` where a or b is not finite.  The scale
    multiplies each branch's product, where a monomial rule can cancel it against expm1's
    argument (`(1/e)·expm1(2·e·x)` is `2·x·exprel(2·e·x)`).  `select` builds the wheres (a late
    phase's must mask their branches themselves)."""
    a, b = owner(first, Exp).inputs[0], owner(second, Exp).inputs[0]  # type: ignore[union-attr]
    apart = polynomial_difference(a, b)
    d = apart if apart is not None else a - b
    above, below = first * expm1(negate(d)), second * expm1(d)
    if scale is not None:
        above, below = scale * above, scale * below
    stable = select(greater_equal(a, b), negate(above), below)
    return select(logical_and(isfinite(a), isfinite(b)), stable, written)


def _coefficient_and_exp(v: Variable) -> tuple[Variable | float, Variable] | None:
    """(p, exp(a)) for v = p·exp(a) in either order, or (1, v) for v = exp(a) itself."""
    if owner(v, Exp) is not None:
        return 1.0, v
    product = owner(v, Multiply)
    if product is None:
        return None
    for p, e in (product.inputs, product.inputs[::-1]):
        if owner(e, Exp) is not None:
            return p, e
    return None


def _sum_of(terms: list[tuple[Variable, float]], constant: float) -> Variable | float:
    """Σ k·u + constant (a float where there are no terms)."""
    total: Variable | float = constant
    for u, k in terms:
        term = scaled(k, u)
        total = term if isinstance(total, float) and total == 0.0 else total + term
    return total


@rewrite(_S, _REC, Subtract)
def difference_of_exps_from_shared_coefficient(node):
    """p·exp(a) - q·exp(b) → w·(exp(a) - exp(b)) + (p - w)·exp(a) - (q - w)·exp(b) for affine p and
    q whose shared terms with equal coefficients sum to w: `(1 + 1/e)·exp(-(1 - e)·x) -
    (1/e - 1)·exp(-(1 + e)·x)` is `(1/e)·(exp(…) - exp(…)) + exp(…) + exp(…)`, the difference of
    exps taken as `expm1_from_difference_of_exps` takes it, with w in each of its branches.

    Written, each product is about w times an exp and they cancel to about 1: at e = 1e-200 no
    digit is left (the answer is (1 + x)·exp(-x)).
    """
    pairs = [_coefficient_and_exp(v) for v in node.inputs]
    if pairs[0] is None or pairs[1] is None:
        return None
    (p, first), (q, second) = pairs  # type: ignore[misc]
    forms = [affine_form(c) if isinstance(c, Variable) else ({}, c) for c in (p, q)]
    if forms[0] is None or forms[1] is None:
        return None
    p_terms, q_terms = forms[0][0], forms[1][0]
    shared = [key for key in p_terms.keys() & q_terms.keys() if p_terms[key][1] == q_terms[key][1]]
    if not shared:
        return None
    w = _sum_of([p_terms[key] for key in shared], 0.0)
    p_rest, q_rest = (_sum_of([t for key, t in terms.items() if key not in shared], c) for terms, c in forms)
    total = _difference_of_exps(first, second, w * (first + negate(second)), scale=w)
    for rest, e, sign in ((p_rest, first, 1.0), (q_rest, second, -1.0)):
        if not isinstance(rest, float):
            total = total + scaled(sign, rest * e)
        elif rest != 0.0:
            total = total + scaled(sign * rest, e)
    return fits(total, node)


# -- exp of a sum of logs -------------------------------------------------------------------------------
@rewrite(_S, _REC, Exp)
def product_from_exp_of_sum_of_logs(node):
    """exp(log(a) + log(b)) → a·b and exp(log(a) - log(b)) → a/b, NaN where a or b is negative (as
    written: the log of a negative); a log1p(b) is log(1 + b).

    Written, the sum of logs rounds to an ulp of |log(a·b)| and the exp turns that into a relative
    error of |log(a·b)|·ε: 9 bits at a·b = 1e-300; the derivative b·exp(...)/... carries it too.
    The product rounds once (1 + b once more). Zeros and infinities meet as written: 0·inf and
    inf/inf are NaN where -inf + inf is, 0·b = exp(-inf) = 0 — but the derivative at a = 0 is b,
    where written it is exp(-inf)·(1/0) = NaN. Logs of other functions (log_sigmoid) must not fire.
    """
    total = owner(node.inputs[0], Add, Subtract)
    if total is None:
        return None
    a, b = (_log_or_log1p_operand(v) for v in total.inputs)
    if a is None or b is None or not (_float(a) and _float(b)):
        return None
    combined = a * b if isinstance(total.op, Add) else a / b
    negative = logical_or(less(a, 0), less(b, 0))
    dtype = node.outputs[0].dtype
    outside = where(negative, np.full((), np.nan, dtype), np.zeros((), dtype))
    return fits(combined + outside, node)


def _log_or_log1p_operand(v: Variable) -> Variable | None:
    """x for log(x), 1 + x for log1p(x), else None."""
    shifted = owner(v, Log1p)
    return 1.0 + shifted.inputs[0] if shifted is not None else _log_operand(v)


# -- inverse hyperbolic functions ----------------------------------------------------------------------
def _square_plus(v: Variable, c: float) -> Variable | None:
    """x for v = x² + c (`x*x + c`, `c + x**2`, `x² - 1` for c = -1), else None."""
    total = owner(v, Add)
    if total is not None:
        for sq, k in (total.inputs, total.inputs[::-1]):
            x = square_of(sq)
            if x is not None and is_constant(k, c):
                return x
    difference = owner(v, Subtract)
    if difference is not None and is_constant(difference.inputs[1], -c):
        return square_of(difference.inputs[0])
    return None


@rewrite(_S, _REC, Log)
def inverse_hyperbolic_from_log(node):
    """log(x + √(x² + 1)) → arcsinh(x); log(x + √(x² - 1)) → arccosh(x) (either order of the sum,
    `sqrt` or `** 0.5`, x² as `x*x`, `square(x)`, `x**2`).

    Written, x + √(x² + 1) cancels for x << 0 (log(0) = -inf below x ≈ -1e8 where the answer is
    about -log(-2x)) and x² overflows past 1e154 (log(inf)); the arccosh form overflows the
    same way. Both keep their domains: x + √(x² - 1) is negative for x ≤ -1 and √ of a negative
    for |x| < 1, where arccosh is NaN too. Another constant than ±1 must not fire.
    """
    total = owner(node.inputs[0], Add)
    if total is None:
        return None
    for x, root in (total.inputs, total.inputs[::-1]):
        inside = root_of(root)
        if inside is None:
            continue
        if _square_plus(inside, 1.0) is x:
            return fits(arcsinh(x), node)
        if _square_plus(inside, -1.0) is x:
            return fits(arccosh(x), node)
    return None


def _quarter_pi_plus_half(theta: Variable, node: Apply) -> tuple[int, Variable] | None:
    """(s, x) for theta = π/4 + s·x/2 (s = ±1; `x * 0.5`, `0.5 * x`, `x / 2`, either order), with
    π/4 a constant within a few ulps of node's dtype."""
    dtype = node.outputs[0].dtype
    if not is_floating(dtype):
        return None
    candidates = []
    total = owner(theta, Add)
    if total is not None:
        candidates += [(c, t, 1) for c, t in (total.inputs, total.inputs[::-1])]
    difference = owner(theta, Subtract)
    if difference is not None:
        candidates.append((difference.inputs[0], difference.inputs[1], -1))
    for c, t, sign in candidates:
        if not reads_as(constant_value(c), np.pi / 4, dtype):
            continue
        core, scale = scaled_core(t)
        if abs(scale) == 0.5:
            return (1 if scale * sign > 0 else -1), core
    return None


@rewrite(_S, _REC, Log)
def inverse_gudermannian_from_log_tan(node):
    """log(tan(π/4 + x/2)) → arcsinh(tan(x)) where cos(x) > 0 (NaN elsewhere, as written);
    log(tan(π/4 - x/2)) → -arcsinh(tan(x)) (the inverse Gudermannian function, the Mercator
    projection's latitude: gd⁻¹(x) = log tan(π/4 + x/2) = asinh(tan x) = atanh(sin x)).

    Written, tan(π/4 + x/2) is within an ulp of 1 for |x| below ~1e-16, so the log loses every
    digit of the answer ≈ x there (and ~log2(1/|x|) bits above). Where cos(x) ≤ 0 the tangent is
    negative and the written log is NaN; the replacement is NaN there too. Fires only for π/4
    to a few ulps and the factor ½.
    """
    tangent = owner(node.inputs[0], Tan)
    found = _quarter_pi_plus_half(tangent.inputs[0], node) if tangent is not None else None
    if found is None:
        return None
    sign, x = found
    gd = arcsinh(tan(x))
    # NaN added where cos(x) <= 0, not selected: a NaN x keeps its NaN gradient
    outside = where(greater(cos(x), 0), np.zeros((), x.dtype), np.full((), np.nan, x.dtype))
    return fits((gd if sign == 1 else negate(gd)) + outside, node)


@rewrite(_S, _REC, Subtract)
def arctan_of_ratio_from_arctan_minus_quarter_pi(node):
    """arctan(r) - π/4 → arctan((r - 1)/(r + 1)) where -1 < r < inf, as written elsewhere; so
    `2·(arctan(exp(u)) - π/4)`, the Gudermannian function of map projections, becomes
    `2·arctan(tanh(u/2))` (for every u: exp(u) is never at or below -1).

    Written, arctan(r) is within an ulp of π/4 for r near 1 and the difference keeps only its
    rounding (0 at r = 1 + 1e-16, where the answer is 5e-17). r - 1 is exact there (Sterbenz).
    The identity holds only on -1 < r (at r < -1 the two sides differ by π): there the written
    difference stays; at r = +inf its value π/4 is taken as a constant (written, the gradient
    through arctan's 1/(1 + r²) = 0 met an overflowed r as 0 · inf). Fires only for π/4 to a
    few ulps.
    """
    a, quarter = node.inputs
    inner = owner(a, Arctan)
    dtype = node.outputs[0].dtype
    value = constant_value(quarter)
    if inner is None or not is_floating(dtype) or not reads_as(value, np.pi / 4, dtype):
        return None
    r = inner.inputs[0]
    u = _exp_argument(r)
    if u is not None:  # (r - 1)/(r + 1) of r = exp(u) is tanh(u/2), for every u (no overflow of r)
        return fits(arctan(tanh(u / 2.0)), node)
    inside = logical_and(greater(r, -1.0), less(r, np.inf))
    above = equal(r, np.inf)
    # each branch of a value where it is not taken (0: no 0/0; 0 - c is not this rule's pattern)
    near = where(inside, r, np.zeros((), dtype))
    far = arctan(where(logical_or(inside, above), np.zeros((), dtype), r)) + (-value)
    limit = np.asarray(np.pi / 2 - value, dtype)
    return fits(where(inside, arctan((near - 1.0) / (near + 1.0)), where(above, limit, far)), node)


# -- a difference of square roots ----------------------------------------------------------------------
def _plus_positive_constant(v: Variable) -> tuple[Variable, Variable] | None:
    """(x, c) for v = x + c (either order), c a positive finite constant."""
    total = owner(v, Add)
    if total is None:
        return None
    for x, c in (total.inputs, total.inputs[::-1]):
        value = constant_value(c)
        if value is not None and 0 < value < np.inf:
            return x, c
    return None


@rewrite(_S, _REC, Subtract)
def conjugate_from_difference_of_roots(node):
    """√(x + c) - √x → c / (√(x + c) + √x), and √x - √(x + c) → -c / (√(x + c) + √x), c a positive
    constant (`sqrt` or `** 0.5`): the difference of roots times its conjugate (Herbie's "2sqrt").

    Written, the roots cancel for x >> c: all digits are lost by x ≈ c·2⁵³ (the answer is about
    c / (2√x)), and so does the derivative, a difference of 1/(2√·) terms. The domain is the
    written one: x < 0 makes √x NaN in both. A non-constant or non-positive c must not fire.
    """
    a, b = (root_of(v) for v in node.inputs)
    if a is None or b is None:
        return None
    for shifted, plain, sign in ((a, b, 1.0), (b, a, -1.0)):
        pair = _plus_positive_constant(shifted)
        if pair is not None and pair[0] is plain:
            quotient = pair[1] / (node.inputs[0] + node.inputs[1])
            return fits(quotient if sign == 1.0 else negate(quotient), node)
    return None


# -- quotients by exp and cosh ----------------------------------------------------------------------------
@rewrite(_S, _REC, Divide, Reciprocal)
def product_from_quotient_by_exp(node):
    """a / exp(x) → a·exp(-x) (and 1/exp(x) → exp(-x)); `exp(b) / exp(x)` is exp_of_sum's.

    Written, exp(x) overflows past x ≈ 709 where exp(-x) is still a number down to 1e-308 (and
    a subnormal to 745), and the quotient rule's derivative, -(a/exp(x))/exp(x)·exp(x), is
    0 · inf = NaN there; below x ≈ -708, 1/exp(x) is the reciprocal of a subnormal, with its
    few digits. Everywhere else both round twice. NaN as written: inf/inf (a = inf past 745)
    is inf·0.
    """
    if isinstance(node.op, Reciprocal):
        a, divisor = None, node.inputs[0]
    else:
        a, divisor = node.inputs
        if _exp_argument(a) is not None:
            return None
    x = _exp_argument(divisor)
    if x is None or not _float(x):
        return None
    e = exp(negate(x))
    k = 1.0 if a is None else constant_value(a)
    if k is not None and (a is None or a.ndim == 0):
        return fits(scaled(k, e), node)
    return fits(a * e, node)


@rewrite(_S, _REC, Divide)
def sech_from_quotient_by_cosh(node):
    """a / (c·cosh(x)) → a·sech(x)/c, so `2/(exp(x) + exp(-x))` → sech(x).

    Written, cosh overflows past |x| ≈ 710, where sech is a number down to 745, and the
    derivative by the chain rule is (-g·q/cosh)·sinh = 0 · inf = NaN there; sech's own is
    -tanh·sech. `sinh(x)/cosh(x)` is tanh_from_quotient's.
    """
    bottom = _scaled_call(node.inputs[1], Cosh)
    if bottom is None or bottom[0] == 0 or not _float(bottom[1]):
        return None
    c, x = bottom
    a = node.inputs[0]
    k = constant_value(a)
    if k is not None and a.ndim == 0:
        return fits(scaled(k / c, stable.sech(x)), node)
    return fits(a * scaled(1.0 / c, stable.sech(x)), node)


# -- two-term softmax ---------------------------------------------------------------------------------
@rewrite(_S, _REC, Divide)
def sigmoid_from_two_term_softmax(node):
    """exp(a) / (exp(a) + exp(b)) → sigmoid(a - b) (either order of the sum).

    Written, both exponentials overflow past 709 (inf/inf = NaN) or underflow below -745 (0/0)
    where the answer is a number in [0, 1]. Fires only where the numerator's exponential is one
    of the two terms (the same node).
    """
    a = _exp_argument(node.inputs[0])
    total = owner(node.inputs[1], Add)
    if a is None or total is None:
        return None
    for first, second in (total.inputs, total.inputs[::-1]):
        if _exp_argument(first) is a:
            b = _exp_argument(second)
            if b is not None:
                return fits(stable.sigmoid(a - b), node)
    return None


@rewrite(_S, _REC, Power)
def exp_of_log_sigmoid_from_power_of_sigmoid(node):
    """sigmoid(s)**c → exp(c·log_sigmoid(s)) where log_sigmoid(s) ≥ -1 or the written power is not a
    normal number; the written power elsewhere.

    Written, σ(s) underflows below s ≈ -745 (and σ(s)**c for large c long before), so that a
    product or quotient of such powers (Harley's example: σ(s)^a·σ(-s)^b / (σ(t)^a·σ(-t)^b)) is
    0/0 or inf/inf where it is a number; as exponentials, the products become exp_of_sum and
    stay in range. Past s ≈ 37 σ(s) rounds to 1 and its power to 1, where the answer is
    exp(-c·e^(-s)). The written power errs by about |c| ulps of σ, the exponential by |c·log σ|:
    where log σ < -1 and the written power is a normal number it stays. As IEEE's pow: 1 where
    log σ = 0, and where c = 0 at σ = 0. Other bases must not fire.
    """
    base, c = node.inputs
    sig = owner(base, stable.Sigmoid)
    dtype = node.outputs[0].dtype
    if sig is None or not _float(c) or sig.outputs[0].dtype != dtype:
        return None
    ls = stable.log_sigmoid(sig.inputs[0])
    y = c * ls
    info = np.finfo(dtype)
    # the written power is normal where σ and σ**c are: log(tiny) < log σ, c·log σ < log(max) (a
    # margin of 1 for their rounding)
    low, high = float(np.log(info.tiny)) + 1.0, float(np.log(info.max)) - 1.0
    normal = logical_and(logical_and(greater(ls, low), greater(y, low)), less(y, high))
    exponential = logical_or(greater_equal(ls, -1.0), logical_not(normal))
    # the written power where it is taken, of 1 elsewhere: no 0**c or inf where it is not, and a base
    # this rule does not match again
    written = where(exponential, np.ones((), dtype), base) ** c
    one = logical_or(equal(ls, 0.0), logical_and(equal(c, 0.0), equal(ls, -np.inf)))
    return fits(where(one, np.ones((), dtype), where(exponential, exp(y), written)), node)


RULES = (
    log1p_difference_from_log_of_ratio,
    log1p_from_bernoulli_cumulant,
    hyperbolic_from_opposite_exponentials,
    tanh_from_quotient,
    tanh_from_shifted_sigmoid,
    log_of_twice_hyperbolic,
    log_tanh_from_log_of_hyperbolic_ratio,
    sigmoid_from_two_term_softmax,
    exp_of_log_sigmoid_from_power_of_sigmoid,
    product_from_quotient_by_exp,
    sech_from_quotient_by_cosh,
    sinh_squared_from_cosh_minus_one,
    sine_squared_from_one_minus_cos,
    conjugate_from_difference_of_roots,
    expm1_from_power_near_one,
    expm1_from_difference_of_shifted_powers,
    exp_from_power_of_e,
    log1p_from_difference_of_shifted_logs,
    log1p_from_difference_of_x_log_x,
    inverse_hyperbolic_from_log,
    inverse_gudermannian_from_log_tan,
    arctan_of_ratio_from_arctan_minus_quarter_pi,
    exprel_from_quotient,
    cot_difference_by_series,
    exp_plus_one_from_ratio_of_expm1,
    log_sinhc_from_log_of_quotient,
    log_sinh_from_log_of_sinh,
    log1pmx_from_difference,
    product_from_exp_of_sum_of_logs,
    difference_of_exps_from_shared_coefficient,
)

#: run after recognition (`rewrite/pipeline.py`), on value and gradient graphs alike
LATE_RULES = (expm1_from_difference_of_exps,)
