"""Products and quotients whose gradient the product and quotient rules take with a cancellation,
rebuilt as ops that compute exactly as written and differentiate without it (`ops.partials`):

- affine forms in shared terms, `(x - y)/(x + y)`, `x/(1 - x)`, `(1 + w)/(2 + w)`: the quotient
  rule's two parts, summed where they meet at a shared term, cancel; `AffineQuotient`'s
  pullback has the shared term cancelled symbolically;
- products of affine forms in shared terms, `(x + y)(x - y)`: the product rule's two parts
  cancel alike; `AffineProduct` sums them term by term;
- `sin(x)/x` and `sinh(x)/x`, whose derivative cancels near 0: `OverArgument` takes its series.

These rules run in a phase of their own after recognition, only on the graphs `grad`, `jvp` and
composite bodies differentiate (`pipeline.recognise`), never on a value's compile: a
recognition rule that reads a quotient (`log((1 + x)/(1 - x))`) must see the Divide first.
"""

from __future__ import annotations

import math
from fractions import Fraction

from ..graph.basic import Constant, Variable
from ..ops.elementwise import Add, Divide, Multiply, Negative, Subtract
from ..ops.math import Sin, Sinh
from ..ops.partials import affine_product, affine_quotient, over_argument
from .engine import Kind, Phase, rewrite
from .patterns import constant_value

#: the most terms a form may have (the pullback is quadratic in them)
MAX_TERMS = 8
#: the most ops followed into each form
REACH = 24


@rewrite(Phase.GRADIENT, Kind.GUARD, Divide, note="quotient(s): gradient taken with the shared terms cancelled")
def affine_quotient_gradient(node):
    """a / c → affine_quotient(a, c) where a and c are affine forms sharing a term (value unchanged).

    The gradient of (x - y)/(x + y) with respect to x is then 2y·g/(x + y)/(x + y) instead of
    (1 - q)·g/(x + y), which cancels wherever y is small against x (14.9 bits lost on average
    over Herbie's benchmarks of this shape). Fires only on real floating terms; a quotient
    whose forms share no term has no such sum to cancel.
    """
    shared = _shared_forms(node)
    return affine_quotient(*shared) if shared is not None else None


@rewrite(Phase.GRADIENT, Kind.GUARD, Multiply, note="product(s): gradient taken with the shared terms cancelled")
def affine_product_gradient(node):
    """a · c → affine_product(a, c) where a and c are affine forms sharing a term (value unchanged).

    The gradient of (x + y)(x - y) with respect to x is then 2x·g instead of ((x - y) + (x + y))·g,
    which keeps no digit of it once |x| is below |y|·eps. Fires only where some term's two parts
    do cancel (x·(x + 1) and z·z have nothing to cancel: their partials stay the product rule's).
    """
    shared = _shared_forms(node)
    return affine_product(*shared) if shared is not None and _parts_cancel(*shared[3:]) else None


def _parts_cancel(first: list[float], second: list[float]) -> bool:
    """Whether for some term j the product rule's αⱼc + γⱼa holds a term i (or the constant) whose two
    parts αⱼγᵢ and γⱼαᵢ cancel exactly."""
    n = len(first)
    return any(
        first[j] * second[i] + second[j] * first[i] == 0 and (first[j] * second[i] != 0 or second[j] * first[i] != 0)
        for j in range(n - 1)
        for i in range(n)
    )


def _shared_forms(node) -> tuple | None:
    """(a, c, terms, coefficients of a, coefficients of c) for a node a ∘ c of two affine forms that
    share a term, the constants last; None otherwise."""
    a, c = node.inputs
    if not _real_float(node.outputs[0]):
        return None
    top, bottom = affine_form(a), affine_form(c)
    if top is None or bottom is None:
        return None
    (top_terms, top_constant), (bottom_terms, bottom_constant) = top, bottom
    if not top_terms.keys() & bottom_terms.keys():
        return None
    terms: dict[int, Variable] = {}
    for coefficients in (top_terms, bottom_terms):
        terms.update((key, u) for key, (u, _) in coefficients.items())
    if len(terms) > MAX_TERMS:
        return None
    first = [top_terms.get(key, (None, 0.0))[1] for key in terms] + [top_constant]
    second = [bottom_terms.get(key, (None, 0.0))[1] for key in terms] + [bottom_constant]
    return a, c, list(terms.values()), first, second


def _real_float(v: Variable) -> bool:
    return v.type.is_float() and v.dtype.kind == "f"


def affine_form(v: Variable) -> tuple[dict[int, tuple[Variable, float]], float] | None:
    """({term id: (term, coefficient)}, constant) with v = Σ coefficient·term + constant, else None.

    Followed through +, -, negation, and products and quotients by constants; any other
    value is a term (it must be real floating).  None past `REACH` ops or `MAX_TERMS` terms.
    """
    terms: dict[int, tuple[Variable, float]] = {}
    constant = 0.0
    budget = REACH
    stack: list[tuple[Variable, float]] = [(v, 1.0)]
    while stack:
        u, scale = stack.pop()
        value = constant_value(u) if isinstance(u, Constant) else None
        if value is not None:
            if not math.isfinite(value):
                return None
            constant += scale * value
            continue
        node = u.owner
        budget -= 1
        if budget < 0:
            return None
        split = _split(node) if node is not None else None
        if split is not None:
            stack.extend((w, scale * k) for w, k in split)
            continue
        if not _real_float(u):
            return None
        known = terms.get(u.id)
        terms[u.id] = (u, scale + (known[1] if known else 0.0))
        if len(terms) > MAX_TERMS:
            return None
    return {key: entry for key, entry in terms.items() if entry[1] != 0}, constant


#: a sum of products: {sorted term ids: (terms, coefficient)}, the constant under ()
Polynomial = dict[tuple[int, ...], tuple[tuple[Variable, ...], Fraction]]


def polynomial_form(v: Variable, degree: int = 2) -> Polynomial | None:
    """v as Σ coefficient·Π terms of at most `degree` terms each, products of affine forms
    multiplied out (`(1 - e)·x` is x - e·x), coefficients exact; None where v is no such sum
    (within `REACH` ops and `MAX_TERMS` products)."""
    budget = [REACH]

    def form(u: Variable) -> Polynomial | None:
        value = constant_value(u) if isinstance(u, Constant) else None
        if value is not None:
            return {(): ((), Fraction(value))} if math.isfinite(value) else None
        budget[0] -= 1
        node = u.owner
        if budget[0] < 0:
            return None
        split = _split(node) if node is not None else None
        if split is not None:
            total: Polynomial = {}
            for w, k in split:
                part = form(w)
                if part is None:
                    return None
                for key, (terms, c) in part.items():
                    total[key] = (terms, total.get(key, (terms, Fraction(0)))[1] + Fraction(k) * c)
            return total
        if node is not None and isinstance(node.op, Multiply):
            left, right = form(node.inputs[0]), form(node.inputs[1])
            if left is None or right is None or len(left) * len(right) > MAX_TERMS:
                return None
            product: Polynomial = {}
            for (p, (p_terms, p_c)), (q, (q_terms, q_c)) in ((x, y) for x in left.items() for y in right.items()):
                if len(p) + len(q) > degree:
                    return None
                key = tuple(sorted(p + q))
                terms = tuple(sorted(p_terms + q_terms, key=lambda t: t.id))
                product[key] = (terms, product.get(key, (terms, Fraction(0)))[1] + p_c * q_c)
            return product
        return {(u.id,): ((u,), Fraction(1))} if _real_float(u) else None

    found = form(v)
    return None if found is None or len(found) > MAX_TERMS else found


def polynomial_difference(a: Variable, b: Variable) -> Variable | None:
    """a - b summed product by product where a and b share products that cancel in it
    (`(1 + e)·x - (1 - e)·x` is 2·e·x, which written rounds to 0 for e below 1e-16); None where
    none cancels, where all do, or where a coefficient would be rounded."""
    first, second = polynomial_form(a), polynomial_form(b)
    if first is None or second is None:
        return None
    if not any(first[k][1] == second[k][1] for k in first.keys() & second.keys()):
        return None
    total: Variable | None = None
    for key in sorted(first.keys() | second.keys()):
        terms = (first.get(key) or second[key])[0]
        k = first.get(key, (terms, Fraction(0)))[1] - second.get(key, (terms, Fraction(0)))[1]
        if k == 0:
            continue
        if k != Fraction(float(k)):
            return None
        product: Variable | float = float(k) if not terms else terms[0]
        for t in terms[1:]:
            product = product * t
        if terms and k != 1:
            product = -product if k == -1 else float(k) * product
        total = product if total is None else total + product  # type: ignore[assignment]
    return total if isinstance(total, Variable) else None


def _split(node) -> list[tuple[Variable, float]] | None:
    """The node's operands with their signs or constant factors, if it is an affine step."""
    op = node.op
    if isinstance(op, Add):
        return [(node.inputs[0], 1.0), (node.inputs[1], 1.0)]
    if isinstance(op, Subtract):
        return [(node.inputs[0], 1.0), (node.inputs[1], -1.0)]
    if isinstance(op, Negative):
        return [(node.inputs[0], -1.0)]
    if isinstance(op, Multiply):
        for x, k in (node.inputs, node.inputs[::-1]):
            factor = _factor(constant_value(k))
            if factor is not None:
                return [(x, factor)]
    if isinstance(op, Divide):
        divisor = _factor(constant_value(node.inputs[1]))
        factor = _factor(1.0 / divisor) if divisor is not None else None
        if factor is not None:
            return [(node.inputs[0], factor)]
    return None


def _factor(k: float | None) -> float | None:
    """k if it may scale a term: finite and not 0 (0 would drop a term that may be inf or NaN as written)."""
    return k if k is not None and k != 0 and math.isfinite(k) else None


@rewrite(Phase.GRADIENT, Kind.GUARD, Divide, note="quotient(s): derivative taken by its series near 0")
def series_quotient_gradient(node):
    """sin(x)/x, sinh(x)/x → over_argument(x) (value unchanged): the derivative by its Taylor
    series for |x| < 2, where the quotient rule's two terms of about 1/x cancel to x/3 (at
    x = 1e-8 no digit is left).  Another numerator's argument than the divisor must not fire.
    """
    a, x = node.inputs
    for op_class, name in ((Sin, "sin"), (Sinh, "sinh")):
        f = a.owner if a.owner is not None and isinstance(a.owner.op, op_class) else None
        if f is not None and f.inputs[0] is x and _real_float(x) and x.dtype == node.outputs[0].dtype:
            return over_argument(x, name)
    return None


RULES = (series_quotient_gradient, affine_quotient_gradient, affine_product_gradient)
