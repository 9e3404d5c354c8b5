"""The softmax family lowered whole: `jax.nn`'s passes (a max, sums of exp), tails kept.

The bodies of these ops count the entries at the max ("ties") and sum the others
("rest") separately, so that a tail far below the max is not rounded away against
the max's exp(0) = 1: logsumexp([0, -40]) = 4.2e-18, not 0.  Lowered whole, both
sums are read off e = exp(x - max) alone (`_log_total`): comparisons with the max
would keep XLA's CPU code from fusing them into the loop that computes e.
`logsumexp` goes further and speculates (`flags.settle`): a result of magnitude 1
or more hides a lost tail, so only a row with s < 2 and |m + log s| < 1 calls for a
rerun (see `lower_logsumexp`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ...graph.basic import Op
from ...ops.stable.logsumexp import LogSumExp, LogSumExpGrad
from ...ops.stable.softmax import LogSoftmax, Softmax, SoftmaxCrossEntropy
from .flags import settle
from .lowerings import rounded

#: the magnitude of a logsumexp below which a lost tail could show (see `lower_logsumexp`),
#: with a margin for the roundings of the bounds it is tested on
_NEAR_ONE = 1 + 2.0**-10

#: below this many entries the exact tail's extra sum costs less than the risk of running a call twice
EXACT_BELOW = 1 << 14


def runs_whole(op: Op) -> bool:
    """Whether this backend lowers the (composite) op whole rather than through its inlined body."""
    if isinstance(op, LogSumExp):
        return op.plain
    if isinstance(op, Softmax | LogSoftmax):
        return not op.masked
    return isinstance(op, LogSumExpGrad | SoftmaxCrossEntropy)


@partial(jax.custom_jvp, nondiff_argnums=(2,))
def _minus_max(x, m, empty_rows_nan: bool):
    """x - m, exactly 0 at the max entries (+inf ones included, where x - m is NaN); on
    rows with nothing above -inf 0 too, or NaN with `empty_rows_nan` (0/0, as the
    softmax bodies want).

    Its derivative is dx - dm everywhere.  JAX's own rule would see the select that pins
    the max entries to 0 as a constant there: harmless at a unique max (where dm = dx),
    but at tied maxima it drops their dx - dm, and `jax.hessian` of a stabilized function
    differentiates these lowerings (a softmax of [1, 1, 1] had a Hessian of 0)."""
    top = jnp.where(m == -jnp.inf, jnp.nan, m) if empty_rows_nan else m
    return jnp.where(x == top, 0, x - m)


@_minus_max.defjvp
def _minus_max_jvp(empty_rows_nan: bool, primals, tangents):
    (x, m), (dx, dm) = primals, tangents
    return _minus_max(x, m, empty_rows_nan), dx - dm


#: within one trace (`sharing`), the values already lowered from each (array, axes): a
#: logsumexp and its gradient on the same x then share one max, exp and sum in the program
#: JAX emits, instead of emitting them twice for XLA's common-subexpression pass to merge
#: (an unrolled HMM's gradient: a third fewer reductions and half the exps in the program;
#: XLA merged the copies itself, so its compile takes about as long either way)
_SHARED: ContextVar[dict | None] = ContextVar("stablegrad_jax_shared", default=None)


@contextmanager
def sharing():
    """Lowerings inside share what they compute from the same array (`_shared`)."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def _shared(kind: str, x, axes: tuple[int, ...], compute: Callable):
    """compute(x, axes), once per trace for the same x (held, so its id stays x's)."""
    memo = _SHARED.get()
    if memo is None:
        return compute(x, axes)
    key = (kind, id(x), axes)
    found = memo.get(key)
    if found is not None and found[0] is x:
        return found[1]
    value = compute(x, axes)
    memo[key] = (x, value)
    return value


def _max_and_sum(x, axes: tuple[int, ...]):
    """(m, e, s): the max (kept), e = exp(x - m) (exactly 1 at the max; on rows with nothing
    above -inf 0 or 1, which callers pick out on m) and its sum, once per trace for the
    same x (`_shared`).

    The shift is per row, as `jax.nn`'s (-inf rows shifted by 0), and speculates: only a
    row whose max is +inf needs the per-entry select that pins its +inf entries to
    exp(0) (inf - inf is NaN), so such a row makes the call rerun with the select
    (`flags.settle`): the select was 4-9 % of a 1000 x 1000 logsumexp and gradient.  Below
    `EXACT_BELOW` entries the select stays, as the tails do: an unrolled HMM's 8 x 8 steps
    would pay a reduction each for the doubt."""
    return _shared("max_and_sum", x, axes, _compute_max_and_sum)


def _compute_max_and_sum(x, axes: tuple[int, ...]):
    m = jnp.max(x, axis=axes, keepdims=True, initial=-jnp.inf)

    def pinned():
        return jnp.exp(_minus_max(x, m, False))

    if np.size(x) < EXACT_BELOW:  # (where the doubt's own reduction costs more than the select)
        e = pinned()
    else:
        e = settle(jnp.exp(x - jnp.where(m == -jnp.inf, 0, m)), m == jnp.inf, pinned)
    return m, e, jnp.sum(e, axis=axes, keepdims=True)


def _shifted(x, axes: tuple[int, ...]):
    """(z, e) as the softmax bodies build them: z = x - max, exactly 0 at the max entries
    (+inf ones included) and NaN on rows with nothing above -inf (0/0); e = exp(z)."""
    z = _minus_max(x, jnp.max(x, axis=axes, keepdims=True, initial=-jnp.inf), True)
    return z, jnp.exp(z)


def _log_total(e, axes: tuple[int, ...]):
    """log(sum(e)) for e = exp(x - max), with the tail kept, as the bodies'
    `log_tied_plus_rest` (`_ties_and_rest`)."""
    ties, rest = _shared("ties_and_rest", e, axes, _ties_and_rest)
    return jnp.log1p(rest + (ties - 1))


def _ties_and_rest(e, axes: tuple[int, ...]):
    """The max entries' e is exactly 1 and the others' below 1, so ties = Σ floor(e) and
    rest = Σ (e - floor(e)).  (An entry just below the max whose exp rounds to 1 counts
    as a tie: the same total.)  Counted from e alone, both sums fuse into the loop that
    computes e; a select on `x == max` would not."""
    whole = jnp.floor(e)
    return jnp.sum(whole, axis=axes, keepdims=True), jnp.sum(e - whole, axis=axes, keepdims=True)


def lower_logsumexp(op: LogSumExp, x):
    """`m + log(s)` as `jax.nn.logsumexp`, speculating: a row whose total is under 2
    and whose result is under 1 in magnitude makes the call rerun with the tail kept
    (`_log_total`).  Below `EXACT_BELOW` entries, always kept.

    Only a unique max (s < 2) has a tail that `log1p` keeps and `log` may not: there
    s = 1 + rest is rounded to a spacing of eps (the ulp of 1), which moves log(s) by
    at most eps/2, and a result r = m + log(s) with |r| >= 1 has half an ulp of at least
    eps/2.  (The sum's other roundings are those of a total of 2 or more, which never
    reruns: measured, the cheap result is within 2 ulps of the exact one on such rows.)
    So the doubt is on the result (bounded from m and s), not on m alone: a Gaussian
    mixture's log-densities (r around -2) and short rows with a clear max stay on the
    cheap program, as `jax.nn` does; `[0, -40, ...]` (r = 0 for 4e-18) still reruns.
    (-inf, +inf and NaN rows have |r| = inf or NaN: no doubt, and their cheap result is exact.)
    """
    axes = op.axes
    m, e, s = _max_and_sum(x, axes)

    def exact():
        return m + _log_total(e, axes)

    if np.size(x) < EXACT_BELOW:
        out = exact()
    else:
        cheap = m + jnp.log(s)
        # |m + log(s)| < 1, from m and s alone: log(s) lies in [y/s, y] for y = s - 1, so
        # the row's result does too, shifted by m (and the margin covers their roundings).
        # A test on the result itself read the log in a fusion of its own: a 10000 x 10
        # float32 logsumexp and gradient took 298 µs against 254 µs this way.
        y = s - 1
        doubt = (s < 2) & (m + y > -_NEAR_ONE) & (m + y / s < _NEAR_ONE)
        out = settle(cheap, doubt, exact)
    return out if op.keepdims or not axes else jnp.squeeze(out, axes)


def lower_logsumexp_grad(op: LogSumExpGrad, x):
    """e / s, 0 on rows with nothing above -inf (the body's `where(at_max, 1, terms) / (ties + rest)`).

    Below `EXACT_BELOW` entries s is the body's ties + rest, the two sums the logsumexp of
    the same x keeps (shared within the trace: one pair of sums for both, not three).
    The -inf rows are picked out on the total (e / inf = 0), one select
    per row rather than per entry.  A NaN entry makes s NaN, and keeps it: XLA's max
    may pass over the NaN of `[-inf, nan]` and report -inf, yet the row's gradient is NaN."""
    m, e, s = _max_and_sum(x, op.axes)
    if np.size(x) < EXACT_BELOW:
        ties, rest = _shared("ties_and_rest", e, op.axes, _ties_and_rest)
        s = ties + rest
    return e / jnp.where((m == -jnp.inf) & (s == s), jnp.inf, s)


def lower_softmax(op: Softmax, x):
    _, e = _shifted(x, op.axes)
    return rounded(e / jnp.sum(e, axis=op.axes, keepdims=True))


def lower_log_softmax(op: LogSoftmax, x):
    z, e = _shifted(x, op.axes)
    return z - _log_total(e, op.axes)


def lower_softmax_cross_entropy(op: SoftmaxCrossEntropy, logits, labels):
    """`log_total - z[label]` for class indices (no log_softmax of the whole row), else the body's sum."""
    axes = (op.axis,)
    z, e = _shifted(logits, axes)
    log_total = _log_total(e, axes)
    if op.sparse:
        picked = jnp.take_along_axis(z, jnp.expand_dims(labels, op.axis), axis=op.axis)
        return jnp.squeeze(log_total - picked, op.axis)
    return -jnp.sum(jnp.where(labels == 0, 0, labels * (z - log_total)), axis=op.axis)


#: op class -> lowering of the variants `runs_whole` keeps
WHOLE: dict[type, Callable] = {
    LogSumExp: lower_logsumexp,
    LogSumExpGrad: lower_logsumexp_grad,
    Softmax: lower_softmax,
    LogSoftmax: lower_log_softmax,
    SoftmaxCrossEntropy: lower_softmax_cross_entropy,
}
