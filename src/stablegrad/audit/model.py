"""What can be audited, made uniform: a model is a way to build (inputs, outputs) for a float dtype.

Three kinds of target:

- a Python function that builds a graph from symbolic inputs (`def loss(x, w): ...`),
  with input specs such as `{"x": "float64[3,5]"}` — rebuilt for every audited dtype;
- a compiled `sg.Function` — its inputs and outputs, and its `recognition` setting;
- output variables (one or a list), with their inputs (default: every input of the graph).

A built graph is audited in another float dtype by re-typing it: float inputs and
float constants take the new dtype and every node is rebuilt (types inferred afresh).
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..compile.function import Function
from ..errors import StableGradError
from ..graph.basic import Apply, Constant, Variable, graph_inputs, toposort
from ..graph.inputs import tensor
from ..graph.types import TensorType, is_floating
from ..ops.composite import OpFromGraph
from ..ops.scan import Scan
from .scenarios import InputSpec

#: the extent given to an axis whose length is known neither statically nor from an example
DEFAULT_EXTENT = 3
SUPPORTED_FLOATS = ("float16", "float32", "float64")
_SPEC = re.compile(r"^\s*([a-z]+[0-9]*)\s*(?:\[\s*([0-9,\s]*)\])?\s*$")


class AuditError(StableGradError, ValueError):
    """The audit was asked for something it cannot do (a bad target, input spec or dtype)."""

    def __init__(self, message: str):
        super().__init__(message, location=None)

    def __str__(self) -> str:
        return self.message


@dataclass
class Model:
    """One build of the audited model: symbolic inputs, float outputs and their display names."""

    inputs: list[Variable]
    outputs: list[Variable]
    names: list[str]


def parse_spec(text: str) -> TensorType:
    """`float64[3,5]` → TensorType(float64, (3, 5)); `float32` or `float32[]` is a scalar."""
    match = _SPEC.match(text)
    if match is None:
        raise AuditError(f"cannot read the input spec {text!r}; write it like float64[3,5] (or float64 for a scalar)")
    dtype_name, dims = match.group(1), match.group(2)
    try:
        dtype = np.dtype(dtype_name)
    except TypeError:
        raise AuditError(f"unknown dtype {dtype_name!r} in {text!r}") from None
    if dtype.kind not in "fiub":
        raise AuditError(f"unsupported dtype {dtype.name!r} in {text!r} (floats, ints and bool are supported)")
    shape = tuple(int(d) for d in dims.split(",") if d.strip()) if dims else ()
    return TensorType(dtype, shape)


def check_dtypes(dtypes: Sequence) -> list[np.dtype]:
    result = []
    for d in dtypes:
        try:
            dtype = np.dtype(d)
        except TypeError:
            raise AuditError(f"unknown dtype {d!r}") from None
        if dtype.name not in SUPPORTED_FLOATS:
            raise AuditError(f"unsupported dtype {dtype.name!r} to audit (supported: {', '.join(SUPPORTED_FLOATS)})")
        result.append(dtype)
    if not result:
        raise AuditError("no dtype to audit")
    return result


def _as_type(value) -> TensorType:
    if isinstance(value, TensorType):
        return value
    if isinstance(value, Variable):
        return value.type
    if isinstance(value, str):
        return parse_spec(value)
    if isinstance(value, tuple) and len(value) == 2:
        dtype, shape = value
        return TensorType(np.dtype(dtype), tuple(shape))
    array = np.asarray(value)
    return TensorType(array.dtype, array.shape)


class Target:
    """A model to audit, independent of how it was given."""

    def __init__(self, target, inputs=None, examples: Mapping | None = None, recognition: bool | None = None):
        self.examples = dict(examples or {})
        self._fixed: Model | None = None
        self._builder: Callable | None = None
        if isinstance(target, Function):
            self.name = "function"
            self._fixed = Model(list(target.inputs), *_outputs(target.outputs, "the function"))
            self.recognition = target.recognition if recognition is None else recognition
        elif isinstance(target, Variable) or (
            isinstance(target, Sequence) and target and all(isinstance(v, Variable) for v in target)
        ):
            outs = [target] if isinstance(target, Variable) else list(target)
            ins = list(inputs) if inputs is not None else graph_inputs(outs)
            if not all(isinstance(v, Variable) for v in ins):
                raise AuditError("inputs= must list the graph's input variables when auditing outputs")
            self.name = ", ".join(v.name or "output" for v in outs)
            self._fixed = Model(ins, *_outputs(outs, "the outputs"))
            self.recognition = True if recognition is None else recognition
        elif callable(target):
            self.name = getattr(target, "__name__", "model")
            self._builder = target
            self._types = _builder_types(target, inputs, self.examples)
            self.recognition = True if recognition is None else recognition
        else:
            raise AuditError(
                f"cannot audit a {type(target).__name__}: pass output variables, an sg.Function, "
                "or a function that builds a graph"
            )

    # -- the concrete inputs ------------------------------------------------------------------------------
    def specs(self, dtype: np.dtype | None = None) -> list[InputSpec]:
        """Name, dtype and shape of every input (float inputs in `dtype` when given)."""
        if self._builder is not None:
            named = list(self._types.items())
        else:
            assert self._fixed is not None
            named = [(v.name or f"input{i}", v.type) for i, v in enumerate(self._fixed.inputs)]
        specs = []
        for name, t in named:
            example = self.examples.get(name)
            shape = tuple(
                n if n is not None else (np.shape(example)[i] if example is not None else DEFAULT_EXTENT)
                for i, n in enumerate(t.shape)
            )
            if example is not None and np.shape(example) != shape:
                raise AuditError(f"the example for {name} has shape {np.shape(example)}, the input is {t}")
            input_dtype = dtype if dtype is not None and is_floating(t.dtype) else t.dtype
            specs.append(InputSpec(name, np.dtype(input_dtype), shape))
        return specs

    def native_float(self) -> np.dtype | None:
        """The float dtype the graph was built in (None for a builder: it builds any)."""
        if self._fixed is None:
            return None
        floats = [v.dtype for v in self._fixed.inputs if is_floating(v.dtype)]
        return floats[0] if floats else None

    # -- building -------------------------------------------------------------------------------------------
    def build(self, dtype: np.dtype) -> Model:
        if self._fixed is not None:
            native = self.native_float()
            if native is None or native == dtype:
                return self._fixed
            return retype(self._fixed, dtype)
        assert self._builder is not None
        specs = self.specs(dtype)
        variables = [tensor(s.name, tuple(s.shape), s.dtype) for s in specs]
        try:
            result = self._builder(*variables)
        except StableGradError:
            raise
        except Exception as exc:
            raise AuditError(f"{self.name}{_signature(self._builder)} failed while building its graph: {exc}") from exc
        if isinstance(result, Mapping):
            outs, names = _outputs(list(result.values()), f"{self.name}()", [str(k) for k in result])
            return Model(variables, outs, names)
        outs, names = _outputs(result, f"{self.name}()")
        return Model(variables, outs, names)


def _outputs(result, what: str, given: list[str] | None = None) -> tuple[list[Variable], list[str]]:
    items = list(result) if isinstance(result, tuple | list) else [result]
    if not items or not all(isinstance(v, Variable) for v in items):
        shown = type(result).__name__
        raise AuditError(
            f"{what} returned a {shown}, not a graph: return a stablegrad Variable (or a tuple of them) "
            "built from its symbolic arguments"
        )
    floats = [v for v in items if is_floating(v.dtype)]
    if not floats:
        raise AuditError(f"{what} has no float output to audit")
    given = given or [v.name or (f"out{i}" if len(items) > 1 else "value") for i, v in enumerate(items)]
    names = [n for n, v in zip(given, items) if is_floating(v.dtype)]
    return floats, names


def _signature(fn) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(...)"


def _builder_types(fn: Callable, inputs, examples: Mapping) -> dict[str, TensorType]:
    """Input name → type for a builder function, checked against its parameters."""
    try:
        params = [
            p
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    required = [p.name for p in params if p.default is p.empty]
    names = [p.name for p in params]
    if inputs is None:
        inputs = {n: examples[n] for n in names if n in examples}
    if not isinstance(inputs, Mapping):
        inputs = dict(zip(names, inputs)) if len(list(inputs)) <= len(names) else None
        if inputs is None:
            raise AuditError(f"{fn.__name__}{_signature(fn)} takes {len(names)} inputs, more were given")
    unknown = [n for n in inputs if n not in names]
    if unknown and params:
        raise AuditError(
            f"{fn.__name__}{_signature(fn)} has no parameter {unknown[0]!r} (its parameters: {', '.join(names) or 'none'})"
        )
    missing = [n for n in required if n not in inputs]
    if missing:
        raise AuditError(
            f"{fn.__name__}{_signature(fn)}: no input given for parameter {missing[0]!r} (e.g. --input {missing[0]}=float64[3])"
        )
    order = names if params else list(inputs)
    return {n: _as_type(inputs[n]) for n in order if n in inputs}


# -- re-typing a built graph ---------------------------------------------------------------------------------------
class _CannotRetype(AuditError):
    pass


def retype(model: Model, dtype: np.dtype) -> Model:
    """The same graph with float inputs and float constants in `dtype` (nodes rebuilt, types re-inferred)."""
    mapping: dict[int, Variable] = {}
    new_inputs = []
    for v in model.inputs:
        nv = Variable(TensorType(dtype, v.type.shape), name=v.name) if is_floating(v.dtype) else v
        mapping[v.id] = nv
        new_inputs.append(nv)

    def get(v: Variable) -> Variable:
        if v.id in mapping:
            return mapping[v.id]
        if isinstance(v, Constant) and is_floating(v.dtype) and v.dtype != dtype:
            mapping[v.id] = Constant(v.data.astype(dtype), name=v.name)
            return mapping[v.id]
        return v

    for node in toposort(model.outputs, stop=model.inputs):
        if isinstance(node.op, Scan):
            raise _CannotRetype(
                "the graph has a loop (scan); pass a function that builds the model to audit other dtypes"
            )
        args = [get(v) for v in node.inputs]
        if isinstance(node.op, OpFromGraph):
            outs = node.op(*args)
            outs = [outs] if isinstance(outs, Variable) else list(outs)
        else:
            outs = list(Apply(node.op, args, node.op.infer(*args), node.location).outputs)
        for old, new in zip(node.outputs, outs):
            mapping[old.id] = new
    return Model(new_inputs, [get(o) for o in model.outputs], list(model.names))


def size_of(spec: InputSpec) -> int:
    return math.prod(spec.shape)
