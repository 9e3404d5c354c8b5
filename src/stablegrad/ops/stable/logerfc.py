"""log(erfc(x)), finite for every finite x, and the Gaussian-tail pieces its relatives share.

`exp_minus_square` and `log_erfc_slope` are the two places where the Gaussian tails
lose digits when written directly: `exp(-x**2)` carries the rounding of x² (|x²|·ε of
relative error: 250 ulps at x = -24), and `1 / erfcx(t)` has a derivative that divides
by erfcx(t)², which underflows for t past 1e154.  `log_ndtr` uses them too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, final

import numpy as np

from ...graph.basic import Reads, Variable
from ..base import Entrywise
from ..composite import SymbolicOp
from ..elementwise import floor, maximum, minimum, square, where
from ..math import erf, erfc, erfcx, exp, expm1, log, log1p
from ._common import promote, restore

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
#: past this, 1/erfcx(t) is t·√π·(1 + 1/(2t²)) to below half an ulp (the next term is 2/(4t⁴))
_SLOPE_SERIES_FROM = 1e5


def exp_minus_square(x: Variable, half: bool = False) -> Variable:
    """exp(-x²) (exp(-x²/2) with `half`) to about an ulp, also where x² is not a float.

    x = hi + lo with hi on a grid of 2⁻²⁰ (2⁻⁸ in float32), so hi² is exact in the
    format and lo exact too; then x² = hi² + lo·(hi + x), and the small second term's
    rounding is far below an ulp of the result.  x is clamped to where the result
    underflows anyway (|x| <= 40, 15 in float32), which keeps hi within 26 (12) bits.
    The derivative is taken through lo and hi + x (the grid point has none): -2x·exp(-x²).
    Written as e + e·expm1(-r), not exp(-hi²)·exp(-r): recognition would merge that product
    into exp_of_sum, which rounds the exponents' sum where a factor is subnormal.
    """
    wide = x.dtype == np.float64
    bound, grid = (40.0, 2.0**20) if wide else (15.0, 2.0**8)
    x = where(x > bound, bound, where(x < -bound, -bound, x))  # (NaN stays NaN)
    hi = floor(x * grid) / grid
    lo = x - hi
    scale = 0.5 if half else 1.0
    e = exp(-scale * square(hi))
    return e + e * expm1(-scale * (lo * (hi + x)))


def log_erfc_slope(t: Variable) -> Variable:
    """-(d/dt) log erfc(t) = (2/√π) / erfcx(t) for t >= 0 (NaN stays NaN).

    Past 1e5 it is the series 2t + 1/t, whose own derivative 2 - 1/t² stays finite where
    that of 1/erfcx(t) would divide by an underflowed erfcx(t)² (t > 1e154).
    """
    far = t > _SLOPE_SERIES_FROM
    t_far = where(far, t, _SLOPE_SERIES_FROM)  # each branch sees only its own arguments
    t_near = where(far, _SLOPE_SERIES_FROM, t)
    return where(far, 2 * t_far + 1 / t_far, _TWO_OVER_SQRT_PI / erfcx(t_near))


@final
@dataclass(frozen=True)
class LogErfc(Entrywise, SymbolicOp):
    """log(erfc(x)).

    Naive: erfc(x) underflows to 0 past x ≈ 26.5 (float64; 9.2 in float32), so the
    log is -inf and its gradient -exp(-x²)/erfc(x) is 0/0.  Stable: for x > 1/2 use
    the scaled function, log(erfcx(x)) - x², with erfcx(x) = exp(x²)·erfc(x) in (0, 1);
    below, log1p(-erf(x)), which keeps its relative accuracy where the result is near
    0 (log of erfcx(1e-8) ≈ 1 - 1e-8 would lose half the digits).  Each branch sees an
    argument clamped to its side, so the unused branch is finite too.
    The pullback reads x: d/dx log erfc(x) = -(2/√π)·exp(-x²)/erfc(x), computed as
    `-log_erfc_slope(x)` for x >= 0 and from `exp_minus_square(x) / erfc(x)` below, where
    erfc is in [1, 2]: erfcx(x) overflows there (past -26.6 in float64, -9.3 in float32)
    while the derivative itself is representable down to -27.3 (float64, subnormal past
    -26.6); exp(-x²) written out would carry x²'s rounding (250 ulps at x = -24).  Its own
    derivative stays finite for every finite x too (-2 far out, 0 far in).
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
        # the factor first, so that only the last product rounds in the subnormal range (x < -26.6)
        below = (_TWO_OVER_SQRT_PI / erfc(negative)) * exp_minus_square(negative)
        return [grads[0] * -where(below_zero, below, log_erfc_slope(positive))]


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
