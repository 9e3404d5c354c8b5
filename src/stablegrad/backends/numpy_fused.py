"""Whole-op NumPy implementations of stable-family ops, for the NumPy backend.

Inlined, `logsumexp`'s body is about fourteen nodes; on small arrays (an HMM step
over a handful of states) the executor's per-node cost then dominates.  Run
whole, it is one node doing the same arithmetic in the same order — so the
result is bit-for-bit the body's (a test compares them), only without the
per-node overhead.  A factory returns None for parameters it does not cover;
those ops are inlined as usual.

On large arrays reduced over their last axis the cost is memory traffic instead: written
as the body is, the max, subtract, compare, exp, sum and divide each pass over a full-size
temporary.  There (`_by_rows`) the same arithmetic runs a block of rows at a time
(`_BLOCK` float64 entries), so that the block's temporaries stay in cache: x is read from
memory twice (its max, then the block pass), logsumexp allocates nothing of x's size and its
gradient only its result, which it is computed in.  The ties at the max are counted for the
whole block at once (one per row, as almost always, or per row when not), and rows whose max
is not finite (all -inf, +inf, NaN) are redone by the general code: the same values as the
body's, bit for bit, on every row (tests compare both paths).

The gradient rarely comes alone: the chain rule scales it by a factor per row, and a
function that returns a loss beside its gradient computes the logsumexp too.  `row_pairs`
makes those one node (`ScaledSoftmax`, `LogSumExpAndScaledSoftmax`), run here by the same
blocks: one max, one exp and one sum per row give both results, and each block is scaled
while it is in cache.  The logsumexp, and an unscaled gradient, are the separate nodes'
values bit for bit; a scaled gradient on the row path is p · (factor / total), one division
a row and one product an entry, where the separate nodes compute (p / total) · factor, a
division and a product an entry: two roundings each way, so within 2 ulps of each other
(a W1-style logsumexp and gradient: 1.5x hand-written NumPy with the division, 1.2x without).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..graph.types import is_floating
from ..ops.stable import LogSumExp, Softmax
from ..ops.stable.logsumexp import LogSumExpGrad
from .row_pairs import LogSumExpAndScaledSoftmax, ScaledSoftmax

#: float64 entries per block of rows on the row path (twice as many float32): the block's
#: temporaries (8 bytes and a mask byte an entry in float64) stay in a core's cache, and
#: float32 blocks make as few NumPy calls a byte; a row longer than this is one block
_BLOCK = 1 << 16
#: arrays smaller than this take the general code, which makes fewer NumPy calls
_ROW_PATH_MIN = 1 << 10
#: rows this short take their max a column at a time
_SHORT_ROW = 16


def fused_logsumexp(op: LogSumExp) -> Callable | None:
    """The plain (unweighted, unmasked, unsigned) LogSumExp body as one function."""
    if not op.plain:
        return None
    axes, keepdims = op.axes, op.keepdims

    def run(x):
        if _by_rows(x, axes):
            return _logsumexp_rows(x, keepdims)
        return _logsumexp(x, axes, keepdims)

    return run


def fused_logsumexp_grad(op: LogSumExpGrad) -> Callable:
    """The LogSumExpGrad body (softmax, 0 on empty rows) as one function."""
    axes = op.axes

    def run(x):
        if _by_rows(x, axes):
            return _logsumexp_grad_rows(x)
        return _logsumexp_grad(x, axes)

    return run


def _logsumexp(x, axes, keepdims):
    """The body, whole: `m + log1p(rest + ties - 1)` (see `split_at_max`)."""
    m, at_max, terms = _max_and_terms(x, axes)
    terms[at_max] = 0  # the body's where(at_max, 0, terms), in place: half the time on small arrays
    # reduced without keepdims (the same sums, and no squeeze call); `initial` counts ties - 1 at once
    rest = np.add.reduce(terms, axis=axes, keepdims=keepdims)
    excess_ties = np.add.reduce(at_max, axis=axes, keepdims=keepdims, dtype=terms.dtype, initial=-1)
    return np.add(m.reshape(rest.shape), np.log1p(rest + excess_ties))


def _logsumexp_grad(x, axes):
    """The gradient's body, whole: `where(at_max, 1, terms) / (ties + rest)`, 0 where m is -inf."""
    m, at_max, terms = _max_and_terms(x, axes)
    terms[at_max] = 0
    rest = np.add.reduce(terms, axis=axes, keepdims=True)
    ties = np.add.reduce(at_max, axis=axes, keepdims=True, dtype=terms.dtype)
    terms[at_max] = 1
    np.true_divide(terms, ties + rest, out=terms)
    np.copyto(terms, 0, where=np.equal(m, -np.inf))
    return terms


def _max_and_terms(x, axes):
    """(m, at_max, exp(x - m)) as `split_at_max` builds them; the terms a fresh array
    even for a 0-d x (NumPy returns 0-d results as scalars), to be set in place."""
    m = np.maximum.reduce(x, axis=axes, keepdims=True, initial=-np.inf)
    at_max = np.equal(x, m)
    terms = np.asarray(np.subtract(x, m))
    np.exp(terms, out=terms)
    return m, at_max, terms


def _by_rows(x, axes) -> bool:
    """Whether x takes the row path: a large C-ordered float array reduced over its last axis."""
    return (
        type(x) is np.ndarray
        and x.size >= _ROW_PATH_MIN
        and axes == (x.ndim - 1,)
        and is_floating(x.dtype)
        and x.flags.c_contiguous
    )


def _row_blocks(x):
    """(x as rows, m: the rows' max (kept), first: the flat index of each row's first entry at
    its max, or None for short rows, finite: where m is finite, the blocks: (start, stop)
    pairs of rows).  x has no empty row (x.size > 0)."""
    n = x.shape[-1]
    rows = x.reshape(-1, n)  # a view: x is C-ordered
    count = rows.shape[0]
    if n <= _SHORT_ROW:
        # a reduction makes a call per row: on short rows, a maximum per column is a few times
        # faster (NaN propagates as in the reduction; only the sign of a zero max may differ, which
        # nothing reads: m + log1p(...) adds a non-negative number, x - m is 0 either way)
        first = None
        m = rows[:, :1].copy()
        for j in range(1, n):
            np.maximum(m, rows[:, j : j + 1], out=m)
    else:
        # the max as its first position (NaN counts as the max, as in `maximum`): a block with
        # no tie then zeroes its max entries by index instead of through a mask
        first = np.argmax(rows, axis=1)
        first += np.arange(0, count * n, n)
        m = rows.reshape(-1).take(first).reshape(count, 1)
    finite = np.isfinite(m[:, 0])
    step = max(1, _BLOCK * 8 // (n * x.itemsize))
    return rows, m, first, finite, [(i, min(i + step, count)) for i in range(0, count, step)]


def _shift_and_exp(rows, m, first, finite, start, stop, out, at_max):
    """exp(x - m) of rows start:stop into `out`, 0 where x is at its row's max (`at_max`, set
    here); returns the ties at the max per row (kept), or None where every finite row has
    exactly one (the entry at `first`, where there is a `first`).

    For a finite max, x - m is 0 exactly where x = m; a row whose max is not finite has no 0
    (its x - m is NaN or -inf throughout) and is redone by the general code."""
    np.subtract(rows[start:stop], m[start:stop], out=out)
    np.equal(out, 0, out=at_max)
    np.exp(out, out=out)
    if first is None:
        np.subtract(out, at_max, out=out)  # exp(0) - 1 = 0 at the max, v - 0 = v elsewhere
    # a finite row has at least one entry at its max: as many as finite rows, exactly one each
    if np.count_nonzero(at_max) == np.count_nonzero(finite[start:stop]):
        if first is not None:
            out.reshape(-1)[first[start:stop] - start * out.shape[1]] = 0
        return None
    if first is not None:
        out[at_max] = 0
    return np.add.reduce(at_max, axis=1, keepdims=True, dtype=out.dtype)


def _logsumexp_rows(x, keepdims):
    """`_logsumexp` over the last axis of a C-ordered x, a block of rows at a time."""
    rows, m, first, finite, blocks = _row_blocks(x)
    width = blocks[0][1] - blocks[0][0]
    terms = np.empty((width, rows.shape[1]), dtype=x.dtype)
    at_max = np.empty(terms.shape, dtype=np.bool_)
    rest = np.empty(m.shape, dtype=x.dtype)
    excess_ties = np.zeros(m.shape, dtype=x.dtype)
    for start, stop in blocks:
        block = terms[: stop - start]
        ties = _shift_and_exp(rows, m, first, finite, start, stop, block, at_max[: stop - start])
        np.add.reduce(block, axis=1, keepdims=True, out=rest[start:stop])
        if ties is not None:
            np.subtract(ties, 1, out=excess_ties[start:stop])
    out = np.add(m, np.log1p(np.add(rest, excess_ties, out=rest), out=rest), out=rest)
    if not finite.all():
        bad = np.flatnonzero(~finite)
        out[bad, 0] = _logsumexp(rows[bad], (1,), False)
    return out.reshape(x.shape[:-1] + ((1,) if keepdims else ()))[()]  # (a scalar when 0-d, as NumPy's)


def _logsumexp_grad_rows(x):
    """`_logsumexp_grad` over the last axis of a C-ordered x, a block of rows at a time,
    written straight into the result."""
    return _scaled_softmax_rows(x, None, None)[1]


def _scaled_softmax_rows(x, factors, keepdims):
    """(`_logsumexp` or None, factors · `_logsumexp_grad`) over the last axis of a C-ordered x, a
    block of rows at a time: the gradient written straight into the result and scaled there
    (`factors`: one per row, shape (rows, 1), or None for 1), the logsumexp (where `keepdims`
    is not None) from the same exps and sums.  The logsumexp and an unscaled gradient are
    the separate nodes' (`_logsumexp_rows`, the gradient alone) bit for bit; a scaled one is
    the terms times factor / total (see the module's docstring)."""
    rows, m, first, finite, blocks = _row_blocks(x)
    p = np.empty(rows.shape, dtype=x.dtype)
    at_max = np.empty((blocks[0][1] - blocks[0][0], rows.shape[1]), dtype=np.bool_)
    rest = np.empty(m.shape, dtype=x.dtype)
    denominators = np.empty(m.shape, dtype=x.dtype)
    excess_ties = np.zeros(m.shape, dtype=x.dtype) if keepdims is not None else None
    for start, stop in blocks:
        block, block_at_max = p[start:stop], at_max[: stop - start]
        ties = _shift_and_exp(rows, m, first, finite, start, stop, block, block_at_max)
        block_rest = np.add.reduce(block, axis=1, keepdims=True, out=rest[start:stop])
        if excess_ties is not None and ties is not None:
            np.subtract(ties, 1, out=excess_ties[start:stop])
        # the body's where(at_max, 1, terms): set back to exp(0)
        if first is None:
            np.add(block, block_at_max, out=block)
        elif ties is None:
            p.reshape(-1)[first[start:stop]] = 1
        else:
            block[block_at_max] = 1
        total = np.add(1 if ties is None else ties, block_rest, out=denominators[start:stop])
        if factors is not None:
            np.multiply(block, np.true_divide(factors[start:stop], total, out=total), out=block)
        else:
            np.true_divide(block, total, out=block)
    lse = None
    if excess_ties is not None:
        lse = np.add(m, np.log1p(np.add(rest, excess_ties, out=rest), out=rest), out=rest)
    if not finite.all():
        bad = np.flatnonzero(~finite)
        p[bad] = _scaled(None if factors is None else factors[bad], _logsumexp_grad(rows[bad], (1,)))
        if lse is not None:
            lse[bad, 0] = _logsumexp(rows[bad], (1,), False)
    if lse is not None:
        lse = lse.reshape(x.shape[:-1] + ((1,) if keepdims else ()))[()]  # (a scalar when 0-d, as NumPy's)
    return lse, p.reshape(x.shape)


def fused_scaled_softmax(op: ScaledSoftmax) -> Callable:
    """scale · logsumexp_grad(x) over the last axis (the gradient's body, then the multiply)."""

    def run(x, scale):
        axes = (x.ndim - 1,)
        if _by_rows(x, axes) and _per_row(scale, x):
            return _scaled_softmax_rows(x, _row_factors(scale, x), None)[1]
        return _scaled(scale, _logsumexp_grad(x, axes))

    return run


def fused_logsumexp_and_scaled_softmax(op: LogSumExpAndScaledSoftmax) -> Callable:
    """(logsumexp(x), scale · logsumexp_grad(x)) over the last axis, from one max, exp and sum."""
    keepdims = op.keepdims

    def run(x, scale):
        axes = (x.ndim - 1,)
        if _by_rows(x, axes) and _per_row(scale, x):
            return _scaled_softmax_rows(x, _row_factors(scale, x), keepdims)
        lse, p = _logsumexp_and_grad(x, axes, keepdims)
        return lse, _scaled(scale, p)

    return run


def _logsumexp_and_grad(x, axes, keepdims):
    """(`_logsumexp`, `_logsumexp_grad`) from one max, exp and pair of sums, each bit for bit."""
    m, at_max, terms = _max_and_terms(x, axes)
    terms[at_max] = 0
    rest = np.add.reduce(terms, axis=axes, keepdims=True)
    ties = np.add.reduce(at_max, axis=axes, keepdims=True, dtype=terms.dtype)
    excess_ties = np.add.reduce(at_max, axis=axes, keepdims=True, dtype=terms.dtype, initial=-1)
    lse = np.add(m, np.log1p(rest + excess_ties))
    if not keepdims:
        lse = np.squeeze(lse, axis=axes)
    terms[at_max] = 1
    np.true_divide(terms, ties + rest, out=terms)
    np.copyto(terms, 0, where=np.equal(m, -np.inf))
    return lse[()], terms  # (a scalar when 0-d, as NumPy's)


def _per_row(scale, x) -> bool:
    """Whether `scale` is one factor per row of x in x's dtype (extent 1 or x's own on each
    other axis, 1 on the last), as the row path applies it; the general code takes the rest."""
    return (
        type(scale) is np.ndarray
        and scale.dtype == x.dtype
        and scale.ndim == x.ndim
        and scale.shape[-1] == 1
        and all(s == 1 or s == n for s, n in zip(scale.shape[:-1], x.shape[:-1]))
    )


def _row_factors(scale, x):
    """The `_per_row` scale as a column of one factor per row of x, or None where it is all 1
    (a gradient's seed: the terms / total then, bit for bit the nodes' 1 · v)."""
    if np.all(scale == 1):  # (a pass over one number a row)
        return None
    return np.broadcast_to(scale, x.shape[:-1] + (1,)).reshape(-1, 1)


def _scaled(scale, p):
    """scale * p as the graph's multiply computes it: into p (a fresh array) where the product
    has its shape and dtype, p itself where scale is None or a 1 that changes no shape."""
    if scale is None:
        return p
    if getattr(scale, "dtype", None) == p.dtype and np.broadcast_shapes(np.shape(scale), p.shape) == p.shape:
        if scale.size == 1 and scale.reshape(-1)[0] == 1:
            return p  # (1 · v is v bit for bit, NaN and -0 included)
        return np.multiply(scale, p, out=p)
    return np.multiply(scale, p)


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
    ScaledSoftmax: fused_scaled_softmax,
    LogSumExpAndScaledSoftmax: fused_logsumexp_and_scaled_softmax,
}
