"""Scalar semantics of the mpmath evaluator: extended-real arithmetic over mpf numbers.

`scalar_ops()` maps a function name to a scalar implementation with the
conventions of `mpmath_eval` (IEEE extended reals without overflow), and
`elementwise(name)` lifts one over broadcast object arrays.  mpmath is imported
lazily: it is needed by the audit only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import StableGradError


class MissingDependencyError(StableGradError, ImportError):
    """An optional dependency of a feature is not installed."""

    def __str__(self) -> str:
        return self.message


def _mpmath():
    try:
        import mpmath
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise MissingDependencyError(
            "the high-precision reference needs mpmath, which is not installed: pip install 'stablegrad[audit]'"
        ) from exc
    return mpmath


# -- scalars ------------------------------------------------------------------------------------------
def _scalars():
    """The scalar semantics, built once mpmath is imported."""
    mpmath = _mpmath()
    mp, mpf = mpmath.mp, mpmath.mpf
    nan, inf = mpf("nan"), mpf("inf")

    def isnan(a):
        return a != a

    def real(z):
        if isinstance(z, mpmath.mpc):
            return z.real if z.imag == 0 else nan
        return z

    def guarded(fn):
        """fn on mpf, nan for nan, and nan wherever mpmath has no real answer."""

        def apply(*args):
            if any(isnan(a) for a in args):
                return nan
            try:
                return real(fn(*args))
            except (ZeroDivisionError, ValueError):
                return nan

        return apply

    def exp(a):
        if not (abs(a) > 1e6 and mpmath.isfinite(a)):
            return mp.exp(a)
        # mpmath's own reduction of a huge argument costs ~60 ms at 330 digits; this one ~1 ms:
        # exp(a) = 2**n · exp(a - n ln 2), with a / ln 2 carried to all its integer digits
        extra = int(mpmath.log(abs(a), 2)) + 20
        with mp.workprec(mp.prec + extra):
            n = mpmath.floor(a / mp.ln2)
            r = a - n * mp.ln2
        return mpmath.ldexp(mp.exp(r), int(n))

    def log(a):
        if a < 0:
            return nan
        return -inf if a == 0 else mp.log(a)

    def log1p(a):
        if a < -1:
            return nan
        return -inf if a == -1 else mp.log1p(a)

    def divide(a, b):
        if isnan(a) or isnan(b):
            return nan
        if b == 0:
            return nan if a == 0 else (inf if a > 0 else -inf)
        return a / b

    def power(a, b):
        if b == 0 or a == 1:
            return mpf(1)  # IEEE pow: x**0 = 1 and 1**y = 1, nan included
        if isnan(a) or isnan(b):
            return nan
        if a == 0 and b < 0:
            return inf
        try:
            return real(a**b)
        except ZeroDivisionError:
            return inf

    def maximum(a, b):
        return nan if isnan(a) or isnan(b) else (a if a >= b else b)

    def minimum(a, b):
        return nan if isnan(a) or isnan(b) else (a if a <= b else b)

    def mod(a, b):  # sign of b, as NumPy
        if isnan(a) or isnan(b) or b == 0 or mpmath.isinf(a):
            return nan
        if mpmath.isinf(b):
            return a if (a >= 0) == (b > 0) or a == 0 else b
        return a - mpmath.floor(a / b) * b

    def floor_divide(a, b):
        q = divide(a, b)
        return q if isnan(q) or mpmath.isinf(q) else mpmath.floor(q)

    def sign(a):
        return nan if isnan(a) else mpf((a > 0) - (a < 0))

    def clip(a, lo, hi):
        return minimum(maximum(a, lo), hi)

    def gammaln(a):
        if a <= 0 and a == mpmath.floor(a):
            return inf
        return mp.loggamma(a).real if a < 0 else mp.loggamma(a)

    def polygamma(n):
        def apply(a):
            if a <= 0 and a == mpmath.floor(a):
                return nan
            return mp.psi(n, a)

        return guarded(apply)

    def erfcx(a):
        if a == inf:
            return mpf(0)
        return mp.exp(a * a) * mp.erfc(a)

    def logaddexp(a, b):
        return log(exp(a) + exp(b))

    def ndtri(p):  # Φ⁻¹ by Newton on log Φ (mpmath has no inverse normal CDF); the upper half by symmetry
        if p < 0 or p > 1:
            return nan
        if p == 0 or p == 1:
            return -inf if p == 0 else inf
        if p > 0.5:
            return -ndtri(1 - p)  # exact: 1 - p of a float in (1/2, 1) needs no more bits
        from scipy.special import ndtri as float_ndtri  # the float64 answer starts Newton near its root

        start = mpf(float(float_ndtri(float(p))))
        return mp.findroot(lambda y: log(mp.ncdf(y)) - log(p), start)

    def betaln(a, b):
        return log(abs(mp.beta(a, b)))

    def digamma_difference(a, b):
        return mp.psi(0, a) - mp.psi(0, a + b)

    # modified Bessel functions, real order, on SciPy's domain: K_v for x >= 0, I_v for x < 0 only at
    # integer orders (elsewhere the value is complex: NaN)
    def kv(v, a):
        if a < 0:
            return nan
        return inf if a == 0 else mp.besselk(v, a)

    def kve(v, a):
        if a == inf:
            return mpf(0)
        return kv(v, a) * exp(a) if a > 0 else kv(v, a)

    def iv(v, a):
        if a < 0 and v != mpmath.floor(v):
            return nan
        if mpmath.isinf(a):
            return inf if a > 0 or v % 2 == 0 else -inf
        return mp.besseli(v, a)

    def ive(v, a):
        if mpmath.isinf(a):
            return nan if a < 0 and v != mpmath.floor(v) else mpf(0)
        return iv(v, a) * exp(-abs(a))

    return {
        "nan": nan,
        "mpf": mpf,
        "isnan": isnan,
        "isinf": lambda a: bool(mpmath.isinf(a)),
        "isfinite": lambda a: bool(mpmath.isfinite(a)),
        "exp": guarded(exp),
        "exp2": guarded(lambda a: mpf(2) ** a),
        "expm1": guarded(mp.expm1),
        "log": guarded(log),
        "log2": guarded(lambda a: divide(log(a), mp.ln2)),
        "log10": guarded(lambda a: divide(log(a), mp.ln10)),
        "log1p": guarded(log1p),
        "sin": guarded(mp.sin),
        "cos": guarded(mp.cos),
        "tan": guarded(mp.tan),
        "tanh": guarded(mp.tanh),
        "sech_squared": guarded(lambda a: mp.sech(a) ** 2),
        "sinh": guarded(mp.sinh),
        "cosh": guarded(mp.cosh),
        "arctan": guarded(mp.atan),
        "arcsinh": guarded(mp.asinh),
        "arccosh": guarded(mp.acosh),
        "arctanh": guarded(mp.atanh),
        "erf": guarded(mp.erf),
        "erfc": guarded(mp.erfc),
        "erfcx": guarded(erfcx),
        "gammaln": guarded(gammaln),
        "ndtr": guarded(mp.ncdf),
        "ndtri": guarded(ndtri),
        "betaln": guarded(betaln),
        "digamma_difference": guarded(digamma_difference),
        "kv": guarded(kv),
        "kve": guarded(kve),
        "iv": guarded(iv),
        "ive": guarded(ive),
        "polygamma": polygamma,
        "sqrt": guarded(lambda a: nan if a < 0 else mp.sqrt(a)),
        "add": lambda a, b: a + b,
        "subtract": lambda a, b: a - b,
        "multiply": lambda a, b: a * b,
        "divide": divide,
        "power": power,
        "maximum": maximum,
        "minimum": minimum,
        "mod": mod,
        "floor_divide": floor_divide,
        "negative": lambda a: -a,
        "abs": lambda a: abs(a),
        "square": lambda a: a * a,
        "reciprocal": lambda a: divide(mpf(1), a),
        "sign": sign,
        "floor": guarded(mpmath.floor),
        "ceil": guarded(mpmath.ceil),
        "round": lambda decimals: guarded(lambda a: mpmath.nint(a * mpf(10) ** decimals) / mpf(10) ** decimals),
        "clip": clip,
        "logaddexp": logaddexp,
    }


@functools.cache
def scalar_ops() -> dict[str, Any]:
    return _scalars()


@functools.cache
def _ufunc(name: str, nin: int):
    return np.frompyfunc(scalar_ops()[name], nin, 1)


def _objects(result) -> np.ndarray:
    """A result of a frompyfunc ufunc (a bare object for 0-d operands) as an object array."""
    if isinstance(result, np.ndarray):
        return result
    out = np.empty((), dtype=object)
    out[()] = result
    return out


def elementwise(name: str) -> Callable:
    """impl for an elementwise op: the scalar function `name` over broadcast operands."""

    def impl(op, *values):
        return _objects(_ufunc(name, len(values))(*values))

    return impl
