"""Probability space: a matrix product of exponentials under a log, a softmax's complement,
and the probability of a set of classes as a ratio of sums of exponentials.

`log(exp(a) @ B)` is how a hidden-Markov forward step or a mixture over a shared set of
components is written with a matrix product: every exp(a) underflows to 0 once `a` is a
log-likelihood of a few hundred nats (log(0) = -inf), or overflows past ~709.  Shifting
`a` by its largest entry along the contracted axis keeps the product's speed (one
matrix product) and its terms in range: log(exp(a - s) @ B) + s.

`log(1 - softmax(x))`, the log-probability of "any class but this one", is
log1mexp(log_softmax(x)) once recognised, which is -inf at a saturated maximum: there
log_softmax rounds to 0 (it is -(tail), below an ulp of 1) and its complement, the tail
itself, is lost.  The complement of the max entry is therefore taken from the tail directly.

`sum(where(mask, exp(x), 0)) / sum(exp(x))` is inf/inf past ~709 and 0/0 far below; both
sums shifted by the same max are a quotient of ordinary numbers.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from ..graph.basic import Variable, constant
from ..graph.types import is_floating
from ..ops.elementwise import (
    Divide,
    Negative,
    Subtract,
    astype,
    equal,
    greater,
    greater_equal,
    isfinite,
    isinf,
    logical_and,
    logical_not,
    maximum,
    where,
)
from ..ops.gradient_mask import MaskedGradient, masked_gradient
from ..ops.linalg import Matmul, matmul
from ..ops.math import Exp, Log, Log1p, exp, log, log1p
from ..ops.reduction import Any, Sum
from ..ops.shape import Squeeze
from ..ops.stable import Log1mExp, LogSoftmax, Softmax
from ..ops.stable._common import MaxShift
from ..ops.stable.logsumexp import split_at_max
from .engine import Kind, Phase, rewrite
from .patterns import entrywise_operand, fits, owner


@rewrite(Phase.STABILIZE, Kind.RECOGNITION, Log)
def log_matmul_exp_from_naive(node):
    """log(exp(a) @ B) → log(exp(a - s) @ B) + s and log(B @ exp(a)) → log(B @ exp(a - s)) + s, s the
    max of `a` along the contracted axis (0 where that max is not finite, so -inf, +inf and NaN
    rows give what the written formula gives).  The terms then lie in [0, 1] with 1 at the max:
    nothing overflows, and a row far below zero no longer underflows whole to log(0) = -inf.

    It fires for any B: a negative total is NaN as it is written.  The shift carries no
    gradient (the value does not depend on it; its exact cancellation in the derivative would
    only add rounding).  Terms more than ~745 (float64) below their row's max still underflow:
    the result is then the product over the terms near the max, which is the answer unless B
    gives all of those a weight of 0.  The exact form there, a logsumexp of a + log(B) over
    the contracted axis, would hold a k-fold larger intermediate, and is not built."""
    product = owner(node.inputs[0], Matmul)
    if product is None:
        return None
    left, right = product.inputs
    a = entrywise_operand(left, Exp)
    on_left = a is not None
    if not on_left:
        a = entrywise_operand(right, Exp)
    if a is None or _shifted_already(a):
        return None
    a = astype(a, (left if on_left else right).dtype)  # (exp of integers is a float)
    # the contracted axis: a's last on the left, its second to last (or only) on the right
    axis = -1 if on_left or a.ndim == 1 else -2
    shift = _shift(a, axis)
    terms = exp(a - shift)
    total = matmul(terms, right) if on_left else matmul(left, terms)
    if (right if on_left else left).ndim == 1:  # a vector operand: the product drops that axis
        shift = Squeeze((axis % shift.ndim,))(shift)
    return fits(log(total) + shift, node)


def _shifted_already(a: Variable) -> bool:
    """Whether `a` is this rule's own a - shift (its shift is the only gradient-masked operand)."""
    difference = owner(a, Subtract)
    return difference is not None and owner(difference.inputs[1], MaskedGradient) is not None


def _shift(a: Variable, axis: int) -> Variable:
    """max(a) along `axis` (kept as length 1) as a shift: see `_finite_shift`."""
    return _finite_shift(MaxShift((axis % a.ndim,), keepdims=True)(a))


def _finite_shift(top: Variable) -> Variable:
    """`top`, 0 where it is not finite (a row of -inf, +inf or NaN then computes as written),
    with no gradient (what is shifted by it does not depend on it)."""
    return masked_gradient(where(isfinite(top), top, 0), constant(False))


@rewrite(Phase.STABILIZE, Kind.RECOGNITION, Log1mExp, Log1p)
def log_softmax_complement_from_naive(node):
    """log1mexp(log_softmax(x)) and log1p(-softmax(x)) (what log(1 - softmax(x)) becomes) → at a
    row's unique max entry, log(r) - log1p(r) with r = Σ exp(x - max) over the row's other
    entries; elsewhere log1mexp(log_softmax(x)).  A saturated row, [0, 0, 800], has
    1 - p = 7.5e-348 at 800: -799.31, where p rounds to 1 and log_softmax to 0.

    Elsewhere p <= 1/2 (off the max, or one of several tied maxima) and log1mexp(log p) is
    accurate already.  A row without an entry above -inf stays NaN (0/0), as written."""
    ls = _log_softmax_under(node)
    if ls is None:
        return None
    x, axes = ls.owner.inputs[0], ls.owner.op.axes
    top, at_max, _, ties, rest = split_at_max(axes, x)  # logsumexp's own split, shared with it
    # (a lone -inf is no max: its row is NaN, 0/0, as written)
    alone = logical_and(logical_and(at_max, equal(ties, 1)), greater(top, -np.inf))
    # the other entries through a `where`, so that this rule does not match them again
    elsewhere = Log1mExp()(where(alone, -1.0, ls))
    return fits(where(alone, log(rest) - log1p(rest), elsewhere), node)


def _log_softmax_under(node) -> Variable | None:
    """log_softmax(x) (unmasked) where node is log1mexp of it or log1p(-softmax(x))."""
    if isinstance(node.op, Log1mExp):
        ls = owner(node.inputs[0], LogSoftmax)
        return node.inputs[0] if ls is not None and not cast(LogSoftmax, ls.op).masked else None
    negated = owner(node.inputs[0], Negative)
    s = owner(negated.inputs[0], Softmax) if negated is not None else None
    if s is None or cast(Softmax, s.op).masked:
        return None
    return LogSoftmax(cast(Softmax, s.op).axes)(s.inputs[0])


@rewrite(Phase.STABILIZE, Kind.RECOGNITION, Divide)
def probability_from_ratio_of_sums(node):
    """sum(exp(a)) / sum(exp(b)) over the same axes → sum(exp(a - s)) / sum(exp(b - s)), s the
    larger of the two maxima along those axes (0 where it is not finite): the probability of
    a set of classes, `sum(where(mask, exp(x), 0)) / sum(exp(x))`, is no longer inf/inf past
    ~709 (float64) or 0/0 far below.

    Both sums are at most their entry count and the larger at least 1 (the max entry's
    exp(0)), so the quotient keeps a quotient's accuracy; a numerator that is a tiny fraction
    of the denominator (below ~1e-308) still underflows, as it would written.  The shift
    carries no gradient (the quotient does not depend on it)."""
    top, bottom = (owner(v, Sum) for v in node.inputs)
    if top is None or bottom is None or top.op != bottom.op:
        return None
    a, b = (entrywise_operand(t.inputs[0], Exp) for t in (top, bottom))
    if a is None or b is None or a.ndim != b.ndim or _shifted_already(a):
        return None
    a, b = astype(a, top.inputs[0].dtype), astype(b, bottom.inputs[0].dtype)
    axes = top.op.axes
    shift = _finite_shift(maximum(MaxShift(axes, keepdims=True)(a), MaxShift(axes, keepdims=True)(b)))
    return fits(top.op(exp(a - shift)) / bottom.op(exp(b - shift)), node)


@rewrite(Phase.STABILIZE, Kind.RECOGNITION, Softmax, LogSoftmax)
def normalized_weights_from_softmax_of_log(node):
    """softmax(log(w)) → w / sum(w), log_softmax(log(w)) → log(w) - log(sum(w)) along the same
    axes: mixture weights normalised through their logs.

    Written, the gradient with respect to a weight of exactly 0 is NaN: log's pullback divides
    the cotangent, itself 0 (the weight's probability), by w = 0.  Normalised directly, the
    weights differentiate as the quotient they are, and a log-likelihood built on them
    (`logsumexp(log_softmax(log(w)) + x)`, `log(sum(softmax(log(w)) * exp(x)))`) goes on to a
    weighted logsumexp whose slope at w = 0 is finite.  The domain stays as written: a negative
    or NaN weight makes its whole row NaN, +inf weights share the mass equally, a row of zeros
    is 0/0 = NaN.  float16 weights are summed in float32 (a float16 sum overflows at 65504).
    """
    if node.op.masked:
        return None
    w = entrywise_operand(node.inputs[0], Log)
    if w is None or not is_floating(w.dtype):
        return None
    axes, dtype = node.op.axes, node.outputs[0].dtype
    wide = w if dtype.itemsize >= 4 else astype(w, np.float32)
    infinite = isinf(wide)
    # a row with +inf weights: they share the mass equally (the limit), as if each weighed 1 and
    # the rest 0; written as weights of their own, so that the result is log(w) - c or w / c,
    # which the weighted-logsumexp rules read on
    weights = where(
        greater(Sum(axes, keepdims=True)(astype(infinite, wide.dtype)), 0), astype(infinite, wide.dtype), wide
    )
    outside = Any(axes, keepdims=True)(logical_not(greater_equal(wide, 0)))  # (NaN is not >= 0)
    total = where(outside, np.nan, Sum(axes, keepdims=True)(weights))
    out = weights / total if isinstance(node.op, Softmax) else log(weights) - log(total)
    return fits(out if out.dtype == dtype else astype(out, dtype), node)


RULES = (
    log_matmul_exp_from_naive,
    log_softmax_complement_from_naive,
    probability_from_ratio_of_sums,
    normalized_weights_from_softmax_of_log,
)
