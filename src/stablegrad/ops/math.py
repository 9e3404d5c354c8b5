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
from ..graph.types import is_floating
from .base import Elementwise, as_operands, astype
from .elementwise import absolute, equal, floor, greater, sign, sqrt, square, where

_LN2 = _pymath.log(2.0)
_LN10 = _pymath.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / _pymath.sqrt(_pymath.pi)
_SQRT_2PI = _pymath.sqrt(2.0 * _pymath.pi)
_SQRT_HALF = _pymath.sqrt(0.5)


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
            # a zero cotangent contributes nothing, also where x**(y-1) overflows (0 · c·x**400 at x = 10);
            # x**0 is the constant 1, also at x = 0, where y·x**(y-1) would be 0 · inf (a polynomial's
            # constant term written c·x**0); the derivative before the cotangent: g·y may overflow
            # where the derivative is 0
            gx = where(equal(g, 0) | equal(y, 0), 0, g * (y * _power_less_one(x, y, out)))
        safe_x = where(equal(x, 0), 1, x)
        gy = where(equal(x, 0) | equal(g, 0), 0, g * out * log(safe_x))
        return [gx, gy]


def _power_less_one(x, y, out):
    """x**(y - 1), as out / x where out is a normal number and x is not 0: two roundings, where
    x**(y - 1) carries the rounding of y - 1 times |log x| (700 ulps at x = 1e300). Where out
    underflows or overflows (x**1.5 at x = 1e-300) or x is 0, x**(y - 1) itself."""
    if not is_floating(out.dtype):
        return power(x, y - 1)
    info = np.finfo(out.dtype)
    magnitude = absolute(out)
    exact = (magnitude >= info.tiny) & (magnitude <= info.max) & ~equal(x, 0)
    return where(exact, out / where(exact, x, 1), power(x, y - 1))


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


@final
@dataclass(frozen=True)
class Arcsinh(Elementwise):
    """Inverse hyperbolic sine; d = 1/√(1 + x²), written so that x² cannot overflow: past
    |x| = 1 as 1/(|x|·√(1 + 1/x²))."""

    def perform(self, x):
        return np.arcsinh(x)

    def pullback(self, inputs, outputs, grads):
        a = absolute(inputs[0])
        large = greater(a, 1)
        safe = where(large, a, 1)  # (each branch's operand kept off the other's poles)
        slope = where(large, 1 / (safe * sqrt(1 + square(1 / safe))), 1 / sqrt(1 + square(where(large, 0, a))))
        return [grads[0] * slope]


@final
@dataclass(frozen=True)
class Arccosh(Elementwise):
    """Inverse hyperbolic cosine (NaN below 1); d = 1/(√(x - 1)·√(x + 1)): accurate near 1, and
    no x² to overflow."""

    def perform(self, x):
        return np.arccosh(x)

    def pullback(self, inputs, outputs, grads):
        (x,) = inputs
        return [grads[0] / (sqrt(x - 1) * sqrt(x + 1))]


@final
@dataclass(frozen=True)
class Arctanh(Elementwise):
    """Inverse hyperbolic tangent (±inf at ±1, NaN past them); d = 1/((1 - x)(1 + x)), accurate near ±1."""

    def perform(self, x):
        return np.arctanh(x)

    def pullback(self, inputs, outputs, grads):
        (x,) = inputs
        return [grads[0] / ((1 - x) * (1 + x))]


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


def _exp_half_square(x, sign: float):
    """exp(sign·x²/2) to about an ulp, also where x² is not exact in the format.

    exp(-x²/2) of a rounded x² is off by x²/2 times the rounding (2e-13 at x = 30).  With
    x = hi + lo, hi on a grid of 2⁻²⁰ (2⁻⁸ in float32), hi² is exact, and
    x² = hi² + lo·(hi + x) leaves only a small term to round.  |x| is clamped to 40 (15 in
    float32), past which the result has under- or overflowed anyway.  The derivative
    passes through lo and hi + x (floor has none): sign·x·exp(sign·x²/2), as it should.
    """
    wide = x.dtype == np.float64
    bound, grid = (40.0, 2.0**20) if wide else (15.0, 2.0**8)
    x = where(x > bound, bound, where(x < -bound, -bound, x))  # (NaN stays NaN)
    hi = floor(x * grid) / grid
    lo = x - hi
    e = exp((0.5 * sign) * square(hi))
    # e·expm1(r) is inf·0 = NaN where exp(+x²/2) overflows at a grid point (ndtri at p = 0, 1)
    return where(equal(e, np.inf), e, e + e * expm1((0.5 * sign) * (lo * (hi + x))))


def ndtr_tail(xp, erfcx, x):
    """Φ(x) for float64 x in [-40, -1] as erfcx(-x/√2)·exp(-x²/2)/2, with x = hi + lo, hi on a grid
    of 2⁻²⁰ (hi² exact) and x² = hi² + lo·(hi + x).  `xp` is NumPy or jax.numpy, `erfcx` its
    erfcx: `Ndtr.perform` and the JAX lowering compute the same formula."""
    hi = xp.floor(x * 2.0**20) / 2.0**20
    lo = x - hi
    e = xp.exp(-0.5 * xp.square(hi))
    return 0.5 * erfcx(-x * _SQRT_HALF) * (e + e * xp.expm1(-0.5 * (lo * (hi + x))))


@final
@dataclass(frozen=True)
class Ndtr(Elementwise):
    """Φ(x), the standard normal CDF (scipy.special.ndtr), to about an ulp in the lower tail.

    SciPy's erfc(-x/√2)/2 carries the rounding of x/√2 into erfc's exponent: 6e-14 relative
    at x = -30; and it flushes Φ to 0 below x ≈ -37.5, where Φ is still subnormal.  Below
    x = -1 this is erfcx(-x/√2)·exp(-x²/2)/2 instead, with x² split so nothing is rounded
    into the exponent (see `ndtr_tail`).  Pullback: the density φ(x) = exp(-x²/2)/√(2π),
    likewise.
    """

    def perform(self, x):
        x = np.asarray(x)
        dtype = sps.ndtr(np.ones((), x.dtype)).dtype
        wide = x.astype(np.float64)
        with np.errstate(under="ignore", invalid="ignore"):
            tail = ndtr_tail(np, sps.erfcx, np.clip(wide, -40.0, -1.0))  # (below -40 Φ has underflowed)
            out = np.where(wide < -1.0, tail, sps.ndtr(wide))
        return out.astype(dtype, copy=False)[()]

    def pullback(self, inputs, outputs, grads):
        g = grads[0]
        x = astype(inputs[0], g.dtype)  # an integer operand's (discarded) gradient still needs a float graph
        return [g * (_exp_half_square(x, -1.0) / _SQRT_2PI)]


@final
@dataclass(frozen=True)
class Ndtri(Elementwise):
    """Φ⁻¹(p), the inverse of the standard normal CDF (scipy.special.ndtri).

    Pullback, from the output y: dy/dp = 1/φ(y) = √(2π)·exp(y²/2), exponent unrounded
    (1e298 at p = 1e-300; it overflows only where the true slope does).  Reads its output.
    """

    reads = READS_OUTPUTS

    def perform(self, p):
        return sps.ndtri(p)

    def pullback(self, inputs, outputs, grads):
        return [grads[0] * (_SQRT_2PI * _exp_half_square(outputs[0], 1.0))]


#: Stirling's correction w(x) = log Γ(x) - (x - ½) log x + x - ½ log 2π ~ Σ B₂ₖ / (2k(2k-1) x²ᵏ⁻¹), k = 1..6:
#: its truncation is below 1e-17 from x = 20 on
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360)
#: from here on betaln takes log Γ(large) - log Γ(large + small) from Stirling's series
_BETALN_STIRLING_FROM = 20.0


def _stirling_correction(x):
    """w(x) by Horner's rule (arithmetic only: NumPy and JAX arrays alike)."""
    u = 1 / (x * x)
    total = _STIRLING[-1]
    for c in reversed(_STIRLING[:-1]):
        total = total * u + c
    return total / x


def betaln_stirling(xp, gammaln, big, little):
    """log B(big, little) for big >= 20, with log Γ(big) - log Γ(big + little) from Stirling's
    series so that nothing large cancels.  `xp` is NumPy or jax.numpy, `gammaln` its gammaln:
    `_betaln` and the JAX lowering compute the same formula."""
    return (
        gammaln(little)
        - (big - 0.5) * xp.log1p(little / big)
        - little * xp.log(big + little)
        + little
        + (_stirling_correction(big) - _stirling_correction(big + little))
    )


def _betaln(a, b):
    """log|B(a, b)| in float64, to a few ulps also where one argument is large.

    scipy.special.betaln loses digits there (3e-8 relative at (0.14, 9.7e5), 3e-11 at (1e6, 0.7)):
    log Γ(large) - log Γ(large + small) cancels.  With the larger argument at least 20 it is
    -(large - ½)·log1p(small/large) - small·log(large + small) + small + w(large) - w(large + small)
    (Stirling's series w), with no large terms left to cancel; elsewhere SciPy's, exact there.
    """
    a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
    small, large = np.minimum(a, b), np.maximum(a, b)
    far = (large >= _BETALN_STIRLING_FROM) & (small > 0) & np.isfinite(large)  # (an infinite argument: SciPy's -inf)
    big, little = np.where(far, large, _BETALN_STIRLING_FROM), np.where(far, small, 1.0)
    with np.errstate(all="ignore"):
        return np.where(far, betaln_stirling(np, sps.gammaln, big, little), sps.betaln(a, b))


#: ψ's large-argument series starts from here (its first term left out, x⁻¹², is below 1e-17 there)
_DIGAMMA_SERIES_FROM = 20
#: B₂ₖ/2k of ψ(x) ~ log x - 1/(2x) - Σₖ B₂ₖ/(2k·x²ᵏ), k = 1..5
_DIGAMMA_SERIES = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132)


def digamma_difference(xp, digamma, a, b):
    """ψ(a) - ψ(a + b) in float64, without the cancellation of the two digammas (the
    gradient of betaln: at (1e10, 1.5) the difference is 1.5e-10 and ψ(1e10) is 23).

    For a > 0 and a + b > 0 every term below has the sign of -b: the recurrence
    ψ(x) = ψ(x + 1) - 1/x takes both arguments up to `_DIGAMMA_SERIES_FROM` in steps
    1/(a + i) - 1/(c + i) = b/((a + i)(c + i)), and there the series' differences
    1/Aᵐ - 1/Cᵐ = b·(1/A)(1/C)·Σⱼ A⁻ʲ C⁻⁽ᵐ⁻¹⁻ʲ⁾ and log A - log C = -log1p(b/A).  Elsewhere
    (poles, negative arguments, inf, NaN) the two digammas as they are.  `xp` is NumPy or
    jax.numpy, `digamma` its digamma: `DigammaDifference.perform` and the JAX lowering share it.
    """
    c = a + b
    inside = (a > 0) & (c > 0) & xp.isfinite(a) & xp.isfinite(c)
    a_in, b_in = xp.where(inside, a, 1.0), xp.where(inside, b, 0.0)  # each branch sees its own arguments
    c_in = a_in + b_in
    steps = xp.clip(xp.ceil(_DIGAMMA_SERIES_FROM - xp.minimum(a_in, c_in)), 0, _DIGAMMA_SERIES_FROM)
    recurrence = xp.zeros_like(a_in)
    for i in range(_DIGAMMA_SERIES_FROM):
        # (b/(a+i))·(1/(c+i)): no product (a+i)(c+i) to underflow, which XLA makes of b/(a+i)/(c+i)
        recurrence = recurrence + xp.where(i < steps, b_in / (a_in + i) * (1 / (c_in + i)), 0.0)
    big = a_in + steps
    u, v = 1 / big, 1 / (big + b_in)
    lead = b_in * u * v  # 1/A - 1/C
    series = -xp.log1p(b_in * u) - lead / 2
    power_u, homogeneous = xp.ones_like(u), xp.ones_like(u)  # uᵐ⁻¹ and Σⱼ uʲ v^(m-1-j), from m = 1
    for m in range(2, 2 * len(_DIGAMMA_SERIES) + 1):
        power_u = power_u * u
        homogeneous = power_u + v * homogeneous
        if m % 2 == 0:
            series = series - _DIGAMMA_SERIES[m // 2 - 1] * lead * homogeneous
    return xp.where(inside, series - recurrence, digamma(a) - digamma(c))


@final
@dataclass(frozen=True)
class DigammaDifference(Elementwise):
    """ψ(a) - ψ(a + b), accurate where the two digammas nearly cancel (see `digamma_difference`).

    Pullback: ψ'(a) - ψ'(a + b) and -ψ'(a + b).
    """

    def perform(self, a, b):
        dtype = np.result_type(
            sps.digamma(np.ones((), np.asarray(a).dtype)), sps.digamma(np.ones((), np.asarray(b).dtype))
        )
        a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
        with np.errstate(all="ignore"):
            return digamma_difference(np, sps.digamma, a, b).astype(dtype, copy=False)[()]

    def pullback(self, inputs, outputs, grads):
        (a, b), (g,) = inputs, grads
        both = Polygamma(1)(a + b)
        return [g * (Polygamma(1)(a) - both), -g * both]


@final
@dataclass(frozen=True)
class Betaln(Elementwise):
    """log|B(a, b)| (scipy.special.betaln, more accurate for a large argument: see `_betaln`).

    Pullback: ψ(a) - ψ(a + b) and ψ(b) - ψ(a + b), each a `DigammaDifference` (as two digammas
    they cancel for a large argument: 3e-5 relative at (1e10, 1.5)).
    """

    def perform(self, a, b):
        dtype = np.result_type(sps.betaln(np.ones((), np.asarray(a).dtype), np.ones((), np.asarray(b).dtype)))
        return _betaln(a, b).astype(dtype, copy=False)[()]

    def pullback(self, inputs, outputs, grads):
        (a, b), (g,) = inputs, grads
        return [g * DigammaDifference()(a, b), g * DigammaDifference()(b, a)]


# -- modified Bessel functions of real order v: the order is not differentiated ---------------------------
#: from here on SciPy's scaled Bessel functions (AMOS) give NaN (from about 1.07e9), so the
#: asymptotic series does instead: its terms fall as (4v²/8x)ᵏ, below eps after three for v² << x
_BESSEL_SERIES_FROM = 1e8


def _scaled_bessel(scipy_fn, sign: float, v, x):
    """kve (sign +1) or ive (sign -1): SciPy's, and for |x| >= `_BESSEL_SERIES_FROM` (where v² is
    small against |x|) the large-argument series √(π/2x)·Σ (±1)ᵏ aₖ(v)/xᵏ (divided by π for ive)."""
    v, x = np.asarray(v), np.asarray(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.asarray(scipy_fn(v, x))
        far = (np.abs(x) >= _BESSEL_SERIES_FROM) & (4 * v * v < 1e-3 * np.abs(x)) & np.isfinite(x)
        if np.any(far):
            mu, z = 4.0 * v * v, 8.0 * np.abs(x)
            term, total = np.ones_like(out), np.ones_like(out)
            for k in (1, 2, 3):
                term = term * sign * (mu - (2 * k - 1) ** 2) / (k * z)
                total = total + term
            lead = np.sqrt(np.pi / (2 * np.abs(x))) if sign > 0 else 1 / np.sqrt(2 * np.pi * np.abs(x))
            series = (lead * total).astype(out.dtype)
            if sign > 0:
                far &= x > 0  # (K_v of a negative number is NaN, as SciPy has it)
            else:  # I_v(-x) = (-1)^v I_v(x) for an integer order; SciPy's NaN elsewhere stays
                series = np.where(x < 0, np.where(v % 2 == 0, series, -series), series)
                far &= (x > 0) | (v == np.floor(v))
            out = np.where(far, series, out)
    return out[()]


def _order_not_derived(g):
    """The gradient in a Bessel function's order v, which is not derived here: NaN, not a silent 0."""
    return g * np.nan


@final
@dataclass(frozen=True)
class Kv(Elementwise):
    """K_v(x), the modified Bessel function of the second kind (scipy.special.kv).

    It underflows to 0 past x ≈ 700, where its log (about -x) is an ordinary number:
    `log(kv(v, x))` is recognised as `log(kve(v, x)) - x`.
    Pullback in x: -(K_{v-1}(x) + K_{v+1}(x)) / 2; in v: NaN (see `_order_not_derived`).
    """

    def perform(self, v, x):
        return sps.kv(v, x)

    def pullback(self, inputs, outputs, grads):
        (v, x), (g,) = inputs, grads
        return [_order_not_derived(g), g * (-0.5 * (self(v - 1, x) + self(v + 1, x)))]


@final
@dataclass(frozen=True)
class Kve(Elementwise):
    """K_v(x)·exp(x), exponentially scaled (scipy.special.kve): finite where K_v underflows.

    Pullback in x: kve(v, x) - (kve(v-1, x) + kve(v+1, x)) / 2 (reads its output); in v: NaN.
    The difference cancels as x grows (kve' ≈ -kve/2x): measured 1e-10 relative in the second
    derivative at x = 600, against mpmath.
    """

    reads = Reads(inputs=ALL, outputs=(0,))

    def perform(self, v, x):
        return _scaled_bessel(sps.kve, 1.0, v, x)

    def pullback(self, inputs, outputs, grads):
        (v, x), (out,), (g,) = inputs, outputs, grads
        return [_order_not_derived(g), g * (out - 0.5 * (self(v - 1, x) + self(v + 1, x)))]


@final
@dataclass(frozen=True)
class Iv(Elementwise):
    """I_v(x), the modified Bessel function of the first kind (scipy.special.iv).

    It overflows past x ≈ 713 (`log(iv(v, x))` is recognised as `log(ive(v, x)) + |x|`).
    Pullback in x: (I_{v-1}(x) + I_{v+1}(x)) / 2; in v: NaN.
    """

    def perform(self, v, x):
        return sps.iv(v, x)

    def pullback(self, inputs, outputs, grads):
        (v, x), (g,) = inputs, grads
        return [_order_not_derived(g), g * (0.5 * (self(v - 1, x) + self(v + 1, x)))]


@final
@dataclass(frozen=True)
class Ive(Elementwise):
    """I_v(x)·exp(-|x|), exponentially scaled (scipy.special.ive): finite where I_v overflows.

    Pullback in x: (ive(v-1, x) + ive(v+1, x)) / 2 - sign(x)·ive(v, x) (reads its output); in v: NaN.
    The difference cancels as |x| grows, as kve's does.
    """

    reads = Reads(inputs=ALL, outputs=(0,))

    def perform(self, v, x):
        return _scaled_bessel(sps.ive, -1.0, v, x)

    def pullback(self, inputs, outputs, grads):
        (v, x), (out,), (g,) = inputs, outputs, grads
        return [_order_not_derived(g), g * (0.5 * (self(v - 1, x) + self(v + 1, x)) - sign(x) * out)]


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
arcsinh = _unary(Arcsinh(), "Inverse hyperbolic sine.")
arccosh = _unary(Arccosh(), "Inverse hyperbolic cosine (NaN below 1).")
arctanh = _unary(Arctanh(), "Inverse hyperbolic tangent (±inf at ±1, NaN past them).")
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


def kv(v, x):
    """K_v(x), the modified Bessel function of the second kind of real order v (scipy.special.kv).

    Differentiable in x; the gradient in the order v is NaN (not derived).

    >>> import numpy as np, stablegrad as sg
    >>> x = sg.vector("x")
    >>> [round(float(k), 10) for k in sg.function([x], sg.kv(0.5, x))(np.array([1.0]))]  # √(π/2)·e⁻¹
    [0.4610685044]
    """
    return Kv()(*as_operands(v, x))


def kve(v, x):
    """K_v(x)·exp(x), the exponentially scaled kv (scipy.special.kve), finite where kv underflows."""
    return Kve()(*as_operands(v, x))


def iv(v, x):
    """I_v(x), the modified Bessel function of the first kind of real order v (scipy.special.iv).

    Differentiable in x; the gradient in the order v is NaN (not derived)."""
    return Iv()(*as_operands(v, x))


def ive(v, x):
    """I_v(x)·exp(-|x|), the exponentially scaled iv (scipy.special.ive), finite where iv overflows."""
    return Ive()(*as_operands(v, x))


def betaln(a, b):
    """log|B(a, b)|, the log of the beta function (scipy.special.betaln).

    >>> import numpy as np, stablegrad as sg
    >>> a = sg.vector("a")
    >>> [round(float(v), 12) for v in sg.function([a], sg.betaln(a, 2.0))(np.array([1.0, 3.0]))]  # log 1/2, log 1/12
    [-0.69314718056, -2.484906649788]
    """
    return Betaln()(*as_operands(a, b))


def ndtr(x):
    """The standard normal CDF Φ(x), elementwise (scipy.special.ndtr); its gradient is the density φ(x).

    Relatively accurate in the lower tail (subnormal down to x ≈ -38.5); for log Φ past
    that, or where Φ rounds to 1, use `log_ndtr`.

    >>> import numpy as np, stablegrad as sg
    >>> x = sg.vector("x")
    >>> [f"{v:.6g}" for v in sg.function([x], sg.ndtr(x))(np.array([-30.0, 0.0, 1.0]))]
    ['4.90671e-198', '0.5', '0.841345']
    """
    return Ndtr()(*as_operands(x))


def ndtri(p):
    """Φ⁻¹(p), the inverse of the standard normal CDF, elementwise (scipy.special.ndtri).

    Its gradient 1/φ(Φ⁻¹(p)) is computed without rounding the exponent (2.7e298 at p = 1e-300).

    >>> import numpy as np, stablegrad as sg
    >>> p = sg.vector("p")
    >>> [f"{v:.6g}" for v in sg.function([p], sg.ndtri(p))(np.array([1e-300, 0.5, 0.975]))]
    ['-37.0471', '0', '1.95996']
    """
    return Ndtri()(*as_operands(p))
