"""Powers, exponentials, logarithms, trigonometric and special functions.

`power` is here rather than with the arithmetic: its exponent-gradient is `out · log x`.

Where a derivative is cheaper from the output than from the operand (exp, tanh,
sqrt) the op reads its output, so the executor can free the operand early.
"""

from __future__ import annotations

import math as _pymath
from dataclasses import dataclass
from typing import final

import numpy as np
import scipy.special as sps

from ..graph.basic import ALL, READS_OUTPUTS, Constant, Reads
from .base import Elementwise, as_operands, astype
from .elementwise import equal, square, where

_LN2 = _pymath.log(2.0)
_LN10 = _pymath.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / _pymath.sqrt(_pymath.pi)


@final
@dataclass(frozen=True)
class Power(Elementwise):
    """x ** y.  The y-gradient is 0 where x = 0 (the limit of x**y for y > 0), not 0 * -inf."""

    reads = Reads(inputs=ALL, outputs=(0,))  # the y-gradient is g * out * log(x)

    def perform(self, x, y):
        return np.power(x, y)

    def pullback(self, inputs, outputs, grads):
        (x, y), (out,), (g,) = inputs, outputs, grads
        if isinstance(y, Constant) and y.data.size == 1 and float(y.data) == 2.0:
            gx = g * (2 * x)
        elif isinstance(y, Constant) and y.data.size == 1 and float(y.data) == 1.0:
            gx = g
        else:
            # a zero cotangent contributes nothing, also where x**(y-1) overflows (0 · c·x**400 at x = 10)
            gx = where(equal(g, 0), 0, g * y * power(x, y - 1))
        safe_x = where(equal(x, 0), 1, x)
        gy = where(equal(x, 0) | equal(g, 0), 0, g * out * log(safe_x))
        return [gx, gy]


@final
@dataclass(frozen=True)
class Exp(Elementwise):
    """e**x; reads its output: d e**x = e**x."""

    reads = READS_OUTPUTS

    def perform(self, x):
        return np.exp(x)

    def pullback(self, inputs, outputs, grads):
        return [grads[0] * outputs[0]]


@final
@dataclass(frozen=True)
class Exp2(Elementwise):
    """2**x."""

    reads = READS_OUTPUTS

    def perform(self, x):
        return np.exp2(x)

    def pullback(self, inputs, outputs, grads):
        return [grads[0] * outputs[0] * _LN2]


@final
@dataclass(frozen=True)
class Expm1(Elementwise):
    """e**x - 1, accurate near 0.  The derivative is e**x, not out + 1: that cancels
    for x < 0 (half the digits gone by x = -18, all by x = -37, where out rounds to -1)."""

    def perform(self, x):
        return np.expm1(x)

    def pullback(self, inputs, outputs, grads):
        return [grads[0] * exp(inputs[0])]


@final
@dataclass(frozen=True)
class Log(Elementwise):
    """Natural logarithm."""

    def perform(self, x):
        return np.log(x)

    def pullback(self, inputs, outputs, grads):
        return [grads[0] / inputs[0]]


@final
@dataclass(frozen=True)
class Log2(Elementwise):
    """Base-2 logarithm."""

    def perform(self, x):
        return np.log2(x)

    def pullback(self, inputs, outputs, grads):
        return [grads[0] / (inputs[0] * _LN2)]


@final
@dataclass(frozen=True)
class Log10(Elementwise):
    """Base-10 logarithm."""

    def perform(self, x):
        return np.log10(x)

    def pullback(self, inputs, outputs, grads):
        return [grads[0] / (inputs[0] * _LN10)]


@final
@dataclass(frozen=True)
class Log1p(Elementwise):
    """log(1 + x), accurate near 0."""

    def perform(self, x):
        return np.log1p(x)

    def pullback(self, inputs, outputs, grads):
        return [grads[0] / (1 + inputs[0])]


@final
@dataclass(frozen=True)
class Sin(Elementwise):
    """Sine."""

    def perform(self, x):
        return np.sin(x)

    def pullback(self, inputs, outputs, grads):
        return [grads[0] * cos(inputs[0])]


@final
@dataclass(frozen=True)
class Cos(Elementwise):
    """Cosine."""

    def perform(self, x):
        return np.cos(x)

    def pullback(self, inputs, outputs, grads):
        return [-grads[0] * sin(inputs[0])]


@final
@dataclass(frozen=True)
class Tan(Elementwise):
    """Tangent; reads its output: d tan = 1 + tan²."""

    reads = READS_OUTPUTS

    def perform(self, x):
        return np.tan(x)

    def pullback(self, inputs, outputs, grads):
        return [grads[0] * (1 + square(outputs[0]))]


@final
@dataclass(frozen=True)
class Tanh(Elementwise):
    """Hyperbolic tangent; its derivative is `sech_squared` (not 1 - tanh², see there)."""

    reads = Reads(inputs=(0,))

    def perform(self, x):
        return np.tanh(x)

    def pullback(self, inputs, outputs, grads):
        return [grads[0] * SechSquared()(inputs[0])]


@final
@dataclass(frozen=True)
class SechSquared(Elementwise):
    """sech²(x) = 1 - tanh²(x), the derivative of tanh, to full relative accuracy.

    1 - tanh² cancels once |tanh| nears 1 (every digit is lost by |x| ≈ 19); as
    4e / (1 + e)² with e = exp(-2|x|) it is accurate out to where it underflows.
    One node, so a tanh's gradient costs one op, not a dozen.
    Reads its operand and output: d sech² = -2 tanh(x) sech²(x).
    """

    reads = Reads(inputs=(0,), outputs=(0,))

    def perform(self, x):
        e = np.exp(-2 * np.abs(x))
        return 4 * e / np.square(1 + e)

    def pullback(self, inputs, outputs, grads):
        return [grads[0] * (-2 * tanh(inputs[0]) * outputs[0])]


@final
@dataclass(frozen=True)
class Sinh(Elementwise):
    """Hyperbolic sine."""

    def perform(self, x):
        return np.sinh(x)

    def pullback(self, inputs, outputs, grads):
        return [grads[0] * cosh(inputs[0])]


@final
@dataclass(frozen=True)
class Cosh(Elementwise):
    """Hyperbolic cosine."""

    def perform(self, x):
        return np.cosh(x)

    def pullback(self, inputs, outputs, grads):
        return [grads[0] * sinh(inputs[0])]


@final
@dataclass(frozen=True)
class Arctan(Elementwise):
    """Inverse tangent."""

    def perform(self, x):
        return np.arctan(x)

    def pullback(self, inputs, outputs, grads):
        return [grads[0] / (1 + square(inputs[0]))]


# -- special functions (SciPy) -------------------------------------------------------------------
@final
@dataclass(frozen=True)
class Erf(Elementwise):
    """Error function."""

    def perform(self, x):
        return sps.erf(x)

    def pullback(self, inputs, outputs, grads):
        x = inputs[0]
        return [grads[0] * (_TWO_OVER_SQRT_PI * exp(-square(x)))]


@final
@dataclass(frozen=True)
class Erfc(Elementwise):
    """Complementary error function 1 - erf(x), accurate where erf(x) is near 1."""

    def perform(self, x):
        return sps.erfc(x)

    def pullback(self, inputs, outputs, grads):
        x = inputs[0]
        return [grads[0] * (-_TWO_OVER_SQRT_PI * exp(-square(x)))]


#: where erfcx's derivative switches to its asymptotic series (20 terms reach 3e-17 there)
_ERFCX_SERIES_FROM = 8.0
#: (-1)^j (2j+1)!!, j = 0..19: erfcx'(x) = -(2/√π)·u·Σ c_j u^j with u = 1/(2x²)
_ERFCX_SERIES = [(-1) ** j * _pymath.prod(range(1, 2 * j + 2, 2)) for j in range(20)]


def _erfcx_derivative_far(x):
    """erfcx'(x) for x >= 8 from erfcx(x) ~ (1/(x√π))·Σ (-1)^k (2k-1)!!/(2x²)^k, by Horner in u = 1/(2x²).

    u takes (1/x)², not 1/x²: x² would overflow past 1e154, where the derivative is still ~1e-309.
    A float16 x is taken in float32: the series' coefficients reach 39!! ≈ 3e23.
    """
    if x.dtype == np.float16:
        x = astype(x, np.float32)
    u = square(1.0 / x) * 0.5
    total = _ERFCX_SERIES[-1]
    for c in reversed(_ERFCX_SERIES[:-1]):
        total = total * u + c
    return -_TWO_OVER_SQRT_PI * u * total


@final
@dataclass(frozen=True)
class Erfcx(Elementwise):
    """Scaled complementary error function exp(x²)·erfc(x): finite where erfc underflows."""

    reads = Reads(inputs=(0,), outputs=(0,))

    def perform(self, x):
        return sps.erfcx(x)

    def pullback(self, inputs, outputs, grads):
        x, out = inputs[0], outputs[0]
        # 2x·erfcx(x) - 2/√π cancels as x grows (2x² of relative error: 3 digits by x = 30);
        # past `_ERFCX_SERIES_FROM` its asymptotic series has no difference to take
        is_far = x >= _ERFCX_SERIES_FROM
        far = where(is_far, x, _ERFCX_SERIES_FROM)  # each branch sees only its own arguments, so
        near = where(is_far, 0.0, x)  # neither puts an inf·0 into the second derivative at +inf
        return [grads[0] * where(is_far, _erfcx_derivative_far(far), 2 * near * out - _TWO_OVER_SQRT_PI)]


@final
@dataclass(frozen=True)
class Gammaln(Elementwise):
    """log|Γ(x)|."""

    def perform(self, x):
        return sps.gammaln(x)

    def pullback(self, inputs, outputs, grads):
        return [grads[0] * digamma(inputs[0])]


@final
@dataclass(frozen=True)
class Polygamma(Elementwise):
    """The n-th derivative of digamma (n = 0 is digamma itself)."""

    n: int = 0
    reads = Reads(inputs=(0,))

    def perform(self, x):
        return sps.polygamma(self.n, x) if self.n else sps.digamma(x)

    def pullback(self, inputs, outputs, grads):
        return [grads[0] * Polygamma(self.n + 1)(inputs[0])]

    @property
    def name(self) -> str:
        return "digamma" if self.n == 0 else f"polygamma[{self.n}]"


def _unary(op, doc: str):
    def apply(x):
        return op(*as_operands(x))

    apply.__doc__ = doc
    return apply


exp = _unary(Exp(), "e**x, elementwise.")
exp2 = _unary(Exp2(), "2**x, elementwise.")
expm1 = _unary(Expm1(), "e**x - 1, accurate for small x.")
log = _unary(Log(), "Natural logarithm, elementwise.")
log2 = _unary(Log2(), "Base-2 logarithm.")
log10 = _unary(Log10(), "Base-10 logarithm.")
log1p = _unary(Log1p(), "log(1 + x), accurate for small x.")
sin = _unary(Sin(), "Sine.")
cos = _unary(Cos(), "Cosine.")
tan = _unary(Tan(), "Tangent.")
tanh = _unary(Tanh(), "Hyperbolic tangent.")
sinh = _unary(Sinh(), "Hyperbolic sine.")
cosh = _unary(Cosh(), "Hyperbolic cosine.")
arctan = _unary(Arctan(), "Inverse tangent.")
erf = _unary(Erf(), "Error function (scipy.special.erf).")
erfc = _unary(Erfc(), "Complementary error function (scipy.special.erfc).")
erfcx = _unary(Erfcx(), "Scaled complementary error function exp(x**2) * erfc(x) (scipy.special.erfcx).")
gammaln = _unary(Gammaln(), "log|Γ(x)| (scipy.special.gammaln).")
digamma = _unary(Polygamma(0), "ψ(x) = d/dx log Γ(x) (scipy.special.digamma).")


def power(x, y):
    """x ** y."""
    return Power()(*as_operands(x, y))


def polygamma(n: int, x):
    """ψ⁽ⁿ⁾(x) (scipy.special.polygamma), n a non-negative Python int."""
    return Polygamma(int(n))(*as_operands(x))
