"""The NumPy backend (the default): the executor of `numpy_program`, loops of `numpy_loops`,
and `check_finite` by the checking executor of `provenance`."""

from __future__ import annotations

from ..errors import StableGradError
from ..graph.basic import Op
from ..graph.fgraph import FunctionGraph
from . import numpy_loops  # noqa: F401  (registers how a loop runs: graph.hooks.run_loop)
from .interface import Options
from .numpy_program import Program, runs_whole
from .provenance import CheckedProgram


class NumpyBackend:
    name = "numpy"

    def runs_whole(self, op: Op) -> bool:
        return runs_whole(op)

    def compile(self, graph: FunctionGraph, options: Options) -> Program | CheckedProgram:
        if options.shard:
            raise StableGradError(f"function: shard= needs backend='jax' (got backend={self.name!r})")
        program = Program(graph.inputs, graph.outputs)
        if options.check_finite is None:
            return program
        return CheckedProgram(program, options.check_finite, graph.outputs)


BACKEND = NumpyBackend()
