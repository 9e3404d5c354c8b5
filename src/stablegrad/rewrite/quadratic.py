"""The quadratic formula's root, where it cancels: `-b + √(b² - p)` as `p/(-b - √(b² - p))` (the
conjugate), as every textbook on floating point tells and few users write (Herbie's quadp,
quadm, quad2p, quad2m, "Quadratic roots" and "Cubic critical").

Runs in the STABILIZE phase with exponentials.RULES.
"""

from __future__ import annotations

import numpy as np

from ..graph.basic import Variable
from ..graph.types import is_floating
from ..ops.elementwise import Add, Negative, Subtract, less, where
from .engine import Kind, Phase, rewrite
from .patterns import constant_value, fits, owner, root_of, square_of, with_sign


def _signed(v: Variable) -> tuple[float, Variable]:
    """(σ, u) for v = σ·u: -u read as (-1, u)."""
    negation = owner(v, Negative)
    return (-1.0, negation.inputs[0]) if negation is not None else (1.0, v)


@rewrite(Phase.STABILIZE, Kind.RECOGNITION, Add, Subtract)
def quadratic_root_from_conjugate(node):
    """σ·b + τ·√(b² - p) → p / (σ·b - τ·√(b² - p)) where σ·b and τ·√(b² - p) have opposite signs
    (σ, τ = ±1: `-b + sqrt(b*b - 4*a*c)`, `sqrt(b**2 - a*c) - b`, and the other root's sums), as
    written elsewhere.

    Written, where |b| is large against |p| the two terms agree in their leading digits and the
    root, about p/(2b), keeps only their rounding: every digit is gone once |4ac| is below
    b²·2⁻⁵³, and the derivative with them. The conjugate's terms have one sign, and p comes from
    the products the user wrote. Where the terms have one sign already (the other root, and b = 0)
    the written sum is accurate and stays; D < 0 gives NaN in both. Another square than b's
    under the root, or a sum instead of a difference, must not fire; nor a constant p:
    `x + sqrt(x*x - 1)` is the inverse hyperbolics' (under a log, arccosh, which sees the sum
    whole).
    """
    if not is_floating(node.outputs[0].dtype):
        return None
    first, second = node.inputs
    sign_second = -1.0 if isinstance(node.op, Subtract) else 1.0
    for (s1, t1), (s2, t2) in (((1.0, first), (sign_second, second)), ((sign_second, second), (1.0, first))):
        d = root_of(t1)
        difference = owner(d, Subtract) if d is not None else None
        if difference is None:
            continue
        b = square_of(difference.inputs[0])
        sigma, other = _signed(t2)
        if b is None or other is not b or constant_value(difference.inputs[1]) is not None:
            continue
        p, tau, sigma = difference.inputs[1], s1, s2 * sigma
        # σ·b and τ·√D of opposite signs: σ·τ·b < 0 (√D ≥ 0)
        cancels = less(with_sign(sigma * tau, b), np.zeros((), b.dtype))
        conjugate = p / (with_sign(sigma, b) - with_sign(tau, t1))
        # (the written sum of two wheres, which this rule does not match again)
        written = where(cancels, 0.0, with_sign(s1, t1)) + where(cancels, 0.0, with_sign(s2, t2))
        return fits(where(cancels, conjugate, written), node)
    return None


RULES = (quadratic_root_from_conjugate,)
