"""logsumexp of complex numbers, as scipy.special.logsumexp defines it, shifted by the largest real part.

`logsumexp(z)` for complex z (or complex weights b) is the principal complex log of Σ b·exp(z),
its imaginary part in (-π, π]; with `return_sign=True` it is `(log|Σ|, Σ/|Σ|)`: a real value
and a unit complex phase (0 where Σ is exactly 0, the value then -inf).  `logsumexp` sends
complex operands here; the real family never sees them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, final

import numpy as np

from ...graph.basic import ALL, Reads, Variable, Zero
from ..base import astype
from ..complex_parts import imag, real
from ..composite import SymbolicOp
from ..elementwise import abs, equal, logical_and, logical_not, logical_or, where
from ..math import exp, log
from ..reduction import Sum
from ._common import NEG_INF, POS_INF, MaxShift, drop, keep


@final
@dataclass(frozen=True)
class ComplexLogSumExp(SymbolicOp):
    """log Σ b·exp(z) over `axes` for complex z (or complex b), optionally masked and signed.

    Naive: `log(sum(b * exp(z)))` overflows once a real part passes ~709 (~88 in complex64),
    though the answer is near that real part.  Stable: with m the largest real part of the
    live entries, `m + log(Σ b·exp(z - m))`: every |exp(z - m)| ≤ 1, so the sum cannot
    overflow, and the imaginary parts (phases) are untouched by the shift.  Where Σ cancels
    (phases that add to almost nothing) log|Σ| is as accurate as the sum's absolute error
    allows, as for any sum.  Where m is +inf the value is SciPy's: the formula as written,
    with C99's complex exp and log (+inf with a quadrant's angle; the sign is NaN).  Entries
    with b = 0 or `where=False` are absent; with nothing live Σ = 0: -inf (SciPy's -inf + 0j),
    sign 0.
    Pullback (reads z, b, the mask and, with return_sign, the phase): with q = exp(z)/Σ,
    JAX's convention (ops/complex_parts.py): c·b·q for z and c·q for b, where c is the
    cotangent of log Σ — the value's, or for `(log|Σ|, σ)` the real g plus i·Im(g_σ·σ),
    since log|Σ| = Re log Σ and σ = exp(i·Im log Σ).  Where m is +inf, q is the limit: the
    +inf entries' phases b·exp(i·Im z) over their sum, 0 for the others.

    Operands: z, then b if `weighted`, then the mask if `masked`.
    """

    public_name: ClassVar[str] = "logsumexp"

    axes: tuple[int, ...] = ()
    keepdims: bool = False
    weighted: bool = False
    masked: bool = False
    return_sign: bool = False

    @property
    def nout(self) -> int:  # type: ignore[override]
        return 2 if self.return_sign else 1

    @property
    def reads(self) -> Reads:  # type: ignore[override]
        return Reads(inputs=ALL, outputs=(1,) if self.return_sign else ())

    def build(self, *inputs):
        z, b, mask = _unpack(inputs, self.weighted, self.masked)
        _, total, shift, inf_row = _shifted_sum(self.axes, z, b, mask)
        # where a real part is +inf, SciPy answers with the formula as written, so that C99's
        # complex exp and log decide (exp(inf + iθ) is ±inf ± inf·i: log gives a quadrant's angle)
        direct = _live_sum(self.axes, exp(where(inf_row, z, 0)), b, mask)
        if not self.return_sign:
            out = where(inf_row, log(direct), astype(shift, z.dtype) + log(total))
            return drop(out, self.axes, self.keepdims)
        total = where(inf_row, direct, total)
        magnitude = abs(total)
        value = where(inf_row, POS_INF, shift) + log(magnitude)  # (log|±inf ± inf·i| is +inf)
        zero = equal(total, 0)
        phase = where(zero, 0, total / astype(where(zero, 1, magnitude), z.dtype))  # NaN at inf/inf, as SciPy
        return drop(value, self.axes, self.keepdims), drop(phase, self.axes, self.keepdims)

    def pullback(self, inputs, outputs, grads):
        z, b, mask = _unpack(inputs, self.weighted, self.masked)
        c = _log_cotangent(self, z, outputs, grads)
        if c is None:
            return [Zero(v.type) for v in inputs]
        terms, total, _, _ = _shifted_sum(self.axes, z, b, mask)
        zero = equal(total, 0)
        q = where(zero, 0, terms / where(zero, 1, total))  # exp(z)/Σ, 0 where nothing is live
        result: list = [c * q if b is None else c * where(equal(b, 0), 0, b * q)]
        if b is not None:
            result.append(c * q)
        if mask is not None:
            result.append(Zero(mask.type))
        return result


def _unpack(inputs, weighted: bool, masked: bool):
    z, rest = inputs[0], list(inputs[1:])
    b = rest.pop(0) if weighted else None
    mask = rest.pop(0) if masked else None
    return z, b, mask


def _live(b, mask):
    """Where an entry takes part: b != 0 and the mask (None when every entry does)."""
    live = None if b is None else logical_not(equal(b, 0))
    if mask is not None:
        live = mask if live is None else logical_and(live, mask)
    return live


def _max_real(axes, z, b, mask) -> Variable:
    """The largest real part of the live entries (kept axes): -inf with none, NaN with a NaN."""
    live = _live(b, mask)
    re = real(z)
    return MaxShift(axes, keepdims=True)(re if live is None else where(live, re, NEG_INF))


def _shifted_sum(axes, z, b, mask) -> tuple[Variable, Variable, Variable, Variable]:
    """(terms, Σ, shift, inf_row), all but terms with the reduced axes kept.

    shift is the largest live real part, 0 where that is ±inf (NaN stays NaN); terms are
    exp(z - shift) where the mask lets z in (unweighted, so d/db holds at b = 0 too) and Σ
    the sum of the live b·terms.  Where the largest real part is +inf (inf_row) the terms
    are the +inf entries' phases exp(i·Im z): the others' share of the limit is 0."""
    m = _max_real(axes, z, b, mask)
    inf_row = equal(m, POS_INF)
    shift = where(logical_or(inf_row, equal(m, NEG_INF)), 0, m)
    at_inf = equal(real(z), POS_INF)
    phase = exp(astype(imag(z), z.dtype) * 1j)
    shifted = exp(z - astype(shift, z.dtype))
    terms = where(inf_row, where(at_inf, phase, 0), shifted)
    if mask is not None:
        terms = where(mask, terms, 0)
    return terms, _live_sum(axes, terms, b, mask), shift, inf_row


def _live_sum(axes, terms, b, mask) -> Variable:
    """Σ b·terms over the live entries (kept axes)."""
    if b is None:
        return Sum(axes, keepdims=True)(terms if mask is None else where(mask, terms, 0))
    return Sum(axes, keepdims=True)(where(_live(b, mask), b * terms, 0))


def _log_cotangent(op: ComplexLogSumExp, z, outputs, grads) -> Variable | None:
    """The cotangent of log Σ (kept axes) from those of the op's outputs; None if both are zero."""
    if not op.return_sign:
        return None if isinstance(grads[0], Zero) else keep(astype(grads[0], z.dtype), op.axes, op.keepdims)
    g_value, g_phase = grads
    c = None if isinstance(g_value, Zero) else astype(keep(g_value, op.axes, op.keepdims), z.dtype)
    if not isinstance(g_phase, Zero):
        phase = keep(outputs[1], op.axes, op.keepdims)
        turn = astype(imag(keep(g_phase, op.axes, op.keepdims) * phase), z.dtype) * 1j
        c = turn if c is None else c + turn
    return c


def complex_logsumexp(xs: list[Variable], axes: tuple[int, ...], keepdims: bool, weighted: bool, return_sign: bool):
    """`logsumexp` for operands (z, [b], [mask]) of which z or b is complex."""
    dtype = np.result_type(*(v.dtype for v in xs[: 1 + weighted]), np.complex64)
    operands = [astype(v, dtype) for v in xs[: 1 + weighted]] + xs[1 + weighted :]
    op = ComplexLogSumExp(axes, keepdims, weighted, len(xs) > 1 + weighted, return_sign)
    return op(*operands)
