"""log Σ exp and its relatives: `logsumexp` (weights, mask, sign), `logmeanexp`, `logcumsumexp`.

These are opaque on purpose.  Written out, `log(sum(exp(x)))` overflows once an
entry passes ~709 (float64; ~88 in float32) and underflows to `log(0)` below
~-745, and its derivative `exp(x) / sum(exp(x))` is `inf/inf`.  As ops, the
forward pass is max-shifted and the pullback is explicit and built from stable
pieces, so first and second derivatives hold wherever the value does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, final

import numpy as np

from ...errors import ShapeError
from ...graph.basic import ALL, Constant, Op, Reads, Variable
from ...graph.types import TensorType
from .. import dims
from ..base import as_operands, zero_grad
from ..composite import SymbolicOp
from ..creation import ones_like
from ..elementwise import (
    abs,
    astype,
    equal,
    greater,
    isfinite,
    less,
    less_equal,
    logical_and,
    logical_not,
    logical_or,
    maximum,
    not_equal,
    sign,
    where,
)
from ..math import exp, expm1, log, log1p
from ..reduction import Sum, count
from ..shape import ravel
from ._common import (
    NEG_INF,
    POS_INF,
    MaxShift,
    as_mask,
    axes_of,
    check_broadcast,
    drop,
    keep,
    log_tied_plus_rest,
    promote,
    restore,
    softmax_vjp,
)
from .complex_logsumexp import complex_logsumexp


@final
@dataclass(frozen=True)
class LogSumExp(SymbolicOp):
    """log Σ b·exp(x) over `axes`, optionally masked (`where`) and signed (`return_sign`).

    Naive: `log(sum(b * exp(x)))` overflows past ~709 and its gradient is inf/inf.
    Stable: with m the max, `m + log1p(rest + k - 1)`, k the (weighted) count of
    entries at the max and `rest` the sum of the others' `b·exp(x - m)`, which
    keeps tiny tails exact (`logsumexp([0, -40])` = 4.2484e-18).  Entries with
    `b = 0` or `where=False` are absent (-inf) before the max is taken.
    Pullback (reads x, b, where and the output): `g · b · exp(x - out)` for x and
    `g · exp(x - out)` for b (times the sign under `return_sign`); where the output
    is +inf the limit shares the mass among the +inf entries; where it is -inf the
    gradient is 0.

    Operands: x, then b if `weighted`, then the mask if `masked`.
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
    def plain(self) -> bool:
        """No weights, mask or sign: log Σ exp(x) of one operand, the form backends run whole."""
        return not (self.weighted or self.masked or self.return_sign)

    @property
    def reads(self) -> Reads:  # type: ignore[override]
        """The operands; the output too when weighted or signed.  (Unweighted, the
        gradient is a softmax of x alone, so a loop's backward pass need not
        recompute the forward value.)"""
        if not self.weighted and not self.return_sign:
            return Reads(inputs=ALL, outputs=())
        return Reads(inputs=ALL, outputs=(0, 1) if self.return_sign else (0,))

    def build(self, *inputs):
        x, b, mask = unpack(inputs, self.weighted, self.masked)
        live = _live(b, mask)
        x_live = x if live is None else where(live, x, NEG_INF)
        if b is None and not self.return_sign:
            m, _, _, ties, rest = split_at_max(self.axes, x_live)
            return drop(m + log_tied_plus_rest(ties, rest), self.axes, self.keepdims)
        m = MaxShift(self.axes, keepdims=True)(x_live)
        terms = exp(x_live - m)
        # An entry whose term rounds to 1 leads with the max: left in `rest`, it would make a
        # tail next to a cancelling lead (b = [-1/2]*3, x = [-16, 5e-324, 0]) look like
        # no tail, and the total's rounding would swamp log|total| ≈ 1e-7.
        at_max = logical_or(equal(x_live, m), equal(terms, 1))
        at_max_live = at_max if live is None else logical_and(at_max, live)
        others = at_max if live is None else logical_or_not(at_max, live)
        lead_terms = astype(at_max_live, x.dtype) if b is None else where(at_max_live, b, 0)
        lead = Sum(self.axes, keepdims=True)(lead_terms)
        rest = Sum(self.axes, keepdims=True)(where(others, 0, terms if b is None else terms * b))
        log_abs, total_sign = _signed_log(lead, rest)
        total_sign = where(equal(m, NEG_INF), 0, total_sign)  # nothing left: the total is exactly 0
        out = m + log_abs
        if not self.return_sign:
            return drop(where(less(total_sign, 0), np.nan, out), self.axes, self.keepdims)
        return drop(out, self.axes, self.keepdims), drop(total_sign, self.axes, self.keepdims)

    def pullback(self, inputs, outputs, grads):
        x, b, mask = unpack(inputs, self.weighted, self.masked)
        out = keep(outputs[0], self.axes, self.keepdims)
        total_sign = keep(outputs[1], self.axes, self.keepdims) if self.return_sign else None
        g = keep(grads[0], self.axes, self.keepdims)
        return lse_pullback(self.axes, x, b, mask, out, total_sign, g)


def split_at_max(axes, x: Variable) -> tuple[Variable, Variable, Variable, Variable, Variable]:
    """(m, at_max, terms, ties, rest): the max over `axes` (kept), where x attains it,
    exp(x - m), how many entries tie at the max, and the sum of the other terms.

    The start of both logsumexp and its gradient, built the same way for both so
    that, once inlined in one graph, the two share it (one max, one pair of sums).
    """
    m = MaxShift(axes, keepdims=True)(x)
    at_max = equal(x, m)
    terms = exp(x - m)
    ties = Sum(axes, keepdims=True)(astype(at_max, terms.dtype))
    rest = Sum(axes, keepdims=True)(where(at_max, 0, terms))
    return m, at_max, terms, ties, rest


@final
@dataclass(frozen=True)
class LogSumExpGrad(SymbolicOp):
    """The gradient of plain logsumexp over `axes`: softmax(x), 0 on rows with no entry above -inf.

    `where(at_max, 1, terms) / (ties + rest)` from `split_at_max`, logsumexp's own
    start: where both are inlined (the JAX backend), the gradient costs one more
    pass over x instead of a second max and sum.  +inf entries share the mass
    equally (the limit); an empty row gets 0, so no NaN reaches second order.
    Pullback (reads only the output p): `p · (g - Σ g·p)`, which is 0 where p is, taken
    around the largest p (`softmax_vjp`) so a saturated softmax keeps its digits.
    """

    public_name: ClassVar[str] = "logsumexp_grad"

    axes: tuple[int, ...] = ()

    reads = Reads(inputs=(), outputs=(0,))

    def build(self, x):
        m, at_max, terms, ties, rest = split_at_max(self.axes, x)
        return where(equal(m, NEG_INF), 0, where(at_max, 1, terms) / (ties + rest))

    def pullback(self, inputs, outputs, grads):
        (p,), (g,) = outputs, grads
        return [softmax_vjp(self.axes, p, g)]


def logical_or_not(a: Variable, live: Variable) -> Variable:
    """a or not live."""
    return logical_not(logical_and(logical_not(a), live))


def unpack(inputs, weighted: bool, masked: bool):
    """(x, b or None, mask or None) from an op's operand list."""
    x, rest = inputs[0], list(inputs[1:])
    b = rest.pop(0) if weighted else None
    mask = rest.pop(0) if masked else None
    return x, b, mask


def _live(b, mask):
    """Where an entry takes part: b != 0 and the mask (None when every entry does)."""
    live = None if b is None else not_equal(b, 0)
    if mask is not None:
        live = mask if live is None else logical_and(live, mask)
    return live


def _signed_log(lead: Variable, rest: Variable) -> tuple[Variable, Variable]:
    """(log|lead + rest|, sign(lead + rest)), through log1p(rest/lead) when that keeps a tail exact.

    Only where the rest is a tail (-1/2 < rest/lead ≤ 1): a tiny weight at the max (b = 5e-324
    next to 1) makes the ratio overflow, and there the sum itself is the accurate form.
    """
    total = lead + rest
    nonzero = not_equal(lead, 0)
    lead_safe = where(nonzero, lead, 1)
    ratio = rest / lead_safe
    tail = logical_and(nonzero, logical_and(greater(ratio, -0.5), less_equal(ratio, 1)))
    exact_tail = log(abs(lead_safe)) + log1p(where(tail, ratio, 0))
    return where(tail, exact_tail, log(abs(total))), sign(total)


def lse_pullback(axes, x, b, mask, out, total_sign, g) -> list:
    """Gradients of out = log|Σ b·exp(x)| (all arguments with the reduced axes kept).

    p = exp(x) / Σ b·exp(x) (signed) is d out / d b; d out / d x is b · p.  Where nothing is
    live p is 0; where out is +inf p is the limit: 1/K at the +inf entries (K the sum of
    their weights), 0 elsewhere.  (`out` itself is not read: p comes from x and b.)
    """
    x_live = x if mask is None else where(mask, x, NEG_INF)
    if b is None and total_sign is None:
        # unweighted, p is softmax(x): computed as one, not as exp(x - out), which loses
        # the log(k) of k tied maxima once |x| > 2**53 (out rounds to the max itself)
        return [g * LogSumExpGrad(axes)(x_live)] + ([zero_grad(mask)] if mask is not None else [])
    # p from the max-shifted terms, as a softmax is: exp(x - out) would carry the rounding of
    # `out` (once |x| > 2**53, log 2 of two tied maxima is rounded away and p is 1, not 1/2)
    live = None if b is None else not_equal(b, 0)  # b = 0: absent from the total, not from d/db
    x_in = x_live if live is None else where(live, x_live, NEG_INF)
    m = MaxShift(axes, keepdims=True)(x_in)
    infinite = equal(m, POS_INF)
    terms = exp(x_live - where(logical_or(infinite, equal(m, NEG_INF)), 0, m))
    # a +inf row's mass is shared by its +inf entries, in proportion to their weights (total K)
    at_inf = equal(x_in, POS_INF)
    ones = astype(at_inf, x.dtype)
    share = Sum(axes, keepdims=True)(ones if b is None else where(at_inf, b, 0))
    total = where(infinite, share, Sum(axes, keepdims=True)(terms if live is None else where(live, b * terms, 0)))
    empty = equal(total, 0)  # nothing live, or an exact cancellation: nothing to share
    p = where(empty, 0, where(infinite, ones, terms) / where(empty, 1, total))  # signed with the total
    if total_sign is None:
        p = where(less(total, 0), np.nan, p)  # the value is NaN there: so is its gradient
    grads: list = []
    if b is None:
        grads.append(g * p)
    else:
        grads.append(g * where(not_equal(b, 0), b * p, 0))
        grads.append(g * p)
    if mask is not None:
        grads.append(zero_grad(mask))
    return grads


@dims.reduction
def logsumexp(x, axis=None, keepdims=False, b=None, return_sign=False, where=None):
    """log(sum(b * exp(x))) over `axis`, stable (scipy.special.logsumexp; `where=` as JAX).

    `axis` is an int, a tuple or None (all axes).  Entries with `b = 0` or
    `where=False` are absent; an axis with nothing left gives -inf (and gradient 0).
    A negative total gives NaN unless `return_sign=True`, which returns
    `(log|total|, sign)` with the sign in {-1, 0, +1}, as SciPy.

    Complex x or b (`ops/stable/complex_logsumexp.py`): the principal complex log of the total,
    or with `return_sign=True` the real log|total| and the unit complex phase total/|total|, as
    SciPy; shifted by the largest real part, so large real parts do not overflow.

    >>> import numpy as np, stablegrad as sg
    >>> x = sg.vector("x")
    >>> float(sg.function([x], sg.logsumexp(x))(np.array([1000.0, 1000.0])))
    1000.6931471805599
    >>> z = sg.vector("z", dtype="complex128")
    >>> sg.function([z], sg.logsumexp(z))(np.array([1000 + 1j, 1000 - 1j]))
    array(1000.07752071+0.j)
    """
    operands = [x] + ([b] if b is not None else [])
    if any(v.dtype.kind == "c" for v in as_operands(*operands)):
        return _complex(operands, axis, keepdims, b is not None, return_sign, where)
    xs, dtype = promote("logsumexp", *operands)
    if where is not None:
        mask = as_mask("logsumexp", where)
        check_broadcast("logsumexp", "where", xs[0], mask)
        xs.append(mask)
    if b is not None:
        check_broadcast("logsumexp", "b", xs[0], xs[1])
    ndim = max(v.ndim for v in xs)
    axes = axes_of("logsumexp", axis, ndim)
    op = LogSumExp(axes, bool(keepdims), b is not None, where is not None, bool(return_sign))
    if return_sign:
        value, total_sign = op(*xs)
        return restore(value, dtype), restore(total_sign, dtype)
    return restore(op(*xs), dtype)


def _complex(operands, axis, keepdims, weighted: bool, return_sign, where):
    """logsumexp of complex z or b: the checks of the real path, then `ComplexLogSumExp`."""
    xs = as_operands(*operands)
    if where is not None:
        mask = as_mask("logsumexp", where)
        check_broadcast("logsumexp", "where", xs[0], mask)
        xs.append(mask)
    if weighted:
        check_broadcast("logsumexp", "b", xs[0], xs[1])
    axes = axes_of("logsumexp", axis, max(v.ndim for v in xs))
    return complex_logsumexp(xs, axes, bool(keepdims), weighted, bool(return_sign))


@final
@dataclass(frozen=True)
class LogMeanExp(SymbolicOp):
    """log(mean(exp(x))) over `axes`, optionally masked: logsumexp minus log(n).

    Naive: `log(mean(exp(x)))` fails as logsumexp does (overflow, inf/inf).
    Stable: the LogSumExp body with `log(k / n)` for `log(k)`, n the number of live
    entries (an empty or fully masked axis gives NaN, as NumPy's mean of nothing);
    where the entries lie close to their max m, `m + log1p(mean(expm1(x - m)))`,
    which is relatively accurate near 0 where the other form only is absolutely.
    Pullback (reads x, the mask and the output): `g · exp(x - (out + log n))`,
    the logsumexp pullback.
    """

    public_name: ClassVar[str] = "logmeanexp"

    axes: tuple[int, ...] = ()
    keepdims: bool = False
    masked: bool = False

    reads = Reads(inputs=ALL, outputs=(0,))

    def build(self, *inputs):
        x, _, mask = unpack(inputs, False, self.masked)
        x_live = x if mask is None else where(mask, x, NEG_INF)
        m, _, _, ties, rest = split_at_max(self.axes, x_live)
        n = self._count(*inputs)
        lead = maximum(ties, 1)
        spread = log(lead / n) + log1p(rest / lead)  # exactly 0 when every entry ties
        # Entries close together: log(mean) = log1p(mean(exp(x - m) - 1)) keeps the digits that
        # log(lead / n) + log1p(rest / lead) cancels (logmeanexp([1e-10, -1e-10]) is 0, not 1e-17).
        near_m = expm1(x_live - m) if mask is None else where(mask, expm1(x_live - m), 0)
        below = Sum(self.axes, keepdims=True)(near_m) / n
        close = greater(below, -0.5)  # log1p is well conditioned there; false for NaN (no entry, inf)
        out = m + where(close, log1p(where(close, below, 0)), spread)
        return drop(out, self.axes, self.keepdims)

    def _count(self, x, mask=None) -> Variable:
        """The number of live entries per output, with the reduced axes kept."""
        if mask is None:
            n = count(x, self.axes, x.dtype)
            return n if isinstance(n, Variable) else Constant(np.asarray(n, dtype=x.dtype))
        return Sum(self.axes, keepdims=True)(where(mask, ones_like(x), 0))

    def pullback(self, inputs, outputs, grads):
        x, _, mask = unpack(inputs, False, self.masked)
        n = self._count(*inputs)
        out = keep(outputs[0], self.axes, self.keepdims)
        lse = where(equal(n, 0), NEG_INF, out + log(n))
        return lse_pullback(self.axes, x, None, mask, lse, None, keep(grads[0], self.axes, self.keepdims))


@dims.reduction
def logmeanexp(x, axis=None, keepdims=False, where=None):
    """log(mean(exp(x))) over `axis`, stable; `where=False` entries are left out of sum and count."""
    xs, dtype = promote("logmeanexp", x)
    if where is not None:
        mask = as_mask("logmeanexp", where)
        check_broadcast("logmeanexp", "where", xs[0], mask)
        xs.append(mask)
    axes = axes_of("logmeanexp", axis, max(v.ndim for v in xs))
    return restore(LogMeanExp(axes, bool(keepdims), where is not None)(*xs), dtype)


@final
@dataclass(frozen=True)
class LogCumSumExp(Op):
    """Running log Σ exp along `axis`: out[i] = log Σ_{j<=i} exp(x[j]).

    Naive: `log(cumsum(exp(x)))` overflows past ~709, and a global max shift
    underflows the early prefixes to log(0).  There is no cumulative primitive
    to write a body with, so this is a primitive op: NumPy runs the sequential,
    stable `logaddexp.accumulate`.
    Pullback (reads x): d out[i] / d x[j] = exp(x[j] - out[i]) for j <= i, so
    `grad[j] = Σ_{i>=j} g[i] exp(x[j] - out[i])`; with g split by sign, each part is
    `exp(x + reversed logcumsumexp(log|g| - out))`, bounded because out[i] >= x[j], and
    built from this op, so second derivatives come free.  Both x and out are taken
    shifted by x's max (out recomputed from the shifted x): the forward `out` carries
    its own rounding, which at |x| > 2**53 is all of log 2 (the gradient of
    logcumsumexp([1e16, 1e16])[-1] is [1/2, 1/2], not [1, 1]).
    """

    public_name: ClassVar[str] = "logcumsumexp"

    axis: int = 0
    reads = Reads(inputs=(0,), outputs=())

    def infer(self, x):
        return [TensorType(x.dtype, x.type.shape)]

    def perform(self, x):
        return np.logaddexp.accumulate(x, axis=self.axis)

    def pullback(self, inputs, outputs, grads):
        (x,), (g,) = inputs, grads
        m = MaxShift((self.axis,), keepdims=True)(x)
        x = x - where(isfinite(m), m, 0)
        out = LogCumSumExp(self.axis)(x)
        out_safe = where(equal(out, NEG_INF), 0, out)  # only -inf entries of x feed a -inf prefix
        parts = []
        for positive in (greater(g, 0), less(g, 0)):
            magnitude = where(positive, abs(g), 1)
            log_g = where(positive, log(magnitude), NEG_INF)
            parts.append(exp(x + self._reversed(log_g - out_safe)))
        return [parts[0] - parts[1]]

    def _reversed(self, v: Variable) -> Variable:
        """logcumsumexp from the end of the axis: Σ over i >= j."""
        flip = (slice(None),) * self.axis + (slice(None, None, -1),)
        return LogCumSumExp(self.axis)(v[flip])[flip]


@dims.along_axis
def logcumsumexp(x, axis=None):
    """Cumulative log(sum(exp(x))) along `axis` (flattened when None, as numpy.cumsum)."""
    (x,), dtype = promote("logcumsumexp", x)
    if axis is not None and not isinstance(axis, int | np.integer):
        raise ShapeError(f"logcumsumexp: axis must be an int or None, got {axis!r}")
    if axis is None:
        x, axis = ravel(x), 0
    (a,) = axes_of("logcumsumexp", axis, x.ndim)
    return restore(LogCumSumExp(a)(x), dtype)
