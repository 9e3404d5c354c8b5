"""softplus, sigmoid, log_sigmoid and logit: the scalar primitives of the family.

Opaque on purpose: `log(1 + exp(x))` overflows past ~709 (float64) and is 0
instead of exp(x) below ~-37; `1 / (1 + exp(-x))` is 0 · inf-prone in its
gradient; `log(p / (1 - p))` cancels near p = 1/2.  Each op has a two-branch
body whose branches are both finite, and a pullback written with these same ops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, final

import numpy as np

from ...graph.basic import READS_INPUTS, Reads
from ..base import Entrywise
from ..composite import SymbolicOp
from ..elementwise import abs, greater_equal, less_equal, logical_and, maximum, minimum, where
from ..math import exp, log, log1p
from ._common import promote, restore


@final
@dataclass(frozen=True)
class Softplus(Entrywise, SymbolicOp):
    """log(1 + exp(x)).

    Naive: `log(1 + exp(x))` overflows past ~709 (float64) and rounds to 0 below
    ~-37 (where the answer is exp(x)); its gradient `exp(x) / (1 + exp(x))` is inf/inf.
    Stable: `max(x, 0) + log1p(exp(-|x|))`, exact to an ulp on the whole line.
    Pullback (reads the operand): `g · sigmoid(x)`.
    """

    public_name: ClassVar[str] = "softplus"

    reads = READS_INPUTS

    def build(self, x):
        return maximum(x, 0) + log1p(exp(-abs(x)))

    def pullback(self, inputs, outputs, grads):
        return [grads[0] * Sigmoid()(inputs[0])]


@final
@dataclass(frozen=True)
class Sigmoid(Entrywise, SymbolicOp):
    """1 / (1 + exp(-x)) (scipy.special.expit).

    Naive: `1 / (1 + exp(-x))` overflows exp(-x) below ~-709, and the textbook
    gradient `s · (1 - s)` loses every digit of 1 - s for x > ~37.
    Stable: with e = exp(-|x|) (never overflows), `1 / (1 + e)` for x >= 0 and
    `e / (1 + e)` below.
    Pullback (reads operand and output): `g · out · sigmoid(-x)`, both factors
    accurate.
    """

    public_name: ClassVar[str] = "sigmoid"

    reads = Reads(inputs=(0,), outputs=(0,))

    def build(self, x):
        e = exp(-abs(x))
        return where(greater_equal(x, 0), 1 / (1 + e), e / (1 + e))

    def pullback(self, inputs, outputs, grads):
        (x,), (out,), (g,) = inputs, outputs, grads
        return [g * out * Sigmoid()(-x)]


@final
@dataclass(frozen=True)
class LogSigmoid(Entrywise, SymbolicOp):
    """log(sigmoid(x)) = -softplus(-x) (scipy.special.log_expit).

    Naive: `log(1 / (1 + exp(-x)))` is log(0) = -inf below ~-709 and rounds to 0
    above ~37.  Stable: `min(x, 0) - log1p(exp(-|x|))`.
    Pullback (reads the operand): `g · sigmoid(-x)`.
    """

    public_name: ClassVar[str] = "log_sigmoid"

    reads = READS_INPUTS

    def build(self, x):
        return minimum(x, 0) - log1p(exp(-abs(x)))

    def pullback(self, inputs, outputs, grads):
        return [grads[0] * Sigmoid()(-inputs[0])]


@final
@dataclass(frozen=True)
class Logit(Entrywise, SymbolicOp):
    """log(p / (1 - p)) (scipy.special.logit); NaN outside [0, 1], ∓inf at 0 and 1.

    Naive: `log(p / (1 - p))` cancels near p = 1/2 (where logit is near 0).
    Stable: `log1p((2p - 1) / (1 - p))` on [1/4, 3/4] (2p - 1 is exact there),
    `log(p) - log1p(-p)` elsewhere.
    Pullback (reads the operand): `g · (1/p + 1/(1 - p))`, NaN outside [0, 1]; a sum, not
    `g / (p (1 - p))`, whose own derivative meets inf - inf where p² underflows.
    """

    public_name: ClassVar[str] = "logit"

    reads = READS_INPUTS

    def build(self, p):
        middle = less_equal(abs(p - 0.5), 0.25)
        q = where(middle, p, 0.5)  # both branches finite
        return where(middle, log1p((2 * q - 1) / (1 - q)), log(p) - log1p(-p))

    def pullback(self, inputs, outputs, grads):
        (p,), (g,) = inputs, grads
        inside = logical_and(greater_equal(p, 0), less_equal(p, 1))
        return [where(inside, g * (1 / p + 1 / (1 - p)), np.nan)]


def _unary(op, name: str, doc: str):
    def apply(x):
        (v,), dtype = promote(name, x)
        return restore(op(v), dtype)

    apply.__name__ = apply.__qualname__ = name
    apply.__doc__ = doc
    return apply


softplus = _unary(Softplus(), "softplus", "log(1 + exp(x)), elementwise and stable.")
log1pexp = softplus
sigmoid = _unary(Sigmoid(), "sigmoid", "1 / (1 + exp(-x)), elementwise and stable (scipy.special.expit).")
expit = sigmoid
log_sigmoid = _unary(LogSigmoid(), "log_sigmoid", "log(sigmoid(x)), elementwise and stable (scipy.special.log_expit).")
log_expit = log_sigmoid
logit = _unary(Logit(), "logit", "log(p / (1 - p)), elementwise and stable; NaN outside [0, 1].")
