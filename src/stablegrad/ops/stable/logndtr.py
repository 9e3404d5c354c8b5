"""log Φ(x), the log of the standard normal CDF (scipy.special.log_ndtr), finite for every finite x."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, final

from ...graph.basic import READS_INPUTS
from ..base import Entrywise
from ..composite import SymbolicOp
from ..elementwise import equal, where
from ..math import erfcx, log, log1p
from ._common import promote, restore
from .logerfc import exp_minus_square, log_erfc_slope

_LN2 = math.log(2.0)
_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _upper_tail(x):
    """1 - Φ(x) = erfc(x/√2)/2 for x >= 0, as erfcx(x/√2)·exp(-x²/2)/2: erfc of the rounded
    x/√2 would carry that rounding x² times over (450 ulps at x = 30)."""
    return 0.5 * erfcx(x * _SQRT_HALF) * exp_minus_square(x, half=True)


@final
@dataclass(frozen=True)
class LogNdtr(Entrywise, SymbolicOp):
    """log Φ(x) = log(erfc(-x/√2) / 2).

    Naive: `log(0.5 * erfc(-x / sqrt(2)))` is log(0) = -inf past x ≈ -38.5 (float64; -13.2
    in float32), and for x > 0 it is log of 1 - tiny, which rounds to 0 (x > 8.3: the
    answer is -Φ(-x), down to 1e-308).
    Stable: for x < 0, `log(erfcx(-x/√2)) - x²/2 - log 2`, three non-positive terms (x²/2
    taken as (x/2)·x, so it overflows only where the answer does); for x >= 0,
    `log1p(-q)` with q = 1 - Φ(x) <= 1/2 computed without rounding x/√2 into an exponent.
    Each branch sees an argument clamped to its side.
    Pullback (reads the operand): d/dx = φ(x)/Φ(x): for x < 0 `log_erfc_slope(-x/√2)/√2`
    (no exp(-x²/2) / Φ(x) with both underflowing; about -x far out, and its own derivative
    finite), for x >= 0 `φ(x) / (1 - q)`, φ(x) from `exp_minus_square`; 0 where the
    cotangent is 0, also at x = -inf.
    """

    public_name: ClassVar[str] = "log_ndtr"

    reads = READS_INPUTS

    def build(self, x):
        below = x < 0
        lower, upper = where(below, x, 0), where(below, 0, x)
        from_lower = log(erfcx(-lower * _SQRT_HALF)) - (0.5 * lower) * lower - _LN2
        return where(below, from_lower, log1p(-_upper_tail(upper)))

    def pullback(self, inputs, outputs, grads):
        x = inputs[0]
        below = x < 0
        lower, upper = where(below, x, 0), where(below, 0, x)
        from_lower = _SQRT_HALF * log_erfc_slope(-lower * _SQRT_HALF)
        from_upper = _INV_SQRT_2PI * exp_minus_square(upper, half=True) / (1 - _upper_tail(upper))
        # a zero cotangent contributes nothing, also at x = -inf, where the slope is +inf (a
        # difference of log-CDFs whose lower end is -inf: logdiffexp sends 0 back there)
        g = grads[0]
        return [where(equal(g, 0), 0, g * where(below, from_lower, from_upper))]


def log_ndtr(x):
    """Logarithm of the standard normal CDF, log Φ(x), elementwise (scipy.special.log_ndtr).

    Accurate and finite for every finite x: about -x²/2 in the lower tail (where Φ(x)
    underflows) and -Φ(-x) in the upper one (where Φ(x) rounds to 1).  Integers compute in
    float64; float16 computes in float32 and comes back as float16.

    >>> import numpy as np, stablegrad as sg
    >>> x = sg.vector("x")
    >>> [f"{v:.12g}" for v in sg.function([x], sg.log_ndtr(x))(np.array([-40.0, 0.0, 10.0]))]
    ['-804.608442014', '-0.69314718056', '-7.61985302416e-24']
    """
    (x,), dtype = promote("log_ndtr", x)
    return restore(LogNdtr()(x), dtype)
