"""A JAX primitive we have no op for, kept in our graph as a call of JAX itself.

`stabilize` imports every equation of a jaxpr; one whose primitive has no stablegrad
counterpart (`sort`, `gather`, `cumsum`, a `while` loop, ...) becomes a `JaxCall` node.
The rewrites see it as opaque: nothing is recognised through it, but the formulas
around it are, as in any graph.  The JAX backend binds the primitive as JAX would (so
`jit`, `vmap` and `grad` around the stabilized function apply JAX's own rules to it),
its gradient is JAX's own (`jax.vjp` of the primitive, a `JaxCallVJP` node), and the
NumPy backends run it through JAX eagerly.

>>> import jax, jax.numpy as jnp, numpy as np, stablegrad as sg
>>> x = sg.tensor("x", shape=(3,))
>>> s = JaxCall(jax.lax.sort_p, {"dimension": 0, "is_stable": True, "num_keys": 1}, (x.type,))(x)
>>> sg.function([x], s)(np.array([3.0, 1.0, 2.0])).tolist()
[1.0, 2.0, 3.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np

from ..backends.jax_backend import LOWERINGS
from ..errors import GradientError
from ..graph.basic import Op, Variable
from ..graph.types import TensorType
from ..ops.base import zero_grad


@dataclass(frozen=True, eq=False)  # (compared by identity: params hold jaxprs and arrays)
class JaxCall(Op):
    """`primitive.bind(*inputs, **params)`, with the result types JAX declared (`types`)."""

    primitive: Any = field(repr=False)
    params: dict = field(repr=False)
    types: tuple[TensorType, ...] = field(repr=False)

    @property
    def nout(self) -> int:  # type: ignore[override]  # (one op class serves every primitive)
        return len(self.types)

    @property
    def name(self) -> str:
        return f"jax.{self.primitive.name}"

    def infer(self, *inputs: Variable) -> list[TensorType]:
        return list(self.types)

    def bind(self, *args) -> list:
        out = self.primitive.bind(*args, **self.params)
        return list(out) if self.primitive.multiple_results else [out]

    def perform(self, *arrays: np.ndarray):
        with jax.enable_x64(True):  # the arrays in their own dtypes: float64 is not to be rounded to float32
            return _as_returned(self, [np.asarray(r, dtype=t.dtype) for r, t in zip(self.bind(*arrays), self.types)])

    def pullback(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Sequence[Variable]):
        wrt = tuple(k for k, v in enumerate(inputs) if v.type.is_float())
        seeded = tuple(k for k, v in enumerate(outputs) if v.type.is_float())
        if not wrt or not seeded:
            return [zero_grad(v) for v in inputs]
        found = JaxCallVJP(self, wrt, seeded)(*inputs, *[grads[j] for j in seeded])
        found = [found] if len(wrt) == 1 else list(found)
        by_input = dict(zip(wrt, found))
        return [by_input[k] if k in by_input else zero_grad(v) for k, v in enumerate(inputs)]


@dataclass(frozen=True, eq=False)
class JaxCallVJP(Op):
    """JAX's vector-Jacobian product of a `JaxCall`: inputs (the call's inputs, the cotangents of
    its outputs numbered `seeded`), one gradient per input numbered `wrt`."""

    call: JaxCall = field(repr=False)
    wrt: tuple[int, ...]
    seeded: tuple[int, ...]

    @property
    def nout(self) -> int:  # type: ignore[override]
        return len(self.wrt)

    @property
    def name(self) -> str:
        return f"{self.call.name}_vjp"

    def infer(self, *inputs: Variable) -> list[TensorType]:
        return [inputs[k].type for k in self.wrt]

    def vjp(self, *args) -> list:
        n = len(args) - len(self.seeded)
        primals, cotangents = list(args[:n]), list(args[n:])

        def seeded_outputs(*varied):
            full = list(primals)
            for k, v in zip(self.wrt, varied):
                full[k] = v
            outs = self.call.bind(*full)
            return [outs[j] for j in self.seeded]

        _, pull = jax.vjp(seeded_outputs, *[primals[k] for k in self.wrt])
        return list(pull(cotangents))

    def perform(self, *arrays: np.ndarray):
        with jax.enable_x64(True):
            return _as_returned(
                self, [np.asarray(g, dtype=arrays[k].dtype) for g, k in zip(self.vjp(*arrays), self.wrt)]
            )

    def pullback(self, inputs, outputs, grads):
        # (stabilize never asks: JAX differentiates the lowered backward pass itself)
        raise GradientError(f"{self.name}: a JAX primitive's gradient has no stablegrad derivative")


def _as_returned(op: Op, results: list):
    """An op's results as `perform` and a lowering return them: one array, or a tuple of `nout`."""
    return results[0] if op.nout == 1 else tuple(results)


LOWERINGS[JaxCall] = lambda op, *args: _as_returned(op, op.bind(*args))
LOWERINGS[JaxCallVJP] = lambda op, *args: _as_returned(op, op.vjp(*args))
