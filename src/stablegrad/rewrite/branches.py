"""The branch a `where` did not select stays out of the gradient.

`where(c, f(x), y)` sends f a zero cotangent wherever c is false, and f's pullback
multiplies it by f's partial there: 0 · inf = NaN for `where(x > 0, log(x), 0)` at
x = 0, `where(d > 0, sqrt(d), 0)` at d <= 0, or any branch whose derivative blows up
outside the region it is selected in.  The cure JAX documents is a second, hand-written
`where` that feeds the branch a safe value.  This rule does the equivalent
automatically: every leaf the branch reaches through entrywise ops is read through
`masked_gradient(leaf, c)` — the leaf itself, whose pullback keeps the gradient only
where c holds.  No value changes (the forward graph is the formula as written); only
the zero cotangents a NaN was made of are dropped.
"""

from __future__ import annotations

from ..graph.basic import Constant, Variable
from ..graph.types import broadcast_shapes
from ..ops.elementwise import Where, where
from ..ops.gradient_mask import MaskedGradient, masked_gradient
from ..ops.shape import BroadcastTo, broadcast_arrays
from .engine import Kind, Phase, rewrite
from .extents import Extents
from .patterns import is_entrywise

#: how many ops a branch is followed through
REACH = 64


@rewrite(Phase.STABILIZE, Kind.GUARD, Where, note="where(s): gradients masked outside the selected branch")
def masked_gradients_of_unselected_branches(node):
    """where(c, f(x), g(y)) → where(c, f(masked_gradient(x, c)), g(masked_gradient(y, c, kept=False))).

    Fires only where a branch is computed from some input by entrywise ops (a branch
    that *is* an input needs nothing: where's own pullback gives it exact zeros).
    """
    c, chosen, other = node.inputs
    extents = Extents()
    masked_chosen = _mask_leaves(chosen, c, True, extents)
    masked_other = _mask_leaves(other, c, False, extents)
    if masked_chosen is chosen and masked_other is other:
        return None
    return node.op(c, masked_chosen, masked_other)


def masked_where(condition: Variable, chosen: Variable, other: Variable) -> Variable:
    """where(condition, chosen, other), its branches masked as this rule masks them: for the rules of
    the later phases, whose wheres it does not see."""
    selected = where(condition, chosen, other)
    masked = masked_gradients_of_unselected_branches.fn(selected.owner)
    return selected if masked is None else masked


def _mask_leaves(branch: Variable, mask: Variable, kept: bool, extents: Extents) -> Variable:
    """The branch rebuilt with each float leaf read through masked_gradient; itself if none needed it."""
    if not _entrywise(branch):
        return branch
    leaves, region = _walk(branch)
    replaced = {leaf.id: _masked(leaf, mask, kept, extents) for leaf in leaves if not _masked_by(leaf, mask, kept)}
    return _rebuild(branch, replaced, region) if replaced else branch


def _entrywise(v: Variable) -> bool:
    return v.owner is not None and is_entrywise(v.owner.op)


def _walk(branch: Variable) -> tuple[list[Variable], set[int]]:
    """The float variables the branch is computed from by entrywise ops (not constants, not
    through comparisons), and the ids of the entrywise nodes' outputs walked through to reach them.

    The walk follows at most REACH ops: a where deep in a long chain would otherwise walk the
    whole chain (quadratic in graph length); beyond it the frontier is masked instead.
    """
    found: dict[int, Variable] = {}
    seen: set[int] = set()
    region: set[int] = set()
    stack = [branch]
    while stack:
        v = stack.pop()
        if v.id in seen:
            continue
        seen.add(v.id)
        if not v.type.is_float():
            # a nested where's condition: no gradient flows through a comparison, and rebuilding
            # it would make that where a new node, masked again by the rule without end
            continue
        if _entrywise(v) and len(seen) <= REACH:
            region.add(v.id)
            stack.extend(v.owner.inputs)  # type: ignore[union-attr]
        elif not isinstance(v, Constant) and v.type.is_float():
            found[v.id] = v
    return list(found.values()), region


def _masked_by(leaf: Variable, mask: Variable, kept: bool) -> bool:
    """Whether the leaf already reads through this mask (among the masks of nested wheres, and the
    broadcasts `_masked` puts before a mask that could widen its leaf)."""
    node = leaf.owner
    while node is not None and isinstance(node.op, MaskedGradient | BroadcastTo):
        if isinstance(node.op, MaskedGradient) and node.op.kept == kept and node.inputs[1] is mask:
            return True
        node = node.inputs[0].owner
    return False


def _masked(leaf: Variable, mask: Variable, kept: bool, extents: Extents) -> Variable:
    """masked_gradient(leaf, mask, kept), broadcasting the leaf first where the mask could widen it."""
    if not _cannot_widen(mask, leaf, extents):
        leaf = broadcast_arrays(leaf, mask)[0]
    return masked_gradient(leaf, mask, kept)


def _cannot_widen(keep: Variable, x: Variable, extents: Extents) -> bool:
    if keep.ndim > x.ndim:
        return False
    shift = x.ndim - keep.ndim
    for axis, n in enumerate(keep.type.shape):
        m = x.type.shape[axis + shift]
        if n == 1 or (n is not None and n == m):
            continue
        if not extents.leaves(keep, axis).keys() <= extents.leaves(x, axis + shift).keys():
            return False
    return broadcast_shapes(keep.type.shape, x.type.shape) is not None


def _rebuild(branch: Variable, replaced: dict[int, Variable], region: set[int]) -> Variable:
    """branch with the variables in `replaced` (by id) substituted, rebuilt bottom-up through `region`.

    Not `graph.basic.substitute`: that walks everything below the branch that is not replaced
    (a mask's whole graph, say), and this runs once per `where`; here only the walked region is.
    """
    done: dict[int, Variable] = dict(replaced)
    stack: list[tuple[Variable, bool]] = [(branch, False)]
    while stack:
        v, expanded = stack.pop()
        if v.id in done:
            continue
        if expanded or v.id not in region:
            if v.id in region:
                done[v.id] = v.owner.op(*(done.get(u.id, u) for u in v.owner.inputs))  # type: ignore[union-attr]
            else:
                done[v.id] = v
            continue
        stack.append((v, True))
        stack.extend((u, False) for u in v.owner.inputs)  # type: ignore[union-attr]
    return done[branch.id]


RULES = (masked_gradients_of_unselected_branches,)
