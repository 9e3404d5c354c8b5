"""log(sigmoid(a) - sigmoid(b)) for a > b: the log-probability of an interval of a logistic
variable (ordinal and cumulative-logit models), finite in both tails."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, final

import numpy as np

from ...graph.basic import Reads
from ..base import Entrywise
from ..composite import SymbolicOp
from ..elementwise import equal, isinf, less, logical_and, where
from ..math import exp, expm1
from ._common import promote, restore
from .logaddexp import Log1mExp
from .softplus import LogSigmoid, Sigmoid


def _inverse_expm1(d):
    """1 / expm1(d) for d >= 0 (+inf at d = +0, 0 at +inf): exp(-d) / -expm1(-d) from 1 on, so
    neither it nor its own derivative (e^d / expm1(d)² written out) overflows far out."""
    far = d > 1
    d_far, d_near = where(far, d, 1), where(far, 1, d)  # each branch sees only its own arguments
    return where(far, exp(-d_far) / (0 - expm1(-d_far)), 1 / expm1(d_near))


@final
@dataclass(frozen=True)
class LogSigmoidDifference(Entrywise, SymbolicOp):
    """log(σ(a) - σ(b)), elementwise with broadcasting; NaN where a < b, -inf where a = b.

    Naive: σ(a) - σ(b) cancels where both are near 1 (a, b > 37: 1 - 1 = 0, so log(0)), and
    both underflow below -745; `logdiffexp(log_sigmoid(a), log_sigmoid(b))` mends the
    second tail only.
    Stable: σ(a) - σ(b) = σ(a)·σ(-b)·(1 - exp(b - a)) exactly, so
    `log_sigmoid(a) + log_sigmoid(-b) + log1mexp(b - a)`: three non-positive terms, no
    difference in either tail (b - a taken as 0 at a = b, so ties at ±inf give -inf).
    Pullback (reads the operands): with r = 1/expm1(a - b), ∂a = σ(-a) + r and
    ∂b = -(σ(b) + r), sums of like-signed terms; ±inf at a = b as the written formula's,
    NaN where a < b, 0 at ties at ±inf (nothing to differentiate, as logdiffexp).
    """

    public_name: ClassVar[str] = "log_sigmoid_difference"

    reads = Reads(inputs="all", outputs=())

    def build(self, a, b):
        return LogSigmoid()(a) + LogSigmoid()(-b) + Log1mExp()(where(equal(a, b), 0, b - a))

    def pullback(self, inputs, outputs, grads):
        (a, b), (g,) = inputs, grads
        tie = equal(a, b)
        r = _inverse_expm1(where(tie, 0, a - b))
        nan, one = (np.asarray(v, a.dtype) for v in (np.nan, 1))  # a Python NaN would make it float64
        undefined = where(less(a, b), nan, one)  # NaN where the value is
        nothing = logical_and(tie, isinf(a))
        da = where(nothing, 0, (Sigmoid()(-a) + r) * undefined)
        db = where(nothing, 0, -(Sigmoid()(b) + r) * undefined)
        return [g * da, g * db]


def log_sigmoid_difference(a, b):
    """log(sigmoid(a) - sigmoid(b)) for a >= b, elementwise and stable; NaN where a < b.

    >>> import numpy as np, stablegrad as sg
    >>> a, b = sg.vector("a"), sg.vector("b")
    >>> f = sg.function([a, b], sg.ops.stable.log_sigmoid_difference(a, b))
    >>> f(np.array([50.0, -40.0]), np.array([45.0, -45.0])).round(6).tolist()
    [-45.006761, -40.006761]
    """
    (x, y), dtype = promote("log_sigmoid_difference", a, b)
    return restore(LogSigmoidDifference()(x, y), dtype)
