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

`OverArgument`: f(x)/x for f = sin, sinh, tanh, expm1 or log1p.  The quotient rule's derivative,
f'(x)/x - q/x, is two terms of about 1/x that cancel to about x/3 (sinh; expm1 and log1p: ±1/2):
every digit is gone below |x| ≈ 1e-8 (1e-16).  Its pullback takes the derivative's Taylor series
there instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, final

import numpy as np

from ..graph.basic import ALL, Reads, Variable
from .base import zero_grad
from .composite import SymbolicOp
from .elementwise import abs, equal, isfinite, less, logical_and, where
from .math import SechSquared, cos, cosh, exp, expm1, log1p, sin, sinh, tanh


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
#: d/dx (expm1(x)/x) = Σ k·x^(k-1)/(k+1)!, k ≥ 1; 19 terms for |x| < 1 (the 20th: 40/21! of the first)
_EXPM1_SERIES = [k / math.factorial(k + 1) for k in range(1, 20)]
#: d/dx (log1p(x)/x) = Σ (-1)^k·k·x^(k-1)/(k+1), k ≥ 1; 30 terms for |x| < 1/4 (the 31st: 2·4⁻³⁰ of the first)
_LOG1P_SERIES = [(-1) ** k * k / (k + 1) for k in range(1, 31)]
#: (sinh(y) - y)/y³ = Σ y^(2k)/(2k+3)!: 12 terms for y² < 4 (the 13th: 6·4¹²/27! of the first)
SINH_REMAINDER = [1.0 / math.factorial(2 * k + 3) for k in range(12)]


def _tanh_near_0(x: Variable) -> Variable:
    """d/dx (tanh(x)/x) = -(sinh(2x) - 2x)/(2x²·cosh²x) = -4x·sech²(x)·Σ (2x)^(2k)/(2k+3)!: no
    difference of terms (the written x·sech²x - tanh x cancels to -2x³/3)."""
    return -4.0 * x * SechSquared()(x) * horner(4.0 * (x * x), SINH_REMAINDER)


@dataclass(frozen=True)
class _Vanishing:
    """A function f with f(0) = 0 and f'(0) = 1, and what f(x)/x's derivative needs."""

    f: Callable[[Variable], Variable]
    slope: Callable[[Variable], Variable]  # f'
    near_0: Callable[[Variable], Variable]  # the derivative of f(x)/x by its series, for |x| < below
    below: float  # above it, the written derivative (f'(x) - f(x)/x)/x loses at most 3 bits


def _series(coefficients: list[float], odd: bool) -> Callable[[Variable], Variable]:
    """Σ cₖxᵏ, or x·Σ cₖx²ᵏ for the derivative of an even f(x)/x (f odd)."""
    return (lambda x: x * horner(x * x, coefficients)) if odd else (lambda x: horner(x, coefficients))


_FUNCTIONS = {
    "sin": _Vanishing(sin, cos, _series(_SIN_SERIES, odd=True), 2.0),
    "sinh": _Vanishing(sinh, cosh, _series(_SINH_SERIES, odd=True), 2.0),
    "tanh": _Vanishing(tanh, lambda x: SechSquared()(x), _tanh_near_0, 1.0),
    "expm1": _Vanishing(expm1, exp, _series(_EXPM1_SERIES, odd=False), 1.0),
    "log1p": _Vanishing(log1p, lambda x: 1 / (1 + x), _series(_LOG1P_SERIES, odd=False), 0.25),
}


@final
@dataclass(frozen=True)
class OverArgument(SymbolicOp):
    """f(x)/x for f = sin, sinh, tanh, expm1 or log1p, as written (NaN at x = 0), with the
    derivative by its series near 0.

    Pullback (reads the operand and the output): the series (sin and sinh: `g·x·Σ cₖx²ᵏ`; expm1 and
    log1p: `g·Σ cₖxᵏ`; tanh: `g·-4x·sech²(x)·Σ (2x)^(2k)/(2k+3)!`) where |x| is below 2 (tanh and
    expm1: 1; log1p: 1/4, where its series' terms fall by 4), `g·(f'(x) - f(x)/x)/x` beyond (where
    that keeps its digits), NaN at 0 as the written quotient's.
    """

    function: str  # a key of _FUNCTIONS

    public_name: ClassVar[str] = "over_argument"

    reads = Reads(ALL, ALL)

    def build(self, x):
        return _FUNCTIONS[self.function].f(x) / x

    def pullback(self, inputs, outputs, grads):
        (x,), (g,) = inputs, grads
        f = _FUNCTIONS[self.function]
        small = less(abs(x), f.below)
        far = where(small, f.below, x)  # no 0/0 where the series is taken
        # (the quotient read from the output: not a written f(x)/x for the rules to expand again)
        written = (f.slope(far) - where(small, 0.0, outputs[0])) / far
        nan_at_zero = where(equal(x, 0), np.full((), np.nan, x.dtype), np.zeros((), x.dtype))
        return [g * (where(small, f.near_0(x), written) + nan_at_zero)]


def horner(t: Variable, coefficients: list[float]) -> Variable:
    """Σ coefficients[k]·t^k, by Horner's rule (the highest power innermost): a series' graph."""
    total: Variable | float = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        total = total * t + c
    return total  # type: ignore[return-value]


def over_argument(x: Variable, function: str) -> Variable:
    """f(x)/x (f = sin, sinh, tanh, expm1 or log1p), as written, with an accurate derivative near 0 (`OverArgument`)."""
    return OverArgument(function)(x)
