"""Functions that under- or overflow long before the formula around them does, through scaled forms.

- Logs of Bessel functions: K_v(x) underflows to 0 past x ≈ 700 and I_v(x) overflows past
  x ≈ 713, while their logs (about -x and +x) are ordinary numbers; the exponentially scaled
  functions kve = kv·eˣ and ive = iv·e⁻|ˣ| stay finite there, so the log is taken of those and
  the exponent added back exactly.
- Quotients of sums with sinh(x) or cosh(x) terms above and below (Kepler's hyperbolic Newton
  step `(e·sinh(N) - N - M)/(e·cosh(N) - 1)`): inf/inf past |x| ≈ 710, while the quotient is
  about e·tanh(N)/e; both sums are divided by cosh(x), which turns sinh into tanh and cosh into 1
  (and keeps the quotient rule's terms of the quotient's size).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..graph.basic import Apply, Variable
from ..graph.types import is_floating
from ..ops.elementwise import (
    Divide,
    Multiply,
    Negative,
    abs,
    isinf,
    negative,
    where,
)
from ..ops.math import Cosh, Iv, Kv, Log, Sinh, ive, kve, log, tanh
from ..ops.stable import sech
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


#: how a term is rebuilt with its sinh or cosh factor replaced (None: the factor dropped)
Rebuild = Callable[[Variable | None], Variable | None]


#: how deep in a term's products, quotients and negations a sinh or cosh factor is looked for
_DEPTH = 4


def _hyperbolic_factor(t: Variable, depth: int = _DEPTH) -> tuple[Apply, Rebuild] | None:
    """(the sinh(x) or cosh(x) node among t's factors, t rebuilt with something else in its place)
    for t = a·f(x)·b, f(x)/c or -f(x), f at most `depth` operations down; else None."""
    f = owner(t, Sinh, Cosh)
    if f is not None:
        return f, lambda v: v
    if depth == 0:
        return None
    product, quotient, negation = owner(t, Multiply), owner(t, Divide), owner(t, Negative)
    if product is not None:
        a, b = product.inputs
        found = _hyperbolic_factor(a, depth - 1)
        if found is not None:
            return found[0], lambda v, r=found[1]: _times(r(v), b)
        found = _hyperbolic_factor(b, depth - 1)
        if found is not None:
            return found[0], lambda v, r=found[1]: _times(r(v), a)
    elif quotient is not None:
        found = _hyperbolic_factor(quotient.inputs[0], depth - 1)
        c = quotient.inputs[1]
        if found is not None:
            return found[0], lambda v, r=found[1]: _or_one(r(v), c) / c
    elif negation is not None:
        found = _hyperbolic_factor(negation.inputs[0], depth - 1)
        if found is not None:
            return found[0], lambda v, r=found[1]: negate(_or_one(r(v), t))
    return None


def _times(v: Variable | None, w: Variable) -> Variable:
    """v·w, or w alone where v is a dropped factor."""
    return w if v is None else v * w


def _or_one(v: Variable | None, like: Variable) -> Variable:
    """v, or 1 (in like's dtype) where v is a dropped factor."""
    return np.ones((), like.dtype) if v is None else v  # type: ignore[return-value]


def _over_cosh(v: Variable, x: Variable) -> Variable | None:
    """v/cosh(x) for a sum v of terms (a·sinh(x) → a·tanh(x), a·cosh(x) → a, others t → t·sech(x)),
    None unless some term has a sinh(x) or cosh(x) factor and none has one of another argument."""
    terms = terms_with_signs(v, limit=6)
    if terms is None:
        return None
    scaled, hyperbolic = [], False
    for sign, t in terms:
        found = _hyperbolic_factor(t)
        if found is not None and found[0].inputs[0] is not x:
            return None
        if found is None:
            s = t * sech(x)
        else:
            f, rebuild = found
            s = _or_one(rebuild(tanh(x) if isinstance(f.op, Sinh) else None), x)
            hyperbolic = True
        scaled.append(s if sign > 0 else negate(s))
    if not hyperbolic:
        return None
    total = scaled[0]
    for s in scaled[1:]:
        total = total + s
    return total


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
    num, den = node.inputs
    x = _first_hyperbolic_argument(num)
    if x is None or not is_floating(node.outputs[0].dtype):
        return None
    top, bottom = _over_cosh(num, x), _over_cosh(den, x)
    if top is None or bottom is None or len(terms_with_signs(num, 6) or ()) + len(terms_with_signs(den, 6) or ()) < 3:
        return None
    return fits(where(isinf(x), np.full((), np.nan, x.dtype), top / bottom), node)


def _first_hyperbolic_argument(v: Variable) -> Variable | None:
    """x of the first sinh(x) or cosh(x) factor among the terms of the sum v, else None."""
    for _, t in terms_with_signs(v, limit=6) or []:
        found = _hyperbolic_factor(t)
        if found is not None:
            return found[0].inputs[0]
    return None


RULES = (log_bessel_from_scaled, quotient_scaled_by_cosh)
