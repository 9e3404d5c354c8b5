"""Identities: recognition of formulas that are a stable primitive in disguise.

Where stabilize.py recognises the naive spelling of a primitive (`log(1 + exp(x))`),
the rules here use an identity between special functions to reach one:

- error function: `1 ± erf(x)` is `erfc(∓x)` (no cancellation where erf(x) is near ∓1),
  so `log(1 + erf(x))` goes on to `log_erfc(-x)`; `exp(x²)·erfc(x)` is `erfcx(x)`; the
  normal CDF written with erf or erfc under a log is `log_ndtr`;
- logistic: `exp(x)·σ(-x)` is σ(x), `log1p(-σ(x))` is log σ(-x), `c - σ(x)` for c just
  above 1 is `(c - 1) + σ(-x)`, the logistic density `exp(y) / (1 + exp(y))²` is
  σ(y)·σ(-y), and `log(σ(a) - σ(b))` is `log_sigmoid_difference(a, b)`;
- `log(cosh(x))` is `log_cosh(x)`;
- exp of a stable log-primitive is the primitive's own value: `exp(log1mexp(z))` is
  `-expm1(z)`, `exp(log_sigmoid(x))` is σ(x), `exp(log_erfc(x))` is erfc(x).

Every rule keeps the written formula's domain (NaN stays NaN) and fires only on the
exact constants it names (±1, ½, √2 to a few ulps, c in (1, 2]).  The rules run in the
STABILIZE phase after stabilize.RULES and chain with them.
"""

from __future__ import annotations

import math

import numpy as np

from ..graph.basic import Apply, Constant, Variable
from ..graph.types import is_floating
from ..ops import stable
from ..ops.base import astype
from ..ops.elementwise import (
    Add,
    Divide,
    Multiply,
    Negative,
    Subtract,
    equal,
    greater,
    where,
)
from ..ops.math import Cosh, Erf, Erfc, Exp, Log, Log1p, Ndtr, erf, erfc, erfcx, expm1, log, ndtr
from .engine import Kind, Phase, rewrite
from .patterns import (
    constant_value,
    fits,
    is_constant,
    is_negation,
    negate,
    owner,
    reads_as,
    scaled_core,
    square_of,
)

_S = Phase.STABILIZE
_REC = Kind.RECOGNITION
_SQRT2 = math.sqrt(2.0)


def _in_dtype_of(result: Variable, node: Apply) -> Variable:
    """result cast up to node's float dtype (a float32 formula next to a float64 constant array)."""
    dtype = node.outputs[0].dtype
    if result.dtype != dtype and is_floating(result.dtype) and is_floating(dtype):
        return astype(result, dtype)
    return result


def _float_operand(x: Variable, like: Variable) -> Variable:
    """x in like's float dtype: the operand as the op computed it (and negating it cannot wrap)."""
    return x if x.dtype == like.dtype else astype(x, like.dtype)


# -- error function ---------------------------------------------------------------------------------
def _signed(v: Variable, op_class: type) -> tuple[int, Apply] | None:
    """(s, node) for v = s·f(x), s = ±1, f of `op_class`."""
    f = owner(v, op_class)
    if f is not None:
        return 1, f
    neg = owner(v, Negative)
    f = owner(neg.inputs[0], op_class) if neg is not None else None
    return (-1, f) if f is not None else None


def _unit_plus_signed(node: Apply, op_class: type) -> tuple[int, int, Variable] | None:
    """(k, s, x) for node = k + s·f(x) with k, s = ±1 and f of `op_class` (either order, a
    subtraction, `+ (-1)`, `+ (-f(x))`); x in f's float dtype."""
    a, b = node.inputs
    signs = (1, -1 if isinstance(node.op, Subtract) else 1)
    for i in (0, 1):
        unit, term = constant_value((a, b)[i]), _signed((a, b)[1 - i], op_class)
        if term is not None and unit in (1.0, -1.0):
            f = term[1]
            return int(unit) * signs[i], term[0] * signs[1 - i], _float_operand(f.inputs[0], f.outputs[0])
    return None


def _signed_result(k: int, v: Variable, node: Apply) -> Variable | None:
    return fits(_in_dtype_of(v if k == 1 else negate(v), node), node)


@rewrite(_S, _REC, Add, Subtract)
def erfc_from_one_plus_erf(node):
    """k + s·erf(x) with k, s = ±1 → k·erfc(-s·k·x): 1 + erf(x) → erfc(-x), 1 - erf(x) → erfc(x),
    erf(x) - 1 → -erfc(x), -1 - erf(x) → -erfc(-x) (either order, `+ (-1)`, `+ (-erf(x))`).

    Written, 1 + erf(x) cancels for x << 0 (0.4% off at x = -5.5, 0 from x = -6 in float64, from
    -4 in float32) where erfc(-x) keeps its relative accuracy; no other constant fires.
    """
    found = _unit_plus_signed(node, Erf)
    if found is None:
        return None
    k, s, x = found
    return _signed_result(k, erfc(negate(x) if s * k == 1 else x), node)


@rewrite(_S, _REC, Add, Subtract)
def erf_from_one_minus_erfc(node):
    """1 - erfc(x) → erf(x), erfc(x) - 1 → -erf(x) (either order, `+ (-1)`, `+ (-erfc(x))`).

    Written, the difference cancels near 0: 1 - erfc(1e-20) is 0, not 1.1e-20, and erf(1e-8)
    written so is 2e-9 off (relative).  1 + erfc(x) and -1 - erfc(x) do not cancel, and stay.
    """
    found = _unit_plus_signed(node, Erfc)
    if found is None or found[0] != -found[1]:
        return None
    return _signed_result(found[0], erf(found[2]), node)


@rewrite(_S, _REC, Add, Subtract)
def normal_survival_from_one_minus_ndtr(node):
    """1 - ndtr(x) → ndtr(-x), ndtr(x) - 1 → -ndtr(-x) (either order, `+ (-1)`, `+ (-ndtr(x))`):
    the normal survival function, and under a log (by the rule below) log_ndtr(-x).

    Written, 1 - Φ(x) is 0 from x ≈ 8.3 (5.4 in float32), where Φ(-x) is 6e-17, and loses its
    relative accuracy long before (0.3% at x = 6).  1 + ndtr(x) does not cancel, and stays.
    """
    found = _unit_plus_signed(node, Ndtr)
    if found is None or found[0] != -found[1]:
        return None
    return _signed_result(found[0], ndtr(negate(found[2])), node)


@rewrite(_S, _REC, Multiply)
def erfcx_from_naive(node):
    """exp(x²)·erfc(x) → erfcx(x) (either order; x² as `square(x)`, `x ** 2` or `x * x`).

    Written, exp(x²) overflows past x ≈ 26.6 (9.3 in float32) where erfc(x) underflows: inf·0 =
    NaN where the answer is about 1/(x√π).  (Below that the product is as accurate: SciPy's
    erfc carries the same rounding of x² in its own exp(-x²), and the two cancel.)
    """
    for e, c in (node.inputs, node.inputs[::-1]):
        ex, complement = owner(e, Exp), owner(c, Erfc)
        x = square_of(ex.inputs[0]) if ex is not None and complement is not None else None
        if x is not None and x is complement.inputs[0]:
            return fits(erfcx(x), node)
    return None


def _normal_argument(t: Variable, sign: float, node: Apply) -> Variable | None:
    """z with t = sign·z/√2, in node's dtype, else None.

    The written 1/√2 must be within a few ulps of node's dtype, not of its own: a float16
    `1 / sqrt(2)` under a float32 result is 1e-4 off, which moves log Φ in the lower tail by
    thousands of float32 ulps (log_ndtr would take the true √2; the written formula does not).
    """
    dtype = node.outputs[0].dtype
    if not is_floating(dtype):
        return None
    core, scale = scaled_core(t)
    for direction in (1.0, -1.0):
        if reads_as(scale * _SQRT2 * sign * direction, 1.0, dtype):
            z = _float_operand(core, node.outputs[0])
            return z if direction == 1.0 else negate(z)
    return None


def _half_erfc(v: Variable) -> tuple[float, Variable] | None:
    """(c, t) for v = c·erfc(t) with c = ±½: written `0.5 * erfc(t)`, `erfc(t) / 2`, `-0.5 * erfc(t)`."""
    product = owner(v, Multiply)
    if product is not None:
        for c, e in (product.inputs, product.inputs[::-1]):
            node = owner(e, Erfc)
            value = constant_value(c)
            if node is not None and value in (0.5, -0.5):
                return value, node.inputs[0]
    quotient = owner(v, Divide)
    if quotient is not None:
        node = owner(quotient.inputs[0], Erfc)
        value = constant_value(quotient.inputs[1])
        if node is not None and value in (2.0, -2.0):
            return 0.5 if value == 2.0 else -0.5, node.inputs[0]
    return None


@rewrite(_S, _REC, Log)
def log_ndtr_from_log_of_half_erfc(node):
    """log(0.5·erfc(-x/√2)) → log_ndtr(x); log(0.5·erfc(x/√2)) → log_ndtr(-x) (the log survival
    function).  With the rule above, log(0.5·(1 + erf(x/√2))) is the first.

    Written, it is log(0) below x ≈ -38.5 and log(1 - tiny) = 0 above x ≈ 8.3.  Fires only
    for a factor ½ and a scale 1/√2 (as `/ sqrt(2)`, `* 0.7071...`, negated anywhere).
    """
    half = _half_erfc(node.inputs[0])
    if half is None or half[0] != 0.5:
        return None
    z = _normal_argument(half[1], -1.0, node)  # ½·erfc(t) = Φ(-√2·t)
    return fits(stable.log_ndtr(z), node) if z is not None else None


@rewrite(_S, _REC, Log1p)
def log_ndtr_from_log1p_of_half_erfc(node):
    """log1p(-0.5·erfc(x/√2)) → log_ndtr(x) (so log(1 - 0.5·erfc(x/√2)) too); with -x/√2 → log_ndtr(-x).

    Written, 1 - ½·erfc(x/√2) = Φ(x) cancels for x << 0 (log of 0 below x ≈ -8.3).
    """
    inner = node.inputs[0]
    neg = owner(inner, Negative)
    half = _half_erfc(neg.inputs[0]) if neg is not None else _half_erfc(inner)
    if half is None or half[0] != (0.5 if neg is not None else -0.5):
        return None
    z = _normal_argument(half[1], 1.0, node)  # 1 - ½·erfc(t) = Φ(√2·t)
    return fits(stable.log_ndtr(z), node) if z is not None else None


@rewrite(_S, _REC, Log, Log1p)
def log_ndtr_from_log_of_ndtr(node):
    """log(ndtr(x)) → log_ndtr(x); log1p(-ndtr(x)) → log_ndtr(-x) (so log(1 - ndtr(x)) too, by
    the rule above): a probit model's log-likelihood.

    Written, log Φ(x) is log(0) = -inf below x ≈ -38.5 (-14 in float32), with a NaN gradient,
    where log_ndtr is about -x²/2 and its slope -x; log1p(-Φ(x)) is -inf past x ≈ 8.3.
    """
    if isinstance(node.op, Log):
        f = owner(node.inputs[0], Ndtr)
        return fits(stable.log_ndtr(f.inputs[0]), node) if f is not None else None
    neg = owner(node.inputs[0], Negative)
    f = owner(neg.inputs[0], Ndtr) if neg is not None else None
    return fits(stable.log_ndtr(negate(f.inputs[0])), node) if f is not None else None


@rewrite(_S, _REC, Log)
def log_ndtr_difference_from_naive(node):
    """log(ndtr(b) - ndtr(a)) → the log-probability of the interval [a, b] in the form its place
    needs: logdiffexp(log_ndtr(b), log_ndtr(a)) where b <= 0 (the lower tail), the same in
    survival functions, logdiffexp(log_ndtr(-a), log_ndtr(-b)), where a > 0, and
    log((erf(b/√2) - erf(a/√2)) / 2) between, where the two terms have opposite signs.

    Written, the difference underflows to 0 where both CDFs do (a, b < -38.5) and cancels to 0
    where both round to 1 (a, b > 8.3): log(0) = -inf with a NaN gradient, where the answer is
    about -b²/2 or -a²/2 (a truncated normal's or an interval-censored likelihood); across 0 it
    keeps only the absolute accuracy of 0.5 (3e-9 relative for [-1e-8, 1e-8]).  NaN where b < a
    and -inf at a = b, as written.
    """
    difference = owner(node.inputs[0], Subtract)
    if difference is None:
        return None
    upper, lower = (owner(v, Ndtr) for v in difference.inputs)
    if upper is None or lower is None:
        return None
    b, a = upper.inputs[0], lower.inputs[0]
    in_lower_tail = stable.logdiffexp(stable.log_ndtr(b), stable.log_ndtr(a))
    in_upper_tail = stable.logdiffexp(stable.log_ndtr(negate(a)), stable.log_ndtr(negate(b)))
    across = log(0.5 * (erf(b * (1 / _SQRT2)) - erf(a * (1 / _SQRT2))))
    return fits(where(greater(a, 0), in_upper_tail, where(greater(b, 0), across, in_lower_tail)), node)


# -- logistic ---------------------------------------------------------------------------------------
@rewrite(_S, _REC, Multiply)
def sigmoid_from_exp_times_sigmoid(node):
    """exp(x)·σ(-x) → σ(x) (either order): written, inf·0 = NaN past x ≈ 709 where the answer is 1.
    At x = +inf itself the written inf·0 is NaN in exact arithmetic too, and stays NaN (an inf
    that a finite input made, 1/0 say, is not a limit to take)."""
    for e, s in (node.inputs, node.inputs[::-1]):
        ex, sig = owner(e, Exp), owner(s, stable.Sigmoid)
        if ex is not None and sig is not None and is_negation(ex.inputs[0], sig.inputs[0]):
            x = ex.inputs[0]
            at_inf = equal(x, np.asarray(np.inf, x.dtype))
            return fits(where(at_inf, np.asarray(np.nan, x.dtype), stable.sigmoid(x)), node)
    return None


@rewrite(_S, _REC, Log1p)
def log_sigmoid_from_log1p_of_minus_sigmoid(node):
    """log1p(-σ(x)) → log_sigmoid(-x) (= -softplus(x)): written, log1p(-1) = -inf past x ≈ 37."""
    neg = owner(node.inputs[0], Negative)
    sig = owner(neg.inputs[0], stable.Sigmoid) if neg is not None else None
    return fits(stable.log_sigmoid(negate(sig.inputs[0])), node) if sig is not None else None


@rewrite(_S, _REC, Subtract, Add)
def sigmoid_complement_from_c_minus_sigmoid(node):
    """c - σ(x) for a constant 1 < c <= 2 → (c - 1) + σ(-x) (also c + (-σ(x))); with a log
    around it, log((c - 1) + σ(-x)) is the log of a sum of positive terms, accurate for large x
    (stabilize's `logaddexp_from_naive` goes on to logaddexp(log(c - 1), log_sigmoid(-x))).

    Written, c - σ(x) for c = 1 + δ (a guard such as 1.0000000000000002 or 1 + 1e-7) is left
    with the rounding of σ(x) near 1, as large as δ itself: for c = 1 + 2⁻⁵², log(c - σ(x)) is
    -35.3505 instead of -35.3284 at x = 36 and -36.0437 instead of -36.0247 at x = 40.  c - 1 is
    exact on (1, 2] (Sterbenz) and both terms are positive.
    c = 1 is stabilize's `1 - σ(x)` → σ(-x); c < 1 would be a difference again and does not fire.
    """
    for c, sig in _constant_minus_sigmoid(node):
        value = constant_value(c)
        if sig is None or value is None or not 1.0 < value <= 2.0:
            continue
        assert isinstance(c, Constant)
        delta = Constant(np.asarray(c.data - c.data.dtype.type(1)))
        return fits(delta + stable.sigmoid(negate(sig.inputs[0])), node)
    return None


def _constant_minus_sigmoid(node: Apply) -> list[tuple[Variable, Apply | None]]:
    """(c, σ node or None) for each way node reads as c - σ(x)."""
    a, b = node.inputs
    if isinstance(node.op, Subtract):
        return [(a, owner(b, stable.Sigmoid))]
    found = []
    for c, other in ((a, b), (b, a)):
        neg = owner(other, Negative)
        found.append((c, owner(neg.inputs[0], stable.Sigmoid) if neg is not None else None))
    return found


def _one_plus_exp(v: Variable) -> Variable | None:
    """y for v = 1 + exp(y) (either order), else None."""
    total = owner(v, Add)
    if total is None:
        return None
    for one, e in (total.inputs, total.inputs[::-1]):
        ex = owner(e, Exp)
        if ex is not None and is_constant(one, 1.0):
            return ex.inputs[0]
    return None


@rewrite(_S, _REC, Divide)
def logistic_density_from_naive(node):
    """exp(y) / (1 + exp(y))² → σ(y)·σ(-y) (the logistic density, dσ/dy; y = -z or z alike).

    Written, inf/inf = NaN where exp(y) overflows (y > 709, or z < -709 for y = -z).
    """
    numerator, denominator = node.inputs
    ex = owner(numerator, Exp)
    base = square_of(denominator)
    y = _one_plus_exp(base) if base is not None else None
    if ex is None or y is None or ex.inputs[0] is not y:
        return None
    y = _float_operand(y, numerator)
    return fits(stable.sigmoid(y) * stable.sigmoid(negate(y)), node)


@rewrite(_S, _REC, Log)
def log_sigmoid_difference_from_naive(node):
    """log(σ(a) - σ(b)) → log_sigmoid_difference(a, b): finite where both σ round to 1 (a, b > 37)
    or underflow (a, b < -745); NaN where a < b and -inf at a = b, as written."""
    difference = owner(node.inputs[0], Subtract)
    if difference is None:
        return None
    sa, sb = (owner(v, stable.Sigmoid) for v in difference.inputs)
    if sa is None or sb is None:
        return None
    return fits(stable.log_sigmoid_difference(sa.inputs[0], sb.inputs[0]), node)


# -- log cosh -------------------------------------------------------------------------------------------
@rewrite(_S, _REC, Log)
def log_cosh_from_naive(node):
    """log(cosh(x)) → log_cosh(x): written, inf past |x| ≈ 710 and 0 (not x²/2) for |x| < 1e-8."""
    c = owner(node.inputs[0], Cosh)
    return fits(stable.log_cosh(c.inputs[0]), node) if c is not None else None


# -- exp of a log-primitive -------------------------------------------------------------------------------
@rewrite(_S, _REC, Exp)
def complement_from_exp_of_log1mexp(node):
    """exp(log1mexp(z)) → -expm1(z) (so exp(log1p(-exp(z))) and exp(log(1 - exp(z))) too); NaN for
    z > 0 as written.  Written, exp carries log1mexp's rounding |log1mexp(z)| times over (255
    ulps at z = -2.6e-239)."""
    inner = owner(node.inputs[0], stable.Log1mExp)
    if inner is None:
        return None
    z = inner.inputs[0]
    nan, one = (np.asarray(v, z.dtype) for v in (np.nan, 1))  # in z's dtype: a Python NaN would be float64
    undefined = where(greater(z, 0), nan, one)  # NaN where log1mexp is, value and gradient
    return fits((0 - expm1(z)) * undefined, node)  # `0 -`: +0 at z = 0, as exp(-inf)


@rewrite(_S, _REC, Exp)
def primitive_from_exp_of_its_log(node):
    """exp(log_sigmoid(x)) → σ(x); exp(log_erfc(x)) → erfc(x): written, exp carries the log's
    rounding |log| times over (erfc: 490 ulps at x = 24.5; σ: 15 ulps at x = -33.3)."""
    ls = owner(node.inputs[0], stable.LogSigmoid)
    if ls is not None:
        return fits(stable.sigmoid(ls.inputs[0]), node)
    le = owner(node.inputs[0], stable.LogErfc)
    return fits(erfc(le.inputs[0]), node) if le is not None else None


RULES = (
    erfc_from_one_plus_erf,
    erf_from_one_minus_erfc,
    normal_survival_from_one_minus_ndtr,
    erfcx_from_naive,
    log_ndtr_from_log_of_half_erfc,
    log_ndtr_from_log1p_of_half_erfc,
    log_ndtr_from_log_of_ndtr,
    log_ndtr_difference_from_naive,
    sigmoid_from_exp_times_sigmoid,
    log_sigmoid_from_log1p_of_minus_sigmoid,
    sigmoid_complement_from_c_minus_sigmoid,
    logistic_density_from_naive,
    log_sigmoid_difference_from_naive,
    log_cosh_from_naive,
    complement_from_exp_of_log1mexp,
    primitive_from_exp_of_its_log,
)
