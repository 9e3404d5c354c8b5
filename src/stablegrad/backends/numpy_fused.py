"""Whole-op NumPy implementations of stable-family ops, for the NumPy backend.

Inlined, `logsumexp`'s body is about fourteen nodes; on small arrays (an HMM step
over a handful of states) the executor's per-node cost then dominates.  Run
whole, it is one node doing the same NumPy calls in the same order — so the
result is bit-for-bit the body's (a test compares them), only without the
per-node overhead.  A factory returns None for parameters it does not cover;
those ops are inlined as usual.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ops.stable import LogSumExp, Softmax


def fused_logsumexp(op: LogSumExp) -> Callable | None:
    """The plain (unweighted, unmasked, unsigned) LogSumExp body as one function."""
    if op.weighted or op.masked or op.return_sign:
        return None
    axes, keepdims = op.axes, op.keepdims

    def run(x):
        m = np.maximum.reduce(x, axis=axes, keepdims=True, initial=-np.inf)
        at_max = np.equal(x, m)
        terms = np.exp(np.subtract(x, m))
        if terms.ndim:  # the body's where(at_max, 0, terms), in place: half the time on small arrays
            terms[at_max] = 0
        else:  # NumPy returns a 0-d result as a scalar, which has no item to set
            terms = np.where(at_max, 0, terms)
        # reduced without keepdims (the same sums, and no squeeze call); `initial` counts ties - 1 at once
        rest = np.add.reduce(terms, axis=axes, keepdims=keepdims)
        excess_ties = np.add.reduce(at_max, axis=axes, keepdims=keepdims, dtype=terms.dtype, initial=-1)
        return np.add(m.reshape(rest.shape), np.log1p(rest + excess_ties))

    return run


def fused_softmax(op: Softmax) -> Callable | None:
    """The unmasked Softmax body as one function (the gradient of logsumexp is one too)."""
    if op.masked:
        return None
    axes = op.axes

    def run(x):
        m = np.maximum.reduce(x, axis=axes, keepdims=True, initial=-np.inf)
        at_max = np.equal(x, np.where(np.equal(m, -np.inf), np.nan, m))
        e = np.exp(np.where(at_max, 0, np.subtract(x, m)))
        return np.true_divide(e, np.add.reduce(e, axis=axes, keepdims=True))

    return run


FUSED: dict[type, Callable] = {LogSumExp: fused_logsumexp, Softmax: fused_softmax}
