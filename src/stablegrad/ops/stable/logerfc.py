"""log(erfc(x)), finite for every finite x."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, final

from ...graph.basic import Reads
from ..composite import SymbolicOp
from ..elementwise import maximum, minimum, square, where
from ..math import erf, erfc, erfcx, exp, log, log1p
from ._common import promote, restore

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


@final
@dataclass(frozen=True)
class LogErfc(SymbolicOp):
    """log(erfc(x)).

    Naive: erfc(x) underflows to 0 past x ≈ 26.5 (float64; 9.2 in float32), so the
    log is -inf and its gradient -exp(-x²)/erfc(x) is 0/0.  Stable: for x > 1/2 use
    the scaled function, log(erfcx(x)) - x², with erfcx(x) = exp(x²)·erfc(x) in (0, 1);
    below, log1p(-erf(x)), which keeps its relative accuracy where the result is near
    0 (log of erfcx(1e-8) ≈ 1 - 1e-8 would lose half the digits).  Each branch sees an
    argument clamped to its side, so the unused branch is finite too.
    The pullback reads x: d/dx log erfc(x) = -(2/√π)·exp(-x²)/erfc(x), computed as
    -(2/√π)/erfcx(x) for x ≥ 0 and from exp(-x²)/erfc(x) below, where erfc is in [1, 2]:
    erfcx(x) overflows there (past -26.6 in float64, -9.3 in float32) while the derivative
    itself is representable down to -27 (float64); its own derivative stays finite too.
    """

    public_name: ClassVar[str] = "log_erfc"

    reads = Reads(inputs=(0,))

    def build(self, x):
        upper, lower = maximum(x, 0.5), minimum(x, 0.5)
        return where(x > 0.5, log(erfcx(upper)) - square(upper), log1p(-erf(lower)))

    def pullback(self, inputs, outputs, grads):
        x = inputs[0]
        # each branch on its own side, so both stay finite; where(), not minimum/maximum, whose
        # derivative at the tie x = 0 is split in halves and would halve the second derivative there
        below_zero = x < 0
        negative, positive = where(below_zero, x, 0), where(below_zero, 0, x)
        below = exp(-square(negative)) / erfc(negative)
        return [grads[0] * -_TWO_OVER_SQRT_PI * where(below_zero, below, 1 / erfcx(positive))]


def log_erfc(x):
    """log(erfc(x)), accurate and finite for all finite x (also where erfc(x) underflows).

    Integers compute in float64; float16 computes in float32 and comes back as float16.

    >>> import numpy as np, stablegrad as sg
    >>> x = sg.vector("x")
    >>> sg.function([x], sg.log_erfc(x))(np.array([0.0, 30.0])).round(3).tolist()
    [-0.0, -903.974]
    """
    (x,), dtype = promote("log_erfc", x)
    return restore(LogErfc()(x), dtype)
