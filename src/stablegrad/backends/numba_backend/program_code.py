"""A NumPy-backend program as straight Numba code: a buffer per value, a loop nest per node.

Used for a scan's body inside its compiled loop (`scan_loop`).  Every value has a static
shape; a node's output is a buffer of that shape, allocated once (`setup`), written by the
node's loop nest (`body`); views (expand_dims, squeeze, reshape, basic indexing) are views.
Nodes: elementwise ops (the scalar forms of `loops`), broadcast_to, sums and `reduce_to`,
updates at a basic index, and plain logsumexp and its gradient over any axes, computed as
the stable body computes them (the max's ties counted apart, -inf rows, +inf entries, NaN).
A program with any other node, or a shape the types leave open (a 0-d value, too), gives None.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from ...graph.basic import Apply
from ...ops.elementwise import Maximum
from ...ops.indexing import ARRAY, Index, IndexUpdate
from ...ops.reduction import Sum
from ...ops.shape import BroadcastTo, ExpandDims, ReduceTo, Reshape, Squeeze
from ...ops.stable import LogSumExp
from ...ops.stable._common import MaxShift
from ...ops.stable.logsumexp import LogSumExpGrad
from ..numpy_program import Program
from .loop_source import literal_text, scalar_expression
from .loops import scalar_form

_MAX = cast(str, scalar_form(Maximum()))  # NaN wins, as np.maximum

_VIEWS = (ExpandDims, Squeeze, Reshape)
_SHAPED = (Reshape, BroadcastTo, ReduceTo)  # ops whose inputs after the first are extents

HEADER = [
    "import math",
    "import numba",
    "import numpy as np",
    "",
    "from stablegrad.backends.numba_backend.kernels import column_logsumexp, exp, exp_shifted_along, exp_shifted_down",
    "",
    "",
    '@numba.njit(cache=True, nogil=True, error_model="numpy")',
]


@dataclass
class Code:
    names: dict[int, str]  # slot → the name of its value in the code
    setup: list[str]  # buffers, allocated once
    body: list[str]  # the nodes, in order
    buffers: set[str]  # names that are buffers of the code's own (not inputs or views of them)
    #: the nodes that read no varying input, in order: a loop runs them once, before its first step
    invariant: list[str] = field(default_factory=list)


def array_constants(program: Program) -> list[tuple[int, np.ndarray]]:
    """The program's constants that are passed in as arrays (one-entry ones are literals)."""
    return [(s, np.asarray(d)) for s, d in program.constants if np.size(d) != 1]


def translate(program: Program, named: dict[int, str], varying: Iterable[int] = ()) -> Code | None:
    """The program's nodes as code, its inputs under the names in `named` (arrays constants
    are `k<slot>`), or None where it has a node or a shape this module has no code for.
    Nodes that read none of the `varying` slots, directly or through other nodes, go to
    `invariant` (a loop's closed-over `log(A)`: computed once, not at every step)."""
    types: dict[int, tuple] = {}
    names: dict[int, str] = dict(named)
    literals = set()
    for s, data in program.constants:
        if np.size(data) == 1:
            names[s] = literal_text(np.asarray(data).reshape(()))
            literals.add(s)
        else:
            names[s] = f"k{s}"
    for node, ins, out in _steps(program):
        data = ins[:1] if isinstance(node.op, _SHAPED) else ins  # (the rest give a shape)
        for s, v in [*zip(data, node.inputs), *zip(out, node.outputs)]:
            types[s] = (v.type.shape, v.dtype)
            if None in v.type.shape or (not v.type.shape and s not in literals):
                return None  # (a 0-d array: Numba's scalar and array code differ; NumPy runs it)
    for s in literals:  # a one-entry constant is a number in the code, whatever its shape
        if s in types:
            types[s] = ((), types[s][1])
    code = Code(names, [], [], set())
    varying = set(varying)
    for node, ins, out in _steps(program):
        start = len(code.body)
        if not _node(node, ins, out, types, code):
            return None
        if any(s in varying for s in ins):
            varying.update(out)
        else:
            code.invariant.extend(code.body[start:])
            del code.body[start:]
    return code


def _steps(program: Program):
    for _fn, ins, out, single, _frees, node in program.steps:
        yield node, ins, ([out] if single else out)


def _node(node: Apply, ins: list[int], out: list[int], types: dict, code: Code) -> bool:
    """Append the node's code; False where there is none."""
    op, names = node.op, code.names
    o = out[0]
    view = _view(node, names[ins[0]], types[o][0])
    if view is not None:
        names[o] = f"v{o}"
        code.body.append(f"v{o} = {view}")
        return True
    for s in out:
        names[s] = f"v{s}"
        code.buffers.add(f"v{s}")
        code.setup.append(f"v{s} = np.empty({_shape_text(types[s][0])}, dtype=np.{types[s][1].name})")
    x, x_type = names[ins[0]], types[ins[0]]
    if not x_type[0] and scalar_form(op) is None and not isinstance(op, BroadcastTo | IndexUpdate):
        return False  # (the ops over axes below take arrays)
    if (isinstance(op, LogSumExp) and op.plain) or isinstance(op, LogSumExpGrad):
        setup, lines = _logsumexp_code(op, x, x_type, f"v{o}", types[o])
    elif isinstance(op, IndexUpdate) and ARRAY not in op.spec and None not in op.spec:
        setup, lines = [], _update_code(op, ins, o, types, names)
    else:
        data = ins[:1] if isinstance(op, _SHAPED) else ins  # (the rest give a shape, already known)
        found = _node_code(node, [names[s] for s in data], [types[s] for s in data], f"v{o}", types[o])
        if found is None or len(out) != 1:
            return False
        setup, lines = [], found
    code.setup.extend(setup)
    code.body.extend(lines)
    return True


def _view(node: Apply, x: str, shape: tuple) -> str | None:
    """A node that only looks at its operand differently, as the expression of the view."""
    op = node.op
    if not x.isidentifier():  # a one-entry constant, written as a number
        return None
    if isinstance(op, _VIEWS) and shape:
        return f"{x}.reshape({_shape_text(shape)})"
    if isinstance(op, Index) and ARRAY not in op.spec and None not in op.spec and shape:
        return f"{x}[{_basic_index(op.spec)}]"
    return None


def _basic_index(spec: tuple) -> str:
    parts = []
    for entry in spec:
        if isinstance(entry, tuple):
            parts.append(":".join("" if v is None else str(v) for v in entry))
        else:
            parts.append(str(entry))
    return ", ".join(parts) + ","


def _update_code(op: IndexUpdate, ins: list[int], o: int, types: dict, names: dict) -> list[str]:
    """A copy of x with x[index] set to or incremented by v (broadcast), at a basic index."""
    x = names[ins[0]]
    shape = _indexed_shape(types[o][0], op.spec)
    idx = [f"i{a}" for a in range(len(shape))]
    value = _at(names[ins[1]], types[ins[1]][0], shape, idx)
    assign = "+=" if op.mode == "add" else "="
    if not shape:  # one entry
        return [f"v{o}[:] = {x}", f"v{o}[{_basic_index(op.spec)}] {assign} {value}"]
    target = f"v{o}_at"
    lines = [f"v{o}[:] = {x}", f"{target} = v{o}[{_basic_index(op.spec)}]"]
    return lines + loop_nest(shape, "i", [f"{target}[{', '.join(idx)}] {assign} {value}"])


def _indexed_shape(shape: tuple, spec: tuple) -> tuple:
    """The shape of x[spec] for a basic spec (ints and slices)."""
    out, axis = [], 0
    for entry in spec:
        if isinstance(entry, tuple):
            out.append(len(range(*slice(*entry).indices(shape[axis]))))
        axis += 1
    return (*out, *shape[axis:])


def _shape_text(shape: tuple) -> str:
    return "(" + "".join(f"{n}, " for n in shape) + ")"


def _at(name: str, shape: tuple, out_shape: tuple, idx: list[str]) -> str:
    """The operand's entry at output index `idx` (a 0-d operand here is a literal)."""
    return name if not shape else f"{name}[{_index(shape, out_shape, idx)}]"


def _item(name: str, idx: list[str]) -> str:
    """The entry of an output buffer at `idx` (of a 0-d value: its one entry)."""
    return f"{name}[{', '.join(idx) or '0'}]"


def _index(shape: tuple, out_shape: tuple, idx: list[str]) -> str:
    """Broadcasting: the index into an operand of `shape` at output index `idx`."""
    pad = len(out_shape) - len(shape)
    return ", ".join("0" if n == 1 and out_shape[pad + a] != 1 else idx[pad + a] for a, n in enumerate(shape))


def loop_nest(shape: tuple, prefix: str, inner: list[str]) -> list[str]:
    """Loops over `shape` (indices prefix0, prefix1, ...) around `inner`."""
    lines, indent = [], ""
    for a, n in enumerate(shape):
        lines.append(f"{indent}for {prefix}{a} in range({n}):")
        indent += "    "
    return lines + [indent + line for line in inner]


def _node_code(node: Apply, ins: list[str], in_types: list, out: str, out_type) -> list[str] | None:
    op = node.op
    shape = out_type[0]
    idx = [f"i{a}" for a in range(len(shape))]
    if scalar_form(op) is not None and len(node.outputs) == 1:
        value = scalar_expression(node, [_at(name, t[0], shape, idx) for name, t in zip(ins, in_types)])
        return loop_nest(shape, "i", [f"{_item(out, idx)} = {value}"])
    if isinstance(op, BroadcastTo):
        return loop_nest(shape, "i", [f"{_item(out, idx)} = {_at(ins[0], in_types[0][0], shape, idx)}"])
    if isinstance(op, Sum | ReduceTo | MaxShift):
        in_shape = in_types[0][0]
        j = [f"j{a}" for a in range(len(in_shape))]
        if isinstance(op, Sum | MaxShift):
            kept = [j[a] if a not in op.axes else "0" for a in range(len(in_shape))]
            target = kept if op.keepdims else [j[a] for a in range(len(in_shape)) if a not in op.axes]
        else:  # the axes the target has as 1 or lacks
            pad = len(in_shape) - len(shape)
            target = ["0" if n == 1 and in_shape[pad + a] != 1 else j[pad + a] for a, n in enumerate(shape)]
        entry, item = f"{ins[0]}[{', '.join(j)}]", _item(out, target)
        start = loop_nest(shape, "i", [f"{_item(out, idx)} = {'-np.inf' if isinstance(op, MaxShift) else '0'}"])
        if isinstance(op, MaxShift):  # (-inf over no entries; NaN wins, as np.maximum)
            return start + loop_nest(in_shape, "j", [f"{item} = {_MAX.format(item, entry)}"])
        return start + loop_nest(in_shape, "j", [f"{item} += {entry}"])
    return None


def _logsumexp_code(op, x: str, x_type, out: str, out_type) -> tuple[list[str], list[str]]:
    """(set-up, step) lines: the stable body's passes, each one nest over all of x's axes with
    the per-row values (max, rest, ties) in arrays of the kept shape, so that where the last
    axis is kept the inner loop runs across rows and vectorises.  The max (a NaN wins, as in
    `np.maximum`), then Σ exp(x - m) below it and the ties at it, then `m + log1p(rest + ties - 1)`
    (logsumexp) or `where(at max, 1, exp(x - m)) / (ties + rest)` (its gradient; 0 on a row
    with nothing above -inf)."""
    shape = x_type[0]
    axes = {a % len(shape) for a in op.axes}
    kept_shape = tuple(1 if a in axes else n for a, n in enumerate(shape))
    j = [f"j{a}" for a in range(len(shape))]
    at = f"{x}[{', '.join(j)}]"
    row = "[" + ", ".join("0" if a in axes else j[a] for a in range(len(shape))) + "]"
    m, rest, ties = (f"{out}_{name}" for name in ("m", "rest", "ties"))
    setup = [f"{name} = np.empty({_shape_text(kept_shape)})" for name in (m, rest, ties)]
    # (one nest, not three `fill` calls: a call each costs more than the few entries it sets)
    lines = loop_nest(kept_shape, "j", [f"{m}{row} = -np.inf", f"{rest}{row} = 0.0", f"{ties}{row} = 0.0"])
    lines += loop_nest(shape, "j", [f"v = np.float64({at})", f"{m}{row} = {_MAX.format(f'{m}{row}', 'v')}"])
    exp = f"math.exp(v - {m}{row})"
    matrix = len(shape) == 2 and len(axes) == 1
    per_row = "[0]" if axes == {0} else "[:, 0]"  # (a matrix's per-row values as one vector)
    if matrix:
        # a matrix's exps in one call of a loop that vectorises (per entry, libm's exp is a
        # call each: most of an HMM step's time)
        terms = f"{out}_e"
        setup.append(f"{terms} = np.empty({_shape_text(shape)})")
        lines.append(f"exp_shifted_{'down' if axes == {0} else 'along'}({x}, {m}{per_row}, {terms})")
        exp = f"{terms}[j0, j1]"
    lines += loop_nest(
        shape,
        "j",
        [
            f"v = np.float64({at})",
            f"tie = v == {m}{row}",
            f"e = {exp}",
            f"{rest}{row} += 0.0 if tie else e",
            f"{ties}{row} += 1.0 if tie else 0.0",
            *([f"{out}[{', '.join(j)}] = 1.0 if tie else e"] if isinstance(op, LogSumExpGrad) else []),
        ],
    )
    if isinstance(op, LogSumExp) and matrix:
        # the logs in one call of a loop without libm calls (a log1p each was a fifth of an
        # HMM's forward step); the kernel turns rest into the total, which nothing reads here
        into = out if not op.keepdims else f"{out}{per_row}"
        lines.append(f"column_logsumexp({m}{per_row}, {rest}{per_row}, {ties}{per_row}, {into})")
    elif isinstance(op, LogSumExp):
        kept = [a for a in range(len(shape)) if a not in axes]
        target = [j[a] if a in kept else "0" for a in range(len(shape))] if op.keepdims else [j[a] for a in kept]
        lines += loop_nest(
            kept_shape,
            "j",
            [
                f"mb = {m}{row}",
                "if mb == mb and mb != np.inf and mb != -np.inf:",
                f"    mb = mb + math.log1p({rest}{row} + ({ties}{row} - 1.0))",
                f"{out}[{', '.join(target) or '0'}] = mb",
            ],
        )
    else:
        # one division a row, then a product an entry: these nests run on a step's small
        # arrays, where a division an entry was a sixth of an HMM's backward step.  (The
        # total is at least 1, the ties, so its reciprocal neither overflows nor underflows;
        # the product rounds twice, within an ulp of the quotient.)
        lines += loop_nest(
            kept_shape,
            "j",
            [f"{rest}{row} = 0.0 if {m}{row} == -np.inf else 1.0 / ({rest}{row} + {ties}{row})"],
        )
        # (the terms from the pass before, kept in the output)
        lines += loop_nest(shape, "j", [f"{out}[{', '.join(j)}] *= {rest}{row}"])
    return setup, lines
