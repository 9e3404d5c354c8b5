"""Small matching helpers the rewrites share: who produced a variable, constants, signs."""

from __future__ import annotations

import numpy as np

from ..graph.basic import Apply, Constant, Variable
from ..ops.elementwise import Add, Negative, negative


def owner(v: Variable, *op_classes: type) -> Apply | None:
    """v's node if its op is one of `op_classes`, else None."""
    node = v.owner
    if node is not None and isinstance(node.op, op_classes):
        return node
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


def is_constant(v: Variable, value: float) -> bool:
    c = constant_value(v)
    return c is not None and c == value


def negate(v: Variable) -> Variable:
    """-v, without building -(-x)."""
    node = owner(v, Negative)
    return node.inputs[0] if node is not None else negative(v)


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


def add_terms(v: Variable) -> list[Variable]:
    """The addends of a tree of `+` (v itself when it is no sum)."""
    node = owner(v, Add)
    if node is None:
        return [v]
    return add_terms(node.inputs[0]) + add_terms(node.inputs[1])
