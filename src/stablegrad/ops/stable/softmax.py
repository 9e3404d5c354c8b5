"""softmax, log_softmax and the cross-entropy of logits.

Opaque on purpose: `exp(x) / sum(exp(x))` is inf/inf past ~709 (float64; ~88 in
float32) and 0/0 far below, and `x - log(sum(exp(x)))` inherits logsumexp's
overflow.  The ops shift by the max and carry the classic pullbacks, written
with stable pieces so that they differentiate again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, final

import numpy as np

from ...errors import DTypeError, ShapeError
from ...graph.basic import ALL, READS_NOTHING, Op, Reads, Variable
from ...graph.types import TensorType, is_floating
from .. import dims
from ..base import as_tensor, zero_grad
from ..composite import SymbolicOp
from ..creation import arange
from ..elementwise import astype, equal, logical_not, logical_or, where
from ..indexing import take_along_axis
from ..math import exp
from ..reduction import Sum
from ..shape import ExpandDims, Squeeze, as_shape_inputs, broadcast_to, reshape, shape_tuple
from ._common import (
    NEG_INF,
    MaxShift,
    as_mask,
    axes_of,
    check_broadcast,
    log_tied_plus_rest,
    promote,
    restore,
    softmax_vjp,
)


def _shifted(axes: tuple[int, ...], x_live: Variable) -> tuple[Variable, Variable]:
    """(z, at_max): z = x - max, exactly 0 at the max entries (+inf ones included).

    A row whose max is +inf gives z = 0 at its +inf entries and -inf elsewhere
    (the limit); an all -inf row gives NaN (0/0), as the edge table wants.
    """
    m = MaxShift(axes, keepdims=True)(x_live)
    at_max = equal(x_live, where(equal(m, NEG_INF), np.nan, m))
    return where(at_max, 0, x_live - m), at_max


def _dead(axes: tuple[int, ...], x_live: Variable) -> Variable:
    """Rows (axes kept) without a live entry above -inf: their gradient is 0.

    Those whose max is -inf (a NaN entry makes it NaN: not dead).  It is the shift the
    body takes, so a compiler that sees both computes the max once."""
    return equal(MaxShift(axes, keepdims=True)(x_live), NEG_INF)


def _unpack(inputs, masked: bool):
    x = inputs[0]
    mask = inputs[1] if masked else None
    x_live = x if mask is None else where(mask, x, NEG_INF)
    return x, mask, x_live


@final
@dataclass(frozen=True)
class Softmax(SymbolicOp):
    """exp(x) / sum(exp(x)) over `axes`; masked entries (`where=False`) are 0.

    Naive: `exp(x) / sum(exp(x))` is inf/inf once an entry passes ~709 (float64).
    Stable: `exp(x - max) / sum(exp(x - max))`, with `x - max` taken as 0 at +inf
    maxima so that +inf entries share the mass equally (the limit).
    Pullback (reads x, the mask and the output): `out · (g - sum(g · out))`, taken
    around the largest entry (`softmax_vjp`: a saturated softmax keeps its digits), and 0
    on rows with no live entry above -inf (their value is NaN, 0/0).
    """

    public_name: ClassVar[str] = "softmax"

    axes: tuple[int, ...] = (-1,)
    masked: bool = False

    reads = Reads(inputs=ALL, outputs=(0,))

    def build(self, *inputs):
        _, mask, x_live = _unpack(inputs, self.masked)
        z, _ = _shifted(self.axes, x_live)
        e = exp(z)
        out = e / Sum(self.axes, keepdims=True)(e)
        return out if mask is None else where(mask, out, 0)

    def pullback(self, inputs, outputs, grads):
        _, mask, x_live = _unpack(inputs, self.masked)
        (out,), (g,) = outputs, grads
        p = where(_dead(self.axes, x_live), 0, out)
        gx = softmax_vjp(self.axes, p, g)
        return [gx] if mask is None else [gx, zero_grad(mask)]


@final
@dataclass(frozen=True)
class LogSoftmax(SymbolicOp):
    """x - logsumexp(x) over `axes`; masked entries (`where=False`) are -inf.

    Naive: `x - log(sum(exp(x)))` overflows past ~709 and `log(softmax(x))` is
    log(0) = -inf far below the max.  Stable: `z - log(sum(exp(z)))` with z = x - max,
    the sum split into the entries at the max and the rest so that tiny tails
    stay exact (`log1p`).
    Pullback (reads x, the mask and the output): `g - exp(out) · sum(g)` over live
    entries (a -inf entry gets its limit, ∂ls₀/∂x₀ = 1), 0 on rows with no live
    entry above -inf.
    """

    public_name: ClassVar[str] = "log_softmax"

    axes: tuple[int, ...] = (-1,)
    masked: bool = False

    reads = Reads(inputs=ALL, outputs=(0,))

    def build(self, *inputs):
        _, mask, x_live = _unpack(inputs, self.masked)
        z, at_max = _shifted(self.axes, x_live)
        ties = Sum(self.axes, keepdims=True)(astype(at_max, z.dtype))
        rest = Sum(self.axes, keepdims=True)(where(at_max, 0, exp(z)))
        out = z - log_tied_plus_rest(ties, rest)
        return out if mask is None else where(mask, out, NEG_INF)

    def pullback(self, inputs, outputs, grads):
        _, mask, x_live = _unpack(inputs, self.masked)
        (out,), (g,) = outputs, grads
        dead = _dead(self.axes, x_live)
        if mask is None:  # one select per entry: a dead row's NaN terms are dropped whole
            return [where(dead, 0, g - exp(out) * Sum(self.axes, keepdims=True)(g))]
        g_live = where(logical_or(dead, logical_not(mask)), 0, g)
        p = exp(where(dead, NEG_INF, out))
        return [g_live - p * Sum(self.axes, keepdims=True)(g_live), zero_grad(mask)]


def _softmax_args(name: str, x, axis, where) -> tuple[list[Variable], tuple[int, ...], np.dtype]:
    xs, dtype = promote(name, x)
    if where is not None:
        mask = as_mask(name, where)
        check_broadcast(name, "where", xs[0], mask)
        xs.append(mask)
    return xs, axes_of(name, axis, max(v.ndim for v in xs)), dtype


@dims.along_axis
def softmax(x, axis=-1, where=None):
    """exp(x) / sum(exp(x)) along `axis` (default -1, the last axis; int, tuple or None), stable.

    `where=False` entries are left out and come out as 0.  A +inf entry takes the
    limit (equal shares among the +inf entries); a row of -inf is NaN (0/0).

    >>> import numpy as np, stablegrad as sg
    >>> x = sg.vector("x")
    >>> sg.function([x], sg.softmax(x))(np.array([1000.0, 1000.0])).tolist()
    [0.5, 0.5]
    """
    xs, axes, dtype = _softmax_args("softmax", x, axis, where)
    return restore(Softmax(axes, where is not None)(*xs), dtype)


@dims.along_axis
def log_softmax(x, axis=-1, where=None):
    """x - logsumexp(x) along `axis` (default -1, the last axis; int, tuple or None), stable.

    `where=False` entries are left out and come out as -inf.
    """
    xs, axes, dtype = _softmax_args("log_softmax", x, axis, where)
    return restore(LogSoftmax(axes, where is not None)(*xs), dtype)


# -- cross-entropy -------------------------------------------------------------------------------
@final
@dataclass(frozen=True)
class SoftmaxCrossEntropy(SymbolicOp):
    """-sum(labels · log_softmax(logits)) along `axis`; `sparse`: labels are class indices.

    Naive: `-sum(y * log(softmax(x)))` is `0 · log(0)` = NaN where a probability
    underflows, and -inf (not the finite 2000) where the label sits far below the
    max.  Stable: built on LogSoftmax, with `0 · log_softmax` taken as 0.
    Pullback (reads logits and labels): `g · (softmax · sum(y) - y)` for the
    logits (`g · (softmax - onehot)` for indices), `-g · log_softmax` for
    probability labels.
    """

    public_name: ClassVar[str] = "softmax_cross_entropy"

    axis: int = -1
    sparse: bool = False

    reads = Reads(inputs=ALL, outputs=())

    def build(self, logits, labels):
        ls = LogSoftmax((self.axis,))(logits)
        if self.sparse:
            picked = take_along_axis(ls, ExpandDims((self.axis,))(labels), self.axis)
            return -Squeeze((self.axis,))(picked)
        return -Sum((self.axis,))(where(equal(labels, 0), 0, labels * ls))

    def pullback(self, inputs, outputs, grads):
        (logits, labels), (g,) = inputs, grads
        p = Softmax((self.axis,))(logits)
        g = ExpandDims((self.axis,))(g)
        if self.sparse:
            n = shape_tuple(logits)[self.axis]
            positions = [1] * logits.ndim
            positions[self.axis] = -1
            onehot = astype(equal(ExpandDims((self.axis,))(labels), reshape(arange(n), positions)), p.dtype)
            return [g * (p - onehot), zero_grad(labels)]
        total = Sum((self.axis,), keepdims=True)(labels)
        return [g * (p * total - labels), -g * LogSoftmax((self.axis,))(logits)]


@final
@dataclass(frozen=True)
class LabelsInRange(Op):
    """The class-index labels unchanged, after a run-time check that they lie in [0, n)."""

    reads = READS_NOTHING

    @property
    def name(self) -> str:
        return "softmax_cross_entropy"

    def infer(self, labels, n):
        return [labels.type]

    def perform(self, labels, n):
        bad = (labels < 0) | (labels >= n)
        if np.any(bad):
            # a plain ValueError: the executor names this op and the line that built it
            raise ValueError(f"labels must lie in [0, {int(n)}) (the number of classes), got {labels[bad].flat[0]}")
        return labels

    def pullback(self, inputs, outputs, grads):
        return [zero_grad(v) for v in inputs]


@dims.reduction
def softmax_cross_entropy(logits, labels, axis=-1):
    """Cross-entropy of softmax(logits) against `labels`, summed along `axis` (default -1).

    Integer `labels` are class indices (the logits' shape without `axis`); float
    `labels` are probabilities (broadcastable to the logits' shape).
    """
    name = "softmax_cross_entropy"
    (x,), dtype = promote(name, logits)
    if x.ndim == 0:
        raise ShapeError(f"{name}: logits must have at least one dimension, got a scalar")
    (a,) = axes_of(name, axis, x.ndim)
    y = as_tensor(labels)
    kind = y.dtype.kind
    expected = tuple(n for i, n in enumerate(x.type.shape) if i != a)
    if kind in "iu":
        if y.ndim != x.ndim - 1:
            raise ShapeError(
                f"{name}: integer labels are class indices and need the logits' shape without axis {a}, "
                f"{_shape(expected)}; got shape {_shape(y.type.shape)}"
            )
        check_broadcast(name, "labels", Variable(TensorType(x.dtype, expected)), y)
        n = as_shape_inputs((shape_tuple(x)[a],), name)[0]
        y = LabelsInRange()(astype(y, np.int64), n)
        return restore(SoftmaxCrossEntropy(a, True)(x, y), dtype)
    if not is_floating(y.dtype):
        raise DTypeError(f"{name}: labels must be integer class indices or float probabilities, got {y.type}")
    if y.ndim == x.ndim - 1 and not _spans_the_classes(y, x, a):
        raise DTypeError(
            f"{name}: labels of shape {_shape(y.type.shape)} look like class indices, which must be integers, "
            f"got {y.dtype.name} (probabilities need the logits' shape {_shape(x.type.shape)})"
        )
    check_broadcast(name, "labels", x, y)
    y = astype(y, x.dtype)
    if y.type.shape != x.type.shape:
        y = broadcast_to(y, shape_tuple(x))
    return restore(SoftmaxCrossEntropy(a, False)(x, y), dtype)


def _spans_the_classes(labels: Variable, logits: Variable, axis: int) -> bool:
    """Whether float labels of one dimension fewer provably lie along the class axis, as
    probabilities broadcast over the rest (shape (3,) against logits (2, 3)): their extent
    there is known and is the logits' number of classes."""
    k = axis - (logits.ndim - labels.ndim)
    classes = logits.type.shape[axis]
    return k >= 0 and classes is not None and labels.type.shape[k] == classes


def _shape(shape) -> str:
    return str(tuple(shape)).replace("None", "?")
