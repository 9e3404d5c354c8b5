"""Small matching helpers the rewrites share: who produced a variable, constants, signs."""

from __future__ import annotations

import numpy as np

from ..graph.basic import Apply, Constant, Op, Variable
from ..ops import stable
from ..ops.base import Cast, Entrywise
from ..ops.elementwise import Add, Divide, Multiply, Negative, Sqrt, Square, Subtract, negative
from ..ops.indexing import Index
from ..ops.math import Exp, Power
from ..ops.partials import horner as horner  # (re-exported: the rules' series)
from ..ops.shape import BroadcastTo, ExpandDims, Reshape, ShapeDim, Squeeze, Transpose

#: ops that only move, drop or repeat entries: an entrywise op of one operand commutes with them
LAYOUT = (Index, Transpose, ExpandDims, Squeeze, Reshape, BroadcastTo)


def is_entrywise(op: Op) -> bool:
    """Whether output entry i depends on operand entry i alone (NumPy broadcasting aside)."""
    return isinstance(op, Entrywise)


def is_layout(op: Op) -> bool:
    return isinstance(op, LAYOUT)


def owner(v: Variable, *op_classes: type) -> Apply | None:
    """v's node if its op is one of `op_classes`, else None."""
    node = v.owner
    if node is not None and isinstance(node.op, op_classes):
        return node
    return None


def entrywise_operand(v: Variable, op_class: type) -> Variable | None:
    """x where v is op(x) for a one-operand entrywise op of `op_class`, also behind layout ops:
    for v = L(op(x)) it is L(x), since op(L(x)) = L(op(x)) (`log(w)[None, :]` is `log(w[None, :])`)."""
    node = v.owner
    if node is None:
        return None
    if isinstance(node.op, op_class) and len(node.inputs) == 1:
        return node.inputs[0]
    if is_layout(node.op):
        x = entrywise_operand(node.inputs[0], op_class)
        return node.op(x, *node.inputs[1:]) if x is not None else None
    return None


def constant_value(v: Variable) -> float | None:
    """The value of a constant whose entries are all equal, else None."""
    if not isinstance(v, Constant) or v.data.size == 0:
        return None
    flat = v.data.reshape(-1)
    first = flat[0]
    if not np.all(flat == first):
        return None
    return float(first)


#: how far (in ulps of the result's dtype) a written transcendental constant may be from the true one
_CONSTANT_ULPS = 4


def reads_as(value: float | None, target: float, dtype) -> bool:
    """Whether a written constant is `target` (π/4, e, 1/√2, ...) to a few ulps of the floating
    `dtype`: the user's float of the number, which a rule may read as the number itself."""
    return value is not None and abs(value / target - 1) <= _CONSTANT_ULPS * float(np.finfo(dtype).eps)


def is_count(v: Variable) -> bool:
    """Whether v is a number of entries: a product of extents, perhaps cast (mean's divisor)."""
    node = v.owner
    if node is None:
        return constant_value(v) is not None and constant_value(v) > 0  # type: ignore[operator]
    if isinstance(node.op, ShapeDim):
        return True
    if isinstance(node.op, Cast | Multiply):
        return all(is_count(x) for x in node.inputs)
    return False


def is_constant(v: Variable, value: float) -> bool:
    c = constant_value(v)
    return c is not None and c == value


def negate(v: Variable) -> Variable:
    """-v, without building -(-x)."""
    node = owner(v, Negative)
    return node.inputs[0] if node is not None else negative(v)


def with_sign(sign: float, v: Variable) -> Variable:
    """v for sign 1, -v for sign -1 (without building -(-x))."""
    return v if sign == 1.0 else negate(v)


def written_difference(node: Apply) -> Variable:
    """A difference node's value as the sum with the negation: a rule that keeps the written
    difference in a branch must not match that branch again."""
    return node.inputs[0] + negate(node.inputs[1])


def is_negation(a: Variable, b: Variable) -> bool:
    """Whether b is -a or a is -b (as nodes, not by value)."""
    nb, na = owner(b, Negative), owner(a, Negative)
    return (nb is not None and nb.inputs[0] is a) or (na is not None and na.inputs[0] is b)


def fits(result: Variable, node: Apply) -> Variable | None:
    """`result` if it can stand for node's output (same dtype, rank and compatible shape), else None."""
    old = node.outputs[0]
    if result.dtype != old.dtype or result.ndim != old.ndim:
        return None
    if not all(a is None or b is None or a == b for a, b in zip(old.type.shape, result.type.shape)):
        return None
    return result


def provably_positive(v: Variable) -> bool:
    """Whether v is positive or NaN wherever it is defined (exp, softplus, sigmoid, softmax, a positive
    constant): its log is never NaN for a number, so a log of a product of such factors is a sum of logs."""
    if owner(v, Exp, stable.Softplus, stable.Sigmoid, stable.Softmax) is not None:
        return True
    value = constant_value(v)
    return value is not None and value > 0


def scaled_core(t: Variable) -> tuple[Variable, float]:
    """(core, scale) with t = scale·core, through negations and constant factors and divisors."""
    scale = 1.0
    while True:
        neg = owner(t, Negative)
        if neg is not None:
            t, scale = neg.inputs[0], -scale
            continue
        product = owner(t, Multiply)
        if product is not None:
            factors = [(constant_value(c), v) for c, v in (product.inputs, product.inputs[::-1])]
            found = [(c, v) for c, v in factors if c is not None and c != 0]
            if found:
                t, scale = found[0][1], scale * found[0][0]
                continue
        quotient = owner(t, Divide)
        c = constant_value(quotient.inputs[1]) if quotient is not None else None
        if quotient is not None and c is not None and c != 0:
            t, scale = quotient.inputs[0], scale / c
            continue
        return t, scale


def root_of(v: Variable) -> Variable | None:
    """u for v = √u, written `sqrt(u)` or `u ** 0.5`."""
    root = owner(v, Sqrt)
    if root is not None:
        return root.inputs[0]
    power = owner(v, Power)
    return power.inputs[0] if power is not None and is_constant(power.inputs[1], 0.5) else None


def square_of(v: Variable) -> Variable | None:
    """u for v = u², written `square(u)`, `u ** 2` or `u * u`."""
    sq = owner(v, Square)
    if sq is not None:
        return sq.inputs[0]
    pw = owner(v, Power)
    if pw is not None and is_constant(pw.inputs[1], 2.0):
        return pw.inputs[0]
    product = owner(v, Multiply)
    if product is not None and product.inputs[0] is product.inputs[1]:
        return product.inputs[0]
    return None


def signed_terms(v: Variable) -> list[Variable]:
    """The addends of a tree of `+` and `-`, subtrahends negated (`a - b + c` → [a, -b, c])."""
    node = v.owner
    if node is not None and isinstance(node.op, Add):
        return signed_terms(node.inputs[0]) + signed_terms(node.inputs[1])
    if node is not None and isinstance(node.op, Subtract):
        return signed_terms(node.inputs[0]) + [negate(t) for t in signed_terms(node.inputs[1])]
    return [v]


def terms_with_signs(v: Variable, limit: int) -> list[tuple[float, Variable]] | None:
    """The addends of a tree of `+` and `-` with their signs (±1), or None past `limit` of them.

    Each subtree still on the stack holds at least one addend, so the walk stops as soon as
    those and the ones found pass the limit: a rule asking at every `+` of a long chain (a
    gradient summed over an unrolled loop's steps) pays for `limit` nodes, not the chain."""
    found: list[tuple[float, Variable]] = []
    stack = [(1.0, v)]
    while stack:
        sign, u = stack.pop()
        node = owner(u, Add, Subtract)
        if node is None:
            found.append((sign, u))
        else:
            a, b = node.inputs
            stack.append((-sign if isinstance(node.op, Subtract) else sign, b))
            stack.append((sign, a))
        if len(found) + len(stack) > limit:
            return None
    return found


def add_terms(v: Variable) -> list[Variable]:
    """The addends of a tree of `+` (v itself when it is no sum)."""
    node = owner(v, Add)
    if node is None:
        return [v]
    return add_terms(node.inputs[0]) + add_terms(node.inputs[1])


def scaled(k: float, v: Variable) -> Variable:
    """k·v, or v itself for k = 1."""
    return v if k == 1.0 else k * v
