"""exp(a + b) that is as accurate as `exp(a) * exp(b)` and finite where that overflows.

What recognition puts in place of a product (or quotient) of exponentials.  Written
`exp(a) * exp(b)` is accurate to ~1.5 ulp but gives inf · 0 = NaN (or a wrong inf or
0) once a factor leaves the exponent range; `exp(a + b)` fixes that but rounds
a + b first, which costs |a + b| · 2⁻⁵³ relatively (2e-14 at a + b ≈ 700).  So
the product is kept where both factors are in range and the sum is taken only
where one is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, final

import numpy as np

from ...graph.basic import Reads
from ..base import Entrywise
from ..composite import SymbolicOp
from ..elementwise import greater, less, logical_and, where
from ..math import exp


@final
@dataclass(frozen=True)
class ExpOfSum(Entrywise, SymbolicOp):
    """exp(a + b), elementwise with broadcasting, rounded as `exp(a) * exp(b)` is.

    Naive: `exp(a) * exp(b)` is NaN for `exp(800) * exp(-800)`; `exp(a + b)` is
    less accurate than the product for large |a + b|.
    Stable: the product where both exponents are inside the dtype's normal range,
    `exp(a + b)` elsewhere; each branch is fed zeros where it is not taken, so no
    unused branch's inf meets a zero cotangent.
    Pullback (reads the output): `g · out` for both operands.
    """

    public_name: ClassVar[str] = "exp_of_sum"

    reads = Reads(inputs=(), outputs=(0,))

    def build(self, a, b):
        info = np.finfo(exp(a + b).dtype)
        low, high = float(np.log(info.tiny)), float(np.log(info.max))
        in_range = logical_and(logical_and(greater(a, low), less(a, high)), logical_and(greater(b, low), less(b, high)))
        product = exp(where(in_range, a, 0)) * exp(where(in_range, b, 0))
        return where(in_range, product, exp(where(in_range, 0, a + b)))

    def pullback(self, inputs, outputs, grads):
        share = grads[0] * outputs[0]
        return [share, share]


def exp_of_sum(a, b):
    """exp(a + b), as accurate as exp(a) * exp(b) and finite where that overflows."""
    return ExpOfSum()(a, b)
