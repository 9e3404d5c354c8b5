"""Readable text for graphs: one-line expressions (for `explain`) and `dprint` listings."""

from __future__ import annotations

import dataclasses
import sys

from . import names
from .basic import Constant, Variable, toposort

_INFIX = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "power": "**"}
#: ops whose `axes` are not axes of their operand (a permutation, new positions)
_LAYOUT = {"transpose", "expand_dims"}


def _op_label(op, dims: names.Dims | None = None) -> tuple[str, list[str]]:
    """The op's name and its parameters as `name=value` (axes of a named operand as `dim=`)."""
    params = []
    for field in dataclasses.fields(op) if dataclasses.is_dataclass(op) else ():
        if not field.repr:
            continue
        name, value = field.name, getattr(op, field.name)
        if value == field.default and name not in ("axes", "axis"):
            continue
        named = _dim_names(value, dims) if name in ("axes", "axis") and op.name not in _LAYOUT else None
        if named is not None:
            params.append(f"dim={named!r}")
            continue
        if name in ("axes", "axis") and isinstance(value, tuple) and len(value) == 1:
            value = value[0]
        if name == "keepdims" and not value:
            continue
        params.append(f"{'axis' if name == 'axes' else name}={value!r}")
    return op.name, params


def _dim_names(axes, dims: names.Dims | None):
    """Axes of a named operand as its dim names (one, or a tuple); None where it has no names."""
    axes = axes if isinstance(axes, tuple) else (axes,)
    if dims is None or not all(isinstance(a, int) and 0 <= a < len(dims) for a in axes):
        return None
    chosen = tuple(dims[a] for a in axes)
    return chosen[0] if len(chosen) == 1 else chosen


def expression(v: Variable, depth: int = 4, bare: bool = True) -> str:
    """v as a nested expression, e.g. `log(sum(exp(x), axis=1))`, cut off below `depth`.

    `bare`: v stands alone or as a function argument, so an infix form needs no parentheses.
    """
    if isinstance(v, Constant):
        return repr(v.data.item()) if v.data.size == 1 else f"const{tuple(v.data.shape)}"
    if v.owner is None:
        return v.name or "?"
    if depth == 0:
        return "…"
    node = v.owner
    name, params = _op_label(node.op, node.inputs[0].dims if node.inputs else None)
    if name in _INFIX and len(node.inputs) == 2:
        a, b = (expression(x, depth - 1, bare=False) for x in node.inputs)
        text = f"{a} {_INFIX[name]} {b}"
        return text if bare else f"({text})"
    args = [expression(x, depth - 1) for x in node.inputs]
    if name == "negative":
        return f"-{expression(node.inputs[0], depth - 1, bare=False)}"
    suffix = f"[{v.index}]" if len(node.outputs) > 1 else ""
    return f"{name}({', '.join(args + params)}){suffix}"


def dprint(outputs, file=None) -> None:
    """Print the graph of `outputs` (variables, or a compiled `sg.function`: the graph it runs),
    one node a line, in execution order, to `file` (default: standard output).

    >>> import stablegrad as sg
    >>> x = sg.vector("x")
    >>> sg.dprint(sg.exp(x) + 1)
    %0 = exp(x)  : float64[?]
    %1 = add(%0, 1.0)  : float64[?]
    """
    print(listing(outputs), end="", file=file if file is not None else sys.stdout)


def listing(outputs) -> str:
    """What `dprint` prints, as a string."""
    graph = getattr(outputs, "graph", None)  # a compiled function: its optimised graph
    if graph is not None and hasattr(graph, "outputs"):
        outputs = graph.outputs
    outs = [outputs] if isinstance(outputs, Variable) else list(outputs)
    labels: dict[int, str] = {}

    def ref(v: Variable) -> str:
        if v.id in labels:
            return labels[v.id]
        return expression(v, 0) if v.owner is None or isinstance(v, Constant) else "?"

    lines = []
    for node in toposort(outs):
        for o in node.outputs:
            labels[o.id] = f"%{len(labels)}"
        name, params = _op_label(node.op, node.inputs[0].dims if node.inputs else None)
        targets = ", ".join(labels[o.id] for o in node.outputs)
        types = ", ".join(f"{o.dtype.name}[{names.describe(o.dims, o.type.shape)}]" for o in node.outputs)
        lines.append(f"{targets} = {name}({', '.join([ref(x) for x in node.inputs] + params)})  : {types}")
    return "\n".join(lines) + "\n"
