"""Products and quotients as one `Monomial`, whose partial products do not take the result out
of the float range where the answer is in it (`ops/monomial.py`): `sin(x/2)²/x²`, `t²/sinh(t)²`, `eps·expm1(u)/
(expm1(a)·expm1(b))` at arguments where each partial product over- or underflows.

The rule runs before differentiating (with the GRADIENT phase's rules, after recognition), so
that the pullback is the Monomial's own — a monomial again, where the product rule's partial
products would pass through `reduce_to` and leave the range — and once more last (RANGE), for
the products the gradient itself is made of; both only with recognition on.  No recognition
rule runs after it to look for a product it has folded.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..graph.basic import Variable
from ..graph.types import is_floating
from ..ops.elementwise import Divide, Multiply, Negative, Reciprocal, Square
from ..ops.math import Sin, Sinh
from ..ops.monomial import Monomial, Tree, monomial, powers
from ..ops.partials import over_argument
from .engine import Kind, Phase, rewrite
from .patterns import constant_value, owner

#: the most nodes one monomial collects: its significands' partial products stay within 2^±MOST
MOST = 32

_NAMES = {Multiply: "multiply", Divide: "divide", Negative: "negative", Square: "square", Reciprocal: "reciprocal"}


def _product(v: Variable, dtype):
    """v's node if it is a product, quotient, square, reciprocal, negation or monomial in `dtype`."""
    node = owner(v, *_NAMES, Monomial)
    if node is not None and node.outputs[0].dtype == dtype and all(u.dtype == dtype for u in node.inputs):
        return node
    return None


def _reached(v: Variable, dtype, counts: Counter, budget: list[int]) -> bool:
    """How often each product node below v is reached from it (a node reached twice stays whole);
    False once the tree would pass MOST nodes (a monomial below counts with its tree's nodes),
    which bounds the walk and the tree, and so keeps a chain of n products linear."""
    counts[v.id] += 1
    node = _product(v, dtype)
    budget[0] -= _nodes(node.op.tree) if node is not None and isinstance(node.op, Monomial) else 1
    if budget[0] < 0:
        return False
    if node is not None and counts[v.id] == 1:
        return all(_reached(u, dtype, counts, budget) for u in node.inputs)
    return True


def _nodes(tree: Tree) -> int:
    return 1 if isinstance(tree, int) else 1 + sum(_nodes(t) for t in tree[1:])


def _tree(v: Variable, dtype, counts: Counter, leaves: dict[int, int], operands: list[Variable]) -> Tree:
    """v's tree of products and quotients (other monomials' trees spliced in), over `operands`; a
    product reached twice (z in `0.5·z·z`) is one leaf: expanded, it would be computed twice."""
    node = _product(v, dtype)
    if node is not None and counts[v.id] == 1:
        parts = [_tree(u, dtype, counts, leaves, operands) for u in node.inputs]
        if isinstance(node.op, Monomial):
            return _spliced(node.op.tree, parts)
        return (_NAMES[type(node.op)], *parts)
    if v.id not in leaves:
        leaves[v.id] = len(operands)
        operands.append(v)
    return leaves[v.id]


def _spliced(tree: Tree, parts: list[Tree]) -> Tree:
    if isinstance(tree, int):
        return parts[tree]
    return (tree[0], *(_spliced(t, parts) for t in tree[1:]))


@rewrite(Phase.GRADIENT, Kind.RECOGNITION, Multiply, Divide, note="product(s) kept in range where their answer is")
def monomial_from_products(node):
    """A tree of products and quotients of three or more factors with a divisor among them, or
    of four or more (`a·b/c`, `t²/sinh(t)²`, `-2n·t³·u`) → one Monomial of the same tree: as
    written where its result is a normal number, with the factors' exponents carried apart where
    it is not (`ops/monomial.py`).

    Written, `(1 - cos x)/(x·x)` at x = 1e-200 is 0/0 (both sides underflow, the answer is 1/2)
    and `y³/x²` at y = 1e-150, x = 1e-200 is 0/0 (the answer is 1e-50); their gradients likewise.
    Products of two or three factors and no divisor (`w·g·p`, the bulk of a model's gradient,
    and each step of a series' Horner scheme, `p·u·u`) stay as written: folding each would cost
    it a comparison per entry and hide it from the backends' fused patterns. A product reached
    twice inside the tree (z in `0.5·z·z`) is one factor, not expanded (it would be computed
    twice). Factors that cancel (`x·y/x`) must not fold: the written NaN at x = 0 or ±inf would
    be lost. Constants are factors that do not count.
    """
    out = node.outputs[0]
    if not is_floating(out.dtype):
        return None
    counts: Counter = Counter()
    if not _reached(out, out.dtype, counts, [MOST]):
        return None
    operands: list[Variable] = []
    tree = _tree(out, out.dtype, counts, {}, operands)
    found, sign = powers(tree, len(operands))
    if any(k == 0 for k in found):
        return None
    counted = [k for v, k in zip(operands, found) if constant_value(v) is None]
    if sum(map(abs, counted)) < 3 or not (min(counted) < 0 or sum(map(abs, counted)) >= 4):
        return None
    regrouped = _over_arguments(operands, found)
    if regrouped is not None:
        factors, exponents, scale = regrouped
        result = monomial(factors, exponents)
        result = result if scale * sign == 1.0 else (scale * sign) * result
    else:
        result = Monomial(tree)(*operands)
    return result if result.type == out.type else None


def _over_arguments(operands: list[Variable], found: list[int]) -> tuple[list, list, float] | None:
    """The factors with each pair f(c·x)^k·x^-k (f = sin, sinh; c a constant, 1 if absent) read as
    c^k·(f(u)/u)^k, u = c·x, f(u)/u an `over_argument` (its derivative by its series near 0), and
    the scale Π c^k apart; None if the monomial has no such pair.

    Written, the pair's partials cancel near 0: ∂/∂t of t²/sinh(t)² is 2t/sinh² - 2t²cosh/sinh³,
    two terms of about 2/t whose difference is about -2t/3 (59 bits lost on average where t is
    drawn as Herbie draws it), and so for `(1 - cos x)/x²` = 2·sin(x/2)²/x². The NaN of the
    written 0/0 at x = 0 is f(u)/u's. (Not u = t·τ, a product of its own: where that under- or
    overflows, f(u)/u is NaN where the written pair was in range.)"""
    factors, exponents, scale, changed = list(operands), list(found), 1.0, False
    for i, v in enumerate(operands):
        call = owner(v, Sin, Sinh)
        if call is None:
            continue
        for j, x in enumerate(operands):
            c = _multiple_of(call.inputs[0], x)
            if c is not None and exponents[j] == -exponents[i]:
                factors[i] = over_argument(call.inputs[0], "sin" if isinstance(call.op, Sin) else "sinh")
                scale *= c ** exponents[i]
                exponents[j], changed = 0, True
                break
    return (factors, exponents, scale) if changed else None


def _multiple_of(u: Variable, x: Variable) -> float | None:
    """c for u = c·x (`x`, `c * x`, `x * c`, `x / c`), c a finite non-zero constant; else None."""
    if u is x:
        return 1.0
    node = owner(u, Multiply, Divide)
    if node is None:
        return None
    a, b = node.inputs
    divided = isinstance(node.op, Divide)
    for operand, c in [(a, b)] if divided else [(a, b), (b, a)]:
        value = constant_value(c) if operand is x else None
        if value is not None and value != 0 and np.isfinite(value):
            return 1.0 / float(value) if divided else float(value)
    return None


RULES = (monomial_from_products,)
