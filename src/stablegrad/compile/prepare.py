"""From the user's graph to the graph that runs: merge duplicates and fold constants.

One pass in topological order, linear in graph size: each node is rebuilt on its
(already prepared) inputs; a node whose op and inputs were seen before is merged
with the earlier one, and a node whose inputs are all small constants is
evaluated now.  The user's graph is never modified.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..graph.basic import Apply, Constant, Variable, toposort

#: constants with more entries than this are not produced by folding (they would bloat the graph)
FOLD_LIMIT = 4096


def _constant_key(c: Constant):
    if c.data.size > 64:
        return ("big", c.id)
    return (c.data.dtype.str, c.data.shape, c.data.tobytes())


def prepare(inputs: Sequence[Variable], outputs: Sequence[Variable]) -> list[Variable]:
    """Outputs of an equivalent graph with duplicate subgraphs merged and constants folded."""
    mapping: dict[int, Variable] = {}
    constants: dict[tuple, Constant] = {}
    seen: dict[tuple, Apply] = {}
    stop = list(inputs)

    def get(v: Variable) -> Variable:
        if isinstance(v, Constant):
            return constants.setdefault(_constant_key(v), v)
        return mapping.get(v.id, v)

    for node in toposort(outputs, stop=stop):
        new_inputs = tuple(get(v) for v in node.inputs)
        key = (node.op, tuple(v.id for v in new_inputs))
        merged = seen.get(key)
        if merged is None:
            merged = _fold(node, new_inputs)
            if merged is None:
                unchanged = all(a is b for a, b in zip(new_inputs, node.inputs))
                merged = (
                    node if unchanged else Apply(node.op, new_inputs, (o.type for o in node.outputs), node.location)
                )
            seen[key] = merged
        for old, new in zip(node.outputs, merged.outputs):
            mapping[old.id] = new
    return [get(v) for v in outputs]


class _Folded:
    """A stand-in node whose outputs are constants."""

    __slots__ = ("outputs",)

    def __init__(self, outputs):
        self.outputs = outputs


def _fold(node: Apply, inputs: tuple[Variable, ...]):
    if not all(isinstance(v, Constant) for v in inputs):
        return None
    for o in node.outputs:
        dims = o.type.shape
        if None in dims or math.prod(d for d in dims if d is not None) > FOLD_LIMIT:
            return None
    with np.errstate(all="ignore"):
        values = node.op.perform(*(v.data for v in inputs))  # type: ignore[attr-defined]
    if node.op.nout == 1:
        values = (values,)
    return _Folded(tuple(Constant(np.asarray(v, dtype=o.type.dtype)) for v, o in zip(values, node.outputs)))
