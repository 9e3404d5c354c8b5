"""Fused loop nests: chains of elementwise ops and the sums they feed, as one pass.

On the NumPy backend every node of `z = (x - mu) * s; lp = c - 0.5 * z * z` writes a
full-sized temporary, and the gradient's `sum(p * z, axis=0)` reads two of them back.
Here such nodes become one `Loop` node whose kernel (`loop_source`) walks the array once,
computing every member as a scalar at each index: only the values read outside the loop
are stored, and a sum adds into its result as it goes.

Which nodes join (`fuse`):
- *members* are elementwise ops with a scalar form (`scalar_form`) whose operands and
  result have fully known shapes, the result's (the loop's *space*) at least `SMALLEST`
  entries; a member read by anything else becomes one of the loop's outputs;
- a *sum* of a member that keeps the last axis (a sum along it stays NumPy's pairwise one)
  is an output, and so is a sum of a leaf the loop reads anyway;
- one logsumexp-family *row op* over rows of at most `SHORT_ROW` entries of a 2-d space
  (`row_op`) runs as a stage inside the loop: its logsumexp is an output, its softmax a
  member (a space with several such ops keeps them all apart);
- everything else a member reads is a *leaf*: an input of the loop, indexed with NumPy's
  broadcasting (an extent-1 axis is read at 0).
A member that two loops need is computed in both rather than stored by one and read by the
other: a few flops per entry cost less than a pass over memory.  Two outputs share a loop
only when every leaf of the later one exists before the earlier one (see `fuse`), which
keeps the fused graph acyclic.  A space with more than `LARGEST` members is not fused.

Each member's result is cast to its node's dtype, with operands cast to NumPy's common
dtype first, so float32 stays float32 where NumPy keeps it there; division by zero, NaN and
inf behave as NumPy's (`error_model="numpy"`, no fast-math flags, which could reassociate
away a cancellation a stable formula relies on).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...graph.basic import Apply, Op, Variable, toposort
from ...graph.types import is_floating
from ...ops.base import Cast
from ...ops.elementwise import (
    Abs,
    Add,
    Compare,
    Divide,
    Logical,
    Maximum,
    Minimum,
    Multiply,
    Negative,
    Reciprocal,
    Sign,
    Sqrt,
    Square,
    Subtract,
    Where,
)
from ...ops.math import (
    Arccosh,
    Arcsinh,
    Arctan,
    Arctanh,
    Cos,
    Cosh,
    Exp,
    Expm1,
    Log,
    Log1p,
    Log2,
    Log10,
    SechSquared,
    Sin,
    Sinh,
    Tanh,
)
from ...ops.monomial import Monomial, evaluate
from ...ops.reduction import Sum
from ...ops.stable import LogSumExp
from ...ops.stable.logsumexp import LogSumExpGrad
from ..row_pairs import LogSumExpAndScaledSoftmax, ScaledSoftmax, over_rows
from .kernels import SHORT_ROW

#: loops over fewer entries than this stay NumPy calls: a kernel call costs a few µs
SMALLEST = 1024
#: the most member nodes of one space that are fused (see `fuse`)
LARGEST = 200

_COMPARE = {"less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">=", "equal": "==", "not_equal": "!="}
_LOGICAL = {
    "logical_and": "({0} and {1})",
    "logical_or": "({0} or {1})",
    "logical_xor": "({0} != {1})",
    "isnan": "({0} != {0})",
    "isinf": "(abs({0}) == np.inf)",
    "isfinite": "(abs({0}) < np.inf)",  # (NaN compares false)
}
_DTYPES = frozenset(np.dtype(t) for t in ("float32", "float64", "bool", "int64", "int32"))


def scalar_form(op: Op) -> str | None:
    """The op as a Python expression over its operands `{0}`, `{1}`, ..., or None."""
    forms: dict[type, str] = {
        Add: "{0} + {1}",
        Subtract: "{0} - {1}",
        Multiply: "{0} * {1}",
        Divide: "{0} / {1}",
        # NaN wins either way round, as in np.maximum / np.minimum
        Maximum: "({0} if ({0} >= {1} or {0} != {0}) else {1})",
        Minimum: "({0} if ({0} <= {1} or {0} != {0}) else {1})",
        Negative: "-{0}",
        Abs: "abs({0})",
        Square: "{0} * {0}",
        Reciprocal: "1 / {0}",
        Sign: "(1.0 if {0} > 0 else (-1.0 if {0} < 0 else (0.0 if {0} == 0 else {0})))",  # ±0 → 0, NaN → NaN
        Sqrt: "math.sqrt({0})",
        Exp: "exp({0})",  # the row kernels' exp: vectorises, within an ulp
        Expm1: "math.expm1({0})",
        Log: "math.log({0})",
        Log1p: "math.log1p({0})",
        Tanh: "math.tanh({0})",
        Sin: "math.sin({0})",
        Cos: "math.cos({0})",
        Where: "({1} if {0} else {2})",
        # as its perform: 4e / (1 + e)**2 with e = exp(-2|x|) (one exp once LLVM merges them)
        SechSquared: "(4.0 * exp(-2.0 * abs({0})) / ((1.0 + exp(-2.0 * abs({0}))) * (1.0 + exp(-2.0 * abs({0})))))",
        Sinh: "math.sinh({0})",
        Cosh: "math.cosh({0})",
        Arctan: "math.atan({0})",
        Arcsinh: "math.asinh({0})",
        Arccosh: "math.acosh({0})",
        Arctanh: "math.atanh({0})",
        Log2: "math.log2({0})",
        Log10: "math.log10({0})",
    }
    form = forms.get(type(op))
    if form is not None:
        return form
    if isinstance(op, Compare):
        return "({0} " + _COMPARE[op.ufunc] + " {1})" if op.ufunc in _COMPARE else None
    if isinstance(op, Logical):
        if op.ufunc == "logical_not":
            return "(not {0})"
        return _LOGICAL.get(op.ufunc)
    if isinstance(op, Cast):
        return "{0}"  # the result cast below does the work
    if isinstance(op, Monomial):
        return _monomial_form(op.tree)
    return None


#: a monomial's tree as source text: its values, and the exponents carried apart (`ops.monomial`)
_TEXT = {
    "multiply": "({} * {})".format,
    "divide": "({} / {})".format,
    "negative": "(-{})".format,
    "square": lambda a: f"({a} * {a})",
    "reciprocal": "(1.0 / {})".format,
}
_EXPONENT_TEXT = {
    "multiply": "({} + {})".format,
    "divide": "({} - {})".format,
    "negative": "{}".format,
    "square": "(2 * {})".format,
    "reciprocal": "(-{})".format,
}


def _monomial_form(tree) -> str:
    """The tree as written, and where that is no normal number the factors do not explain
    (`monomial_unexplained`) with exponents carried: a branch taken almost never."""
    x = _operands(tree)
    written = evaluate(tree, x, _TEXT)
    significand = evaluate(tree, [f"math.frexp({a})[0]" for a in x], _TEXT)
    exponent = evaluate(tree, [f"math.frexp({a})[1]" for a in x], _EXPONENT_TEXT)
    return f"({written} if {_as_written(written, x)} else math.ldexp({significand}, {exponent}))"


def monomial_written(tree) -> str:
    """The tree as written, nothing more: a speculative loop's form (see `monomial_unexplained`)."""
    return "(" + evaluate(tree, _operands(tree), _TEXT) + ")"


def monomial_unexplained(tree) -> str:
    """A truth value: the written result `{r}` is no normal number (`{tiny}`, `{huge}`: the
    dtype's range, filled in by `scalar_expression`) and the factors do not explain it (0
    with no factor 0, inf with no factor inf, NaN with no factor NaN).  In bitwise operators,
    so that a loop testing it at every entry stays free of branches and vectorises."""
    return f"(not {_as_written('{r}', _operands(tree))})"


def _operands(tree) -> list[str]:
    return [f"{{{i}}}" for i in range(max(_leaves(tree)) + 1)]


def _as_written(written: str, x: list[str]) -> str:
    """Whether the written result stands: a normal number, or one its factors explain."""

    def any_of(test: str) -> str:
        return "(" + " | ".join("(" + test.format(a) + ")" for a in x) + ")"

    explained = (
        f"(({written} == 0) & {any_of('{} == 0')}) | ((abs({written}) == np.inf) & {any_of('abs({}) == np.inf')})"
        f" | (({written} != {written}) & {any_of('{0} != {0}')})"
    )
    in_range = f"(({{tiny}} <= abs({written})) & (abs({written}) <= {{huge}}))"
    return f"({in_range} | {explained})"


def _leaves(tree) -> list[int]:
    return [tree] if isinstance(tree, int) else [i for part in tree[1:] for i in _leaves(part)]


def _known(v: Variable) -> tuple[int, ...] | None:
    shape = v.type.shape
    return shape if all(n is not None for n in shape) else None  # type: ignore[return-value]


def _member(node: Apply) -> tuple[int, ...] | None:
    """The space of a node that can be a loop member, or None."""
    op = node.op
    if scalar_form(op) is None or len(node.outputs) != 1:
        return None
    if isinstance(op, Cast) and op.dtype.kind in "iu" and is_floating(node.inputs[0].dtype):
        return None  # float → int of NaN or out of range: NumPy and LLVM differ
    out = node.outputs[0]
    if any(v.dtype not in _DTYPES for v in (*node.inputs, out)):
        return None
    if any(v.dtype.kind in "iu" for v in node.inputs) and isinstance(op, Divide | Reciprocal):
        return None
    space = _known(out)
    if space is None or not space or math.prod(space) < SMALLEST:
        return None
    # (an operand of unknown extents could be 1 at run time where the code indexes it)
    return space if all(_known(v) is not None for v in node.inputs) else None


def row_op(node: Apply) -> tuple[int, ...] | None:
    """The space of a logsumexp-family node over short rows that a 2-d loop can run as a stage
    (see `loop_source`), or None.  Its softmax output (if any) is a member of that space."""
    op, x = node.op, node.inputs[0]
    if isinstance(op, LogSumExp):
        if not (op.plain and over_rows(x, op.axes)):
            return None
    elif isinstance(op, LogSumExpGrad):
        if not over_rows(x, op.axes):
            return None
    elif not isinstance(op, LogSumExpAndScaledSoftmax | ScaledSoftmax) or not over_rows(x, (x.ndim - 1,)):
        return None
    space = _known(x)
    if space is None or len(space) != 2 or space[1] > SHORT_ROW or math.prod(space) < SMALLEST:
        return None
    return space if all(_known(v) is not None for v in node.inputs) else None


def row_softmax(node: Apply) -> Variable | None:
    """A row op's softmax output, or None (plain logsumexp has none)."""
    if isinstance(node.op, LogSumExp):
        return None
    return node.outputs[-1]


def row_lse(node: Apply) -> Variable | None:
    """A row op's logsumexp output, or None."""
    if isinstance(node.op, LogSumExp | LogSumExpAndScaledSoftmax):
        return node.outputs[0]
    return None


def _summed(node: Apply) -> tuple[int, ...] | None:
    """The space a float sum reduces, or None."""
    if not isinstance(node.op, Sum):
        return None
    x = node.inputs[0]
    space = _known(x)
    if not is_floating(x.dtype) or x.dtype not in _DTYPES or not space or math.prod(space) < SMALLEST:
        return None
    # (a sum along the last axis stays NumPy's: its pairwise sum is more accurate than a loop's)
    return None if x.ndim - 1 in node.op.axes else space


@dataclass(frozen=True, eq=False)
class Loop(Op):
    """A fused loop nest (see the module docstring); equal only to itself.

    `members` are the member nodes in order, `leaves` the variables they read from
    outside, `results` the variables the loop returns (member outputs and sums).
    """

    space: tuple[int, ...]
    members: tuple[Apply, ...]
    leaves: tuple[Variable, ...]
    results: tuple[Variable, ...]

    def infer(self, *leaves):
        return [v.type for v in self.results]

    def perform(self, *arrays):
        """The member nodes run one by one in NumPy (the reference for the kernel)."""
        values: dict[int, Any] = {v.id: a for v, a in zip(self.leaves, arrays)}
        for node in self.members:
            result = node.op.perform(*[values[v.id] for v in node.inputs])
            for v, r in zip(node.outputs, result if len(node.outputs) > 1 else (result,)):
                values[v.id] = np.asarray(r)
        out = [values[v.id] for v in self.results]
        return out[0] if len(out) == 1 else tuple(out)

    @property
    def name(self) -> str:
        return f"loop[{'x'.join(map(str, self.space))}: {len(self.members)} ops]"


def fuse(outputs: Sequence[Variable], inputs: Sequence[Variable]) -> list[Variable]:
    """`outputs` with elementwise chains and their sums grouped into `Loop` nodes.

    A loop is placed where its first output was computed.  An output joins an existing loop
    of its space only if every leaf it reads was computed before that loop's first output:
    then no leaf of a loop can depend on the loop, and the graph stays acyclic.
    """
    nodes = toposort(outputs, stop=inputs)
    position = {id(node): i for i, node in enumerate(nodes)}
    space: dict[int, tuple[int, ...]] = {}  # member output id → its loop space
    rows: dict[tuple[int, ...], list[Apply]] = {}
    for node in nodes:
        s = _member(node)
        if s is not None:
            space[node.outputs[0].id] = s
        s = row_op(node)
        if s is not None:
            rows.setdefault(s, []).append(node)
    # a space with more members than a loop takes keeps them all as their own nodes (a kernel's
    # compile time grows with its length, and what a loop saves is a pass per node, not more)
    crowded = {s for s, n in Counter(space.values()).items() if n > LARGEST}
    space = {v: s for v, s in space.items() if s not in crowded}
    # a loop runs at most one row op, so a space with several keeps them all as their own nodes
    staged = {id(found[0]): s for s, found in rows.items() if len(found) == 1 and s not in crowded}
    for node in nodes:
        if id(node) in staged and row_softmax(node) is not None:
            space[row_softmax(node).id] = staged[id(node)]  # type: ignore[union-attr]
    roots: list[tuple[Apply, Variable, tuple[int, ...]]] = []  # (node, result, space)
    wanted = {v.id for v in outputs}
    readers: dict[int, list[Apply]] = {}
    for node in nodes:
        for v in node.inputs:
            readers.setdefault(v.id, []).append(node)
    leaf_sums: list[tuple[Apply, Variable, tuple[int, ...]]] = []  # sums that only join a loop
    for node in nodes:
        summed = _summed(node)
        if summed is not None:
            of_member = space.get(node.inputs[0].id) == summed
            (roots if of_member else leaf_sums).append((node, node.outputs[0], summed))
            continue
        lse = row_lse(node) if id(node) in staged else None
        if lse is not None:  # (read by something: the op would be gone otherwise)
            roots.append((node, lse, staged[id(node)]))
        out = node.outputs[-1]
        s = space.get(out.id)
        if s is None:
            continue
        # stored where something besides a member or sum of the same space reads it
        outside = any(not _joins(r, s, space, staged) for r in readers.get(out.id, ()))
        if outside or out.id in wanted:
            roots.append((node, out, s))
    if not roots:
        return list(outputs)

    groups: list[_Group] = []
    of_space: dict[tuple[int, ...], list[_Group]] = {}
    for node, result, s in roots:
        cone, leaves = _cone(node, result, s, space, staged)
        target = _joinable(of_space.get(s, ()), leaves, position)
        if target is None:
            target = _Group(s, position[id(node)])
            groups.append(target)
            of_space.setdefault(s, []).append(target)
        target.add(cone, leaves, result)
    # a sum of an array that a loop reads anyway is one more add there, not a pass of its own
    for node, result, s in leaf_sums:
        x = node.inputs[0]
        target = _joinable([g for g in of_space.get(s, ()) if x.id in g.leaves], [x], position)
        if target is not None and position[id(node)] > target.start:  # (its readers come after it)
            target.add([node], [x], result)
    return _rebuilt(nodes, outputs, groups, position)


def _joinable(groups, leaves: list[Variable], position: dict[int, int]) -> _Group | None:
    """The first of `groups` whose first output comes after every one of `leaves` is made."""
    made = max((_made_at(v, position) for v in leaves), default=-1)
    return next((g for g in groups if made < g.start), None)


def _joins(reader: Apply, s: tuple[int, ...], space: dict[int, tuple[int, ...]], staged: dict) -> bool:
    """Whether `reader` computes inside a loop of space `s` (a member, a sum over it, its row op)."""
    if space.get(reader.outputs[-1].id) == s or staged.get(id(reader)) == s:
        return True
    return _summed(reader) == s


def _made_at(v: Variable, position: dict[int, int]) -> int:
    return position.get(id(v.owner), -1) if v.owner is not None else -1


def _cone(node: Apply, result: Variable, s, space, staged) -> tuple[list[Apply], list[Variable]]:
    """The member nodes `result` needs (in topological order) and the leaves they read."""
    members: list[Apply] = []
    leaves: dict[int, Variable] = {}
    seen: set[int] = set()
    whole = isinstance(node.op, Sum) or id(node) in staged  # (a row op's lse is not in the space)
    start = node.inputs if whole else [result]

    def visit(v: Variable) -> None:  # iterative below: deep chains must not hit the recursion limit
        stack: list[tuple[Variable, bool]] = [(v, False)]
        while stack:
            var, done = stack.pop()
            if var.id in seen and not done:
                continue
            if space.get(var.id) != s:
                leaves.setdefault(var.id, var)
                seen.add(var.id)
                continue
            assert var.owner is not None
            if done:
                members.append(var.owner)
                continue
            seen.add(var.id)
            stack.append((var, True))
            stack.extend((u, False) for u in reversed(var.owner.inputs) if u.id not in seen)

    for v in start:
        visit(v)
    if whole:
        members.append(node)
    return members, list(leaves.values())


class _Group:
    """The outputs gathered into one loop so far."""

    def __init__(self, space: tuple[int, ...], start: int):
        self.space, self.start = space, start
        self.members: dict[int, Apply] = {}
        self.leaves: dict[int, Variable] = {}
        self.results: list[Variable] = []

    def add(self, cone: list[Apply], leaves: list[Variable], result: Variable) -> None:
        for node in cone:
            self.members.setdefault(id(node), node)
        for v in leaves:
            self.leaves.setdefault(v.id, v)
        self.results.append(result)


def _rebuilt(nodes: list[Apply], outputs, groups: list[_Group], position: dict[int, int]) -> list[Variable]:
    """The graph again, each group one `Loop` node placed at its first output's node."""
    fused_away = {id(n) for g in groups for n in g.members.values()}
    at = {g.start: g for g in groups}
    mapping: dict[int, Variable] = {}

    def new(v: Variable) -> Variable:
        return mapping.get(v.id, v)

    for i, node in enumerate(nodes):
        group = at.get(i)
        if group is not None:
            members = tuple(sorted(group.members.values(), key=lambda n: position[id(n)]))
            op = Loop(group.space, members, tuple(group.leaves.values()), tuple(group.results))
            loop = Apply(op, [new(v) for v in op.leaves], op.infer(), members[-1].location)
            mapping.update((v.id, out) for v, out in zip(op.results, loop.outputs))
        if id(node) in fused_away:
            continue
        inputs = [new(v) for v in node.inputs]
        if any(a is not b for a, b in zip(inputs, node.inputs)):
            clone = Apply(node.op, inputs, node.op.infer(*inputs), node.location)
            mapping.update((old.id, c) for old, c in zip(node.outputs, clone.outputs))
    return [new(v) for v in outputs]
