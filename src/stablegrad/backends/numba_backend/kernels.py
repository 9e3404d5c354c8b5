"""Numba kernels for the logsumexp family, row by row over the last axis.

Each computes what the op's stable body computes (ties at the max counted apart, so
tails stay exact; -inf rows, +inf entries and NaN as the body has them), in two or
three passes over a row held in cache instead of a dozen NumPy calls over the array.
The inner loops have no branches and call `exp` below, not libm's, so that LLVM turns
them into SIMD code; sums may be reassociated (`reassoc`), so the rounding can differ
from the NumPy backend's in the last bits, never the edge values.
"""

from __future__ import annotations

import math

import numba
import numpy as np

#: reassociation lets LLVM vectorise the sums; no flag that assumes away inf or NaN
_FAST = {"reassoc", "contract"}


def _compiled(vectorised: bool = False, inline: bool = False):
    """numba.njit, cached on disk; `vectorised` allows the sums to be reassociated.  A division
    by zero gives inf or NaN as in NumPy (`error_model="numpy"`): Python's check and raise is
    a branch in every division, which keeps LLVM from vectorising the loop."""
    return numba.njit(
        cache=True,
        nogil=True,
        error_model="numpy",
        fastmath=_FAST if vectorised else False,
        inline="always" if inline else "never",
    )


_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2 in two parts: k · LN2_HI is exact for |k| < 2**11
_LN2_LO = 1.90821492927058770002e-10
_SHIFT = 6755399441055744.0  # 1.5 · 2**52: adding it rounds to an integer held in the low bits
_OVERFLOW = 709.782712893384  # log of the largest float64
_UNDERFLOW = -745.1332191019412  # below: exp rounds to 0


_SHIFT_BITS = np.int64(0x4338000000000000)  # its bits
#: e**r ≈ 1 + r + r²·(c2 + c3 r + ... + c13 r¹¹) on |r| <= ln 2 / 2: the degree-13 Taylor
#: polynomial, remainder below 1e-17.  (A degree-12 fit, mpmath.chebyfit, saves an FMA and
#: is as accurate with FMAs, but the fused loops compile without contraction, and there it
#: rounds some results the other way: 1.12 ulps at exp(564.58...), where this gives 0.)
_EXP_POLY = tuple(1.0 / math.factorial(i) for i in range(2, 14))


@_compiled(vectorised=True, inline=True)
def _exp_parts(s):
    """(n, p) with e**s = p · 2**n, n an int64: s = n ln 2 + r with |r| <= ln 2 / 2, p the
    polynomial `_EXP_POLY` for e**r.  n is read from the bits of s / ln 2 + 1.5 · 2**52,
    not by subtracting the shift back in floats, which the reassociation flag would let
    LLVM fold away.  For |s| past 2**51 (and for inf and NaN) n is meaningless: the
    callers select those apart, and a NaN s makes p NaN."""
    n = np.int64(np.float64(s * _LOG2E + _SHIFT).view(np.int64) - _SHIFT_BITS)
    k = np.float64(n)
    r = (s - k * _LN2_HI) - k * _LN2_LO
    c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13 = _EXP_POLY
    p = c13
    p = p * r + c12
    p = p * r + c11
    p = p * r + c10
    p = p * r + c9
    p = p * r + c8
    p = p * r + c7
    p = p * r + c6
    p = p * r + c5
    p = p * r + c4
    p = p * r + c3
    p = p * r + c2
    p = p * r + 1.0
    p = p * r + 1.0
    return n, p


@_compiled(vectorised=True, inline=True)
def _power_of_two(n):
    """2**n as a float64, for an int64 n in [-1022, 1023] (exponent bits set directly)."""
    return np.int64((n + 1023) << 52).view(np.float64)


@_compiled(vectorised=True, inline=True)
def exp(t):
    """e**t to within an ulp, branch-free (`_exp_parts`), times 2**n in two halves (so
    that subnormal and near-overflow results are right).  inf → inf, -inf → 0, NaN → NaN
    (a NaN goes through the arithmetic as itself; no comparison below is true for it)."""
    n, p = _exp_parts(t)
    half = n >> 1
    y = p * _power_of_two(half) * _power_of_two(n - half)
    y = np.inf if t > _OVERFLOW else y
    return 0.0 if t < _UNDERFLOW else y


_OFFSET = 512  # exponent offset: p · 2**(n + _OFFSET) stays normal
_TWO_TO_MINUS_512 = 2.0**-512


@_compiled(vectorised=True, inline=True)
def exp_nonpositive(t):
    """`exp` for t <= 0 (or NaN), as the terms x - max of the softmax family are: the same
    values, with one scaling fewer.  p · 2**(n + 512) is a normal number for every n from
    -1076 up to 0, so it is exact, and the one rounding is the product with 2**-512, as
    the second half of `exp`'s scaling."""
    n, p = _exp_parts(t)
    y = _power_of_two(n + _OFFSET) * p * _TWO_TO_MINUS_512
    return 0.0 if t < _UNDERFLOW else y


_SQRT2 = 1.4142135623730951
_ATANH_SERIES = tuple(2.0 / (2 * i + 3) for i in range(11))  # log f = 2s + Σ 2 s^(2i+3) / (2i+3)


@_compiled(inline=True)
def log1p_nonnegative(y):
    """log(1 + y) for y >= 0 (inf and NaN as themselves), branch-free so that a loop of them
    vectorises (libm's log1p is a call per entry): within 2 ulps (tested against mpmath).

    Below sqrt(2) - 1 it is 2 atanh(s), s = y / (2 + y), from y itself (1 + y would round
    y's tail away); above, 1 + y = 2**e f with f in [sqrt(1/2), sqrt(2)), log = e ln 2 +
    2 atanh((f - 1) / (f + 1)) plus what rounding 1 + y lost, (y - (u - 1)) / u.  The
    series in s**2 (|s| <= 0.1716) is summed to its 23rd power, below 1e-17.
    """
    u = 1.0 + y
    bits = np.float64(u).view(np.int64)
    e = ((bits >> 52) & 0x7FF) - 1023
    f = np.int64((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000).view(np.float64)
    big = f > _SQRT2
    f = f * 0.5 if big else f
    e = e + 1 if big else e
    small = y < _SQRT2 - 1.0
    s = y / (2.0 + y) if small else (f - 1.0) / (f + 1.0)
    k = 0.0 if small else np.float64(e)
    z = s * s
    c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10 = _ATANH_SERIES
    p = c10
    p = p * z + c9
    p = p * z + c8
    p = p * z + c7
    p = p * z + c6
    p = p * z + c5
    p = p * z + c4
    p = p * z + c3
    p = p * z + c2
    p = p * z + c1
    p = p * z + c0
    lost = 0.0 if small else (y - (u - 1.0)) / u
    r = k * _LN2_HI + ((2.0 * s + s * z * p + lost) + k * _LN2_LO)
    r = np.inf if y == np.inf else r
    return y if y != y else r


_F32 = np.float32
_LOG2E_32 = _F32(1.4426950408889634)
_LN2_HI_32 = _F32(0.693359375)  # 9 significant bits: k · LN2_HI_32 is exact for every k used
_LN2_LO_32 = _F32(-2.12194440e-4)
_SHIFT_32 = _F32(12582912.0)  # 1.5 · 2**23: adding it rounds to an integer held in the low bits
_SHIFT_BITS_32 = np.int32(0x4B400000)  # its bits
#: e**r ≈ 1 + r + r²·(c2 + c3 r + ... + c6 r⁴) on |r| <= ln 2 / 2, relative error below 4e-9
#: (a degree-6 fit of the relative error, weighted as Lawson's algorithm does; one FMA fewer
#: than the degree-7 Taylor polynomial, whose remainder is 6e-9)
_EXP32_POLY = tuple(_F32(c) for c in (0.49999998, 0.16666521, 0.04166723, 0.00836873, 0.00138797))


@_compiled(vectorised=True, inline=True)
def _exp32_parts(s):
    """(n, p) with e**s = p · 2**n in float32 arithmetic, n an int32: s = n ln 2 + r with
    |r| <= ln 2 / 2.  n is read from the bits of s / ln 2 + 1.5 · 2**23, not by subtracting
    the shift back in floats, which the reassociation flag would let LLVM fold away.  For
    |s| past 2**22 (and for inf and NaN) n is meaningless: the callers select those apart."""
    c2, c3, c4, c5, c6 = _EXP32_POLY
    n = np.int32(np.float32(s * _LOG2E_32 + _SHIFT_32).view(np.int32) - _SHIFT_BITS_32)
    k = np.float32(n)  # (every int32 step is wrapped in np.int32: Numba widens int32 arithmetic to int64)
    r = (s - k * _LN2_HI_32) - k * _LN2_LO_32
    p = c6
    p = p * r + c5
    p = p * r + c4
    p = p * r + c3
    p = p * r + c2
    p = p * r + _F32(1.0)
    p = p * r + _F32(1.0)
    return n, p


@_compiled(vectorised=True, inline=True)
def _power_of_two32(n):
    """2**n as a float32, for an int32 n in [-126, 127] (exponent bits set directly)."""
    return np.int32(np.int32(n + np.int32(127)) << np.int32(23)).view(np.float32)


@_compiled(vectorised=True, inline=True)
def exp32(t):
    """`exp` in float32 arithmetic, for float32 t (twice the SIMD lanes), 2**n in two
    halves; within 2 ulps of float32 (tested against mpmath).  inf → inf, -inf → 0, NaN → NaN
    (a NaN goes through the arithmetic as itself; no comparison below is true for it)."""
    n, p = _exp32_parts(t)
    half = np.int32(n >> np.int32(1))
    y = p * _power_of_two32(half) * _power_of_two32(np.int32(n - half))
    y = _F32(np.inf) if t > _F32(88.72283) else y
    return _F32(0.0) if t < _F32(-103.97208) else y


_OFFSET_32 = np.int32(64)
_TWO_TO_MINUS_64_32 = _F32(2.0**-64)


@_compiled(vectorised=True, inline=True)
def exp32_nonpositive(t):
    """`exp32` for t <= 0 (or NaN), with one scaling fewer, as `exp_nonpositive`: p · 2**(n + 64)
    is normal for every n from -150 up to 0."""
    n, p = _exp32_parts(t)
    y = _power_of_two32(np.int32(n + _OFFSET_32)) * p * _TWO_TO_MINUS_64_32
    return _F32(0.0) if t < _F32(-103.97208) else y


# The row max as an integer max: a float's bits, with the magnitude bits of the negative
# ones flipped, order as the floats do (-0 just below +0), and an integer max vectorises
# without the fast-math flags that would assume NaN away; the NaNs are counted in the same
# pass.  (A float max chain does not vectorise: 1.5x slower, and a second pass for NaN.)
_SIGN_OFF_64 = 0x7FFFFFFFFFFFFFFF
_SIGN_OFF_32 = np.int32(0x7FFFFFFF)


@_compiled(vectorised=True)
def _row_max64(row):
    top = np.int64(-0x7FFFFFFFFFFFFFFF - 1)
    nans = 0.0
    for j in range(row.shape[0]):
        v = np.float64(row[j])
        bits = v.view(np.int64)
        key = bits ^ ((bits >> 63) & _SIGN_OFF_64)
        top = key if key > top else top
        nans += 0.0 if v == v else 1.0
    if nans > 0:
        return np.nan
    if row.shape[0] == 0:
        return -np.inf
    return np.int64(top ^ ((top >> 63) & _SIGN_OFF_64)).view(np.float64)


@_compiled(vectorised=True)
def _row_max32(row):
    top = np.int32(-0x7FFFFFFF - 1)
    nans = np.int32(0)
    for j in range(row.shape[0]):
        v = row[j]
        bits = np.float32(v).view(np.int32)
        key = bits ^ ((bits >> np.int32(31)) & _SIGN_OFF_32)
        top = key if key > top else top
        nans += np.int32(0) if v == v else np.int32(1)
    if nans > 0:
        return np.nan
    if row.shape[0] == 0:
        return -np.inf
    return np.float64(np.int32(top ^ ((top >> np.int32(31)) & _SIGN_OFF_32)).view(np.float32))


def _row_max(row):
    """The max as float64; NaN if the row has a NaN (as np.maximum), -inf if empty."""
    raise NotImplementedError  # (only its overload runs)


@numba.extending.overload(_row_max)
def _row_max_by_dtype(row):
    if row.dtype == numba.float32:
        return lambda row: _row_max32(row)
    return lambda row: _row_max64(row)


@_compiled(vectorised=True)
def _row_rest(row, m):
    """(Σ exp(x - m) over the entries below the max, the number at it): the ties counted apart."""
    rest = 0.0
    ties = 0.0
    for j in range(row.shape[0]):  # (an index loop: LLVM vectorises it, not an iteration over the row)
        v = row[j]
        rest += 0.0 if v == m else exp_nonpositive(np.float64(v) - m)
        ties += 1.0 if v == m else 0.0
    return rest, ties


@_compiled()
def _logsumexp_row(row):
    """log Σ_j exp(row[j]) as `m + log1p(rest + ties - 1)`."""
    m = _row_max(row)
    if m != m or m == np.inf or m == -np.inf:
        return m  # NaN stays NaN; a row of -inf (or empty) is -inf; +inf is +inf
    rest, ties = _rest(row, np.float64(m))
    return m + math.log1p(rest + (ties - 1.0))


@_compiled()
def logsumexp_rows(x, out):
    """out[i] = logsumexp(x[i])."""
    for i in range(x.shape[0]):
        out[i] = _logsumexp_row(x[i])


# The terms of a row take two loops, not one: a loop that both computes an exp and adds it
# to a float64 sum is vectorised at the width of the sum's lanes (and in float32 at half
# its own), while an exp-only loop fills the widest lanes and the sums re-read the row from
# cache (1.3 -> 1.0 ms on a 1000 x 1000 float64 array, 0.52 -> 0.39 ms in float32).
@_compiled(vectorised=True)
def _row_exps(row, m, p):
    """p = exp(x - m); exactly 1 at the max's ties (exp(0) is 1)."""
    for j in range(row.shape[0]):
        p[j] = exp_nonpositive(np.float64(row[j]) - m)


@_compiled(vectorised=True)
def _row_sums(row, m, p):
    """(the sum of the terms p below the max, the ties): the ties counted apart."""
    rest = 0.0
    ties = 0.0
    for j in range(row.shape[0]):
        v = row[j]
        rest += 0.0 if v == m else np.float64(p[j])
        ties += 1.0 if v == m else 0.0
    return rest, ties


@_compiled()
def _row_terms(row, m, p):
    """p = 1 at the max and exp(x - m) elsewhere; returns (the sum of the others, the ties)."""
    _row_exps(row, m, p)
    return _row_sums(row, m, p)


@_compiled(vectorised=True)
def _divide_and_scale(p, total, scale):
    for j in range(p.shape[0]):
        p[j] = scale * (p[j] / total)  # (as the graph: the softmax, then its scale)


@_compiled(vectorised=True)
def _row_rest32(row, m):
    """`_row_rest` for float32 rows: each term's exp in float32 lanes, the sums in float64."""
    m = np.float32(m)
    rest = 0.0
    ties = 0.0
    for j in range(row.shape[0]):
        v = row[j]
        rest += 0.0 if v == m else np.float64(exp32_nonpositive(v - m))
        ties += 1.0 if v == m else 0.0
    return rest, ties


@_compiled(vectorised=True)
def _row_exps32(row, m, p):
    """`_row_exps` for float32 rows, in float32 lanes."""
    for j in range(row.shape[0]):
        p[j] = exp32_nonpositive(row[j] - m)


@_compiled()
def _row_terms32(row, m, p):
    """`_row_terms` for float32 rows: each term's exp in float32 lanes, the sums in float64."""
    m = np.float32(m)
    _row_exps32(row, m, p)
    return _row_sums(row, m, p)


@_compiled(vectorised=True)
def _divide_and_scale32(p, total, scale):
    total, scale = np.float32(total), np.float32(scale)  # (as the graph: float32 throughout)
    for j in range(p.shape[0]):
        p[j] = scale * (p[j] / total)


# the passes by dtype, chosen when Numba types a call (an if on the dtype is not one it can type)
def _rest(row, m):
    raise NotImplementedError  # (only its overload runs)


def _terms(row, m, p):
    raise NotImplementedError


def _scaled(p, total, scale):
    raise NotImplementedError


@numba.extending.overload(_rest)
def _rest_by_dtype(row, m):
    return (lambda row, m: _row_rest32(row, m)) if row.dtype == numba.float32 else (lambda row, m: _row_rest(row, m))


@numba.extending.overload(_terms)
def _terms_by_dtype(row, m, p):
    if row.dtype == numba.float32:
        return lambda row, m, p: _row_terms32(row, m, p)
    return lambda row, m, p: _row_terms(row, m, p)


@numba.extending.overload(_scaled)
def _scaled_by_dtype(p, total, scale):
    if p.dtype == numba.float32:
        return lambda p, total, scale: _divide_and_scale32(p, total, scale)
    return lambda p, total, scale: _divide_and_scale(p, total, scale)


@_compiled()
def _softmax_row(row, p, scale):
    """p = scale · (the gradient of logsumexp of the row): 1 at the max and exp(x - m) elsewhere,
    over ties + rest; 0 on a row with nothing above -inf, +inf entries share the mass, NaN rows
    stay NaN.  Returns the row's logsumexp, `m + log1p(rest + ties - 1)`, from the same passes."""
    m = _row_max(row)
    if m == -np.inf or m != m:
        p[:] = scale * (0.0 if m == -np.inf else np.nan)
        return m
    if m == np.inf:
        ties = 0.0
        for j in range(row.shape[0]):
            ties += 1.0 if row[j] == m else 0.0
        for j in range(row.shape[0]):  # the infinite entries share equally; the others get 0
            p[j] = scale * (1.0 / ties if row[j] == m else 0.0)
        return m
    rest, ties = _terms(row, np.float64(m), p)
    _scaled(p, ties + rest, scale)
    return m + math.log1p(rest + (ties - 1.0))


@_compiled()
def softmax_rows(x, scale, out):
    """out[i] = scale[i] · softmax(x[i]): the pullback of logsumexp over rows."""
    for i in range(x.shape[0]):
        _softmax_row(x[i], out[i], scale[i])


@_compiled()
def logsumexp_and_softmax_rows(x, scale, lse, out):
    """Both at once, one max and one pass of exp per row: lse[i] = logsumexp(x[i]) and
    out[i] = scale[i] · softmax(x[i])."""
    for i in range(x.shape[0]):
        lse[i] = _softmax_row(x[i], out[i], scale[i])


#: rows up to this long run `short_rows`, a block of rows at a time: per-row passes over a
#: handful of entries cost more in loop set-up than in arithmetic, and cannot use SIMD lanes
SHORT_ROW = 16
_BLOCK = 256


@_compiled(vectorised=True)
def add(a, b):
    """a + b, reassociable: a loop summing through it vectorises (its other arithmetic does
    not get the flag; LLVM inlines the call and keeps each instruction's own flags)."""
    return a + b


@_compiled(vectorised=True)
def column_max(column, m, has_nan):
    for b in range(column.shape[0]):
        v = column[b]
        m[b] = max(m[b], v)
        has_nan[b] |= v != v


@_compiled()
def _difference32(a, b):
    """(d, e) with d = a - b rounded to float32 and d + e = a - b exactly (TwoSum); e is 0
    where d is infinite.  Not inlined by Numba: LLVM inlines it with its own strict flags,
    where the caller's reassociation would fold e to 0."""
    d = a - b
    bb = d - a
    e = (a - (d - bb)) - (b + bb)
    return d, (e if e == e else _F32(0.0))  # (inf - inf made e NaN; a NaN a or b makes d NaN)


@_compiled(vectorised=True)
def _column_terms64(column, m, rest, ties):
    for b in range(column.shape[0]):
        v = column[b]
        tie = v == m[b]
        p = 1.0 if tie else exp_nonpositive(np.float64(v) - m[b])
        column[b] = p
        rest[b] += 0.0 if tie else p
        ties[b] += 1.0 if tie else 0.0


@_compiled(vectorised=True)
def _column_terms32(column, m, rest, ties):
    for b in range(column.shape[0]):
        v = column[b]
        mb = np.float32(m[b])
        tie = v == mb
        d, e = _difference32(v, mb)
        p = exp32_nonpositive(d)
        p = _F32(1.0) if tie else p + p * e  # e**(d + e) to first order in e, as e**(x - max)
        column[b] = p
        rest[b] += 0.0 if tie else np.float64(p)
        ties[b] += 1.0 if tie else 0.0


def column_terms(column, m, rest, ties):
    """column becomes its terms: exactly 1 at each row's max (+inf ones too, whose x - max
    is NaN), exp(x - max) elsewhere, added to the rows' sums: the ties apart from the rest,
    in float64.  One loop, not the row kernels' two: the sums here run across rows, an add
    per entry rather than a reduction, so they do not narrow the exps' lanes.

    A float32 column's exps run in float32 lanes: x - max rounded to float32, and its
    rounding error folded back in (without it a term loses up to |x - max| · 2⁻²⁴ of relative
    accuracy, tens of ulps at e⁻⁶⁰)."""
    raise NotImplementedError  # (only its overload runs)


@numba.extending.overload(column_terms, inline="always")
def _column_terms_by_dtype(column, m, rest, ties):
    if column.dtype == numba.float32:
        return lambda column, m, rest, ties: _column_terms32(column, m, rest, ties)
    return lambda column, m, rest, ties: _column_terms64(column, m, rest, ties)


@_compiled()
def column_logsumexp(m, rest, ties, lse):
    """lse = m + log1p(rest + ties - 1) where m is finite, else m (NaN, -inf, +inf rows), and
    rest becomes the row's total, ties + rest.  (No fast-math flags: the log's arithmetic
    is ordered with care.)"""
    for b in range(m.shape[0]):
        mb = m[b]
        finite = mb != np.inf and mb != -np.inf and mb == mb
        value = mb + log1p_nonnegative(rest[b] + (ties[b] - 1.0))
        lse[b] = value if finite else mb
        rest[b] += ties[b]


@_compiled(vectorised=True)
def softmax_factors(total, m, scale):
    """scale becomes each row's factor from its terms to its scaled softmax: scale / total;
    scale · 0 on a row with nothing above -inf (no mass anywhere), NaN on a NaN row.  One
    division a row, then a product an entry (`column_softmax`), not a division an entry."""
    for b in range(m.shape[0]):
        factor = scale[b] / total[b]
        factor = scale[b] * 0.0 if m[b] == -np.inf else factor
        scale[b] = np.nan if m[b] != m[b] else factor


@_compiled(vectorised=True)
def column_softmax(column, factor):
    """column (its terms) becomes the scaled softmax: times its row's `softmax_factors`."""
    for b in range(column.shape[0]):
        column[b] = column[b] * factor[b]


@_compiled()
def _down_max(x):
    """The max of each column of x (NaN where the column has one, -inf where it is empty)."""
    m = np.full(x.shape[1], -np.inf)
    has_nan = np.zeros(x.shape[1], dtype=np.bool_)
    for i in range(x.shape[0]):
        column_max(x[i], m, has_nan)
    for j in range(x.shape[1]):
        m[j] = np.nan if has_nan[j] else m[j]
    return m


@_compiled()
def _short_block(x, scale, lse, out, softmax, b0):
    """`short_rows` on the block of rows from b0: a block of rows is copied column-major into
    scratch, so that every inner loop runs over the block's rows (as long as the block,
    contiguous): the max, then the terms exp(x - max) in place (1 at the ties, as the row
    kernels count them), then the division.  (The scratch is the block's own, of its exact
    size: columns of a slice of one larger buffer are not contiguous, and do not vectorise,
    which costs far more than the allocations: 2.7x on 10⁶ rows of 5.)"""
    n = x.shape[1]
    nb = min(_BLOCK, x.shape[0] - b0)
    block = np.empty((n, nb), dtype=x.dtype)  # (float32 or float64: a float32 block takes float32 lanes)
    rest = np.empty(nb)
    ties = np.empty(nb)
    row_scale = np.empty(nb)
    for j in range(n):  # (the store side contiguous: LLVM gathers the loads)
        for b in range(nb):
            block[j, b] = x[b0 + b, j]
    for b in range(nb):
        rest[b] = 0.0
        ties[b] = 0.0
        row_scale[b] = scale[b0 + b] if softmax else 1.0
    m = _down_max(block)
    for j in range(n):
        column_terms(block[j], m, rest, ties)
    column_logsumexp(m, rest, ties, lse[b0 : b0 + nb])  # (rest becomes the rows' totals)
    if softmax:
        softmax_factors(rest, m, row_scale)
        for j in range(n):
            column_softmax(block[j], row_scale)
        for b in range(nb):
            for j in range(n):
                out[b0 + b, j] = block[j, b]


@_compiled()
def short_rows(x, scale, lse, out, softmax):
    """`logsumexp_and_softmax_rows` for short rows, vectorised across rows instead of along
    them, a block at a time (`_short_block`).  `softmax=False` computes only lse (out is
    not written)."""
    for b0 in range(0, x.shape[0], _BLOCK):
        _short_block(x, scale, lse, out, softmax, b0)


# -- reductions over the leading axes (`x` as a C-ordered matrix whose rows are reduced):
# each of x's own rows is a column in the short-row kernels' sense, so their column passes
# run on it as it is, vectorised along it; an HMM step's logsumexp down the columns of an
# 8 x 8 matrix is one call instead of a dozen NumPy calls on 64 numbers (9 µs -> 1 µs)
@_compiled()
def logsumexp_down(x, lse):
    """lse[j] = logsumexp(x[:, j])."""
    m = _down_max(x)
    rest = np.zeros(x.shape[1])
    ties = np.zeros(x.shape[1])
    terms = np.empty(x.shape[1])
    for i in range(x.shape[0]):
        terms[:] = x[i]
        column_terms(terms, m, rest, ties)
    column_logsumexp(m, rest, ties, lse)


@_compiled()
def softmax_down(x, out):
    """out[:, j] = softmax(x[:, j]): the gradient of logsumexp down the columns."""
    m = _down_max(x)
    rest = np.zeros(x.shape[1])
    ties = np.zeros(x.shape[1])
    for i in range(x.shape[0]):
        out[i] = x[i]
        column_terms(out[i], m, rest, ties)
    for j in range(x.shape[1]):
        rest[j] += ties[j]  # (now each column's total)
    factor = np.ones(x.shape[1])
    softmax_factors(rest, m, factor)
    for i in range(x.shape[0]):
        column_softmax(out[i], factor)


# -- the same over several threads (`sg.function(..., threads=n)`): rows or blocks of rows
# are independent, so each thread takes some, and the values are the serial kernels' exactly
def _parallel():
    return numba.njit(cache=True, nogil=True, error_model="numpy", parallel=True)


@_parallel()
def logsumexp_rows_parallel(x, out):
    for i in numba.prange(x.shape[0]):
        out[i] = _logsumexp_row(x[i])


@_parallel()
def softmax_rows_parallel(x, scale, out):
    for i in numba.prange(x.shape[0]):
        _softmax_row(x[i], out[i], scale[i])


@_parallel()
def logsumexp_and_softmax_rows_parallel(x, scale, lse, out):
    for i in numba.prange(x.shape[0]):
        lse[i] = _softmax_row(x[i], out[i], scale[i])


@_parallel()
def short_rows_parallel(x, scale, lse, out, softmax):
    for k in numba.prange((x.shape[0] + _BLOCK - 1) // _BLOCK):
        _short_block(x, scale, lse, out, softmax, k * _BLOCK)


# -- the exps of a small matrix less its per-column or per-row max, for the compiled loops'
# steps (program_code): one call, whose loop vectorises, instead of a libm call per entry
def _exps():
    return numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})


@_exps()
def exp_shifted_down(x, m, out):
    """out[i, j] = exp(x[i, j] - m[j])."""
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            out[i, j] = exp_nonpositive(np.float64(x[i, j]) - m[j])


@_exps()
def exp_shifted_along(x, m, out):
    """out[i, j] = exp(x[i, j] - m[i])."""
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            out[i, j] = exp_nonpositive(np.float64(x[i, j]) - m[i])
