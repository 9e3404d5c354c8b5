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
from ..ops.stable.logsumexp import LogSumExpGrad


def fused_logsumexp(op: LogSumExp) -> Callable | None:
    """The plain (unweighted, unmasked, unsigned) LogSumExp body as one function."""
    if not op.plain:
        return None
    axes, keepdims = op.axes, op.keepdims

    def run(x):
        m, at_max, terms = _max_and_terms(x, axes)
        terms[at_max] = 0  # the body's where(at_max, 0, terms), in place: half the time on small arrays
        # reduced without keepdims (the same sums, and no squeeze call); `initial` counts ties - 1 at once
        rest = np.add.reduce(terms, axis=axes, keepdims=keepdims)
        excess_ties = np.add.reduce(at_max, axis=axes, keepdims=keepdims, dtype=terms.dtype, initial=-1)
        return np.add(m.reshape(rest.shape), np.log1p(rest + excess_ties))

    return run


def fused_logsumexp_grad(op: LogSumExpGrad) -> Callable:
    """The LogSumExpGrad body (softmax, 0 on empty rows) as one function."""
    axes = op.axes

    def run(x):
        m, at_max, terms = _max_and_terms(x, axes)
        terms[at_max] = 0
        rest = np.add.reduce(terms, axis=axes, keepdims=True)
        ties = np.add.reduce(at_max, axis=axes, keepdims=True, dtype=terms.dtype)
        terms[at_max] = 1
        p = np.asarray(np.true_divide(terms, ties + rest))  # an array for a 0-d x too, to be set in place
        np.copyto(p, 0, where=np.equal(m, -np.inf))
        return p

    return run


def _max_and_terms(x, axes):
    """(m, at_max, exp(x - m)) as `split_at_max` builds them; the terms as an array
    even for a 0-d x (NumPy returns 0-d results as scalars), to be set in place."""
    m = np.maximum.reduce(x, axis=axes, keepdims=True, initial=-np.inf)
    at_max = np.equal(x, m)
    return m, at_max, np.asarray(np.exp(np.subtract(x, m)))


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


FUSED: dict[type, Callable] = {
    LogSumExp: fused_logsumexp,
    LogSumExpGrad: fused_logsumexp_grad,
    Softmax: fused_softmax,
}
