"""Ops whose body is a graph: library `SymbolicOp`s and user `OpFromGraph`s.

Both are *opaque* until the specialize phase inlines them, which matters for two
reasons.  Recognition rewrites never look inside a SymbolicOp's own body — that
is what keeps `LogSumExp`'s max-shifted body from being "recognised" as
`LogSumExp` again — while a user's OpFromGraph body *is* rewritten (its naive
formulas deserve the same repair as top-level ones).  And a SymbolicOp carries
an explicit, stable pullback, where differentiating its body would not be.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..errors import ShapeError, StableGradError
from ..graph import hooks
from ..graph.basic import Apply, Op, Variable, graph_inputs, substitute
from ..graph.types import TensorType
from .base import as_operands


@functools.cache
def _symbolic_body(op: SymbolicOp, types: tuple[TensorType, ...]):
    placeholders = [Variable(t, name=f"arg{i}") for i, t in enumerate(types)]
    outputs = op.build(*placeholders)
    outputs = [outputs] if isinstance(outputs, Variable) else list(outputs)
    return placeholders, outputs


@functools.cache
def _compiled_body(op: Op, types: tuple[TensorType, ...]):
    placeholders, outputs = body_of(op, types)
    return hooks.function.get()(placeholders, outputs, recognition=False)


def body_of(op: Op, types: tuple[TensorType, ...]) -> tuple[list[Variable], list[Variable]]:
    """(placeholder inputs, outputs) of a composite op's body for these input types."""
    if isinstance(op, OpFromGraph):
        return op.inputs, op.outputs
    return _symbolic_body(op, types)


@dataclass(frozen=True)
class SymbolicOp(Op):
    """Abstract: a library op defined by a graph built from its inputs (`build`).

    Subclasses are frozen dataclasses (equal parameters, equal ops) that define
    `build(*inputs)` — the stable formula, written with ordinary ops — and usually
    an explicit `pullback` with its `reads`.  Without one, the gradient is derived
    from the body.  `perform` runs the body, so it *is* the reference semantics.
    """

    #: inlined at specialize so backends see plain ops; a backend may instead run the op whole
    inline: ClassVar[bool] = True

    def build(self, *inputs: Variable) -> Variable | Sequence[Variable]:
        raise NotImplementedError

    def infer(self, *inputs: Variable) -> list[TensorType]:
        _, outputs = _symbolic_body(self, tuple(v.type for v in inputs))
        return [o.type for o in outputs]

    def perform(self, *arrays):
        types = tuple(TensorType(a.dtype, a.shape) for a in map(np.asarray, arrays))
        results = _compiled_body(self, types)(*arrays)
        return results[0] if self.nout == 1 else tuple(results)

    def pullback(self, inputs, outputs, grads):
        return body_pullback(self, inputs, grads)


class OpFromGraph(Op):
    """A user composite: `OpFromGraph(inputs, outputs)` is an op whose body is that graph.

    Call it on variables like any op.  Its gradient is derived from its body, and
    recognition rewrites run inside the body, so a naive formula in a composite is
    repaired too.  Composites nest.

    >>> import numpy as np, stablegrad as sg
    >>> a, b = sg.vector("a"), sg.vector("b")
    >>> hypot = sg.OpFromGraph([a, b], [sg.sqrt(a * a + b * b)])
    >>> x = sg.vector("x")
    >>> sg.function([x], hypot(x, 2 * x))(np.array([3.0]))
    array([6.70820393])
    """

    def __init__(self, inputs: Sequence[Variable], outputs: Sequence[Variable] | Variable, name: str | None = None):
        outputs = [outputs] if isinstance(outputs, Variable) else list(outputs)
        for i, v in enumerate(inputs):
            if not isinstance(v, Variable) or v.owner is not None:
                raise StableGradError(f"OpFromGraph: inputs[{i}] must be a symbolic input, got {v!r}")
        given = {v.id for v in inputs}
        for v in graph_inputs(outputs):
            if v.id not in given:
                raise StableGradError(f"OpFromGraph: the outputs depend on {v!r}, which is not among the inputs")
        self.inputs = list(inputs)
        self.outputs = outputs
        self._name = name or "composite"

    # identity semantics: two composites are the same op only if they are the same object
    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    @property
    def name(self) -> str:
        return self._name

    @property
    def nout(self) -> int:  # type: ignore[override]
        return len(self.outputs)

    def __call__(self, *args):
        xs = as_operands(*args)
        if len(xs) != len(self.inputs):
            raise ShapeError(f"{self.name}: expected {len(self.inputs)} arguments, got {len(xs)}")
        for i, (x, p) in enumerate(zip(xs, self.inputs)):
            if x.ndim != p.ndim or not all(
                a is None or b is None or a == b for a, b in zip(x.type.shape, p.type.shape)
            ):
                raise ShapeError(f"{self.name}: argument {i} has type {x.type}, the composite expects {p.type}")
        xs = [x if x.dtype == p.dtype else x.astype(p.dtype) for x, p in zip(xs, self.inputs)]
        node = Apply(self, xs, self.infer(*xs))
        return node.outputs[0] if self.nout == 1 else node.outputs

    def infer(self, *inputs):
        return [o.type for o in self.outputs]

    def perform(self, *arrays):
        results = _compiled_body(self, ())(*arrays)
        return results[0] if self.nout == 1 else tuple(results)

    def pullback(self, inputs, outputs, grads):
        return body_pullback(self, inputs, grads)

    def with_body(self, inputs: Sequence[Variable], outputs: Sequence[Variable]) -> OpFromGraph:
        """The same composite with a (rewritten) body."""
        return OpFromGraph(inputs, outputs, self._name)


def body_pullback(op: Op, inputs: Sequence[Variable], grads: Sequence[Variable]) -> list:
    """Gradient of a composite derived from its body, inlined on the actual inputs."""
    return hooks.vjp.get()(inline(op, inputs), grads, inputs)


def inline(op: Op, inputs: Sequence[Variable]) -> list[Variable]:
    """The composite's body rebuilt on `inputs` (a copy; the body itself is untouched)."""
    placeholders, outputs = body_of(op, tuple(v.type for v in inputs))
    return substitute(outputs, {p.id: x for p, x in zip(placeholders, inputs)})
