"""Functions that under- or overflow long before the formula around them does, through scaled forms.

- Logs of Bessel functions: K_v(x) underflows to 0 past x ≈ 700 and I_v(x) overflows past
  x ≈ 713, while their logs (about -x and +x) are ordinary numbers; the exponentially scaled
  functions kve = kv·eˣ and ive = iv·e⁻|ˣ| stay finite there, so the log is taken of those and
  the exponent added back exactly.
- Quotients of sums with sinh(x) or cosh(x) terms above and below (Kepler's hyperbolic Newton
  step `(e·sinh(N) - N - M)/(e·cosh(N) - 1)`): inf/inf past |x| ≈ 710, while the quotient is
  about e·tanh(N)/e; both sums are divided by cosh(x), which turns sinh into tanh and cosh into 1
  (and keeps the quotient rule's terms of the quotient's size). Likewise exp(x) terms (Lambert
  W's Newton step), by exp(max(x, 0)).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..graph.basic import Apply, Variable
from ..graph.types import is_floating
from ..ops.elementwise import (
    Divide,
    Multiply,
    Negative,
    abs,
    isinf,
    maximum,
    minimum,
    negative,
    where,
)
from ..ops.math import Cosh, Exp, Iv, Kv, Log, Sinh, exp, ive, kve, log, tanh
from ..ops.stable import sech
from ..ops.stable.xlogy import XExpX
from .engine import Kind, Phase, rewrite
from .patterns import fits, negate, owner, terms_with_signs

#: a Bessel function's class → its scaled form, and the exponent that the log of the scaled form lacks
_SCALED = {Kv: (kve, negative), Iv: (ive, abs)}


@rewrite(Phase.STABILIZE, Kind.RECOGNITION, Log)
def log_bessel_from_scaled(node):
    """log(kv(v, x)) → log(kve(v, x)) - x, log(iv(v, x)) → log(ive(v, x)) + |x|: finite where kv
    underflows (x > 700 in float64) and iv overflows (|x| > 713)."""
    f = owner(node.inputs[0], Kv, Iv)
    if f is None:
        return None
    scaled, exponent = _SCALED[type(f.op)]
    v, x = f.inputs
    return fits(_finite_x_only(x, f.outputs[0], log(scaled(v, x)) + exponent(x)), node)


def _finite_x_only(x, written, scaled):
    """`scaled` where x is finite; at x = ±inf (the scaled function of SciPy is NaN there, and the
    sum would be inf - inf) the log of the function as written, read through a `where` so that
    the rule does not match it again."""
    infinite = isinf(x)
    return where(infinite, log(where(infinite, written, 1.0)), scaled)


#: how a term is rebuilt with its sinh, cosh or exp factor replaced (None: the factor dropped)
Rebuild = Callable[[Variable | None], Variable | None]


#: how deep in a term's products, quotients and negations such a factor is looked for
_DEPTH = 4


def _factor(t: Variable, classes: tuple[type, ...], depth: int = _DEPTH) -> tuple[Apply, Rebuild] | None:
    """(the node of one of `classes` among t's factors, t rebuilt with something else in its place)
    for t = a·f(x)·b, f(x)/c or -f(x), f at most `depth` operations down; else None."""
    f = owner(t, *classes)
    if f is not None:
        return f, lambda v: v
    if depth == 0:
        return None
    product, quotient, negation = owner(t, Multiply), owner(t, Divide), owner(t, Negative)
    if product is not None:
        a, b = product.inputs
        found = _factor(a, classes, depth - 1)
        if found is not None:
            return found[0], lambda v, r=found[1]: _times(r(v), b)
        found = _factor(b, classes, depth - 1)
        if found is not None:
            return found[0], lambda v, r=found[1]: _times(r(v), a)
    elif quotient is not None:
        found = _factor(quotient.inputs[0], classes, depth - 1)
        c = quotient.inputs[1]
        if found is not None:
            return found[0], lambda v, r=found[1]: _or_one(r(v), c) / c
    elif negation is not None:
        found = _factor(negation.inputs[0], classes, depth - 1)
        if found is not None:
            return found[0], lambda v, r=found[1]: _negated(r(v), t)
    return None


def _times(v: Variable | None, w: Variable) -> Variable:
    """v·w, or w alone where v is a dropped factor."""
    return w if v is None else v * w


def _or_one(v: Variable | None, like: Variable) -> Variable:
    """v, or 1 (in like's dtype) where v is a dropped factor."""
    return np.ones((), like.dtype) if v is None else v  # type: ignore[return-value]


def _negated(v: Variable | None, like: Variable) -> Variable:
    """-v, or -1 (in like's dtype) where v is a dropped factor (-exp(x) divided by exp(x))."""
    return np.full((), -1.0, like.dtype) if v is None else negate(v)  # type: ignore[return-value]


@dataclass(frozen=True)
class _Scale:
    """A positive s(x) that a quotient's two sums are divided by: for each class of their terms'
    factors f(x), what f(x)/s(x) is (None: 1), and 1/s(x) for the other terms."""

    over: dict[type, Callable[[Variable], Variable | None]]
    reciprocal: Callable[[Variable], Variable]

    @property
    def classes(self) -> tuple[type, ...]:
        return tuple(self.over)


#: s = cosh(x): sinh → tanh, cosh → 1, others by sech
_COSH = _Scale({Sinh: tanh, Cosh: lambda x: None}, sech)
#: s = exp(max(x, 0)): exp → exp(min(x, 0)), x·exp(x) likewise, others by exp(-max(x, 0)) (1 where
#: x ≤ 0: there the exponentials are the small terms)
_EXP = _Scale(
    {Exp: lambda x: exp(minimum(x, 0.0)), XExpX: lambda x: x * exp(minimum(x, 0.0))},
    lambda x: exp(negate(maximum(x, 0.0))),
)


def _scaled_sum(v: Variable, x: Variable, scale: _Scale) -> Variable | None:
    """v/s(x) for a sum v of terms, None unless some term has a factor f(x) of scale's classes and
    none has one of another argument."""
    terms = terms_with_signs(v, limit=6)
    if terms is None:
        return None
    scaled, found_any = [], False
    for sign, t in terms:
        found = _factor(t, scale.classes)
        if found is not None and found[0].inputs[0] is not x:
            return None
        if found is None:
            s = t * scale.reciprocal(x)
        else:
            f, rebuild = found
            s = _or_one(rebuild(scale.over[type(f.op)](x)), x)
            found_any = True
        # (a term that was the scale itself is the number 1 now: -cosh(x)/cosh(x) is -1)
        scaled.append(s if sign > 0 else _negated(None, x) if isinstance(s, np.ndarray) else negate(s))
    if not found_any:
        return None
    total = scaled[0]
    for s in scaled[1:]:
        total = total + s
    return total


def _scaled_quotient(node: Apply, scale: _Scale) -> tuple[Variable, Variable, Variable] | None:
    """(x, numerator/s(x), denominator/s(x)) for a quotient of sums with factors f(x) of scale's
    classes, one x, above and below, three terms or more in all; else None."""
    num, den = node.inputs
    x = _first_argument(num, scale.classes)
    if x is None or not is_floating(node.outputs[0].dtype):
        return None
    top, bottom = _scaled_sum(num, x, scale), _scaled_sum(den, x, scale)
    if top is None or bottom is None or len(terms_with_signs(num, 6) or ()) + len(terms_with_signs(den, 6) or ()) < 3:
        return None
    return x, top, bottom


def _first_argument(v: Variable, classes: tuple[type, ...]) -> Variable | None:
    """x of the first factor f(x) of `classes` among the terms of the sum v, else None."""
    for _, t in terms_with_signs(v, limit=6) or []:
        found = _factor(t, classes)
        if found is not None:
            return found[0].inputs[0]
    return None


@rewrite(Phase.STABILIZE, Kind.RECOGNITION, Divide)
def quotient_scaled_by_cosh(node):
    """(Σ aᵢ·hᵢ(x) + Σ rⱼ)/(Σ bᵢ·hᵢ(x) + Σ sⱼ), hᵢ = sinh or cosh of one x above and below → the
    same with both sums divided by cosh(x): sinh → tanh, cosh → 1, rⱼ → rⱼ·sech(x).

    Written, the quotient is inf/inf = NaN past |x| ≈ 710 (sooner where a coefficient is large:
    `e·sinh(N)` at e = 1e150 overflows past N ≈ 365), while each sum over cosh(x) is a number:
    Kepler's hyperbolic Newton step `N - (e·sinh(N) - N - M)/(e·cosh(N) - 1)` is about N - 1
    there. Its derivative by the quotient rule cancels terms of about (e·cosh(x))² long before
    (at N = 30, e = 2, 4e-5 of it is lost); the scaled sums' terms are of the size of the
    quotient. cosh is positive, so the quotient is unchanged; at x = ±inf it stays NaN, as written
    (an inf that an earlier op made is no limit to take). `sinh(x)/cosh(x)` and `a/cosh(x)` are
    tanh_from_quotient's and sech_from_quotient_by_cosh's, and a quotient of two single terms
    (`cosh(x)/sinh(x)`, whose log is log_tanh's) stays; a sinh or cosh of another argument must
    not fire.
    """
    found = _scaled_quotient(node, _COSH)
    if found is None:
        return None
    x, top, bottom = found
    return fits(where(isinf(x), np.full((), np.nan, x.dtype), top / bottom), node)


@rewrite(Phase.STABILIZE, Kind.RECOGNITION, Divide)
def quotient_scaled_by_exp(node):
    """(Σ aᵢ·exp(x) + Σ rⱼ)/(Σ bᵢ·exp(x) + Σ sⱼ), one x above and below → the same with both sums
    divided by exp(max(x, 0)): exp(x) → exp(min(x, 0)), rⱼ → rⱼ·exp(-max(x, 0)).

    Written, the quotient is inf/inf = NaN past x ≈ 710 (sooner where a coefficient is large):
    the Newton step for Lambert's W, `w - (w·exp(w) - x)/(exp(w) + w·exp(w))`, is about w - 1
    there; over exp(w) its sums are w - x·exp(-w) and 1 + w (w·exp(w) is read as such once
    recognised as xexpx). Where x ≤ 0 nothing is divided (the exponentials are the small terms,
    and the terms keep their written values); at x = +inf the quotient stays NaN, as written.
    Quotients with two terms in all (`exp(x)/(1 + exp(x))`, a sigmoid) are other rules'; an exp
    of another argument (`exp(-x)`, softmax's `exp(a)/(exp(a) + exp(b))`) must not fire.
    """
    found = _scaled_quotient(node, _EXP)
    if found is None:
        return None
    _, top, bottom = found
    return fits(top / bottom, node)


RULES = (log_bessel_from_scaled, quotient_scaled_by_cosh, quotient_scaled_by_exp)
