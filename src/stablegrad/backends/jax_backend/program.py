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
finds the cheap result in doubt (`flags.settle`).  `logsumexp`, say, takes
`jax.nn`'s passes and reruns exactly only on data whose tails would show.

Arguments come as NumPy arrays.  XLA's CPU client uses a host array in place only
when it starts on a 64-byte boundary; NumPy aligns to 16, and the copy JAX makes
otherwise runs at about 2 GB/s (37 ms for 80 MB, more than a logsumexp and its
gradient take on it).  So a large argument that is not aligned is first copied, by
NumPy at memory speed, into an aligned buffer that the program keeps for the next
call (`Staging`); JAX then reads that in place.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ...errors import ExecutionError, InputError, ShapeError
from ...graph.basic import Variable
from . import flags
from .trace import Plan, evaluate

#: the mesh axis that sharded inputs are split along
DATA_AXIS = "data"
#: the alignment (bytes) at which XLA's CPU client reads a host array in place instead of copying it
ALIGN = 64
#: arguments of at least this many bytes are staged in aligned memory (below, JAX's own copy is as quick)
STAGE_FROM = 1 << 15


class Program:
    """A graph lowered to one jitted function; `run` takes and returns NumPy arrays."""

    def __init__(self, inputs: Sequence[Variable], outputs: Sequence[Variable], shard: Mapping | None = None):
        self.plan = Plan(inputs, outputs, final=True)
        self.nodes = self.plan.nodes
        self.inputs = list(inputs)
        self.shard = check_shard(self.inputs, shard or {})
        self.mesh: Mesh | None = None
        self._shardings: list[NamedSharding] | None = None
        if self.shard:
            self.mesh = Mesh(np.array(jax.devices()), (DATA_AXIS,))
            self._shardings = [NamedSharding(self.mesh, _spec(self.shard.get(v.id), v.ndim)) for v in self.inputs]
        self._cheap = self._jit(exact=False)
        self._exact: Callable | None = None  # compiled on the first call whose cheap result is in doubt
        self._checks: dict[bool, list[tuple[str, tuple | None]]] = {}  # each version's (message, line) of checks
        self._staging = Staging()
        # a program whose arguments are all known to be small skips the staging (a few µs a call)
        self._stages = any(_may_stage(v) for v in self.inputs)

    def _jit(self, exact: bool) -> Callable:
        """The plan as a jitted function returning (outputs, doubt, [(failed, detail)] of its checks)."""

        def traced(*args):
            outputs, raised = flags.traced(lambda: evaluate(self.plan, args), speculate=not exact)
            self._checks[exact] = [(c.message, c.location) for c in raised.checks]  # no tracers kept
            return outputs, raised.doubt(), raised.checked()

        return jax.jit(traced, in_shardings=self._shardings)

    def run(self, values: Sequence[np.ndarray]) -> list[np.ndarray]:
        with _x64():
            if self._shardings is not None:
                values = [self._place(i, v, s) for i, (v, s) in enumerate(zip(values, self._shardings))]
                return self._call(values)
            if not self._stages:
                return self._call(values)
            with self._staging.claim() as staging:
                results = self._call([staging.put(i, v) for i, v in enumerate(values)])
                return [staging.unaliased(r) for r in results]

    def _call(self, values: Sequence) -> list[np.ndarray]:
        """The outputs, from the cheap program or, when it doubts its result, the exact one."""
        results, doubt, checked = self._cheap(*values)
        self._raise_failed(self._checks[False], checked)
        if doubt is not None and self._scalar(doubt):
            if self._exact is None:
                self._exact = self._jit(exact=True)
            results, _, checked = self._exact(*values)
            self._raise_failed(self._checks[True], checked)
        if self._shardings is None:  # on one device: no question of which host holds what
            return [np.asarray(r) for r in results]  # (waits for them: no call is left reading the inputs)
        return [_to_numpy(r) for r in results]

    def _scalar(self, value):
        """A scalar result as a Python number (sharded, the replica on this host's first device:
        each host holds all of it)."""
        return np.asarray(value if self._shardings is None else value.addressable_data(0)).item()

    def _raise_failed(self, checks: list[tuple[str, tuple | None]], checked: list) -> None:
        for (message, location), (failed, detail) in zip(checks, checked):
            if self._scalar(failed):
                raise ExecutionError(message.format(self._scalar(detail)), location=location)

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


class Staging:
    """Aligned host buffers for one program's large arguments, one per argument, kept between calls.

    `claim().put(i, value)` is the argument as the program should get it: a large NumPy
    array that does not start on an `ALIGN` boundary (or is not contiguous) is copied
    into argument i's buffer, which JAX then reads in place.  A buffer is rewritten only
    by the next call, once this one's results are out (`Program._call` converts them
    all); a result that still shares a buffer (an output XLA returned without copying)
    is copied out (`unaliased`).  A call made while another thread's is using the
    buffers stages into fresh ones of its own.  (The price: each kept buffer holds as
    much memory as its argument, for as long as the program lives.)
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._buffers: dict[int, np.ndarray] = {}

    def claim(self) -> _Staged:
        """This call's buffers (a context: leaving it hands the kept ones to the next call)."""
        reuse = self._lock.acquire(blocking=False)
        return _Staged(self._buffers if reuse else {}, self._lock if reuse else None)


class _Staged:
    """The buffers of one call (see `Staging`)."""

    def __init__(self, buffers: dict[int, np.ndarray], lock: threading.Lock | None):
        self.buffers, self.lock = buffers, lock
        self.used: list[np.ndarray] = []

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        if self.lock is not None:
            self.lock.release()

    def put(self, i: int, value):
        if not isinstance(value, np.ndarray) or value.nbytes < STAGE_FROM or value.dtype.hasobject:
            return value
        if value.flags.c_contiguous and value.ctypes.data % ALIGN == 0:
            return value  # read in place already
        buffer = self.buffers.get(i)
        if buffer is None or buffer.shape != value.shape or buffer.dtype != value.dtype:
            buffer = self.buffers[i] = aligned_empty(value.shape, value.dtype)
        np.copyto(buffer, value)
        self.used.append(buffer)
        return buffer  # (a jitted call takes an aligned array in place, quicker than device_put first)

    def unaliased(self, result: np.ndarray) -> np.ndarray:
        """The result, copied if it shares memory with a buffer the next call will rewrite."""
        if self.lock is not None and any(np.may_share_memory(result, b) for b in self.used):
            return result.copy()
        return result


def _may_stage(var: Variable) -> bool:
    """Whether an argument for `var` may be large enough to be staged (an unknown extent may)."""
    extents = [n for n in var.type.shape if n is not None]
    if len(extents) < var.ndim:
        return True
    return math.prod(extents) * np.dtype(var.dtype).itemsize >= STAGE_FROM


def aligned_empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an `ALIGN`-byte boundary."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + ALIGN, np.uint8)
    start = -raw.ctypes.data % ALIGN
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def _x64():
    """A context in which JAX computes in 64 bits, for this thread only (the global setting is untouched)."""
    enable_x64 = getattr(jax, "enable_x64", None)
    if enable_x64 is None:  # JAX before the top-level context manager
        from jax.experimental import enable_x64
    return enable_x64(True)


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
