"""log(exp(a) + exp(b)) and its difference twin, and log(1 - exp(x)).

Opaque on purpose: `log(exp(a) + exp(b))` overflows past ~709 (float64) and is
log(0) below ~-745; `log(exp(a) - exp(b))` and `log(1 - exp(x))` also lose every
digit to cancellation near a = b and x = 0.  Each op has a stable body and an
explicit pullback built from stable pieces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, final

import numpy as np

from ...errors import ShapeError
from ...graph.basic import READS_INPUTS, Reads
from ..base import Entrywise
from ..composite import SymbolicOp
from ..elementwise import astype, equal, greater, less, maximum, where
from ..math import exp, expm1, log, log1p
from ._common import NEG_INF, POS_INF, log_tied_plus_rest, promote, restore

_LOG_HALF = float(np.log(0.5))


@final
@dataclass(frozen=True)
class LogAddExp(Entrywise, SymbolicOp):
    """log(exp(x₁) + exp(x₂) + ...), elementwise with broadcasting (two or more operands).

    Naive: `log(exp(a) + exp(b))` overflows past ~709 (float64), and its gradient
    `exp(a) / (exp(a) + exp(b))` is inf/inf there.
    Stable: with m = max, `m + log(k) + log1p(rest / k)`, k the number of operands
    equal to m and rest the sum of the others' `exp(x - m)`; ties (±inf included)
    never meet `inf - inf`.
    Pullback (reads the operands): `g · exp(x - m) / Σ exp(x - m)`, the softmax of
    the operands, so equal inputs get exactly their halves, (-inf, -inf) → (0, 0)
    and +inf operands share equally; the shift m cancels in the derivative, so
    `maximum`'s subgradient never decides a gradient.
    """

    public_name: ClassVar[str] = "logaddexp"

    reads = Reads(inputs="all", outputs=())

    def build(self, *xs):
        m = xs[0]
        for x in xs[1:]:
            m = maximum(m, x)
        ties = [equal(x, m) for x in xs]
        tied = astype(ties[0], m.dtype)
        rest = where(ties[0], 0, exp(xs[0] - m))
        for x, tie in zip(xs[1:], ties[1:]):
            tied = tied + astype(tie, m.dtype)
            rest = rest + where(tie, 0, exp(x - m))
        return m + log_tied_plus_rest(tied, rest)

    def pullback(self, inputs, outputs, grads):
        g = grads[0]
        m = inputs[0]
        for x in inputs[1:]:
            m = maximum(m, x)
        m_safe = where(equal(m, NEG_INF), 0, m)  # all -inf: every share is 0
        marker = where(equal(m, POS_INF), POS_INF, np.nan)  # +inf ties share the limit equally
        terms = [exp(where(equal(x, marker), 0, x - m_safe)) for x in inputs]
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        total = where(equal(total, 0), 1, total)
        return [g * (t / total) for t in terms]


def logaddexp(*xs):
    """log(exp(a) + exp(b) + ...), elementwise and stable (numpy.logaddexp, variadic).

    >>> import numpy as np, stablegrad as sg
    >>> a = sg.vector("a")
    >>> sg.function([a], sg.logaddexp(a, a))(np.array([1000.0])).tolist()
    [1000.6931471805599]
    """
    if len(xs) < 2:
        raise ShapeError(f"logaddexp: needs at least two operands, got {len(xs)}")
    operands, dtype = promote("logaddexp", *xs)
    return restore(LogAddExp()(*operands), dtype)


@final
@dataclass(frozen=True)
class Log1mExp(Entrywise, SymbolicOp):
    """log(1 - exp(x)) for x <= 0; NaN for x > 0, -inf at x = 0 (either sign of zero).

    Naive: `log(1 - exp(x))` is log(0) = -inf for x > -1e-16 and loses all digits
    near 0; its gradient `-exp(x) / (1 - exp(x))` is 0/0-prone.
    Stable (Mächler 2012): `log1p(-exp(x))` for x < log ½, else `log(-expm1(x))`.
    Pullback (reads the operand): d/dx = -exp(x) / (1 - exp(x)), as `exp(x) / expm1(x)`
    for x < log ½ and `-1 / expm1(-x)` above, where neither overflows nor cancels (not
    `exp(x - out)`, which carries the rounding of `out`: 100 ulps at x = -1e-300); -inf at
    both zeros, NaN for x > 0 as the value, and its own derivative finite far out.
    """

    public_name: ClassVar[str] = "log1mexp"

    reads = READS_INPUTS

    def build(self, x):
        far = less(x, _LOG_HALF)
        near = where(far, _LOG_HALF, x)  # both branches finite
        return where(far, log1p(-exp(where(far, x, _LOG_HALF))), log(-expm1(near)))

    def pullback(self, inputs, outputs, grads):
        (x,), (g,) = inputs, grads
        far = less(x, _LOG_HALF)
        x_far, x_near = where(far, x, _LOG_HALF), where(far, _LOG_HALF, x)  # both branches finite
        near = where(greater(x, 0), np.nan, -1 / expm1(0 - x_near))  # `0 -`: both zeros give +0, slope -inf
        return [g * where(far, exp(x_far) / expm1(x_far), near)]


def log1mexp(x):
    """log(1 - exp(x)) for x <= 0, elementwise and stable; NaN for x > 0."""
    (v,), dtype = promote("log1mexp", x)
    return restore(Log1mExp()(v), dtype)


@final
@dataclass(frozen=True)
class LogDiffExp(Entrywise, SymbolicOp):
    """log(exp(a) - exp(b)) for a >= b; NaN for a < b, -inf at a = b.

    Naive: `log(exp(a) - exp(b))` overflows past ~709, cancels near a = b, and its
    gradient `exp(a) / (exp(a) - exp(b))` is inf/inf.
    Stable: `a + log1mexp(b - a)`, with b - a taken as 0 at a = b (so (-inf, -inf)
    gives -inf, not NaN).
    Pullback (reads the operands): with d = b - a, `g / -expm1(d)` and `-g · exp(d) / -expm1(d)`
    (that is exp(a - out) and -exp(b - out), without `out`, whose rounding would be theirs:
    at a = 1e16 + 4, b = 1e16 the gradient is 1.0187, not 1); +inf and -inf at a = b,
    0 at (-inf, -inf), NaN where a < b, as the value.
    """

    public_name: ClassVar[str] = "logdiffexp"

    reads = Reads(inputs="all", outputs=())

    def build(self, a, b):
        return a + Log1mExp()(where(equal(a, b), 0, b - a))

    def pullback(self, inputs, outputs, grads):
        (a, b), (g,) = inputs, grads
        d = where(equal(a, b), 0, b - a)
        gap = 0 - expm1(d)  # 1 - exp(b - a) in [0, 1]; `0 -` makes a tie +0, so its slopes are ±inf
        undefined = where(less(a, b), np.nan, 1)  # NaN where the value is
        nothing = equal(a, NEG_INF)  # (-inf, -inf): nothing to differentiate
        da = where(nothing, 0, undefined / gap)
        db = where(nothing, 0, -exp(d) * undefined / gap)
        return [g * da, g * db]


def logdiffexp(a, b):
    """log(exp(a) - exp(b)), elementwise and stable; NaN where a < b."""
    (x, y), dtype = promote("logdiffexp", a, b)
    return restore(LogDiffExp()(x, y), dtype)


__all__ = ["Log1mExp", "LogAddExp", "LogDiffExp", "log1mexp", "logaddexp", "logdiffexp"]
