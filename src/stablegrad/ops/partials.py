"""Ops whose value is the formula as written and whose partials are not the product or quotient rule's.

`AffineQuotient`: `a / c` for two affine forms in shared terms.  The quotient rule takes ∂(a/c)/∂u as a'/c - (a/c)·c'/c.  Where a and c share a term u,
both parts reach u and are summed there, and the sum cancels wherever a/c nears a'/c':
the gradient of (x - y)/(x + y) with respect to x is (1 - q)/(x + y), which keeps no digit
of -2y/(x + y)² once y is below x·eps.  Written as affine forms a = Σ αᵢuᵢ + α₀ and
c = Σ γᵢuᵢ + γ₀, the numerator of the exact partial, αⱼc - γⱼa, is

    Σ_{i≠j} (αⱼγᵢ - γⱼαᵢ)·uᵢ + (αⱼγ₀ - γⱼα₀)

in which uⱼ itself has cancelled symbolically: for (x - y)/(x + y) it is 2y, not
(x + y) - (x - y).  `AffineQuotient` is the written a/c (its value is that division, bit
for bit) whose pullback sends each term uⱼ that cotangent, g/c · N_j/c (never c², which
would overflow first), and nothing through a and c themselves.

`AffineProduct`: `a · c` for two affine forms in shared terms.  The product rule's parts
αⱼc + γⱼa, summed at a shared term, cancel the same way: ∂/∂x of (x + y)(x - y) is
(x - y) + (x + y), which keeps no digit of 2x once |x| is below |y|·eps; summed term by term,
Σᵢ (αⱼγᵢ + γⱼαᵢ)·uᵢ + αⱼγ₀ + γⱼα₀, the y has cancelled symbolically.

`OverArgument`: sin(x)/x and sinh(x)/x.  The quotient rule's derivative, f'(x)/x - q/x, is
two terms of about 1/x that cancel to about x/3: every digit is gone below |x| ≈ 1e-8.
Its pullback takes the derivative's Taylor series there instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, final

import numpy as np

from ..graph.basic import READS_INPUTS, Variable
from .base import zero_grad
from .composite import SymbolicOp
from .elementwise import abs, equal, isfinite, less, logical_and, where
from .math import cos, cosh, sin, sinh


@final
@dataclass(frozen=True)
class AffineQuotient(SymbolicOp):
    """a / c, where a = Σ αᵢuᵢ + α₀ and c = Σ γᵢuᵢ + γ₀ over the terms u (inputs: a, c, u...).

    `numerator` is (α₁, ..., αₙ, α₀), `denominator` (γ₁, ..., γₙ, γ₀).  The inputs a and c
    must be those forms of the u: the pullback gives the u the whole gradient and a and c none.
    Where c is ±inf (an overflowed sum, or an infinite term) the partials are the quotient
    rule's, as written: there the cancelled numerator can overflow as well, and inf/inf is NaN.
    """

    numerator: tuple[float, ...]
    denominator: tuple[float, ...]

    public_name: ClassVar[str] = "affine_quotient"

    def build(self, a, c, *terms):
        return a / c

    def pullback(self, inputs, outputs, grads):
        a, c, *terms = inputs
        scaled = grads[0] / c
        written = (scaled, -scaled * a / c)  # Divide's pullback: the cotangents of a and c
        finite = isfinite(c)
        partials = [
            # (a term of only one form has a single part, nothing to cancel: its written partial)
            where(finite, self._partial(j, terms, c, scaled), self._chained(j, written))
            if self.numerator[j] != 0 and self.denominator[j] != 0
            else self._chained(j, written)
            for j in range(len(terms))
        ]
        return [zero_grad(a), zero_grad(c), *partials]

    def _partial(self, j: int, terms: list[Variable], c: Variable, scaled: Variable):
        """g/c · (αⱼc - γⱼa)/c, the numerator summed without the uⱼ that cancels from it."""
        return scaled * (_cross_sum(j, terms, self.numerator, self.denominator, -1.0) / c)

    def _chained(self, j: int, written: tuple[Variable, Variable]):
        """αⱼ·ḡa + γⱼ·ḡc: the written quotient rule's partial for term j."""
        return _weighted((self.numerator[j], written[0]), (self.denominator[j], written[1]))


def affine_quotient(a, c, terms, numerator, denominator) -> Variable:
    """a / c with the pullback of `AffineQuotient` (a and c affine in `terms`, coefficients given)."""
    return AffineQuotient(tuple(map(float, numerator)), tuple(map(float, denominator)))(a, c, *terms)


@final
@dataclass(frozen=True)
class AffineProduct(SymbolicOp):
    """a · c, where a = Σ αᵢuᵢ + α₀ and c = Σ γᵢuᵢ + γ₀ over the terms u (inputs: a, c, u...).

    As `AffineQuotient`: the pullback gives the terms the whole gradient, g·(αⱼc + γⱼa) summed
    term by term, and falls back to the product rule's partials where a or c is not finite.
    """

    first: tuple[float, ...]
    second: tuple[float, ...]

    public_name: ClassVar[str] = "affine_product"

    def build(self, a, c, *terms):
        return a * c

    def pullback(self, inputs, outputs, grads):
        a, c, *terms = inputs
        g = grads[0]
        finite = logical_and(isfinite(a), isfinite(c))
        partials = [where(finite, g * self._summed(j, terms), self._chained(j, g, a, c)) for j in range(len(terms))]
        return [zero_grad(a), zero_grad(c), *partials]

    def _summed(self, j: int, terms: list[Variable]):
        """αⱼc + γⱼa as Σᵢ (αⱼγᵢ + γⱼαᵢ)·uᵢ + αⱼγ₀ + γⱼα₀ (terms whose coefficients cancel left out)."""
        return _cross_sum(j, terms, self.first, self.second, 1.0)

    def _chained(self, j: int, g: Variable, a: Variable, c: Variable):
        """αⱼ·g·c + γⱼ·g·a: the written product rule's partial for term j."""
        return _weighted((self.first[j], g * c), (self.second[j], g * a))


def affine_product(a, c, terms, first, second) -> Variable:
    """a · c with the pullback of `AffineProduct` (a and c affine in `terms`, coefficients given)."""
    return AffineProduct(tuple(map(float, first)), tuple(map(float, second)))(a, c, *terms)


def _cross_sum(j: int, terms: list[Variable], alpha: tuple[float, ...], gamma: tuple[float, ...], sign: float):
    """αⱼ·(Σᵢ γᵢuᵢ + γ₀) + sign·γⱼ·(Σᵢ αᵢuᵢ + α₀), summed term by term: coefficient by coefficient,
    so a term whose two parts cancel (uⱼ itself in a quotient's, sign -1) is left out exactly."""
    total: Variable | float = alpha[j] * gamma[-1] + sign * gamma[j] * alpha[-1]
    for i, u in enumerate(terms):
        k = alpha[j] * gamma[i] + sign * gamma[j] * alpha[i]
        if k != 0:
            total = total + (u if k == 1 else -u if k == -1 else k * u)
    return total


def _weighted(*parts: tuple[float, Variable]) -> Variable:
    """Σ k·v over the parts whose k is not 0 (at least one is)."""
    kept = [k * v for k, v in parts if k != 0]
    return kept[0] + kept[1] if len(kept) == 2 else kept[0]


#: d/dx (sinh(x)/x) = x·Σ 2k·x^(2k-2)/(2k+1)!, k ≥ 1; 14 terms for x² < 4 (the 15th: 30·4¹⁴/31! of the first)
_SINH_SERIES = [2 * k / math.factorial(2 * k + 1) for k in range(1, 15)]
#: d/dx (sin(x)/x): the same with alternating signs
_SIN_SERIES = [(-1) ** k * c for k, c in enumerate(_SINH_SERIES, start=1)]
#: below this |x| the series: at 2 the written derivative loses no more than a bit
SERIES_BELOW = 2.0


@final
@dataclass(frozen=True)
class OverArgument(SymbolicOp):
    """f(x)/x for f = sin or sinh, as written (NaN at x = 0), with the derivative by its series near 0.

    Pullback (reads the operand): `g · x·Σ ±2k·x^(2k-2)/(2k+1)!` for |x| < 2, `g·(f'(x) - f(x)/x)/x`
    beyond (where that keeps its digits), NaN at 0 as the written quotient's.
    """

    function: str  # "sin" or "sinh"

    public_name: ClassVar[str] = "over_argument"

    reads = READS_INPUTS

    def _f(self, x):
        return sin(x) if self.function == "sin" else sinh(x)

    def build(self, x):
        return self._f(x) / x

    def pullback(self, inputs, outputs, grads):
        (x,), (g,) = inputs, grads
        small = less(abs(x), SERIES_BELOW)
        t = x * x
        series = _SIN_SERIES if self.function == "sin" else _SINH_SERIES
        total = series[-1] * t + series[-2]
        for c in reversed(series[:-2]):
            total = total * t + c
        far = where(small, SERIES_BELOW, x)  # no 0/0 where the series is taken
        slope = cos(far) if self.function == "sin" else cosh(far)
        written = (slope - self._f(far) / far) / far
        nan_at_zero = where(equal(x, 0), np.full((), np.nan, x.dtype), np.zeros((), x.dtype))
        return [g * (where(small, x * total, written) + nan_at_zero)]


def over_argument(x: Variable, function: str) -> Variable:
    """sin(x)/x or sinh(x)/x, as written, with an accurate derivative near 0 (`OverArgument`)."""
    return OverArgument(function)(x)
