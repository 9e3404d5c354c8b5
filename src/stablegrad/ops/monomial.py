"""Products and quotients whose partial results may leave the float range where the answer does not.

`(1 - cos x)/(x·x)` at x = 1e-200 is 0/0 as written: 2·sin²(x/2) and x·x both underflow, while
the answer is 1/2.  A `Monomial` holds such a tree of products, quotients, squares, reciprocals
and negations over its operands and computes it as written (the same operations in the same
order, so the same bits) — and, where the result is not a normal number (a partial product
overflowed or underflowed, or met 0·inf or inf/inf) and the factors do not explain it (0 with a
factor 0, say), once more with each operand's binary exponent carried apart from its
significand (`frexp`): the
tree over the significands stays within [2^-K, 2^K] for K operands, the exponents add exactly,
and they are applied once at the end (`ldexp`), so nothing leaves the range that the answer
does not.  The derivative in xᵢ is kᵢ·g·Π x^k / xᵢ (kᵢ the power of xᵢ in the tree): a monomial
again, with the cotangent as one more factor, so gradients and their gradients keep the range too.

>>> import numpy as np, stablegrad as sg
>>> x = sg.vector("x")
>>> f = sg.function([x], (1 - sg.cos(x)) / (x * x))
>>> f(np.array([1e-200, 1.0]))
array([0.5       , 0.45969769])
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, final

import numpy as np

from ..graph.basic import Variable
from .base import Elementwise

#: a tree: an operand's index, or (name, subtree, ...) with name one of `ARITHMETIC`'s keys
Tree = int | tuple

#: how each node of a tree combines its values, as written
ARITHMETIC: dict[str, Callable] = {
    "multiply": operator.mul,
    "divide": operator.truediv,
    "negative": operator.neg,
    "square": lambda a: a * a,
    "reciprocal": lambda a: 1 / a,
}

#: the same on (significand, exponent) pairs: significands combine as written, exponents exactly
SCALED: dict[str, Callable] = {
    "multiply": lambda a, b: (a[0] * b[0], a[1] + b[1]),
    "divide": lambda a, b: (a[0] / b[0], a[1] - b[1]),
    "negative": lambda a: (-a[0], a[1]),
    "square": lambda a: (a[0] * a[0], 2 * a[1]),
    "reciprocal": lambda a: (1 / a[0], -a[1]),
}


def evaluate(tree: Tree, leaves: Sequence, arithmetic: dict[str, Callable]) -> Any:
    """The tree's value, leaf i being leaves[i] (arrays, pairs, or source text)."""
    if isinstance(tree, int):
        return leaves[tree]
    name, *parts = tree
    return arithmetic[name](*(evaluate(p, leaves, arithmetic) for p in parts))


def out_of_range(written, xp) -> Any:
    """Where the written result is not a normal number: a partial product overflowed to ±inf
    (which the result keeps, or turns into NaN or 0 by a division), or underflowed to 0 (so
    with the result). (A partial product that underflowed only to a subnormal number, keeping
    fewer digits, and a normal result after it, is not seen: a check on every partial result
    cost a NumPy call of `x·y/z` 3.6× its time.)"""
    info = np.finfo(written.dtype)
    magnitude = xp.abs(written)
    return ~((magnitude >= info.tiny) & (magnitude <= info.max))


def powers(tree: Tree, n: int) -> tuple[list[int], int]:
    """(the power of each of the n operands in the tree, the sign (+1 or -1) of its negations)."""
    found, sign = [0] * n, 1

    def walk(t: Tree, k: int) -> None:
        nonlocal sign
        if isinstance(t, int):
            found[t] += k
            return
        name, *parts = t
        if name == "negative":
            sign = -sign if k % 2 else sign
        walk(parts[0], {"square": 2 * k, "reciprocal": -k}.get(name, k))
        if name in ("multiply", "divide"):
            walk(parts[1], -k if name == "divide" else k)

    walk(tree, 1)
    return found, sign


@final
@dataclass(frozen=True)
class Monomial(Elementwise):
    """The product-and-quotient `tree` over the operands, in range where its answer is (module doc)."""

    tree: Tree = 0

    def perform(self, *xs):
        written = np.asarray(evaluate(self.tree, xs, ARITHMETIC))
        magnitude = np.abs(written)
        info = np.finfo(written.dtype)
        # (two reductions cost less than a mask: a NaN makes both comparisons false)
        if written.size == 0 or (magnitude.min() >= info.tiny and magnitude.max() <= info.max):
            return written[()]
        off = out_of_range(written, np)
        out = np.array(written, copy=True)
        factors = [np.broadcast_to(x, out.shape)[off] for x in xs]
        out[off] = np.where(explained(out[off], factors, np), out[off], rescued(self.tree, factors))
        return out[()]

    def pullback(self, inputs, outputs, grads):
        (g,) = grads
        found, sign = powers(self.tree, len(inputs))
        result = []
        for i, k in enumerate(found):
            lowered = [1] + [p - 1 if j == i else p for j, p in enumerate(found)]
            term = monomial([g, *inputs], lowered)
            result.append(term if sign * k == 1 else (sign * k) * term)
        return result


def explained(written, factors, xp):
    """Where a written result that is not a normal number is what its factors make it, as the
    rescue would give it too: 0 with a factor 0, ±inf with an infinite factor, NaN with a NaN one.
    (Elsewhere it is a partial product's overflow or underflow: 0 · (x·y = inf) is NaN as written,
    0 when the exponents are carried.)"""
    explains = (
        (written == 0, lambda f: f == 0),
        (xp.isinf(written), xp.isinf),
        (xp.isnan(written), xp.isnan),
    )
    found = xp.zeros(xp.shape(written), dtype=bool)
    for kind, of_factor in explains:
        any_factor = functools.reduce(xp.logical_or, (of_factor(f) for f in factors))
        found = found | (kind & any_factor)
    return found


def rescued(tree: Tree, xs: Sequence[np.ndarray]) -> np.ndarray:
    """The tree over xs with exponents carried apart from significands (NumPy arrays)."""
    pairs = [np.frexp(x) for x in xs]
    significand, exponent = evaluate(tree, [(m, e.astype(np.int64)) for m, e in pairs], SCALED)
    # (ldexp takes a C int: an exponent past ±2³⁰ is as far out of range as ±2³⁰)
    return np.ldexp(significand, np.clip(exponent, -(2**30), 2**30).astype(np.int32))


def monomial(factors: Sequence[Variable], exponents: Sequence[int]) -> Variable:
    """Π factors[i]**exponents[i] as a Monomial (zero exponents dropped; a lone factor as itself):
    the factors with positive exponents multiplied in order, divided by those with negative ones."""
    kept = [(f, k) for f, k in zip(factors, exponents) if k != 0]
    if len(kept) == 1 and kept[0][1] == 1:
        return kept[0][0]

    def chain(indices: list[int]) -> Tree | None:
        tree: Tree | None = None
        for i in indices:
            tree = i if tree is None else ("multiply", tree, i)
        return tree

    top = chain([i for i, (_, k) in enumerate(kept) for _ in range(max(k, 0))])
    bottom = chain([i for i, (_, k) in enumerate(kept) for _ in range(max(-k, 0))])
    if bottom is None:
        assert top is not None, "monomial() of no factors"
        return Monomial(top)(*(f for f, _ in kept))
    tree = ("reciprocal", bottom) if top is None else ("divide", top, bottom)
    return Monomial(tree)(*(f for f, _ in kept))
