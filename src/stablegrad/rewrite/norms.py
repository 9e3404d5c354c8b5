"""Norms written out: the square root of a sum of squares as the norm op, which neither
overflows nor underflows and has the gradient 0 at 0.

`sqrt(sum(x**2))` is how distances, norms and standard deviations are written by hand, and
the most reported NaN gradient there is: at x = 0 its gradient is x / ‖x‖ = 0/0 (a distance
of a point to itself, a clipped or normalised vector at rest).  Written, it also overflows
once |x| passes 1.3e154 (float64; 1.8e19 in float32) and underflows below 1e-162.
`VectorNorm` (`sg.linalg.norm`) computes NumPy's √Σx² where the squares stay in range, so
the value there is the written one exactly, and scales by max|x| only outside it; its
pullback is 0 at 0 (the least subgradient, as PyTorch's norm has it).

Fires only on real floating x: a complex `x*x` is no square of a modulus, and an integer
sum is cast before its root, which the patterns do not look through.
"""

from __future__ import annotations

import numpy as np

from ..graph.basic import Variable
from ..graph.types import is_floating
from ..ops.elementwise import Divide, Maximum, Sqrt, abs, greater_equal, less_equal, logical_and, sqrt, where
from ..ops.linalg import Matmul
from ..ops.math import Log, Power, log
from ..ops.norms import VectorNorm
from ..ops.reduction import Sum
from ..ops.shape import broadcast_arrays, stack
from .engine import Kind, Phase, rewrite
from .patterns import add_terms, constant_value, fits, is_constant, is_count, owner, square_of

_S = Phase.STABILIZE
_REC = Kind.RECOGNITION


def _root_operand(node) -> Variable | None:
    """u for node = sqrt(u) or u ** 0.5."""
    if isinstance(node.op, Sqrt):
        return node.inputs[0]
    return node.inputs[0] if is_constant(node.inputs[1], 0.5) else None


def _nonnegative(n: Variable) -> bool:
    """Whether n is provably >= 0: a count of entries, a constant, or var's `maximum(n - ddof, 0)`."""
    bound = owner(n, Maximum)
    if bound is not None:
        return any((c := constant_value(b)) is not None and c >= 0 for b in bound.inputs)
    value = constant_value(n)
    return is_count(n) or (value is not None and value >= 0)


def _real(x: Variable | None) -> Variable | None:
    return x if x is not None and is_floating(x.dtype) else None


@rewrite(_S, _REC, Sqrt, Power)
def norm_from_root_of_sum_of_squares(node):
    """sqrt(sum(x², axis, keepdims)) → norm(x, axis, keepdims) (x² as `square(x)`, `x ** 2` or
    `x * x`; the root as `sqrt` or `** 0.5`); sqrt(sum(x²) / n) → norm(x) / sqrt(n) (a root mean
    square, and a standard deviation written as sqrt(var(x))); sqrt(x @ x) of a vector →
    norm(x); sqrt(x²) → |x|.

    Written, the gradient is x / ‖x‖ = 0/0 = NaN at x = 0 (a point's distance to itself), and
    the squares overflow past |x| = 1.3e154 (float64; 1.8e19 in float32) and underflow below
    1e-162: `sqrt(sum(x**2))` at (3e200, 4e200) is inf, not 5e200.  The norm's value is the
    written one bit for bit where the squares stay in range (over n, an ulp apart: two roots
    instead of one), and its gradient at 0 is 0, as |x|'s is.  Only real floating x (a complex
    x·x is no squared modulus).  Not `sqrt(a² + b²)` of separate terms (hypot): the norm of the
    terms stacked made the gradient of one of Herbie's benchmarks (an SDF of min/max of circles)
    11 bits less accurate, not yet understood.
    """
    u = _root_operand(node)
    if u is None:
        return None
    quotient = owner(u, Divide)  # a mean or a variance: sqrt(sum(x²) / n) = norm(x) / sqrt(n)
    if quotient is not None and not _nonnegative(quotient.inputs[1]):
        return None  # (sqrt(0 / -2) is -0, 0 / sqrt(-2) NaN)
    total = owner(quotient.inputs[0] if quotient is not None else u, Sum)
    if total is not None:
        x = _real(square_of(total.inputs[0]))
        if x is not None:
            norm = VectorNorm(total.op.axes, total.op.keepdims)(x)
            return fits(norm if quotient is None else norm / sqrt(quotient.inputs[1]), node)
    product = owner(u, Matmul)
    if product is not None and product.inputs[0] is product.inputs[1] and product.inputs[0].ndim == 1:
        x = _real(product.inputs[0])
        return fits(VectorNorm((0,))(x), node) if x is not None else None
    x = _real(square_of(u))
    return fits(abs(x), node) if x is not None else None


def _norm_of_terms(u: Variable) -> Variable | None:
    """The norm of (a, b, ...) for u = a² + b² + ..., the terms stacked along a new last axis
    (each broadcast to the sum's shape); None unless u is a sum of two or more real squares."""
    roots = [_real(square_of(t)) for t in add_terms(u)]
    if len(roots) < 2 or any(r is None for r in roots):
        return None
    return VectorNorm((u.ndim,))(stack(broadcast_arrays(*roots), axis=-1))


@rewrite(_S, _REC, Log)
def log_modulus_from_sum_of_squares(node):
    """log(sqrt(a² + b² + ...)) → log(norm(a, b, ...)), the log of a complex modulus or of a
    distance; log(a² + b² + ...) → 2·log(norm(a, b, ...)) where the written sum leaves the
    normal range.

    Written, the squares overflow past 1.3e154 (float64; 1.8e19 in float32), so
    log|z| = 355.2 at re = 1.9e154 is inf, and underflow below 1e-162 to -inf.  The norm is the
    written root bit for bit where the squares stay in range, so log(sqrt(...)) is too.  A
    log of the sum itself keeps the written log wherever the sum is a normal number (two
    logs of the root would round twice), read through a `where` so that it does not match again.
    """
    u = node.inputs[0]
    root = owner(u, Sqrt, Power)
    inner = _root_operand(root) if root is not None else None
    if inner is not None:
        norm = _norm_of_terms(inner)
        return fits(log(norm), node) if norm is not None else None
    norm = _norm_of_terms(u)
    if norm is None:
        return None
    info = np.finfo(u.dtype)
    normal = logical_and(greater_equal(u, np.asarray(info.tiny, u.dtype)), less_equal(u, np.asarray(info.max, u.dtype)))
    written = log(where(normal, u, np.ones((), u.dtype)))
    return fits(where(normal, written, 2.0 * log(norm)), node)


RULES = (norm_from_root_of_sum_of_squares, log_modulus_from_sum_of_squares)
