"""log(cosh(x)), finite for every finite x and relatively accurate near 0."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, final

from ...graph.basic import READS_INPUTS
from ..base import Entrywise
from ..composite import SymbolicOp
from ..elementwise import abs, where
from ..math import exp, expm1, log1p, tanh
from ._common import promote, restore

_LN2 = math.log(2.0)


@final
@dataclass(frozen=True)
class LogCosh(Entrywise, SymbolicOp):
    """log(cosh(x)).

    Naive: `log(cosh(x))` overflows past |x| ≈ 710 (float64; 89 in float32), and near 0
    cosh(x) rounds to 1, so the answer x²/2 is lost (0 instead of 5e-21 at x = 1e-10);
    `logaddexp(x, -x) - log 2` keeps the range but cancels near 0 the same way.
    Stable, with a = |x|: for a < 1, `log1p(e² / (2(1 + e)))` with e = expm1(a) (that is
    cosh(a) - 1 without a difference); above, `(a - log 2) + log1p(exp(-2a))`, whose terms
    are positive.  Each branch sees an argument clamped to its side.
    Pullback (reads the operand): `g · tanh(x)`; tanh's own derivative is sech², to full
    relative accuracy far out.
    """

    public_name: ClassVar[str] = "log_cosh"

    reads = READS_INPUTS

    def build(self, x):
        a = abs(x)
        near = a < 1
        e = expm1(where(near, a, 0))
        far = where(near, 1, a)
        return where(near, log1p(e * e / (2 * (1 + e))), (far - _LN2) + log1p(exp(-2 * far)))

    def pullback(self, inputs, outputs, grads):
        return [grads[0] * tanh(inputs[0])]


def log_cosh(x):
    """log(cosh(x)), elementwise: finite for every finite x, about |x| - log 2 far out, x²/2 near 0.

    Integers compute in float64; float16 computes in float32 and comes back as float16.

    >>> import numpy as np, stablegrad as sg
    >>> x = sg.vector("x")
    >>> sg.function([x], sg.ops.stable.log_cosh(x))(np.array([1e-10, 1000.0])).tolist()
    [5e-21, 999.3068528194401]
    """
    (x,), dtype = promote("log_cosh", x)
    return restore(LogCosh()(x), dtype)
