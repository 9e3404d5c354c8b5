"""x · log(y) and x · log1p(y), defined as 0 where x = 0.

Opaque on purpose: written out, `x * log(y)` is `0 · -inf = NaN` at x = y = 0
(entropy terms, `p log p`), and a rewrite that distributes `(a - 1) · log y` into
`a · log y - log y` would bring the NaN back at y = 0.  The pullbacks keep ∂y = 0
where x = 0 without a division by y there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, final

import numpy as np

from ...graph.basic import READS_INPUTS
from ..composite import SymbolicOp
from ..elementwise import equal, isnan, logical_and, where
from ..math import log, log1p
from ._common import promote, restore


@final
@dataclass(frozen=True)
class XLogY(SymbolicOp):
    """x · log(y), 0 where x = 0 for every y but NaN (scipy.special.xlogy).

    Naive: `x * log(y)` is 0 · -inf = NaN at x = 0, y = 0.
    Stable: `where(x == 0, 0, x · log(y))` (NaN kept for y = NaN).
    Pullback (reads both operands): ∂x = `g · log(y)` (-inf at y = 0), ∂y =
    `g · x / y`, with y replaced by 1 where x = y = 0 so that ∂y = 0 there.
    """

    public_name: ClassVar[str] = "xlogy"

    reads = READS_INPUTS

    def build(self, x, y):
        return where(equal(x, 0), where(isnan(y), np.nan, 0), x * log(y))

    def pullback(self, inputs, outputs, grads):
        (x, y), (g,) = inputs, grads
        y_safe = where(logical_and(equal(x, 0), equal(y, 0)), 1, y)
        return [g * log(y), g * x / y_safe]


@final
@dataclass(frozen=True)
class XLog1PY(SymbolicOp):
    """x · log1p(y), 0 where x = 0 for every y but NaN (scipy.special.xlog1py).

    Naive: `x * log1p(y)` is 0 · -inf = NaN at x = 0, y = -1, and `x * log(1 + y)`
    loses digits for small y.  Stable: `where(x == 0, 0, x · log1p(y))`.
    Pullback (reads both operands): ∂x = `g · log1p(y)`, ∂y = `g · x / (1 + y)`,
    with 1 + y replaced by 1 where x = 0, y = -1.
    """

    public_name: ClassVar[str] = "xlog1py"

    reads = READS_INPUTS

    def build(self, x, y):
        return where(equal(x, 0), where(isnan(y), np.nan, 0), x * log1p(y))

    def pullback(self, inputs, outputs, grads):
        (x, y), (g,) = inputs, grads
        denominator = where(logical_and(equal(x, 0), equal(y, -1)), 1, 1 + y)
        return [g * log1p(y), g * x / denominator]


def xlogy(x, y):
    """x · log(y), elementwise, 0 where x = 0 (scipy.special.xlogy)."""
    (a, b), dtype = promote("xlogy", x, y)
    return restore(XLogY()(a, b), dtype)


def xlog1py(x, y):
    """x · log1p(y), elementwise, 0 where x = 0 (scipy.special.xlog1py)."""
    (a, b), dtype = promote("xlog1py", x, y)
    return restore(XLog1PY()(a, b), dtype)
