"""Stabilize: recognition of the naive formulas users write, replaced by stable primitives.

Every rule here is value-preserving wherever the naive formula is finite, and
finite where the naive one overflows.  Rules chain (the engine rebuilds each
replacement): `log(1 + exp(x))` → `log1p(exp(x))` → `softplus(x)`.  Matching
relies on the canonical forms of canonicalize.py (`x[:, None]` is an expand_dims,
`expand_dims(sum(.))` is a keepdims sum, `x * (1/y)` is `x / y`) and on merging
(two spellings of `exp(x)` are one node).
"""

from __future__ import annotations

from typing import cast

import numpy as np

from ..graph.basic import Constant, Variable
from ..graph.types import is_floating
from ..ops import stable
from ..ops.base import astype
from ..ops.creation import ones_like, zeros_like
from ..ops.elementwise import (
    Add,
    Cast,
    Compare,
    Divide,
    Logical,
    Multiply,
    Negative,
    Subtract,
    Where,
    equal,
    greater,
    isnan,
    logical_and,
    logical_not,
    logical_or,
    where,
)
from ..ops.gradient_mask import MaskedGradient
from ..ops.math import Erfc, Exp, Expm1, Log, Log1p, exp, expm1, log, log1p
from ..ops.reduction import CumSum, Prod, Sum
from ..ops.shape import ShapeDim, stack
from ..ops.stable import LogAddExp, LogSumExp
from .engine import Kind, Phase, rewrite
from .patterns import (
    add_terms,
    constant_value,
    entrywise_operand,
    fits,
    is_constant,
    is_count,
    is_negation,
    negate,
    owner,
    provably_positive,
    signed_terms,
)

_S = Phase.STABILIZE
_REC = Kind.RECOGNITION


def _exp_argument(v: Variable) -> Variable | None:
    """x where v is exp(x); a + b where v is a recognised product exp(a) * exp(b)."""
    x = entrywise_operand(v, Exp)
    if x is not None:
        return x
    pair = owner(v, stable.ExpOfSum)
    return pair.inputs[0] + pair.inputs[1] if pair is not None else None


def _log_of_exp_like(v: Variable) -> Variable | None:
    """log(v), stable, where v is exp(x) (x), sigmoid(x) (log_sigmoid) or a softmax (log_softmax
    of the same axes and mask): the terms whose log is known without taking it of a rounded 0."""
    x = _exp_argument(v)
    if x is not None:
        return x
    node = owner(v, stable.Sigmoid, stable.Softmax)
    if node is None:
        return None
    if isinstance(node.op, stable.Sigmoid):
        return stable.LogSigmoid()(node.inputs[0])
    op = cast(stable.Softmax, node.op)
    return stable.LogSoftmax(op.axes, op.masked)(*node.inputs)


# -- log-sum-exp ---------------------------------------------------------------------------------
@rewrite(_S, _REC, Log)
def logsumexp_from_naive(node):
    """log(sum(exp(x), axis)) → logsumexp(x, axis); log(sum(b * exp(x))) → logsumexp(x, b=b)."""
    total = owner(node.inputs[0], Sum)
    if total is None:
        return None
    axis, keepdims = total.op.axes, total.op.keepdims
    summand = total.inputs[0]
    x = _exp_argument(summand)
    if x is not None:
        return fits(stable.logsumexp(x, axis=axis, keepdims=keepdims), node)
    product = owner(summand, Multiply)
    if product is None:
        return None
    for weight, term in (product.inputs, product.inputs[::-1]):
        x = _exp_argument(term)
        # logsumexp broadcasts x against b as the product did; the axes must mean the same
        if x is not None and weight.ndim <= x.ndim:
            return fits(stable.logsumexp(x, axis=axis, keepdims=keepdims, b=weight), node)
    return None


@rewrite(_S, _REC, Log)
def logcumsumexp_from_naive(node):
    """log(cumsum(exp(x), axis)) → logcumsumexp(x, axis): a running log-partition (a survival
    analysis' risk sets, a CTC or HMM prefix).

    Written, the running sum overflows once any exp(x) does (x > 709 in float64, 88 in float32):
    every later entry is inf, and the gradient NaN; below -745 the leading entries are log(0).
    """
    running = owner(node.inputs[0], CumSum)
    x = _exp_argument(running.inputs[0]) if running is not None else None
    return fits(stable.logcumsumexp(x, axis=running.op.axis), node) if x is not None else None


@rewrite(_S, _REC, LogSumExp)
def logsumexp_with_weights_from_log(node):
    """logsumexp(log(w) + x, axis) → logsumexp(x, axis, b=w): the gradient w.r.t. a zero weight stays finite.

    x is the sum of the other addends (`log(w) - c + x` too), 0 where log(w) stands alone.
    A negative w is outside log's domain: its weight is NaN, so the result stays NaN as written
    (a weighted logsumexp would take it as a negative term)."""
    op = node.op
    if not op.plain:
        return None
    split = _log_weight_and_rest(node.inputs[0])
    if split is None:
        return None
    w, x = split
    return fits(stable.logsumexp(x, axis=op.axes, keepdims=op.keepdims, b=_weight(w, x)), node)


@rewrite(_S, _REC, LogAddExp)
def logsumexp_with_weights_from_logaddexp_of_logs(node):
    """logaddexp(log(w₁) + x₁, log1p(-p) + x₂, ...) → logsumexp over the terms with weights w
    (`log1p(y)` is the weight 1 + y): the two-component mixture `log(p·e^a + (1-p)·e^b)` in log
    space, whose gradient w.r.t. p is finite at p = 0 and 1.  Fires only when some term has a weight."""
    splits = [_log_weight_and_rest(t, log1p_too=True) for t in node.inputs]
    if all(s is None for s in splits):
        return None
    xs, ws = [], []
    for term, split in zip(node.inputs, splits):
        w, x = split if split is not None else (None, term)
        xs.append(x)
        ws.append(_weight(w, x) if w is not None else ones_like(x))
    return fits(_weighted_logsumexp_of_terms(xs, ws), node)


def _weighted_logsumexp_of_terms(xs: list[Variable], ws: list[Variable]) -> Variable:
    """log(Σ wᵢ · exp(xᵢ)) over terms of broadcast-compatible shapes, as one weighted logsumexp."""
    vs = xs + ws
    if len({v.type.shape for v in vs}) > 1 or None in vs[0].type.shape:
        # broadcast by adding zeros of every operand's shape: the extents stay traceable to the operands
        zero = zeros_like(vs[0])
        for v in vs[1:]:
            zero = zero + zeros_like(v)
        vs = [v + zero for v in vs]
    count = len(xs)
    return stable.logsumexp(stack(vs[:count]), axis=0, b=stack(vs[count:]))


def _undefined_term(x: Variable, w: Variable) -> Variable:
    """Where w·exp(x) makes the written sum NaN and the weighted logsumexp would not: x NaN or +inf
    against a weight that is not positive (0·NaN, 0·inf, and -inf, which is NaN in a sum's log
    with or without a +inf beside it).  The weighted form drops a term of weight 0 and shares a
    +inf total among the weights at +inf, so `-0.25·exp(inf) + exp(inf)` would be +inf.  (A NaN
    weight, and ±inf·exp(-inf), are NaN in the weighted form as they are written.)"""
    return logical_and(logical_or(isnan(x), equal(x, np.inf)), logical_not(greater(w, 0)))


def _signed_weight(w: Variable, x: Variable) -> Variable:
    """w as the weight of the term w·exp(x) of a weighted logsumexp: signed, as written (a negative
    total is NaN in the weighted form, as the log of it is), and NaN where the term is undefined."""
    if isinstance(w, Constant) and bool(np.all(w.data > 0)):
        return w  # a positive weight is NaN nowhere, and a NaN or +inf x is NaN or +inf in both forms
    return where(_undefined_term(x, w), np.nan, w)


def _log_weight_and_rest(v: Variable, log1p_too: bool = False) -> tuple[Variable, Variable] | None:
    """(w, rest) where v is log(w) + rest (rest 0 when absent); with `log1p_too`, w = 1 + y for log1p(y)."""
    terms = signed_terms(v)
    for i, t in enumerate(terms):
        w = entrywise_operand(t, Log)
        if w is None and log1p_too:
            y = entrywise_operand(t, Log1p)
            w = 1 + y if y is not None else None
        if w is None:
            continue
        rest = terms[:i] + terms[i + 1 :]
        x = rest[0] if rest else zeros_like(w)
        for r in rest[1:]:
            x = x + r
        if w.ndim <= x.ndim or not rest:
            return w, x
    return None


def _weight(w: Variable, x: Variable) -> Variable:
    """log(w) + x's weight w for a weighted logsumexp, NaN where log(w) + x is NaN: a negative w
    (outside log's domain), or a zero weight next to x = NaN or +inf, which the weighted form
    would drop as a zero term."""
    return where(isnan(log(w) + x), np.nan, w)


@rewrite(_S, _REC, Log)
def log_of_sum_over_count(node):
    """log(sum(exp(x)) / n) → logmeanexp(x) when n counts the summed entries (log(mean(exp(x)))),
    else → log(sum(exp(...))) - log(n) for a positive n, which goes on to logsumexp.

    Only a sum of exponentials: for another sum, log(s) - log(n) cancels where s/n is near 1
    and is less accurate than log(s/n)."""
    quotient = owner(node.inputs[0], Divide)
    total = owner(quotient.inputs[0], Sum) if quotient is not None else None
    if total is None or not _is_sum_of_exps(total.inputs[0]):
        return None
    n = quotient.inputs[1]
    x = _exp_argument(total.inputs[0])
    if x is not None and _counts_entries(n, total.inputs[0], total.op.axes):
        return fits(stable.logmeanexp(x, axis=total.op.axes, keepdims=total.op.keepdims), node)
    value = constant_value(n)
    if not (value is not None and value > 0) and not is_count(n):
        return None
    return fits(log(quotient.inputs[0]) - log(n), node)


def _counts_entries(n: Variable, x: Variable, axes: tuple[int, ...]) -> bool:
    """Whether n is the number of entries of x over `axes`: mean's divisor, known or symbolic."""
    wanted_constant = 1
    wanted_dims = set()
    for a in axes:
        extent = x.type.shape[a]
        if extent is None:
            wanted_dims.add(a)
        else:
            wanted_constant *= extent
    constant, dims = 1.0, []
    pending = [n]
    while pending:
        v = pending.pop()
        value = constant_value(v)
        if value is not None:
            constant *= float(value)
            continue
        node = v.owner
        if node is not None and isinstance(node.op, ShapeDim) and node.inputs[0] is x:
            dims.append(node.op.axis)
        elif node is not None and isinstance(node.op, Cast | Multiply):
            pending.extend(node.inputs)
        else:
            return False
    return constant == wanted_constant and sorted(dims) == sorted(wanted_dims)


def _is_sum_of_exps(summand: Variable) -> bool:
    """exp(x), or b * exp(x) in either order: what logsumexp_from_naive takes."""
    if _exp_argument(summand) is not None:
        return True
    product = owner(summand, Multiply)
    return product is not None and any(_exp_argument(v) is not None for v in product.inputs)


# -- softmax and log-softmax -----------------------------------------------------------------------
@rewrite(_S, _REC, Divide)
def softmax_from_naive(node):
    """exp(x) / sum(exp(x), axis, keepdims=True) → softmax(x, axis) (also exp(x - c), exp(x / T))."""
    numerator, denominator = node.inputs
    total = owner(denominator, Sum)
    x = _exp_argument(numerator)
    if x is None or total is None or not total.op.keepdims or total.inputs[0] is not numerator:
        return None
    return fits(stable.softmax(x, axis=total.op.axes), node)


@rewrite(_S, _REC, Log)
def log_softmax_from_log_of_softmax(node):
    """log(softmax(x)) → log_softmax(x)."""
    return _same_reduction_as(node, stable.Softmax, stable.LogSoftmax)


@rewrite(_S, _REC, Subtract)
def log_softmax_from_logsumexp(node):
    """x - logsumexp(x, axis, keepdims=True) → log_softmax(x, axis); without keepdims too where
    the reduced axes are the leading ones, which broadcasting puts back in place (a vector's
    `x - logsumexp(x)`)."""
    x, lse = node.inputs
    n = owner(lse, stable.LogSumExp)
    if n is None or n.inputs[0] is not x or not _broadcasts_back(n):
        return None
    return fits(stable.log_softmax(x, axis=n.op.axes), node)


@rewrite(_S, _REC, Exp)
def softmax_from_exp_log_softmax(node):
    """exp(log_softmax(x)) → softmax(x)."""
    return _same_reduction_as(node, stable.LogSoftmax, stable.Softmax)


def _same_reduction_as(node, source, target):
    """`target` over the axes and mask of node's operand, when that operand is a `source` node
    (or one cast down to a narrower float: float16's softmax is float32's, rounded)."""
    s = owner(_widened(node.inputs[0]), source)
    return fits(_narrowed_as(target(s.op.axes, s.op.masked)(*s.inputs), node), node) if s is not None else None


def _widened(v: Variable) -> Variable:
    """v's float operand where v casts it down to a narrower float (the stable ops compute float16
    in float32), else v: a rule on f(v) may then build f of the wider value, and round once."""
    cast = owner(v, Cast)
    if cast is None:
        return v
    wide = cast.inputs[0]
    narrower = is_floating(wide.dtype) and is_floating(v.dtype) and wide.dtype.itemsize > v.dtype.itemsize
    return wide if narrower else v


def _narrowed_as(result: Variable, node) -> Variable:
    """result in node's dtype, where `_widened` took it to a wider one."""
    dtype = node.outputs[0].dtype
    return result if result.dtype == dtype else astype(result, dtype)


@rewrite(_S, _REC, Negative)
def softmax_cross_entropy_from_naive(node):
    """-sum(labels * log_softmax(x), axis) → softmax_cross_entropy(x, labels, axis)."""
    total = owner(node.inputs[0], Sum)
    if total is None or total.op.keepdims or len(total.op.axes) != 1:
        return None
    product = owner(total.inputs[0], Multiply)
    if product is None:
        return None
    for labels, term in (product.inputs, product.inputs[::-1]):
        ls = owner(term, stable.LogSoftmax)
        matches = ls is not None and len(ls.inputs) == 1 and _single_axis(ls.op) == total.op.axes[0]
        if matches and labels.type == term.type:
            return fits(stable.softmax_cross_entropy(ls.inputs[0], labels, axis=total.op.axes[0]), node)
    return None


# -- pairs of exponentials ---------------------------------------------------------------------------
@rewrite(_S, _REC, Multiply, Divide)
def exp_of_sum_from_product_of_exps(node):
    """exp(a) * exp(b) → exp_of_sum(a, b); exp(a) / exp(b) → exp_of_sum(a, -b): no inf * 0 where
    one overflows, and the product's accuracy where neither does."""
    a, b = (_exp_argument(v) for v in node.inputs)
    if a is None or b is None:
        return None
    return fits(stable.exp_of_sum(a, b if isinstance(node.op, Multiply) else -b), node)


@rewrite(_S, _REC, Log)
def sum_from_log_of_exp_of_sum(node):
    """log(exp_of_sum(a, b)) → a + b, as log(exp(x)) → x."""
    pair = owner(node.inputs[0], stable.ExpOfSum)
    return fits(pair.inputs[0] + pair.inputs[1], node) if pair is not None else None


@rewrite(_S, _REC, Log)
def logaddexp_from_naive(node):
    """log(exp(a) + exp(b) + ...) → logaddexp(a, b, ...).

    A term `sum(exp(x))` joins as logsumexp(x), and a positive constant c as log(c), so
    the "guarded" `log(sum(exp(x)) + 1e-10)` users write is repaired too.  Terms `w · exp(x)`
    make it a logsumexp over the terms with weights w (signed, as written: a negative total
    is NaN), so `log(p·exp(a) + (1 - p)·exp(b))` has a finite gradient at p = 0.  A sigmoid or
    softmax term joins as its log (log_sigmoid, log_softmax): a mixture of probabilities,
    `log(p·softmax(u) + (1 - p)·softmax(v))`, stays finite where both underflow.
    """
    terms = add_terms(node.inputs[0])
    if len(terms) < 2:
        return None
    arguments = [_log_of_term(t) for t in terms]
    if any(a is None for a in arguments) or all(constant_value(t) is not None for t in terms):
        return None
    pairs = cast(list[tuple[Variable, Variable | None]], arguments)
    if any(w is not None for _, w in pairs):
        ws = [ones_like(x) if w is None else _signed_weight(w, x) for x, w in pairs]
        return fits(_weighted_logsumexp_of_terms([x for x, _ in pairs], ws), node)
    result = pairs[0][0]
    for x, _ in pairs[1:]:
        result = stable.logaddexp(result, x)
    return fits(result, node)


def _log_of_term(t: Variable) -> tuple[Variable, Variable | None] | None:
    """(log(t), None) stably for a term of a sum inside a log: exp(x), a sigmoid or softmax (the
    probabilities a mixture weighs), sum(exp(x)) or a positive constant; (log(f), w) for a
    weighted term w · f of those first kinds."""
    x = _log_of_exp_like(t)
    if x is not None:
        return x, None
    total = owner(t, Sum)
    if total is not None:
        x, op = _exp_argument(total.inputs[0]), cast(Sum, total.op)
        return (stable.logsumexp(x, axis=op.axes, keepdims=op.keepdims), None) if x is not None else None
    product = owner(t, Multiply)
    if product is not None:
        for w, term in (product.inputs, product.inputs[::-1]):
            x = _log_of_exp_like(term)
            if x is not None and _exp_argument(w) is None:  # exp(a) * exp(b) is exp_of_sum's
                return x, w
    value = constant_value(t)
    if value is not None and value > 0:
        return log(t), None
    return None


@rewrite(_S, _REC, Where)
def exp_of_masked_from_masked_exp(node):
    """where(mask, exp(x), 0) → exp(where(mask, x, -inf)) (either branch): a masked exp the
    recognisers can see through, so a masked softmax or logsumexp written out is stable too."""
    c, a, b = node.inputs

    x = _exp_argument(a)
    if x is not None and is_constant(b, 0.0):
        return fits(exp(where(c, x, -np.inf)), node)
    x = _exp_argument(b)
    if x is not None and is_constant(a, 0.0):
        return fits(exp(where(c, -np.inf, x)), node)
    return None


@rewrite(_S, _REC, Multiply)
def exp_of_masked_from_exp_times_mask(node):
    """exp(x) * mask, a boolean mask (or one cast to numbers) → exp(where(mask, x, -inf))."""
    for e, m in (node.inputs, node.inputs[::-1]):
        x = _exp_argument(e)
        cast = owner(m, Cast)
        mask = m if m.dtype == np.bool_ else cast.inputs[0] if cast is not None else None
        if x is not None and mask is not None and mask.dtype == np.bool_:
            return fits(exp(where(mask, x, -np.inf)), node)
    return None


@rewrite(_S, _REC, Log)
def logdiffexp_from_naive(node):
    """log(exp(a) - exp(b)) → logdiffexp(a, b)."""
    difference = owner(node.inputs[0], Subtract)
    if difference is None:
        return None
    a, b = (_exp_argument(v) for v in difference.inputs)
    return fits(stable.logdiffexp(a, b), node) if a is not None and b is not None else None


# -- log1p, expm1, softplus, log1mexp ------------------------------------------------------------------
@rewrite(_S, _REC, Log)
def log1p_from_naive(node):
    """log(1 + x) → log1p(x); log(1 - x) → log1p(-x)."""
    inner = node.inputs[0]
    total = owner(inner, Add)
    if total is not None:
        for one, x in (total.inputs, total.inputs[::-1]):
            if is_constant(one, 1.0):
                return fits(log1p(x), node)
    difference = owner(inner, Subtract)
    if difference is not None and is_constant(difference.inputs[0], 1.0):
        return fits(log1p(negate(difference.inputs[1])), node)
    return None


@rewrite(_S, _REC, Subtract, Add)
def expm1_from_naive(node):
    """exp(x) - 1 → expm1(x) (also -1 + exp(x))."""
    a, b = node.inputs
    minus_one = -1.0 if isinstance(node.op, Add) else 1.0
    for e, one in ((a, b), (b, a)) if isinstance(node.op, Add) else ((a, b),):
        x = _exp_argument(e)
        if x is not None and is_constant(one, minus_one):
            return fits(expm1(x), node)
    return None


@rewrite(_S, _REC, Log1p)
def softplus_from_log1p_exp(node):
    """log1p(exp(x)) → softplus(x); log1p(-exp(x)) → log1mexp(x)."""
    inner = node.inputs[0]
    x = _exp_argument(inner)
    if x is not None:
        return fits(stable.softplus(x), node)
    neg = owner(inner, Negative)
    x = _exp_argument(neg.inputs[0]) if neg is not None else None
    return fits(stable.log1mexp(x), node) if x is not None else None


@rewrite(_S, _REC, Log)
def inverse_softplus_from_log_expm1(node):
    """log(expm1(x)) (and so log(exp(x) - 1), the inverse of softplus) → x + log1mexp(-x):
    expm1(x) overflows past ~709 where the answer is about x."""
    e = owner(node.inputs[0], Expm1)
    if e is None:
        return None
    x = e.inputs[0]
    return fits(x + stable.log1mexp(negate(x)), node)


@rewrite(_S, _REC, Log)
def log1mexp_from_log_neg_expm1(node):
    """log(-expm1(x)) → log1mexp(x)."""
    neg = owner(node.inputs[0], Negative)
    e = owner(neg.inputs[0], Expm1) if neg is not None else None
    return fits(stable.log1mexp(e.inputs[0]), node) if e is not None else None


# -- sigmoid family ----------------------------------------------------------------------------------
def _one_plus_exp(v: Variable) -> Variable | None:
    """y for v = 1 + exp(y) (either order), else None."""
    total = owner(v, Add)
    if total is None:
        return None
    for one, e in (total.inputs, total.inputs[::-1]):
        if is_constant(one, 1.0):
            return _exp_argument(e)
    return None


@rewrite(_S, _REC, Divide)
def sigmoid_from_naive(node):
    """exp(x) / (1 + exp(x)) → sigmoid(x); a / (1 + exp(-x)) → a * sigmoid(x) (a = 1 included)."""
    numerator, denominator = node.inputs
    y = _one_plus_exp(denominator)
    if y is None:
        return None
    if _exp_argument(numerator) is y:
        return fits(stable.sigmoid(y), node)
    s = stable.sigmoid(negate(y))
    return fits(s if is_constant(numerator, 1.0) else numerator * s, node)


@rewrite(_S, _REC, Subtract)
def sigmoid_from_one_minus_sigmoid(node):
    """1 - sigmoid(x) → sigmoid(-x)."""
    one, s = node.inputs
    sig = owner(s, stable.Sigmoid)
    return fits(stable.sigmoid(negate(sig.inputs[0])), node) if sig is not None and is_constant(one, 1.0) else None


@rewrite(_S, _REC, Log)
def log_sigmoid_from_log_of_sigmoid(node):
    """log(sigmoid(x)) → log_sigmoid(x) (and through the rules above, log(1/(1+exp(-x))), log(1-sigmoid(x)));
    a float16 sigmoid, which is float32's rounded, is taken before the rounding."""
    sig = owner(_widened(node.inputs[0]), stable.Sigmoid)
    return fits(_narrowed_as(stable.log_sigmoid(sig.inputs[0]), node), node) if sig is not None else None


@rewrite(_S, _REC, Negative)
def log_sigmoid_from_negated_softplus(node):
    """-softplus(-x) → log_sigmoid(x) (so -log(1 + exp(-x)) ends there)."""
    sp = owner(node.inputs[0], stable.Softplus)
    return fits(stable.log_sigmoid(negate(sp.inputs[0])), node) if sp is not None else None


@rewrite(_S, _REC, Divide)
def exp_from_sigmoid_odds(node):
    """sigmoid(x) / sigmoid(-x) (that is, p / (1 - p) after the rule above) → exp(x)."""
    top, bottom = (owner(v, stable.Sigmoid) for v in node.inputs)
    if top is None or bottom is None or not is_negation(top.inputs[0], bottom.inputs[0]):
        return None

    return fits(exp(top.inputs[0]), node)


@rewrite(_S, _REC, Subtract)
def log_sigmoid_from_x_minus_softplus(node):
    """x - softplus(x) → log_sigmoid(x); softplus(x) - x → softplus(-x): no cancellation for large x.

    Also log_sigmoid(x) - log_sigmoid(-x) → x (the log-odds of a sigmoid, exactly)."""
    a, b = node.inputs
    la, lb = owner(a, stable.LogSigmoid), owner(b, stable.LogSigmoid)
    if la is not None and lb is not None and is_negation(la.inputs[0], lb.inputs[0]):
        return fits(la.inputs[0], node)  # log σ(x) - log σ(-x), i.e. log(p) - log(1 - p), is x itself
    sp = owner(b, stable.Softplus)
    if sp is not None and sp.inputs[0] is a:
        return fits(stable.log_sigmoid(a), node)
    sp = owner(a, stable.Softplus)
    if sp is not None and sp.inputs[0] is b:
        return fits(stable.softplus(negate(b)), node)
    return None


@rewrite(_S, _REC, Log)
def logit_from_naive(node):
    """log(p / (1 - p)) → logit(p)."""
    quotient = owner(node.inputs[0], Divide)
    if quotient is None:
        return None
    p, rest = quotient.inputs
    difference = owner(rest, Subtract)
    if difference is None or difference.inputs[1] is not p or not is_constant(difference.inputs[0], 1.0):
        return None
    return fits(stable.logit(p), node)


@rewrite(_S, _REC, stable.Logit, stable.Sigmoid)
def identity_from_logit_of_sigmoid(node):
    """logit(sigmoid(x)) → x; sigmoid(logit(p)) → p where 0 <= p <= 1, NaN elsewhere (as written).

    Written, σ(x) rounds to 1 past x ≈ 37 (17 in float32), and logit(1) = inf; and the round
    trip p → logit → σ carries logit's rounding (|logit p| ulps: 690 at p = 1e-300).
    """
    inner = owner(node.inputs[0], stable.Sigmoid if isinstance(node.op, stable.Logit) else stable.Logit)
    if inner is None:
        return None
    x = inner.inputs[0]
    x = x if x.dtype == node.outputs[0].dtype else astype(x, node.outputs[0].dtype)
    if isinstance(node.op, stable.Logit):
        return fits(x, node)
    return fits(where((x >= 0) & (x <= 1), x, np.nan), node)


# -- x log y, log erfc, log prod --------------------------------------------------------------------------
@rewrite(_S, _REC, Multiply)
def xlogy_from_naive(node):
    """x * log(y) → xlogy(x, y), x * log1p(y) → xlog1py(x, y): 0 where x = 0, also at
    y = 0 (resp. -1), where the product is 0 · -inf (x * log(x) at x = 0 included)."""
    for x, term in (node.inputs, node.inputs[::-1]):
        for log_op, stable_form in ((Log, stable.xlogy), (Log1p, stable.xlog1py)):
            y = entrywise_operand(term, log_op)
            if y is not None:
                value = constant_value(x)
                if value is not None and value != 0:
                    return None  # a non-zero constant factor needs no guard
                return fits(stable_form(x, y), node)
    return None


@rewrite(_S, _REC, Where)
def xlogy_from_guarded(node):
    """where(x != 0, xlogy(x, y), 0) → where(x == 0 and y is NaN, 0, xlogy(x, y)); with the
    NaN test in the guard already (`x != 0 | y != y`, jax.scipy's own xlogy) → xlogy(x, y).
    The same for xlog1py, and for `where(x == 0, 0, ...)`.

    xlogy is 0 at x = 0 already; the guard changes nothing there but ∂/∂x, which it cuts to
    0 where it is log(y).  Only at y = NaN does the guard's 0 differ from xlogy's NaN, so
    only there does it stay.
    """
    c, a, b = node.inputs
    if is_constant(b, 0.0):
        f, tests, wanted = owner(a, stable.XLogY, stable.XLog1PY), _disjuncts(c), "not_equal"
    elif is_constant(a, 0.0):
        f, tests, wanted = owner(b, stable.XLogY, stable.XLog1PY), [c], "equal"
    else:
        return None
    if f is None:
        return None
    # the guard rule (rewrite/branches.py) may have read x and y through this where's mask already
    x, y = (_unmasked(v, c) for v in f.inputs)
    on_x = [t for t in tests if _compares_with_zero(t, x, wanted)]
    on_nan = [t for t in tests if _tests_nan(t, y)]
    if len(on_x) != 1 or len(on_x) + len(on_nan) != len(tests):
        return None
    unguarded = f.op(x, y)
    if on_nan:
        return fits(unguarded, node)
    return fits(where(logical_and(equal(x, 0), isnan(y)), 0, unguarded), node)


def _unmasked(v: Variable, mask: Variable) -> Variable:
    """v without the `masked_gradient(·, mask)` reads around it."""
    node = owner(v, MaskedGradient)
    while node is not None and node.inputs[1] is mask:
        v = node.inputs[0]
        node = owner(v, MaskedGradient)
    return v


def _disjuncts(v: Variable) -> list[Variable]:
    """The operands of a tree of `or`s (v itself when it is not one)."""
    node = owner(v, Logical)
    if node is None or node.op.name != "logical_or":
        return [v]
    return [t for operand in node.inputs for t in _disjuncts(operand)]


def _compares_with_zero(test: Variable, x: Variable, name: str) -> bool:
    """Whether test is `x <name> 0` (either way round)."""
    node = owner(test, Compare)
    if node is None or node.op.name != name:
        return False
    a, b = node.inputs
    return (a is x and is_constant(b, 0.0)) or (b is x and is_constant(a, 0.0))


def _tests_nan(test: Variable, y: Variable) -> bool:
    """Whether test is isnan(y) or y != y."""
    node = owner(test, Logical, Compare)
    if node is None:
        return False
    if node.op.name == "isnan":
        return node.inputs[0] is y
    return node.op.name == "not_equal" and node.inputs[0] is y and node.inputs[1] is y


@rewrite(_S, _REC, Multiply)
def xexpx_from_naive(node):
    """x * exp(x) → xexpx(x): 0 at x = -inf, where the product is -inf · 0 (the term
    `p · log p` of an entropy or expectation written with log-probabilities)."""
    for x, term in (node.inputs, node.inputs[::-1]):
        if entrywise_operand(term, Exp) is x:
            return fits(stable.xexpx(x), node)
    return None


@rewrite(_S, _REC, Log)
def log_erfc_from_naive(node):
    """log(erfc(x)) → log_erfc(x), finite where erfc(x) underflows (x > 26.5)."""
    e = owner(node.inputs[0], Erfc)
    return fits(stable.log_erfc(e.inputs[0]), node) if e is not None else None


@rewrite(_S, _REC, Log)
def sum_of_logs_from_log_of_prod(node):
    """log(prod(x)) → sum(log(x)) when x is provably positive (the product under- or overflows; the sum does not)."""
    p = owner(node.inputs[0], Prod)
    if p is None or not provably_positive(p.inputs[0]):
        return None

    return fits(Sum(p.op.axes, p.op.keepdims)(log(p.inputs[0])), node)


def _single_axis(op) -> int | None:
    axes = getattr(op, "axes", None)
    return axes[0] if isinstance(axes, tuple) and len(axes) == 1 else None


def _broadcasts_back(node) -> bool:
    """Whether a plain logsumexp's result lines up with its operand under broadcasting."""
    op = node.op
    return op.plain and (op.keepdims or op.axes == tuple(range(len(op.axes))))


RULES = (
    logsumexp_from_naive,
    logcumsumexp_from_naive,
    logsumexp_with_weights_from_log,
    logsumexp_with_weights_from_logaddexp_of_logs,
    log_of_sum_over_count,
    softmax_from_naive,
    log_softmax_from_log_of_softmax,
    log_softmax_from_logsumexp,
    softmax_from_exp_log_softmax,
    softmax_cross_entropy_from_naive,
    exp_of_sum_from_product_of_exps,
    sum_from_log_of_exp_of_sum,
    exp_of_masked_from_masked_exp,
    exp_of_masked_from_exp_times_mask,
    log1p_from_naive,
    logaddexp_from_naive,
    logdiffexp_from_naive,
    expm1_from_naive,
    softplus_from_log1p_exp,
    log1mexp_from_log_neg_expm1,
    inverse_softplus_from_log_expm1,
    sigmoid_from_naive,
    sigmoid_from_one_minus_sigmoid,
    log_sigmoid_from_log_of_sigmoid,
    log_sigmoid_from_negated_softplus,
    log_sigmoid_from_x_minus_softplus,
    exp_from_sigmoid_odds,
    logit_from_naive,
    identity_from_logit_of_sigmoid,
    xlogy_from_naive,
    xlogy_from_guarded,
    xexpx_from_naive,
    log_erfc_from_naive,
    sum_of_logs_from_log_of_prod,
)
