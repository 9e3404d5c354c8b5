"""log(erfc(x)), finite for every finite x."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, final

from ...graph.basic import Reads
from ..base import as_operands
from ..composite import SymbolicOp
from ..elementwise import maximum, minimum, square, where
from ..math import erfc, erfcx, log

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


@final
@dataclass(frozen=True)
class LogErfc(SymbolicOp):
    """log(erfc(x)).

    Naive: erfc(x) underflows to 0 past x ≈ 26.5 (float64; 9.2 in float32), so the
    log is -inf and its gradient -exp(-x²)/erfc(x) is 0/0.  Stable: for x > 0 use the
    scaled function, log(erfcx(x)) - x², with erfcx(x) = exp(x²)·erfc(x) in (0, 1];
    for x ≤ 0, erfc(x) is in [1, 2] and the plain form is exact.  Each branch sees an
    argument clamped to its side, so the unused branch is finite too.
    The pullback reads x: d/dx log erfc(x) = -(2/√π) / erfcx(x).
    """

    public_name: ClassVar[str] = "log_erfc"

    reads = Reads(inputs=(0,))

    def build(self, x):
        positive, negative = maximum(x, 0), minimum(x, 0)
        return where(x > 0, log(erfcx(positive)) - square(positive), log(erfc(negative)))

    def pullback(self, inputs, outputs, grads):
        # below -26, erfcx overflows (1/erfcx is 0 there anyway); the clamp keeps the
        # second derivative from meeting 0 * inf
        x = inputs[0]
        return [grads[0] * (-_TWO_OVER_SQRT_PI) / erfcx(maximum(x, -26.0))]


def log_erfc(x):
    """log(erfc(x)), accurate and finite for all finite x (also where erfc(x) underflows)."""
    (x,) = as_operands(x)
    if not x.type.is_float():
        x = x.astype("float64")
    return LogErfc()(x)
