"""The JAX backend (optional extra: `pip install stablegrad[jax]`); imported only for `backend="jax"`."""

from __future__ import annotations

from ...errors import StableGradError
from ...graph.basic import Op
from ...graph.fgraph import FunctionGraph
from ..interface import Options
from .lowerings import UFUNCS
from .program import DATA_AXIS, Program, check_shard
from .trace import LOWERINGS, Plan, evaluate, lowering_for, lowering_of
from .whole import runs_whole


class JaxBackend:
    name = "jax"

    def runs_whole(self, op: Op) -> bool:
        return runs_whole(op)

    def compile(self, graph: FunctionGraph, options: Options) -> Program:
        if options.check_finite is not None:  # the checking executor steps through NumPy programs
            raise StableGradError("function: check_finite=True needs backend='numpy' (got backend='jax')")
        return Program(graph.inputs, graph.outputs, shard=options.shard)


BACKEND = JaxBackend()
