"""What a backend is: the one contract NumPy, JAX and any later backend implement.

`sg.function` runs the rewrite pipeline, then hands the result to a backend:

1. `backend.runs_whole(op)` is asked *during* optimisation, of every composite (a
   `SymbolicOp` such as `LogSumExp`): True keeps the op as one node, for a backend that
   has a fused version of it; False (the default answer) inlines its stable body.
2. `backend.compile(graph, options)` receives the optimised `FunctionGraph` — inputs,
   outputs and the nodes between them in execution order — and returns a `Program`.
3. `program.run(values)` takes one NumPy array per input (already checked and cast to the
   input's dtype by `sg.function`) and returns one array per output; `program.nodes` are
   the nodes it runs, for `Function.nodes` and tests.

An option a backend cannot honour is an error naming it, never silently dropped.
`backends/__init__.py` holds the table from `backend="..."` to each implementation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..graph.basic import Apply, Op
from ..graph.fgraph import FunctionGraph


@dataclass(frozen=True)
class Options:
    """What `sg.function` asks of a backend besides the graph."""

    #: input variable → axis to split it along over the devices (`shard=`), or None
    shard: Mapping | None = None
    #: for `check_finite=True`: given a finding (the node that first made an output inf/NaN),
    #: the recognition rewrite that would fix it, or None; None here means no checking
    check_finite: Callable[[Any], Any] | None = None
    #: `threads=`: how many threads the compiled kernels may use (None: one); only a backend
    #: whose `threads` attribute is True is given more than one
    threads: int | None = None


class Program(Protocol):
    """A compiled graph."""

    @property
    def nodes(self) -> Sequence[Apply]: ...

    def run(self, values: Sequence[np.ndarray]) -> Sequence[Any]: ...


class Backend(Protocol):
    """A place where a prepared graph runs."""

    #: the name `sg.function(..., backend=name)` selects it by
    name: str

    def runs_whole(self, op: Op) -> bool: ...

    def compile(self, graph: FunctionGraph, options: Options) -> Program: ...
