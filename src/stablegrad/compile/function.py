"""`sg.function`: compile symbolic outputs of symbolic inputs into a NumPy-returning callable."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import InputError, StableGradError, format_location
from ..graph.basic import Constant, Variable, graph_inputs
from ..graph.fgraph import FunctionGraph
from ..rewrite.engine import ChangeLog
from ..rewrite.pipeline import optimize


class Function:
    """A compiled graph.  Call it with one array per input; it returns arrays.

    Arguments are checked before anything runs: their number, and for each its
    rank, dtype kind and every statically known extent.  Arrays of a different
    dtype of the same kind (float64 data for a float32 input) are cast; a float
    array for an integer input is an error.
    """

    def __init__(self, inputs: Sequence[Variable], outputs, backend: str = "numpy", recognition: bool = True):
        self.inputs = list(inputs)
        self._single = isinstance(outputs, Variable)
        self.outputs = [outputs] if self._single else list(outputs)
        _check_signature(self.inputs, self.outputs)
        self.recognition = recognition
        self.backend = backend
        self.changes = ChangeLog()
        self.graph = FunctionGraph(self.inputs, optimize(self.outputs, self.inputs, recognition, self.changes))
        if backend == "numpy":
            from ..backends.numpy_backend import Program

            self._program = Program(self.inputs, self.graph.outputs)
        else:
            raise StableGradError(f"function: unknown backend {backend!r} (available: 'numpy')")

    def explain(self, file=None) -> str:
        """Which rewrites fired, each with the user's source line, e.g.

        `model.py:12  log(sum(exp(x), axis=1))  →  logsumexp(x, axis=1)   [logsumexp_from_naive]`
        """
        return _explain_text(self.changes, file)

    @property
    def nodes(self):
        """The nodes that run, in order."""
        return self._program.nodes

    def __call__(self, *args):
        if len(args) != len(self.inputs):
            names = ", ".join(_name(v, i) for i, v in enumerate(self.inputs))
            raise InputError(f"function: expected {len(self.inputs)} arguments ({names}), got {len(args)}")
        values = [_check_argument(i, v, a) for i, (v, a) in enumerate(zip(self.inputs, args))]
        results = self._program.run(values)
        results = [np.asarray(r) for r in results]
        return results[0] if self._single else results


def function(inputs: Sequence[Variable], outputs, backend: str = "numpy", recognition: bool = True) -> Function:
    """Compile `outputs` (one variable or a list) as a function of `inputs`.

    >>> import numpy as np, stablegrad as sg
    >>> x = sg.vector("x")
    >>> f = sg.function([x], sg.sum(sg.exp(x)))
    >>> float(f(np.zeros(3)))
    3.0
    """
    return Function(inputs, outputs, backend=backend, recognition=recognition)


def explain(outputs, file=None) -> str:
    """What the rewrite pipeline does to `outputs` (one variable or a list), one line per rewrite.

    >>> import stablegrad as sg
    >>> x = sg.vector("x")
    >>> print(sg.explain(sg.log(sg.exp(x))), end="")  # doctest: +ELLIPSIS
    ...log(exp(x))  →  x   [log_of_exp]
    """
    outs = [outputs] if isinstance(outputs, Variable) else list(outputs)
    log = ChangeLog()
    optimize(outs, graph_inputs(outs), True, log)
    return _explain_text(log, file)


def _explain_text(log: ChangeLog, file) -> str:
    from ..rewrite.engine import Kind

    shown = [c for c in log.changes if c.kind is not Kind.INLINING]
    lines = [str(c) for c in shown] or ["no rewrites changed the formulas as written"]
    text = "\n".join(lines) + "\n"
    if file is not None:
        file.write(text)
    return text


def _name(v: Variable, i: int) -> str:
    return repr(v.name) if v.name else f"#{i}"


def _check_signature(inputs: list[Variable], outputs: list[Variable]) -> None:
    for i, v in enumerate(inputs):
        if not isinstance(v, Variable) or isinstance(v, Constant) or v.owner is not None:
            raise InputError(f"function: inputs[{i}] must be a symbolic input (sg.tensor, sg.vector, ...), got {v!r}")
    if len({v.id for v in inputs}) != len(inputs):
        raise InputError("function: an input is listed twice")
    for i, o in enumerate(outputs):
        if not isinstance(o, Variable):
            raise InputError(f"function: outputs[{i}] must be a symbolic Variable, got {type(o).__name__}")
    given = {v.id for v in inputs}
    for v in graph_inputs(outputs):
        if v.id not in given:
            created = f" (created at {format_location(v.location)})" if v.location is not None else ""
            raise InputError(
                f"function: the outputs depend on input {v.name or repr(v)}, which is not among the inputs{created}"
            )


def _check_argument(i: int, var: Variable, value) -> np.ndarray:
    array = np.asarray(value)
    t = var.type
    if array.ndim != t.ndim:
        raise InputError(
            f"function: argument {i} ({_name(var, i)}) must have {t.ndim} dimensions ({t}), "
            f"got an array of shape {array.shape}"
        )
    if not t.accepts(array.shape):
        raise InputError(f"function: argument {i} ({_name(var, i)}) must have shape {t}, got {array.shape}")
    if array.dtype != t.dtype:
        if not np.can_cast(array.dtype, t.dtype, "same_kind"):
            raise InputError(
                f"function: argument {i} ({_name(var, i)}) must be {t.dtype.name}, got {array.dtype.name} "
                "(which does not convert without changing kind)"
            )
        array = array.astype(t.dtype)
    return array
