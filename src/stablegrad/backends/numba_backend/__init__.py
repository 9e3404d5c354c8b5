"""The Numba backend (`backend="numba"`, needs the `numba` extra): the NumPy executor, with
compiled kernels where a node has one.

- Chains of elementwise ops over arrays of known shape, the sums down their rows and the
  logsumexp family over short rows between them become one `Loop` node each (`loops.py`
  chooses, `loop_source.py` writes its loop nest): one pass over the data, no temporaries.
- The logsumexp family over long rows runs as row kernels (`kernels.py`): logsumexp, its
  pullback `g[..., None] * softmax(x)` as one node, and both together where a function
  computes both (`row_pairs.py`), two or three passes over each row.  Logsumexp and its
  gradient over leading axes (an HMM step's `logsumexp(alpha[:, None] + log_A, axis=0)`)
  run the same passes down the columns.
- Every other node runs as on the NumPy backend.

Generated kernels are compiled on first use and kept on disk (`cache.py`), so a later process
loads them instead of compiling.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numba
import numpy as np

from ...errors import StableGradError
from ...graph.basic import Apply, Op
from ...graph.fgraph import FunctionGraph
from ...ops.scan import Scan
from ...ops.stable import LogSumExp
from ...ops.stable.logsumexp import LogSumExpGrad
from ..interface import Options
from ..numpy_program import Program, runs_whole
from ..provenance import CheckedProgram
from ..row_pairs import FLOATS, LogSumExpAndScaledSoftmax, ScaledSoftmax, fused, over_rows
from . import kernels as k
from .cache import compiled
from .loop_source import kernel as loop_kernel
from .loops import Loop, fuse
from .scan_loop import scan_kernel


class NumbaBackend:
    name = "numba"
    #: `sg.function(..., threads=n)` splits the kernels' rows (or blocks of rows) over n threads
    threads = True

    def runs_whole(self, op: Op) -> bool:
        return runs_whole(op)  # the NumPy backend's composites: the kernels replace some of them

    def compile(self, graph: FunctionGraph, options: Options) -> Program | CheckedProgram:
        if options.shard:
            raise StableGradError(f"function: shard= needs backend='jax' (got backend={self.name!r})")
        threads = options.threads or 1
        most = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]
        if threads > most:
            raise StableGradError(
                f"function: threads={threads} is more than the {most} Numba may start here "
                "(NUMBA_NUM_THREADS, by default the number of cores)"
            )
        kernels = functools.partial(kernel_for, threads=threads)
        if options.check_finite is None:
            return Program(graph.inputs, fuse(fused(graph), graph.inputs), kernels=kernels)
        # (unfused: the checking executor names the node of the user's graph that went non-finite)
        return CheckedProgram(
            Program(graph.inputs, graph.outputs, kernels=kernels), options.check_finite, graph.outputs
        )


def kernel_for(node: Apply, unread: frozenset[int] = frozenset(), threads: int = 1) -> Callable | None:
    """A compiled kernel for this node, or None to run it as the NumPy backend does; `unread`
    are the indices of the outputs nothing reads."""
    op = node.op
    if isinstance(op, Loop):
        return loop_kernel(op, compiled, threads)
    if isinstance(op, Scan):
        return scan_kernel(op, compiled, unread)  # (one step after another: a loop has no rows to split)
    x = node.inputs[0]
    rows = _RowKernels(threads)
    if isinstance(op, ScaledSoftmax):
        return rows.scaled_softmax
    if isinstance(op, LogSumExpAndScaledSoftmax):
        return functools.partial(rows.logsumexp_and_scaled_softmax, keepdims=op.keepdims)
    if isinstance(op, LogSumExp) and op.plain and over_rows(x, op.axes):
        return functools.partial(rows.logsumexp, keepdims=op.keepdims)
    if isinstance(op, LogSumExpGrad) and over_rows(x, op.axes):
        return rows.softmax
    leading = _leading(x, op.axes) if isinstance(op, (LogSumExp, LogSumExpGrad)) else 0
    if leading and isinstance(op, LogSumExp) and op.plain:
        return functools.partial(_logsumexp_down, leading=leading, keepdims=op.keepdims)
    if leading and isinstance(op, LogSumExpGrad):
        return functools.partial(_softmax_down, leading=leading)
    return None


def _leading(x, axes) -> int:
    """k where `axes` are x's first k axes and leave at least one (float x), else 0."""
    k = len(axes)
    if x.dtype not in FLOATS or not 0 < k < x.ndim or sorted(a % x.ndim for a in axes) != list(range(k)):
        return 0
    return k


def _down(x: np.ndarray, leading: int) -> np.ndarray:
    """x as a C-ordered matrix: its first `leading` axes down, the others across."""
    return np.ascontiguousarray(x).reshape(math.prod(x.shape[:leading]), math.prod(x.shape[leading:]))


def _logsumexp_down(x, leading: int, keepdims: bool):
    out = np.empty(math.prod(x.shape[leading:]), dtype=x.dtype)
    k.logsumexp_down(_down(x, leading), out)
    return out.reshape((1,) * leading + x.shape[leading:] if keepdims else x.shape[leading:])


def _softmax_down(x, leading: int):
    rows = _down(x, leading)
    out = np.empty(rows.shape, dtype=x.dtype)
    k.softmax_down(rows, out)
    return out.reshape(x.shape)


def _rows(x: np.ndarray) -> np.ndarray:
    """x as a C-ordered matrix of its last axis."""
    return np.ascontiguousarray(x).reshape(math.prod(x.shape[:-1]), x.shape[-1])


def _row_scales(scale: np.ndarray, x: np.ndarray) -> np.ndarray:
    """One factor per row of x (scale is constant along the last axis)."""
    return np.ascontiguousarray(np.broadcast_to(scale, x.shape[:-1] + (1,)), dtype=x.dtype).reshape(-1)


class _RowKernels:
    """The row kernels over NumPy arrays of any rank, on one thread or several."""

    def __init__(self, threads: int):
        self.threads = threads
        many = threads > 1
        self.short = k.short_rows_parallel if many else k.short_rows
        self.lse = k.logsumexp_rows_parallel if many else k.logsumexp_rows
        self.grad = k.softmax_rows_parallel if many else k.softmax_rows
        self.both = k.logsumexp_and_softmax_rows_parallel if many else k.logsumexp_and_softmax_rows

    def _start(self) -> None:
        if self.threads > 1:
            numba.set_num_threads(self.threads)  # (Numba's pool is shared: each call sets its own)

    def logsumexp(self, x, keepdims: bool):
        rows = _rows(x)
        out = np.empty(rows.shape[0], dtype=x.dtype)
        self._start()
        if rows.shape[1] <= k.SHORT_ROW:
            # (scale and softmax are unused; softmax gets a writable stand-in, since the rows may be a
            # read-only constant and the kernel's typing includes the branch that writes it)
            self.short(rows, out, out, np.empty((1, rows.shape[1]), dtype=x.dtype), False)
        else:
            self.lse(rows, out)
        return out.reshape(x.shape[:-1] + ((1,) if keepdims else ()))

    def softmax(self, x):
        return self.scaled_softmax(x, np.ones((1,) * x.ndim, dtype=x.dtype))

    def scaled_softmax(self, x, scale):
        rows = _rows(x)
        out = np.empty(rows.shape, dtype=x.dtype)
        self._start()
        if rows.shape[1] <= k.SHORT_ROW:
            self.short(rows, _row_scales(scale, x), np.empty(rows.shape[0], dtype=x.dtype), out, True)
        else:
            self.grad(rows, _row_scales(scale, x), out)
        return out.reshape(x.shape)

    def logsumexp_and_scaled_softmax(self, x, scale, keepdims: bool):
        rows = _rows(x)
        lse, out = np.empty(rows.shape[0], dtype=x.dtype), np.empty(rows.shape, dtype=x.dtype)
        self._start()
        if rows.shape[1] <= k.SHORT_ROW:
            self.short(rows, _row_scales(scale, x), lse, out, True)
        else:
            self.both(rows, _row_scales(scale, x), lse, out)
        return lse.reshape(x.shape[:-1] + ((1,) if keepdims else ())), out.reshape(x.shape)


BACKEND = NumbaBackend()
