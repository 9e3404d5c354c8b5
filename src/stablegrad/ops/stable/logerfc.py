"""log(erfc(x)), finite for every finite x."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, final

from ...graph.basic import Reads
from ..base import as_operands
from ..composite import SymbolicOp
from ..elementwise import maximum, minimum, square, where
from ..math import erf, erfcx, log, log1p

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
    The pullback reads x: d/dx log erfc(x) = -(2/√π) / erfcx(x).
    """

    public_name: ClassVar[str] = "log_erfc"

    reads = Reads(inputs=(0,))

    def build(self, x):
        upper, lower = maximum(x, 0.5), minimum(x, 0.5)
        return where(x > 0.5, log(erfcx(upper)) - square(upper), log1p(-erf(lower)))

    def pullback(self, inputs, outputs, grads):
        # below -26 the derivative is under 5e-294 (and erfcx heads for overflow): it is 0
        # there, and the clamp keeps the unused branch — and the second derivative — finite
        x = inputs[0]
        return [grads[0] * where(x < -26.0, 0, -_TWO_OVER_SQRT_PI / erfcx(maximum(x, -26.0)))]


def log_erfc(x):
    """log(erfc(x)), accurate and finite for all finite x (also where erfc(x) underflows)."""
    (x,) = as_operands(x)
    if not x.type.is_float():
        x = x.astype("float64")
    return LogErfc()(x)
