"""`masked_gradient(x, mask)`: x itself, whose gradient is kept only where `mask` holds.

It is how a `where` keeps the branch it did not select out of the gradient.  In
`where(x > 0, log(x), 0)` the pullback sends a zero cotangent to `log` at x = 0, and
`log`'s pullback turns it into 0 / 0 = NaN.  Reading x through `masked_gradient(x, x > 0)`
changes no value, but its pullback is `where(mask, g, 0)`: whatever NaN or inf the
branch made of its zero cotangents is dropped before it reaches x.  (JAX documents the
same cure as a hand-written second `where`; here the `where` rule in rewrite/branches.py
places it.)  The mask applies to second derivatives as well: the branch's partials in
the pullback read x through the same op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, final

from ..graph.basic import Reads
from .base import zero_grad
from .composite import SymbolicOp
from .elementwise import where


@final
@dataclass(frozen=True)
class MaskedGradient(SymbolicOp):
    """x; its gradient passes where `mask` equals `kept` and is exactly 0 elsewhere.

    (`kept=False` serves the branch a `where` selects where its condition is false.)
    `mask` must not widen x (broadcast x first where it could): the gradient is masked
    entry by entry, before any sum over broadcast axes, so a NaN in one row cannot leak
    into the sum that reaches a shared entry of x.
    """

    kept: bool = True

    public_name: ClassVar[str] = "masked_gradient"

    reads = Reads(inputs=(1,))

    def build(self, x, mask):
        return x

    def pullback(self, inputs, outputs, grads):
        mask, g = inputs[1], grads[0]
        return [where(mask, g, 0) if self.kept else where(mask, 0, g), zero_grad(mask)]


def masked_gradient(x, mask, kept: bool = True):
    """x, with its gradient set to 0 where `mask` is not `kept` (whatever its consumers' partials are there).

    `mask` must not widen x.

    >>> import numpy as np, stablegrad as sg
    >>> from stablegrad.ops.gradient_mask import masked_gradient
    >>> x = sg.vector("x")
    >>> y = sg.sqrt(masked_gradient(x, x > 0))  # sqrt's partial is inf at 0
    >>> sg.function([x], sg.grad(sg.sum(y * (x > 0)), x))(np.array([0.0, 4.0]))
    array([0.  , 0.25])
    """
    return MaskedGradient(kept)(x, mask)
