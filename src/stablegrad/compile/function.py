"""`sg.function`: compile symbolic outputs of symbolic inputs into a NumPy-returning callable."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from .. import backends
from ..autodiff import as_written, derivation_changes
from ..backends import wide_range
from ..backends.provenance import advice_at
from ..errors import InputError, format_location
from ..graph import hooks, names
from ..graph.basic import Constant, Variable, graph_inputs, paused_gc
from ..graph.fgraph import FunctionGraph
from ..graph.types import is_inexact, is_numeric
from ..progress import Stages
from ..rewrite.engine import ChangeLog, Kind
from ..rewrite.pipeline import optimize

#: seconds of compiling after which a terminal shows what is going on (progress.Stages)
SLOW = 2.0


class Function:
    """`sg.function(inputs, outputs)`: `outputs` (one variable or a list) compiled as a function of `inputs`.

    Call it with one array per input; it returns arrays.  Arguments are checked
    before anything runs: their number, and for each its rank, dtype kind and every
    statically known extent.  Arrays of a different dtype of the same kind (float64
    data for a float32 input) are cast; a float array for an integer input is an error.

    Where an output entry is inf or NaN from finite inputs in a graph that acts entry by
    entry, that entry is evaluated again without a float range to leave (`backends/wide_range.py`):
    `exp(-t*t) * t**3` at t = 1e103 is 0, value and gradient, not 0·inf.

    `recognition=False` keeps the formulas exactly as written.  `check_finite=True` is
    a debug mode: a call whose outputs pick up an inf or NaN that the inputs did not
    have raises `NonFiniteError` naming the node that first produced it (from finite
    operands), its source line, and the stable primitive that would fix it.

    `backend="jax"` compiles the whole graph into one `jax.jit` function (needs the
    `jax` extra); with it, `shard={x: 0}` splits input x along axis 0 over all JAX devices.
    `backend="numba"` compiles fused CPU kernels (needs the `numba` extra); with it,
    `threads=n` splits their rows over n threads (the values agree to an ulp or two).

    Inputs with named dims also take `xarray.DataArray` arguments, matched by dim name
    whatever their axis order; `xarray=True` returns each output that has named dims as a
    DataArray too (needs xarray installed).

    >>> import numpy as np, stablegrad as sg
    >>> x = sg.vector("x")
    >>> f = sg.function([x], sg.sum(sg.exp(x)))
    >>> float(f(np.zeros(3)))
    3.0
    """

    @paused_gc  # compiling builds a graph of long-lived objects; see paused_gc
    @names.positional()  # what compiling builds is library code: by position (graph.names)
    def __init__(
        self,
        inputs: Sequence[Variable],
        outputs,
        backend: str = "numpy",
        recognition: bool = True,
        shard=None,
        check_finite: bool = False,
        threads: int | None = None,
        xarray: bool = False,
    ):
        if isinstance(inputs, Variable) or not isinstance(inputs, Iterable):
            raise InputError(f"function: inputs must be a list of symbolic inputs, got {_what(inputs)}; write [x]")
        self.inputs = list(inputs)
        self._single = isinstance(outputs, Variable)
        self.outputs = [outputs] if self._single else list(outputs)
        _check_signature(self.inputs, self.outputs)
        self._dataarray = _dataarray_type() if xarray else None
        self.recognition = recognition
        self.backend = backend
        # one graph, one meaning: a gradient of a recognised formula in `outputs` is, without
        # recognition, taken of the formula as written; with it, its rewrites are listed too
        self.changes = ChangeLog(derivation_changes(self.outputs) if recognition else [])
        outputs = self.outputs if recognition else as_written(self.outputs)
        target = backends.backend(backend)
        if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
            raise InputError(f"function: threads= must be a positive int, got {threads!r}")
        if threads not in (None, 1) and not getattr(target, "threads", False):
            raise InputError(f"function: threads= needs backend='numba' (got backend={backend!r})")
        with Stages(f"sg.function: compiling (backend={backend!r})", delay=SLOW) as stages:
            stages.stage("recognition and rewrites")
            optimized = optimize(outputs, self.inputs, recognition, self.changes, target.runs_whole)
            self.graph = FunctionGraph(self.inputs, optimized)
            advise = _advice_for(self) if check_finite else None
            stages.stage("generating code")
            options = backends.Options(shard=shard, check_finite=advise, threads=threads)
            self._program = target.compile(self.graph, options)
        # inf and NaN entries evaluated again without a range to leave (backends/wide_range.py);
        # check_finite reports them as they come
        rescues = recognition and not check_finite
        self._rescue = wide_range.rescuer(self.graph) if rescues else None
        self._called = False
        self._checks = [_argument_check(i, v) for i, v in enumerate(self.inputs)]

    def explain(self, file=None) -> str:
        """Which rewrites fired, each with the user's source line, e.g.

        `model.py:12  log(sum(exp(x), axis=1))  →  logsumexp(x, axis=1)   [logsumexp_from_naive]`
        """
        return _explain_text(self.changes, file)

    @property
    def nodes(self):
        """The nodes that run, in order."""
        return self._program.nodes

    def __call__(self, *args, **named):
        if named:
            args = self._by_name(args, named)
        checks = self._checks
        if len(args) != len(checks):
            names = ", ".join(_name(v, i) for i, v in enumerate(self.inputs))
            raise InputError(f"function: expected {len(self.inputs)} arguments ({names}), got {len(args)}")
        values = [check(a) for check, a in zip(checks, args)]
        if self._called:
            results = self._program.run(values)
        else:  # JAX and Numba compile for the arguments' types on the first call
            with Stages(f"sg.function: first call (backend={self.backend!r} compiles for these arguments)", delay=SLOW):
                results = self._program.run(values)
            self._called = True
        if self._rescue is not None:
            results = self._rescue(values, results)
        dataarray = self._dataarray
        if dataarray is not None:
            arrays = [np.asarray(r) for r in results]
            arrays = [a if v.dims is None else dataarray(a, dims=v.dims) for a, v in zip(arrays, self.outputs)]
            return arrays[0] if self._single else arrays
        if self._single:  # (the common case first: a call on small arrays costs microseconds)
            return np.asarray(results[0])
        return [np.asarray(r) for r in results]

    def _by_name(self, args: tuple, named: dict) -> tuple:
        """The arguments in input order, from positional ones and ones named by input name."""
        slots: list = [*args, *[_MISSING] * (len(self.inputs) - len(args))]
        for name, value in named.items():
            matches = [i for i, v in enumerate(self.inputs) if v.name == name]
            if not matches:
                names = ", ".join(_name(v, i) for i, v in enumerate(self.inputs))
                raise InputError(f"function: no input is named {name!r} (inputs: {names})")
            if len(matches) > 1:
                raise InputError(f"function: {len(matches)} inputs are named {name!r}; pass them by position")
            if matches[0] < len(args):
                raise InputError(f"function: input {name!r} is given twice, by position and by name")
            slots[matches[0]] = value
        missing = [_name(v, i) for i, (v, a) in enumerate(zip(self.inputs, slots)) if a is _MISSING]
        if missing:
            raise InputError(f"function: missing argument(s) {', '.join(missing)}")
        return tuple(slots)


_MISSING = object()


def _what(value) -> str:
    """How an argument reads in an error: its type, and its value when short."""
    text = repr(value)
    return f"{type(value).__name__} {text}" if len(text) <= 40 else type(value).__name__


#: `sg.function(inputs, outputs, ...)`: the NumPy-style lower-case name users call
function = Function


def _advice_for(f: Function):
    """For `check_finite=True`: the recognition rewrite that repairs a finding's line, if any."""

    def advise(finding):
        if f.recognition:
            return None  # the rewrites have run already; none repairs this line
        changes = Function(f.inputs, f.outputs, recognition=True).changes.changes
        return advice_at(finding.location, changes, near=finding.expression)

    return advise


def explain(outputs, file=None) -> str:
    """What the rewrite pipeline does to `outputs` (one variable or a list), one line per rewrite.

    >>> import stablegrad as sg
    >>> x = sg.vector("x")
    >>> "log(exp(x))  →  x   [log_of_exp]" in sg.explain(sg.log(sg.exp(x)))
    True
    """
    outs = [outputs] if isinstance(outputs, Variable) else list(outputs)
    log = ChangeLog(derivation_changes(outs))
    optimize(outs, graph_inputs(outs), True, log)
    return _explain_text(log, file)


def _explain_text(log: ChangeLog, file) -> str:
    counted = [c for c in log.changes if c.kind is Kind.GUARD or c.note]
    shown = [c for c in log.changes if c.kind is not Kind.INLINING and not (c.kind is Kind.GUARD or c.note)]
    # (a formula and its gradient are rewritten alike: each rewrite is listed once)
    lines = list(dict.fromkeys(str(c) for c in shown))
    # guards, and rules with a note, fire on the nodes of pullbacks too: one line per source line
    guarded = Counter((c.location, c.rule, c.note) for c in counted)
    lines += [
        f"{format_location(location)}  {count} {note}   [{rule}]" for (location, rule, note), count in guarded.items()
    ]
    lines = lines or ["no rewrites changed the formulas as written"]
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


def _argument_check(i: int, var: Variable) -> Callable[[object], np.ndarray | np.generic]:
    """The check of argument i, with the common case (an array of the right dtype and shape) first:
    a call on small arrays costs a few microseconds, and the full check would be half of them."""
    t = var.type
    dtype, shape, static = t.dtype, t.shape, None not in t.shape
    # a NumPy scalar of the dtype, for a 0-d input, is taken as it is: ufuncs on it take
    # NumPy's scalar path (3.5× faster than on a 0-d array), and give the same values
    scalar = dtype.type if shape == () else None

    def check(value) -> np.ndarray | np.generic:
        if type(value) is np.ndarray:
            array = value
        elif type(value) is scalar:
            return value
        elif type(value) is float and scalar is np.float64:  # (a Python float is a float64 exactly)
            return np.float64(value)
        elif isinstance(value, int | float | np.generic):  # (a number is an array, cheaply)
            array = np.asarray(value)
        else:
            return _check_argument(i, var, value)
        if array.dtype == dtype and (array.shape == shape if static else t.accepts(array.shape)):
            return array
        return _check_argument(i, var, value)

    return check


def _check_argument(i: int, var: Variable, value) -> np.ndarray:
    t = var.type
    if _is_dataarray(value):
        value = _by_dims(i, var, value)
    if isinstance(value, Variable):
        raise InputError(
            f"function: argument {i} ({_name(var, i)}) is a symbolic tensor ({value}); a compiled function "
            "takes values (arrays, numbers) — to build graph, call the ops on it instead"
        )
    try:
        array = np.asarray(value)
        if array.dtype == object and isinstance(value, int) and is_inexact(t.dtype):  # past int64: floats hold it
            array = np.asarray(value, dtype=t.dtype)
    except (ValueError, TypeError, OverflowError) as exc:
        raise InputError(f"function: argument {i} ({_name(var, i)}) is not an array NumPy can read: {exc}") from None
    if not is_numeric(array.dtype):  # objects, strings, bytes, dates, records: not numbers
        raise InputError(
            f"function: argument {i} ({_name(var, i)}) must be an array of {t.dtype.name}, got {_what(value)}"
        )
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
        converted = _cast_exactly(array, t.dtype)
        if converted is None:
            raise InputError(
                f"function: argument {i} ({_name(var, i)}) is {t.dtype.name}, but the {array.dtype.name} values "
                f"given reach {_extremes(array)}, past its range (they would wrap or overflow)"
            )
        array = converted
    return array


def _dataarray_type():
    try:
        import xarray
    except ImportError:
        raise InputError("function: xarray=True returns xarray.DataArray outputs; install xarray first") from None
    return xarray.DataArray


def _is_dataarray(value) -> bool:
    """An xarray.DataArray, told by its attributes (xarray is optional and not imported here)."""
    return isinstance(getattr(value, "dims", None), tuple) and hasattr(value, "transpose") and hasattr(value, "values")


def _by_dims(i: int, var: Variable, value) -> np.ndarray:
    """A DataArray's values in the axis order of a named input (positional inputs take them as they are)."""
    if var.dims is None:
        return value.values
    if sorted(value.dims) != sorted(var.dims):
        raise InputError(
            f"function: argument {i} ({_name(var, i)}) has dims {var.dims!r}; the DataArray given has {value.dims!r}"
        )
    return value.transpose(*var.dims).values


def _cast_exactly(array: np.ndarray, dtype: np.dtype) -> np.ndarray | None:
    """`array` as `dtype`, or None where a value would wrap (integers) or overflow to inf (floats)."""
    if array.size and dtype.kind in "iu" and array.dtype.kind in "iub":
        info = np.iinfo(dtype)
        if int(array.min()) < info.min or int(array.max()) > info.max:
            return None
    with np.errstate(over="ignore"):
        converted = array.astype(dtype)
    if is_inexact(dtype) and is_inexact(array.dtype) and np.any(np.isfinite(array) & ~np.isfinite(converted)):
        return None
    return converted


def _extremes(array: np.ndarray) -> str:
    finite = array[np.isfinite(array)] if is_inexact(array.dtype) else array.ravel()
    return f"[{finite.min()}, {finite.max()}]"


# `x.eval()` and composites' `perform` compile through it (graph and ops cannot import it)
hooks.function.provide(function)
