"""The JAX executor: the whole graph as one `jax.jit` function, optionally sharded over devices.

Tracing and every call run inside `jax.enable_x64(True)` (a thread-local context
manager): float64 graphs compute in float64 and int64 stays int64 without the
user touching JAX's global configuration, and their other JAX code keeps
whatever setting it had.  (The jit cache is keyed on that setting too, so a
user's own float32-only jit functions are unaffected.)

Sharding (`shard={x: 0}`) is data parallelism: the named inputs are split along
the given axis over a one-axis mesh of every device JAX sees, the other inputs
are replicated, and XLA inserts the cross-device reductions.

A graph can compile twice: its cheap form always, its exact form only when a call
finds the cheap result in doubt (`speculation.settle`).  `logsumexp`, say, takes
`jax.nn`'s passes and reruns exactly only on data whose tails would show.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import jax
import numpy as np
from jax.experimental import checkify, multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ...errors import ExecutionError, InputError, ShapeError
from ...graph.basic import Variable, toposort
from ...ops.composite import OpFromGraph, SymbolicOp, body_of
from ...ops.scan import Scan
from .lowerings import RUNTIME_CHECKS
from .speculation import EXACT, Speculation, settling
from .trace import Plan, evaluate, inner_plan

#: the mesh axis that sharded inputs are split along
DATA_AXIS = "data"


class Program:
    """A graph lowered to one jitted function; `run` takes and returns NumPy arrays."""

    def __init__(self, inputs: Sequence[Variable], outputs: Sequence[Variable], shard: Mapping | None = None):
        self.plan = Plan(inputs, outputs)
        self.nodes = self.plan.nodes
        self.inputs = list(inputs)
        self.shard = check_shard(self.inputs, shard or {})
        self.mesh: Mesh | None = None
        self._shardings: list[NamedSharding] | None = None
        if self.shard:
            self.mesh = Mesh(np.array(jax.devices()), (DATA_AXIS,))
            self._shardings = [NamedSharding(self.mesh, _spec(self.shard.get(v.id), v.ndim)) for v in self.inputs]
        self.checked = _contains(self.plan, RUNTIME_CHECKS)
        self._cheap = self._jit(exact=False)
        self._exact: Callable | None = None  # compiled on the first call whose cheap result is in doubt

    def _jit(self, exact: bool) -> Callable:
        """The plan as a jitted function returning (outputs, doubt); see `speculation.settle`."""

        def traced(*args):
            how = EXACT if exact else Speculation()
            with settling(how):
                outputs = evaluate(self.plan, args)
            return outputs, None if exact else how.any()

        checked = checkify.checkify(traced, errors=checkify.user_checks) if self.checked else traced
        return jax.jit(checked, in_shardings=self._shardings)

    def run(self, values: Sequence[np.ndarray]) -> list[np.ndarray]:
        with _x64():
            if self._shardings is not None:
                values = [self._place(i, v, s) for i, (v, s) in enumerate(zip(values, self._shardings))]
            results, doubt = self._call(self._cheap, values)
            if doubt is not None and bool(doubt.addressable_data(0)):  # replicated: every host sees it whole
                if self._exact is None:
                    self._exact = self._jit(exact=True)
                results, _ = self._call(self._exact, values)
            return [_to_numpy(r) for r in results]

    def _call(self, jitted: Callable, values) -> tuple:
        result = jitted(*values)
        if not self.checked:
            return result
        error, result = result
        try:
            error.throw()
        except checkify.JaxRuntimeError as exc:
            raise ExecutionError(str(exc).removesuffix(" (`check` failed)")) from None
        return result

    def _place(self, i: int, value: np.ndarray, sharding: NamedSharding):
        var = self.inputs[i]
        axis = self.shard.get(var.id)
        devices = sharding.mesh.size
        if axis is not None and value.shape[axis] % devices:
            raise InputError(
                f"function: argument {i} ({var.name or f'#{i}'}) is sharded along axis {axis} over {devices} devices, "
                f"but its extent {value.shape[axis]} is not a multiple of {devices}"
            )
        # every process holds the whole array and hands each of its own devices its slice, so the
        # same call works on one host and on several (after jax.distributed.initialize())
        return jax.make_array_from_callback(value.shape, sharding, lambda index: value[index])


def _x64():
    """A context in which JAX computes in 64 bits, for this thread only (the global setting is untouched)."""
    enable_x64 = getattr(jax, "enable_x64", None)
    if enable_x64 is None:  # JAX before the top-level context manager
        from jax.experimental import enable_x64
    return enable_x64(True)


def _contains(plan: Plan, classes: tuple[type, ...]) -> bool:
    """Whether a node of these op classes runs, inside loops and kept-whole composites too."""
    stack = list(plan.nodes)
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if isinstance(node.op, classes):
            return True
        if id(node.op) in seen:
            continue
        seen.add(id(node.op))
        if isinstance(node.op, Scan):
            stack.extend(inner_plan(node.op).nodes)
        elif isinstance(node.op, SymbolicOp | OpFromGraph):
            placeholders, outputs = body_of(node.op, tuple(v.type for v in node.inputs))
            stack.extend(toposort(outputs, stop=placeholders))
    return False


def check_shard(inputs: list[Variable], shard: Mapping) -> dict[int, int]:
    """{input id: axis} from the user's {input: axis}, with errors that name the input."""
    if not isinstance(shard, Mapping):
        raise InputError(f"function: shard must be a dict {{input: axis}}, got {type(shard).__name__}")
    by_id = {v.id: v for v in inputs}
    result = {}
    for var, axis in shard.items():
        if not isinstance(var, Variable) or var.id not in by_id:
            raise InputError(f"function: shard names {var!r}, which is not among the function's inputs")
        if not isinstance(axis, int | np.integer) or isinstance(axis, bool):
            raise ShapeError(f"function: shard axis for {var.name or var!r} must be an int, got {axis!r}")
        if not -var.ndim <= axis < var.ndim:
            raise ShapeError(
                f"function: shard axis {axis} is out of range for input {var.name or var!r} "
                f"of {var.ndim} dimensions ({var.type})"
            )
        result[var.id] = int(axis) % var.ndim
    return result


def _spec(axis: int | None, ndim: int) -> PartitionSpec:
    if axis is None:
        return PartitionSpec()
    return PartitionSpec(*(DATA_AXIS if a == axis else None for a in range(ndim)))


def _to_numpy(value) -> np.ndarray:
    if isinstance(value, jax.Array) and not value.is_fully_addressable:  # sharded over several hosts
        value = multihost_utils.process_allgather(value, tiled=True)
    return np.asarray(value)
