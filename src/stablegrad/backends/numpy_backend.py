"""The NumPy backend (the default): the executor of `numpy_program`, loops of `numpy_loops`,
logsumexp's pullback paired with its forward by `row_pairs` (run by `numpy_fused`), and
`check_finite` by the checking executor of `provenance`."""

from __future__ import annotations

from ..errors import StableGradError
from ..graph.basic import Op
from ..graph.fgraph import FunctionGraph
from . import numpy_loops  # noqa: F401  (registers how a loop runs: graph.hooks.run_loop)
from .interface import Options
from .numpy_program import Program, runs_whole
from .provenance import CheckedProgram
from .row_pairs import fused


class NumpyBackend:
    name = "numpy"

    def runs_whole(self, op: Op) -> bool:
        return runs_whole(op)

    def compile(self, graph: FunctionGraph, options: Options) -> Program | CheckedProgram:
        if options.shard:
            raise StableGradError(f"function: shard= needs backend='jax' (got backend={self.name!r})")
        if options.check_finite is None:
            # logsumexp's pullback (and the logsumexp beside it) as one node: one pass over x
            return Program(graph.inputs, fused(graph))
        # (unfused: the checking executor names the node of the user's graph that went non-finite)
        return CheckedProgram(Program(graph.inputs, graph.outputs), options.check_finite, graph.outputs)


BACKEND = NumpyBackend()
