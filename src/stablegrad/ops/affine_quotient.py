"""`a / c` for two affine forms in shared terms, differentiated without the quotient rule's cancellation.

The quotient rule takes ∂(a/c)/∂u as a'/c - (a/c)·c'/c.  Where a and c share a term u,
both parts reach u and are summed there, and the sum cancels wherever a/c nears a'/c':
the gradient of (x - y)/(x + y) with respect to x is (1 - q)/(x + y), which keeps no digit
of -2y/(x + y)² once y is below x·eps.  Written as affine forms a = Σ αᵢuᵢ + α₀ and
c = Σ γᵢuᵢ + γ₀, the numerator of the exact partial, αⱼc - γⱼa, is

    Σ_{i≠j} (αⱼγᵢ - γⱼαᵢ)·uᵢ + (αⱼγ₀ - γⱼα₀)

in which uⱼ itself has cancelled symbolically: for (x - y)/(x + y) it is 2y, not
(x + y) - (x - y).  `AffineQuotient` is the written a/c (its value is that division, bit
for bit) whose pullback sends each term uⱼ that cotangent, g/c · N_j/c (never c², which
would overflow first), and nothing through a and c themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, final

from ..graph.basic import Variable
from .base import zero_grad
from .composite import SymbolicOp
from .elementwise import isfinite, where


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
            where(finite, self._partial(j, terms, c, scaled), self._chained(j, written)) for j in range(len(terms))
        ]
        return [zero_grad(a), zero_grad(c), *partials]

    def _partial(self, j: int, terms: list[Variable], c: Variable, scaled: Variable):
        """g/c · (αⱼc - γⱼa)/c, the numerator summed without the uⱼ that cancels from it."""
        alpha, gamma = self.numerator, self.denominator
        total: Variable | float = alpha[j] * gamma[-1] - gamma[j] * alpha[-1]
        for i, u in enumerate(terms):
            k = alpha[j] * gamma[i] - gamma[j] * alpha[i]
            if i != j and k != 0:
                total = total + (u if k == 1 else -u if k == -1 else k * u)
        return scaled * (total / c)

    def _chained(self, j: int, written: tuple[Variable, Variable]):
        """αⱼ·ḡa + γⱼ·ḡc: the written quotient rule's partial for term j."""
        parts = [k * g for k, g in ((self.numerator[j], written[0]), (self.denominator[j], written[1])) if k != 0]
        return parts[0] + parts[1] if len(parts) == 2 else parts[0]


def affine_quotient(a, c, terms, numerator, denominator) -> Variable:
    """a / c with the pullback of `AffineQuotient` (a and c affine in `terms`, coefficients given)."""
    return AffineQuotient(tuple(map(float, numerator)), tuple(map(float, denominator)))(a, c, *terms)
