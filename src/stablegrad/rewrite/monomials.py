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

import functools
from collections import Counter
from dataclasses import dataclass

import numpy as np

from ..graph.basic import Variable
from ..graph.types import is_floating
from ..ops.elementwise import (
    Divide,
    Multiply,
    Negative,
    Reciprocal,
    Square,
    absolute,
    equal,
    less,
    logical_and,
    logical_or,
    where,
)
from ..ops.math import Expm1, Log1p, Sin, Sinh, Tanh
from ..ops.monomial import Monomial, Tree, monomial, powers
from ..ops.partials import over_argument
from .branches import masked_where
from .engine import Kind, Phase, rewrite
from .patterns import constant_value, owner, scaled

#: the most nodes one monomial collects: its significands' partial products stay within 2^±MOST
MOST = 32
#: |u| below which f(u) is read as u·(f(u)/u) (`_through_arguments`)
NEAR = 2.0

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

    A product of any size whose sin, sinh, tanh, expm1 or log1p factors share a base with another factor
    at a power of the other sign (`log1p(-x)/log1p(x)`, `t²/sinh(t·τ)²`) is read through f(u)/u,
    so that the bases cancel (`_through_arguments`).
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
    result = _through_arguments(tree, operands, found, sign)
    counted = [k for v, k in zip(operands, found) if constant_value(v) is None]
    if result is None and sum(map(abs, counted)) >= 3 and (min(counted) < 0 or sum(map(abs, counted)) >= 4):
        result = Monomial(tree)(*operands)  # (a smaller product folds only for what cancels through arguments)
    return result if result is not None and result.type == out.type else None


#: the functions f with f(0) = 0 and f'(0) = 1 read as f(u) = u·(f(u)/u), f(u)/u an `over_argument`
_VANISHING: dict[type, str] = {Sin: "sin", Sinh: "sinh", Tanh: "tanh", Expm1: "expm1", Log1p: "log1p"}


def _through_arguments(tree: Tree, operands: list[Variable], found: list[int], sign: int) -> Variable | None:
    """The monomial `tree` with each factor f(u)^k (f in _VANISHING) whose argument u = c·Π bᵐ shares a
    base b with another factor at a power of the other sign read as c^k·Πb^(k·m)·(f(u)/u)^k (f(u)/u
    an `over_argument`), the powers of each base summed, so that they cancel; None if no factor is
    such.

    Written, `(1 - cos x)/x²` = 2·sin(x/2)²/x² is 0/0 at x = 1e-200 and `eps·expm1((a + b)·eps)/
    (expm1(a·eps)·expm1(b·eps))` where each argument underflows (a, b, eps ≈ 1e-200; the answer is
    about (a + b)/(a·b)). Their derivatives by the product and quotient rules cancel besides: the
    partial of `log(1 - x)/log(1 + x)` is two terms of about 1 whose difference is about x, and
    that of `t²/sinh(t)²` two of about 2/t. Read through f(u)/u, the bases cancel exactly, what is
    left is in range, and f(u)/u's derivative is its series near 0.

    Where every such |u| < NEAR; as written elsewhere. There the written terms lose at most 2 bits,
    while f(u)/u of a large u leaves the range sooner than f(u) (sin(u)/u at u = 1e160, squared,
    is subnormal) and an overflowed u is not its bases' product (expm1(-inf) is -1, not -inf·0).
    An argument that underflowed to 0 has f(u)/u = 1. Where a base whose powers cancelled is 0 (a
    factor of it is), the written 0/0 stays NaN, value and gradient.
    """
    index = {v.id: i for i, v in enumerate(operands)}
    bases: dict[int, Variable] = {}
    calls = [c for i, v in enumerate(operands) if (c := _call(i, v, bases, index)) is not None]

    def contributions(b: int, without: int | None = None) -> list[int]:
        """Base b's signed contributions to its power: its own, and each call's k·m."""
        own = found[index[b]] if b in index else 0
        return [own] + [found[c.operand] * c.powers[b] for c in calls if b in c.powers and c.operand != without]

    chosen = [
        c
        for c in calls
        if any(any(k * found[c.operand] * m < 0 for k in contributions(b, c.operand)) for b, m in c.powers.items())
    ]
    if not chosen:
        return None
    written = Monomial(tree)(*operands)
    dtype = written.dtype
    with np.errstate(all="ignore"):
        scale = np.prod([np.float64(c.scale) ** found[c.operand] for c in chosen]) * sign
    if not np.finfo(dtype).tiny <= abs(scale) <= np.finfo(dtype).max:
        return None  # (a constant factor out of range: sin(1e200·x)/x² over 1e400)
    factors, exponents, position = list(operands), list(found), dict(index)
    near_0 = functools.reduce(logical_and, (less(absolute(c.u), NEAR) for c in chosen))
    one = np.ones((), dtype)
    for c in chosen:
        zero = equal(c.u, 0)  # (f(u)/u there is 1; 0/0 is kept out of the branch not taken)
        factors[c.operand] = where(zero, one, over_argument(where(zero, one, c.u), c.function))
        for b, m in c.powers.items():
            if b not in position:
                position[b] = len(factors)
                factors.append(bases[b])
                exponents.append(0)
            exponents[position[b]] += found[c.operand] * m
    regrouped = scaled(float(scale), monomial(factors, exponents))
    for b in {b for c in chosen for b in c.powers}:
        parts = contributions(b)
        if min(parts) < 0 < max(parts):  # 0 to a positive and a negative power: 0/0 as written
            regrouped = regrouped + _nan_where_zero(bases[b])
    return masked_where(near_0, regrouped, written)


@dataclass(frozen=True)
class _Call:
    """A factor f(u) of a monomial, f in _VANISHING, u = scale·Π bᵐ (`powers`: base id → m)."""

    operand: int
    function: str
    u: Variable
    scale: float
    powers: dict[int, int]


def _call(i: int, v: Variable, bases: dict[int, Variable], operands: dict[int, int]) -> _Call | None:
    """Operand i, v, as a `_Call` (its bases recorded in `bases`), if it is one."""
    node = owner(v, *_VANISHING)
    if node is None or node.inputs[0].dtype != v.dtype:
        return None
    u = node.inputs[0]
    split = _product_of(u, bases, operands)
    if split is None or not split[1]:
        return None
    return _Call(i, _VANISHING[type(node.op)], u, *split)


def _nan_where_zero(b: Variable) -> Variable:
    """NaN where b is 0 because a factor of it is (not where a product underflowed to 0), 0 elsewhere;
    times b, which is finite where it is selected, so that the gradient is NaN there too."""
    factors: dict[int, Variable] = {}
    leaves = factors.values() if _product_of(b, factors, {}) is not None else [b]
    zero = functools.reduce(logical_or, (equal(f, 0) for f in leaves))
    return where(zero, np.full((), np.nan, b.dtype), np.zeros((), b.dtype)) * b


def _product_of(
    u: Variable, bases: dict[int, Variable], operands: dict[int, int], depth: int = 3
) -> tuple[float, dict[int, int]] | None:
    """(c, {base id: m}) for u = c·Π bᵐ through products, quotients and negations (bases recorded in
    `bases`; the monomial's own operands are bases, not looked into); None where u is 0, inf or NaN
    times that."""
    value = constant_value(u)
    if value is not None:
        return (float(value), {}) if np.isfinite(value) and value != 0 else None
    node = owner(u, Multiply, Divide, Negative) if depth > 0 and u.id not in operands else None
    if node is None:
        bases[u.id] = u
        return 1.0, {u.id: 1}
    parts = [_product_of(v, bases, operands, depth - 1) for v in node.inputs]
    if parts[0] is None or (len(parts) == 2 and parts[1] is None):
        return None
    if isinstance(node.op, Negative):
        return -parts[0][0], parts[0][1]
    (c, first), (d, second) = parts  # type: ignore[misc]
    divided = isinstance(node.op, Divide)
    merged = Counter(first)
    merged.update({b: -m if divided else m for b, m in second.items()})
    return (c / d if divided else c * d), {b: m for b, m in merged.items() if m != 0}


RULES = (monomial_from_products,)
