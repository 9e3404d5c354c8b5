"""x · log(y) and x · log1p(y), defined as 0 where x = 0; x · exp(x), defined as 0 at x = -inf.

Opaque on purpose: written out, `x * log(y)` is `0 · -inf = NaN` at x = y = 0
(entropy terms, `p log p`), and a rewrite that distributes `(a - 1) · log y` into
`a · log y - log y` would bring the NaN back at y = 0.  The pullbacks keep ∂y = 0
where x = 0 without a division by y there, and a partial that is exactly 0 gives 0 even
for an infinite cotangent (where the product is inf · 0): what the guard `where(x == 0, 0,
x·log(y))` gives, which recognition turns into xlogy (`xlogy_from_guarded`), so that an
outer derivative infinite at the guard's 0 (`log(sinh(·))`, `1/·`) stays out of the NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, final

import numpy as np

from ...graph.basic import READS_INPUTS
from ..base import Entrywise
from ..composite import SymbolicOp
from ..elementwise import equal, isinf, isnan, logical_and, where
from ..gradient_mask import masked_gradient
from ..math import exp, log, log1p
from ._common import promote, restore


def _unless_zero_partial(product, g, partial_is_zero):
    """The cotangent's product with a partial (as the pullback writes it: `g * x / y` in that order),
    and 0 where the partial is exactly 0 and g infinite (a NaN g stays NaN)."""
    return where(logical_and(partial_is_zero, isinf(g)), 0, product)


@final
@dataclass(frozen=True)
class XLogY(Entrywise, SymbolicOp):
    """x · log(y), 0 where x = 0 for every y but NaN (scipy.special.xlogy).

    Naive: `x * log(y)` is 0 · -inf = NaN at x = 0, y = 0.
    Stable: `where(x == 0, 0, x · log(y))` (NaN kept for y = NaN, in y's own dtype).
    Pullback (reads both operands): ∂x = `g · log(y)` (-inf at y = 0), ∂y =
    `g · x / y`, with y replaced by 1 where x = y = 0 so that ∂y = 0 there.
    """

    public_name: ClassVar[str] = "xlogy"

    reads = READS_INPUTS

    def build(self, x, y):
        return where(equal(x, 0), where(isnan(y), y, 0), x * log(y))

    def pullback(self, inputs, outputs, grads):
        (x, y), (g,) = inputs, grads
        y_safe = where(logical_and(equal(x, 0), equal(y, 0)), 1, y)
        return [
            _unless_zero_partial(g * log(y), g, equal(y, 1)),
            _unless_zero_partial(g * x / y_safe, g, equal(x, 0)),
        ]


@final
@dataclass(frozen=True)
class XLog1PY(Entrywise, SymbolicOp):
    """x · log1p(y), 0 where x = 0 for every y but NaN (scipy.special.xlog1py).

    Naive: `x * log1p(y)` is 0 · -inf = NaN at x = 0, y = -1, and `x * log(1 + y)`
    loses digits for small y.  Stable: `where(x == 0, 0, x · log1p(y))`.
    Pullback (reads both operands): ∂x = `g · log1p(y)`, ∂y = `g · x / (1 + y)`,
    with 1 + y replaced by 1 where x = 0, y = -1.
    """

    public_name: ClassVar[str] = "xlog1py"

    reads = READS_INPUTS

    def build(self, x, y):
        return where(equal(x, 0), where(isnan(y), y, 0), x * log1p(y))

    def pullback(self, inputs, outputs, grads):
        (x, y), (g,) = inputs, grads
        denominator = where(logical_and(equal(x, 0), equal(y, -1)), 1, 1 + y)
        return [
            _unless_zero_partial(g * log1p(y), g, equal(y, 0)),
            _unless_zero_partial(g * x / denominator, g, equal(x, 0)),
        ]


@final
@dataclass(frozen=True)
class XExpX(Entrywise, SymbolicOp):
    """x · exp(x), 0 at x = -inf (its limit): the expectation term `p · log p` written in log space.

    Naive: `lp * exp(lp)` is -inf · 0 = NaN at lp = -inf (a category of probability 0), and
    so is its gradient `exp(x) · (1 + x)`.  Stable: `where(x == -inf, 0, x · exp(x))`.
    Pullback (reads the operand): `g · exp(x) · (1 + x)`, 0 at x = -inf, where x is read
    through `masked_gradient` so that the second derivative is 0 there too.
    """

    public_name: ClassVar[str] = "xexpx"

    reads = READS_INPUTS

    def build(self, x):
        return where(equal(x, -np.inf), 0, x * exp(x))

    def pullback(self, inputs, outputs, grads):
        (x,), (g,) = inputs, grads
        at_limit = equal(x, -np.inf)
        finite_x = masked_gradient(x, at_limit, kept=False)
        return [where(at_limit, 0, g * exp(finite_x) * (1 + finite_x))]


def xexpx(x):
    """x · exp(x), elementwise, 0 at x = -inf (the limit; `lp * exp(lp)` is NaN there).

    >>> import numpy as np, stablegrad as sg
    >>> sg.function([x := sg.vector("x")], sg.xexpx(x))(np.array([-np.inf, 0.0, 1.0]))
    array([0.        , 0.        , 2.71828183])
    """
    (a,), dtype = promote("xexpx", x)
    return restore(XExpX()(a), dtype)


def xlogy(x, y):
    """x · log(y), elementwise, 0 where x = 0 (scipy.special.xlogy)."""
    (a, b), dtype = promote("xlogy", x, y)
    return restore(XLogY()(a, b), dtype)


def xlog1py(x, y):
    """x · log1p(y), elementwise, 0 where x = 0 (scipy.special.xlog1py)."""
    (a, b), dtype = promote("xlog1py", x, y)
    return restore(XLog1PY()(a, b), dtype)
