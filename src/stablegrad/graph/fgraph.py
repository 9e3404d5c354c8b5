"""FunctionGraph: the graph a compiled function runs, with client lists and type-checked replacement."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import StableGradError
from .basic import Apply, Variable, substitute, toposort


class FunctionGraph:
    """Inputs, outputs, the nodes between them in execution order, and who reads what.

    Graph nodes are immutable; `replace(old, new)` rebuilds everything downstream
    of `old` on top of `new` (a linear pass), after checking that `new` has a type
    that can stand for `old`'s.
    """

    def __init__(self, inputs: Sequence[Variable], outputs: Sequence[Variable]):
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self._index()

    def _index(self) -> None:
        self.nodes: list[Apply] = toposort(self.outputs, stop=self.inputs)
        self.clients: dict[int, list[tuple[Apply, int]]] = {}
        for node in self.nodes:
            for i, v in enumerate(node.inputs):
                self.clients.setdefault(v.id, []).append((node, i))

    def replace(self, old: Variable, new: Variable) -> None:
        """Make every reader of `old` read `new` instead."""
        if (
            old.dtype != new.dtype
            or old.ndim != new.ndim
            or not all(a is None or b is None or a == b for a, b in zip(old.type.shape, new.type.shape))
        ):
            raise StableGradError(f"FunctionGraph.replace: cannot replace {old.type} by {new.type}")
        self.outputs = substitute(self.outputs, {old.id: new})
        self._index()

    def __len__(self) -> int:
        return len(self.nodes)
