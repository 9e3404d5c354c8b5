"""sech(x) = 1/cosh(x), to full relative accuracy until it underflows, with a derivative that never meets 0 · inf."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, final

from ...graph.basic import Reads
from ..base import Entrywise
from ..composite import SymbolicOp
from ..elementwise import abs
from ..math import exp, tanh
from ._common import promote, restore


@final
@dataclass(frozen=True)
class Sech(Entrywise, SymbolicOp):
    """sech(x) = 1/cosh(x).

    Naive: `1/cosh(x)` (or `2/(exp(x) + exp(-x))`) is 0 once cosh overflows at |x| ≈ 710,
    where sech is still a normal number down to 745, and its derivative by the chain rule,
    (-g/cosh²)·sinh, is 0 · inf = NaN there.  Stable: `2e/(1 + e²)` with e = exp(-|x|),
    which underflows only with the answer.
    Pullback (reads the operand and the output): `-g · tanh(x) · sech(x)`, two factors of at
    most 1.
    """

    public_name: ClassVar[str] = "sech"

    reads = Reads(inputs=(0,), outputs=(0,))

    def build(self, x):
        e = exp(-abs(x))
        return 2 * e / (1 + e * e)

    def pullback(self, inputs, outputs, grads):
        return [-grads[0] * tanh(inputs[0]) * outputs[0]]


def sech(x):
    """sech(x) = 1/cosh(x), elementwise, accurate until it underflows past |x| ≈ 745.

    Integers compute in float64; float16 computes in float32 and comes back as float16.

    >>> import numpy as np, stablegrad as sg
    >>> x = sg.vector("x")
    >>> sg.function([x], sg.ops.stable.sech(x))(np.array([0.0, 720.0])).tolist()
    [1.0, 4.06446160484e-313]
    """
    (x,), dtype = promote("sech", x)
    return restore(Sech()(x), dtype)
