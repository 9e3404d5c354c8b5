"""Where an extent comes from: the operands, and in the end the leaves, that set a variable's
length along one axis at run time.

With unknown (None) extents, two shapes that are merely compatible need not be equal: in
`log(ones(5) + exp(v))`, `v` may have one entry and the sum five.  A rewrite's replacement
is sound only where each of its extents provably equals the written formula's, so the
engine compares them (`conform`): an extent is known statically, or it is the broadcast of
the extents of the *leaves* it comes from — variables whose extent no op rule explains —
and two extents with the same leaves are equal.  A replacement that lost a
broadcast the formula has (its leaves are a subset, or it is a static 1) is broadcast back;
one whose extents could differ is refused.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..graph.basic import Constant, Variable
from ..ops.base import Elementwise
from ..ops.composite import OpFromGraph, SymbolicOp, body_of
from ..ops.creation import Alloc
from ..ops.decompositions import Det, Slogdet
from ..ops.elementwise import Compare, Where, equal, where
from ..ops.indexing import Index
from ..ops.linalg import Matmul
from ..ops.reduction import Reduction, _Cumulative
from ..ops.scan import Scan
from ..ops.shape import (
    BroadcastTo,
    Concatenate,
    ExpandDims,
    ReduceTo,
    Reshape,
    ShapeDim,
    Squeeze,
    Transpose,
    broadcast_to,
)
from ..ops.stable.logsumexp import LogCumSumExp, LogSumExp, LogSumExpGrad
from ..ops.stable.softmax import LogSoftmax, Softmax

Source = tuple[Variable, int]  # a variable and one of its axes
#: what an extent is the broadcast of: unknown extents (a variable's axis) and known ones (an int)
Leaves = dict[tuple[int, int], "Source | int"]


# -- one op up (also what specialize asks, to send a shape lookup to the operand that sets it) ---------------
def extent_source(v: Variable, axis: int) -> Source | None:
    """(operand, its axis) that v's extent at `axis` comes from, one op up; None if unsure."""
    owner = v.owner
    if owner is None or v.ndim == 0:
        return None
    op, axis = owner.op, axis % v.ndim
    if isinstance(op, Elementwise):
        sources = extent_sources(owner.inputs, v.ndim, axis)
        # (with two candidates the extent is `where(a == 1, b, a)`: nodes of their own, worth it
        # only where the value is not needed anyway, which a rule cannot see; see lift_shape_only)
        return sources[0] if len(sources) == 1 else None
    if isinstance(op, Reduction) or (isinstance(op, LogSumExp) and op.plain):
        x = owner.inputs[0]
        kept = [i for i in range(x.ndim) if i not in op.axes]
        if op.keepdims:
            return (x, axis) if axis in kept else None
        return x, kept[axis]
    if (isinstance(op, Softmax | LogSoftmax) and not op.masked) or isinstance(
        op, LogSumExpGrad | LogCumSumExp | _Cumulative
    ):
        return owner.inputs[0], axis
    if isinstance(op, Reshape) and v.ndim == 1 and owner.inputs[0].ndim == 1:
        return owner.inputs[0], 0  # (a vector flattened, as cumsum(axis=None) does)
    return None


def extent_sources(inputs: Sequence[Variable], ndim: int, axis: int) -> list[Source]:
    """The operands of a broadcast (and their axes) that can set its extent at `axis`:
    those that have the axis and are not statically 1 there."""
    sources: dict[tuple[int, int], Source] = {}
    for x in inputs:
        k = axis - (ndim - x.ndim)
        if k >= 0 and x.type.shape[k] != 1:
            sources.setdefault((x.id, k), (x, k))
    return list(sources.values())


def broadcast_extent(sources: Sequence[Source | int]) -> Variable:
    """The run-time extent of a broadcast of these extents (all equal or 1; a 0 wins over a 1)."""
    dims = [Constant(np.int64(s)) if isinstance(s, int) else ShapeDim(s[1])(s[0]) for s in sources]
    extent = dims[0]
    for d in dims[1:]:
        extent = where(equal(extent, 1), d, extent)
    return extent


def _known(n: int) -> Leaves:
    return {} if n == 1 else {(-1, n): n}


# -- all the way up: the leaves ----------------------------------------------------------------------------------
class Extents:
    """The leaves of extents, memoised (one per rewrite pass: each variable is traced once)."""

    def __init__(self) -> None:
        self._leaves: dict[tuple[int, int], Leaves] = {}

    def leaves(self, v: Variable, axis: int) -> Leaves:
        """The extents that v's extent at `axis` is the broadcast of: {(id, axis): (variable, axis)}
        for unknown ones, {(-1, n): n} for a known n (a 1 adds nothing to a broadcast).

        Iterative (a chain of thousands of elementwise ops is no recursion), linear with the memo.
        """
        memo = self._leaves
        upward: dict[tuple[int, int], list[Source | int] | None] = {}
        stack = [(v, axis)]
        while stack:
            w, k = stack[-1]
            key = (w.id, k)
            if key in memo:
                stack.pop()
                continue
            if key not in upward:
                upward[key] = _operand_sources(w, k)
            sources = upward[key]
            if sources is None:  # a leaf: an extent no rule explains
                n = w.type.shape[k]
                memo[key] = {key: (w, k)} if n is None else _known(n)
                stack.pop()
                continue
            pending = [s for s in sources if not isinstance(s, int) and (s[0].id, s[1]) not in memo]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            found = [_known(s) if isinstance(s, int) else memo[(s[0].id, s[1])] for s in sources]
            memo[key] = found[0] if len(found) == 1 else {leaf: e for f in found for leaf, e in f.items()}
        return memo[(v.id, axis)]

    def conform(self, new: Variable, old: Variable) -> Variable | None:
        """`new` if its extents provably equal `old`'s; `new` broadcast to them where it only
        lost a broadcast `old` has; None where they could differ at run time."""
        broadcast = False
        for axis, (m, n) in enumerate(zip(old.type.shape, new.type.shape)):
            if m is not None and m == n:
                continue
            old_leaves = self.leaves(old, axis).keys()
            new_leaves = self.leaves(new, axis).keys()
            if new_leaves == old_leaves:
                continue
            if not new_leaves <= old_leaves:
                return None
            broadcast = True  # each extent of `new` broadcasts against `old`'s: broadcast it to them
        if not broadcast:
            return new
        target = [
            m if m is not None else broadcast_extent(list(self.leaves(old, axis).values()))
            for axis, m in enumerate(old.type.shape)
        ]
        return broadcast_to(new, tuple(target))


def _operand_sources(v: Variable, axis: int) -> list[Source | int] | None:
    """The (operand, axis) pairs whose broadcast is v's extent at `axis`; None where no rule says."""
    owner = v.owner
    if owner is None or isinstance(v, Constant):
        return None
    op = owner.op
    if isinstance(op, Elementwise):
        return list(extent_sources(owner.inputs, v.ndim, axis))
    if isinstance(op, SymbolicOp | OpFromGraph):
        through = _through_body(op, owner.inputs, v.index, axis)
        if through is not None:
            return through
    if isinstance(op, Scan):
        return _through_loop(op, owner.inputs, v.index, axis)
    if isinstance(op, BroadcastTo | ReduceTo | Alloc):  # the extent is the target dim, an input
        return _dim_sources(owner.inputs[1 + axis])
    if isinstance(op, Concatenate) and axis != op.axis % v.ndim:
        return [(x, axis) for x in owner.inputs]  # equal in every operand, off the joined axis
    if isinstance(op, Matmul):
        a, b = owner.inputs
        return _matmul_sources(a, b, v.ndim, axis)
    if isinstance(op, Det | Slogdet):  # one value per matrix of the stack: the operand's batch axes
        return [(owner.inputs[0], axis)]
    layout = _layout_source(op, owner.inputs[0], axis)
    if layout is not None:
        return layout
    source = extent_source(v, axis)
    return [source] if source is not None else None


def _matmul_sources(a: Variable, b: Variable, ndim: int, axis: int) -> list[Source | int]:
    """numpy.matmul's extents: the batch axes broadcast (aligned from the right), then a's rows
    and b's columns, each absent where that operand is a vector."""
    batch = ndim - (a.ndim > 1) - (b.ndim > 1)
    if axis >= batch:
        return [(a, a.ndim - 2)] if axis == batch and a.ndim > 1 else [(b, b.ndim - 1)]
    sources: list[Source | int] = []
    for x in (a, b):
        offset = batch - (x.ndim - 2)
        if x.ndim > 2 and axis >= offset:
            sources.append((x, axis - offset))
    return sources


def _layout_source(op, x: Variable, axis: int) -> list[Source | int] | None:
    """Transpose, expand_dims and squeeze move extents without changing them."""
    if isinstance(op, Transpose):
        return [(x, op.axes[axis])]
    if isinstance(op, ExpandDims):
        if axis in op.axes:
            return []  # a new axis of extent 1
        return [(x, axis - sum(1 for a in op.axes if a < axis))]
    if isinstance(op, Squeeze):
        kept = [k for k in range(x.ndim) if k not in op.axes]
        return [(x, kept[axis])]
    if isinstance(op, Index) and all(e is None or e == (None, None, None) for e in op.spec):
        # x[:, None]: full slices keep an axis, None inserts one of extent 1
        operand_axes: list[int | None] = []
        k = 0
        for e in op.spec:
            operand_axes.append(None if e is None else k)
            k += e is not None
        operand_axes += range(k, x.ndim)
        source = operand_axes[axis]
        return [] if source is None else [(x, source)]
    return None


def _dim_sources(d: Variable) -> list[Source | int] | None:
    """The extents a target dim is: a constant, `x.shape[k]`, or the broadcast of such
    (`broadcast_extent`'s `where(a == 1, b, a)`); None for any other arithmetic."""
    if isinstance(d, Constant):
        return [int(d.data)]
    owner = d.owner
    if owner is None:
        return None
    if isinstance(owner.op, ShapeDim):
        return [(owner.inputs[0], owner.op.axis % owner.inputs[0].ndim)]
    if isinstance(owner.op, Where):
        condition, b, a = owner.inputs
        test = condition.owner
        if test is not None and isinstance(test.op, Compare) and test.op.name == "equal" and test.inputs[0] is a:
            first, second = _dim_sources(a), _dim_sources(b)
            return None if first is None or second is None else first + second
    return None


def _through_body(op, inputs: Sequence[Variable], index: int, axis: int) -> list[Source | int] | None:
    """A composite's extent, traced through its body to the placeholders, then mapped to `inputs`."""
    placeholders, outputs = body_of(op, tuple(x.type for x in inputs))
    return _mapped(Extents().leaves(outputs[index], axis), placeholders, inputs, lambda p, k: k)


def _through_loop(op: Scan, inputs: Sequence[Variable], index: int, axis: int) -> list[Source | int] | None:
    """A loop's extent: a carry keeps its shape (checked at every step); stacked outputs add the
    steps in front (the length of the sequences); the rest comes from the step's graph."""
    inner, n_carry = op.inner, op.n_carry
    xs = inputs[n_carry : n_carry + op.n_xs]
    if index < n_carry:
        return [(inputs[index], axis)]
    if axis == 0:
        return [(x, 0) for x in xs] or None  # steps: `length` when there are no sequences (static)
    if index >= n_carry + op.n_ys:  # the carries entering each step, stacked
        return [(inputs[index - n_carry - op.n_ys], axis - 1)]
    slices = {p.id for p in inner.slices}
    return _mapped(
        Extents().leaves(inner.outputs[index], axis - 1),
        inner.inputs,
        inputs,
        lambda p, k: k + 1 if p in slices else k,  # a sequence's slice drops its leading axis
    )


def _mapped(leaves: Leaves, placeholders, inputs, shift) -> list[Source | int] | None:
    """Leaves inside a body as (outer input, axis) pairs (known extents as they are);
    None if any is an unknown extent of something other than a placeholder."""
    outer = {p.id: x for p, x in zip(placeholders, inputs)}
    result: list[Source | int] = []
    for (pid, k), extent in leaves.items():
        if isinstance(extent, int):
            result.append(extent)
            continue
        x = outer.get(pid)
        if x is None:
            return None
        result.append((x, shift(pid, k)))
    return result
