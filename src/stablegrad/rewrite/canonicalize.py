"""Canonicalize: normal forms, so one recogniser sees the many ways users spell a formula.

- `x[:, None]`-style indexing that only adds axes is `expand_dims`;
- `expand_dims(sum(x, axis), axis)` is `sum(x, axis, keepdims=True)`;
- `x * (1 / y)` is `x / y`;
- `log(exp(x))` and `log1p(expm1(x))` are `x`, and `-(-x)` is `x`;
- a one-operand elementwise op of a broadcast is the broadcast of the op.
(Merging duplicates and folding constants happen in every pass; see engine.py.)
"""

from __future__ import annotations

import dataclasses

from ..ops.base import Elementwise
from ..ops.elementwise import Divide, Multiply, Negative, divide
from ..ops.indexing import Index
from ..ops.math import Exp, Expm1, Log, Log1p
from ..ops.shape import BroadcastTo, ExpandDims
from .engine import Kind, Phase, rewrite
from .patterns import fits, is_constant, owner

_C = Phase.CANONICALIZE
_ALGEBRA = Kind.ALGEBRA


@rewrite(_C, _ALGEBRA, Index)
def expand_dims_from_index(node):
    """x[:, None] (full slices and None only) → expand_dims(x, 1)."""
    spec = node.op.spec
    if not all(e is None or e == (None, None, None) for e in spec) or None not in spec:
        return None
    return ExpandDims(tuple(i for i, e in enumerate(spec) if e is None))(node.inputs[0])


@rewrite(_C, _ALGEBRA, ExpandDims)
def keepdims_from_expand_dims(node):
    """expand_dims(r(x, axis), axis) → r(x, axis, keepdims=True) for a reduction r (sum, max, logsumexp, ...)."""
    reduced = node.inputs[0].owner
    op = reduced.op if reduced is not None else None
    if op is None or op.nout != 1 or getattr(op, "keepdims", True) or getattr(op, "axes", None) != node.op.axes:
        return None
    return dataclasses.replace(op, keepdims=True)(*reduced.inputs)


@rewrite(_C, _ALGEBRA, Multiply)
def divide_from_reciprocal_product(node):
    """x * (1 / y) → x / y."""
    for a, b in (node.inputs, node.inputs[::-1]):
        quotient = owner(b, Divide)
        if quotient is not None and is_constant(quotient.inputs[0], 1.0):
            return fits(divide(a, quotient.inputs[1]), node)
    return None


@rewrite(_C, _ALGEBRA, Log)
def log_of_exp(node):
    """log(exp(x)) → x (also where exp(x) would overflow)."""
    e = owner(node.inputs[0], Exp)
    return fits(e.inputs[0], node) if e is not None else None


@rewrite(_C, _ALGEBRA, Log1p)
def log1p_of_expm1(node):
    """log1p(expm1(x)) → x: exact everywhere (expm1 > -1), where the composition cancels for x << 0."""
    e = owner(node.inputs[0], Expm1)
    return fits(e.inputs[0], node) if e is not None else None


@rewrite(_C, _ALGEBRA, Elementwise)
def broadcast_after_unary(node):
    """f(broadcast_to(x, shape)) → broadcast_to(f(x), shape) for a one-operand elementwise f: each
    distinct entry computed once, and a pattern below the broadcast (log1p(expm1(x))) kept visible."""
    b = owner(node.inputs[0], BroadcastTo) if len(node.inputs) == 1 else None
    return fits(BroadcastTo()(node.op(b.inputs[0]), *b.inputs[1:]), node) if b is not None else None


@rewrite(_C, _ALGEBRA, Negative)
def double_negation(node):
    """-(-x) → x."""
    inner = owner(node.inputs[0], Negative)
    return inner.inputs[0] if inner is not None else None


RULES = (
    expand_dims_from_index,
    keepdims_from_expand_dims,
    divide_from_reciprocal_product,
    log_of_exp,
    log1p_of_expm1,
    broadcast_after_unary,
    double_negation,
)
