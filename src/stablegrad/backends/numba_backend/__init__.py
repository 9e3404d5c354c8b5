"""The Numba backend (`backend="numba"`, needs the `numba` extra): the NumPy executor, with
compiled kernels where a node has one.

So far the kernels are the logsumexp family's over the last axis (`logsumexp` and its
gradient, the softmax), in two or three passes over each row instead of a dozen NumPy
calls; every other node runs as on the NumPy backend.  Kernels are compiled on first use
and cached on disk by Numba.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ...errors import StableGradError
from ...graph.basic import Apply, Op
from ...graph.fgraph import FunctionGraph
from ...ops.stable import LogSumExp
from ...ops.stable.logsumexp import LogSumExpGrad
from ..interface import Options
from ..numpy_program import Program, runs_whole
from ..provenance import CheckedProgram
from . import kernels as k

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


class NumbaBackend:
    name = "numba"

    def runs_whole(self, op: Op) -> bool:
        return runs_whole(op)  # the NumPy backend's composites: the kernels replace some of them

    def compile(self, graph: FunctionGraph, options: Options) -> Program | CheckedProgram:
        if options.shard:
            raise StableGradError(f"function: shard= needs backend='jax' (got backend={self.name!r})")
        program = Program(graph.inputs, graph.outputs, kernels=kernel_for)
        if options.check_finite is None:
            return program
        return CheckedProgram(program, options.check_finite, graph.outputs)


def kernel_for(node: Apply) -> Callable | None:
    """A compiled kernel for this node, or None to run it as the NumPy backend does."""
    op, (x, *rest) = node.op, node.inputs
    if x.dtype not in _FLOATS or x.ndim == 0 or rest:
        return None
    over_last_axis = tuple(a % x.ndim for a in getattr(op, "axes", ())) == (x.ndim - 1,)
    if isinstance(op, LogSumExp) and op.plain and over_last_axis:
        return _rowwise(k.logsumexp_rows, reduces=True, keepdims=op.keepdims)
    if isinstance(op, LogSumExpGrad) and over_last_axis:
        return _rowwise(k.softmax_rows, reduces=False, keepdims=True)
    return None


def _rowwise(kernel: Callable, reduces: bool, keepdims: bool) -> Callable:
    """The kernel applied to x viewed as rows of its last axis; the result in x's layout."""

    def run(x):
        n = x.shape[-1]
        rows = np.ascontiguousarray(x).reshape(math.prod(x.shape[:-1]), n)
        out = np.empty(rows.shape[0] if reduces else rows.shape, dtype=x.dtype)
        kernel(rows, out)
        if not reduces:
            return out.reshape(x.shape)
        return out.reshape(x.shape[:-1] + ((1,) if keepdims else ()))

    return run


BACKEND = NumbaBackend()
