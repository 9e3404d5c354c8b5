"""The rewrite engine: local rewrites applied during one bottom-up rebuild of a graph.

A rewrite is a plain function of one node returning replacement variables (or
None), declared with its phase and kind.  `Rebuilder` walks a graph from its
leaves up and rebuilds every node on its already-rewritten inputs, so a rewrite
always sees canonical operands.  Rebuilding doubles as:

- merging: a node with the same op and inputs as an earlier one *is* that node;
- constant folding: a small node whose inputs are all constants becomes a constant;
- rewriting: the rules for the node's op class are tried in order; the first
  replacement is itself rebuilt (so rewrites chain: `log(1+exp(x))` → `log1p(exp(x))`
  → `softplus(x)`), and recorded in the change log;
- seeing through layout: where no rule fires on an entrywise op of one operand that
  a layout op produced, `u(L(v))`, the rules are tried on `u(v)`, and a replacement r
  stands as `L(r)` (`log(softmax(x)[i])` → `log_softmax(x)[i]`): the two commute.

Each node is visited once and a rule costs O(1) to try, so a pass is linear in
graph size.  Termination is guaranteed by a step budget proportional to the
graph: exceeding it raises `RewriteCycleError` naming the rule that kept firing.
"""

from __future__ import annotations

import contextvars
import enum
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from ..errors import StableGradError, attributed_to, format_location
from ..graph.basic import Apply, Constant, Op, Variable
from ..graph.printing import expression
from ..graph.types import is_inexact
from ..ops.creation import LARGEST_CONSTANT
from .extents import Extents
from .patterns import is_entrywise, is_layout

#: folding never produces constants larger than this (they would bloat the graph)
FOLD_LIMIT = LARGEST_CONSTANT
#: the longest chain of rewrites of rewrites; real chains are a handful long
MAX_CHAIN = 64


class Phase(enum.Enum):
    CANONICALIZE = "canonicalize"
    STABILIZE = "stabilize"
    #: value-preserving rewrites of how a gradient is taken, run only before differentiating
    GRADIENT = "gradient"
    SPECIALIZE = "specialize"
    #: after everything else, with recognition: products kept in range (`monomials`) and
    #: trigonometric functions at constant shifts, the gradient's own among them
    RANGE = "range"


class Kind(enum.Enum):
    ALGEBRA = "algebra"  # value-preserving simplification
    RECOGNITION = "recognition"  # a naive formula replaced by a stable primitive
    GUARD = "guard"  # no value changes; a gradient taken of the result avoids a 0 · inf
    INLINING = "inlining"  # a composite replaced by its body


@dataclass(frozen=True)
class Rewrite:
    """A local rewrite: `fn(node)` returns replacements for node.outputs, or None."""

    fn: Callable[[Apply], Variable | Sequence[Variable] | None]
    phase: Phase
    kind: Kind
    #: op classes the rewrite can fire on (its root); empty means every op
    roots: tuple[type, ...] = ()
    #: for a guard, what `explain` says it did to each node it fired on ("where(s): ...")
    note: str = ""

    @property
    def name(self) -> str:
        return self.fn.__name__


def rewrite(phase: Phase, kind: Kind, *roots: type, note: str = ""):
    """Decorator: turn `fn(node)` into a `Rewrite` that fires on nodes of the `roots` op classes."""

    def wrap(fn) -> Rewrite:
        return Rewrite(fn, phase, kind, roots, note)

    return wrap


_ACTIVE_LOG: contextvars.ContextVar[ChangeLog | None] = contextvars.ContextVar("active_log", default=None)


def active_log() -> ChangeLog | None:
    """The change log of the pass now running, for rules that rewrite nested bodies."""
    return _ACTIVE_LOG.get()


class RewriteCycleError(StableGradError, RuntimeError):
    """A rewrite kept firing: the rule set does not terminate on this graph."""


class RewriteTypeError(StableGradError, TypeError):
    """A rewrite produced a replacement of another type than the variable it replaces."""


@dataclass
class Change:
    """One fired rewrite, for `explain`: the graphs are kept, their text is made when asked for."""

    rule: str
    kind: Kind
    location: tuple[str, int] | None
    replaced: Variable
    replacements: Sequence[Variable]
    note: str = ""

    @property
    def before(self) -> str:
        return expression(self.replaced)

    @property
    def after(self) -> str:
        return ", ".join(expression(r) for r in self.replacements)

    def __str__(self) -> str:
        return f"{format_location(self.location)}  {self.before}  →  {self.after}   [{self.rule}]"


@dataclass
class ChangeLog:
    changes: list[Change] = field(default_factory=list)

    def record(self, rule: Rewrite, node: Apply, replacements: Sequence[Variable]) -> None:
        self.changes.append(Change(rule.name, rule.kind, node.location, node.outputs[0], list(replacements), rule.note))

    def __len__(self) -> int:
        return len(self.changes)


#: a small number for each distinct (rule list, context), for `Apply.settled`; the rules and
#: context are kept referenced so that their ids cannot be reused by other objects
_RULE_SETS: dict[tuple[int, ...], tuple[int, list[Rewrite], object]] = {}


def _rule_set_number(rules: list[Rewrite], context: object) -> int:
    key = (*(id(r) for r in rules), id(context))
    entry = _RULE_SETS.get(key)
    if entry is None:
        entry = _RULE_SETS[key] = (len(_RULE_SETS), list(rules), context)
    return entry[0]


def _constant_key(c: Constant):
    if c.data.size > 64:
        return ("big", c.id)
    return (c.data.dtype.str, c.data.shape, c.data.tobytes())


class Rebuilder:
    """One bottom-up pass with a fixed rule list; reusable across several output lists.

    `context` is whatever else the rules' decisions depend on (the backend's choice of
    composites to keep whole): a node left unchanged by a pass is marked settled for
    (rules, context), and later passes with the same pair skip trying rules on it.
    """

    def __init__(
        self,
        rules: Iterable[Rewrite],
        log: ChangeLog | None = None,
        keep: Iterable[Variable] = (),
        context: object = None,
    ):
        self.rules = list(rules)
        self._rule_key = _rule_set_number(self.rules, context)
        self._by_root: dict[type, list[Rewrite]] = {}
        self.log = log
        self.done: dict[int, Variable] = {v.id: v for v in keep}
        self._seen: dict[tuple, tuple[Variable, ...]] = {}
        self._constants: dict[tuple, Constant] = {}
        self._fired: Counter[str] = Counter()
        self._visited = 0
        self._depth = 0
        self.body_cache: dict[int, Op] = {}
        #: where the extents of this pass's variables come from, to check each replacement against its formula
        self.extents = Extents()

    # -- public --------------------------------------------------------------------------------
    def __call__(self, outputs: Sequence[Variable]) -> list[Variable]:
        token = _ACTIVE_LOG.set(self.log) if self.log is not None else None
        try:
            return [self.canonical(v) for v in outputs]
        finally:
            if token is not None:
                _ACTIVE_LOG.reset(token)

    def canonical(self, root: Variable) -> Variable:
        """The rebuilt, rewritten equivalent of `root` (iterative: no recursion limit on deep graphs)."""
        hit = self.done.get(root.id)
        if hit is not None:
            return hit
        stack: list[tuple[Variable, bool]] = [(root, False)]
        while stack:
            v, expanded = stack.pop()
            if v.id in self.done:
                continue
            if isinstance(v, Constant):
                self.done[v.id] = self._constants.setdefault(_constant_key(v), v)
                continue
            node = v.owner
            if node is None:
                self.done[v.id] = v
                continue
            if not expanded:
                stack.append((v, True))
                stack.extend((x, False) for x in node.inputs if x.id not in self.done)
                continue
            outputs = self._apply(node, [self.done[x.id] for x in node.inputs])
            for old, new in zip(node.outputs, outputs):
                self.done[old.id] = new
        return self.done[root.id]

    # -- one node ------------------------------------------------------------------------------
    def _apply(self, node: Apply, inputs: list[Variable]) -> tuple[Variable, ...]:
        key = (node.op, tuple(v.id for v in inputs))
        merged = self._seen.get(key)
        if merged is not None:
            return merged
        self._visited += 1
        folded = _fold(node, inputs)
        if folded is not None:
            result = tuple(self.canonical(c) for c in folded)
            self._seen[key] = result
            return result
        if all(a is b for a, b in zip(inputs, node.inputs)):
            candidate = node
            if self._rule_key in node.settled:
                # no rule fired on this very node (same op, same inputs) in an earlier pass with
                # these rules, and rules only look at a node and what lies below it
                self._seen[key] = node.outputs
                for o in node.outputs:
                    self.done[o.id] = o
                return node.outputs
        elif all(a.type == b.type for a, b in zip(inputs, node.inputs)):  # same types in, same types out
            candidate = Apply(node.op, inputs, [o.type for o in node.outputs], node.location)
        else:
            candidate = Apply(node.op, inputs, node.op.infer(*inputs), node.location)
        # what a rule builds stands for the node it replaces: it keeps that node's source line
        with attributed_to(candidate.location):
            for rule in self._rules_for(type(node.op)):
                if rule.kind is Kind.RECOGNITION and _complex(candidate):
                    continue  # the stable primitives are real functions: a complex formula stays as written
                replacement = rule.fn(candidate)
                if replacement is None:
                    continue
                replacements = [replacement] if isinstance(replacement, Variable) else list(replacement)
                _check_types(rule, candidate, replacements)
                conformed = [self.extents.conform(new, old) for new, old in zip(replacements, candidate.outputs)]
                if any(c is None for c in conformed):
                    continue  # its extents could differ from the formula's at run time: the rule may not fire here
                replacements = cast(list[Variable], conformed)
                self._count(rule)
                if self.log is not None:
                    self.log.record(rule, candidate, replacements)
                # the replacement is rebuilt too, so rewrites chain; it stands for the candidate from now on
                self._depth += 1
                if self._depth > MAX_CHAIN:
                    raise RewriteCycleError(f"rewrite {rule.name!r} keeps producing graphs it rewrites again (a cycle)")
                try:
                    result = tuple(self.canonical(r) for r in replacements)
                finally:
                    self._depth -= 1
                self._seen[key] = result
                return result
        moved = self._through_layout(candidate)
        if moved is not None:
            self._seen[key] = moved
            return moved
        self._seen[key] = candidate.outputs
        candidate.settled += (self._rule_key,)
        for o in candidate.outputs:
            self.done[o.id] = o
        return candidate.outputs

    def _through_layout(self, node: Apply) -> tuple[Variable, ...] | None:
        """u(L(v)) as L(r) where a rule rewrites u(v) to r; None where none does."""
        if len(node.inputs) != 1 or not is_entrywise(node.op):
            return None
        layout = node.inputs[0].owner
        if layout is None or not is_layout(layout.op):
            return None
        v = layout.inputs[0]
        if v.owner is None:
            return None  # nothing below for a rule to match
        inner = Apply(node.op, [v], node.op.infer(v), node.location)
        rewritten = self._apply(inner, [v])
        if rewritten[0] is inner.outputs[0]:
            return None
        with attributed_to(layout.location):
            moved = layout.op(rewritten[0], *layout.inputs[1:])
        return (self.canonical(moved),)

    def _rules_for(self, op_class: type) -> list[Rewrite]:
        rules = self._by_root.get(op_class)
        if rules is None:
            rules = self._by_root[op_class] = [
                r for r in self.rules if not r.roots or any(issubclass(op_class, root) for root in r.roots)
            ]
        return rules

    def _count(self, rule: Rewrite) -> None:
        self._fired[rule.name] += 1
        if sum(self._fired.values()) > 1000 + 10 * self._visited:
            name, times = self._fired.most_common(1)[0]
            raise RewriteCycleError(
                f"rewrite {name!r} fired {times} times on a graph of {self._visited} nodes: the rewrites cycle"
            )


def _complex(node: Apply) -> bool:
    return any(v.dtype.kind == "c" for v in (*node.inputs, *node.outputs))


def _check_types(rule: Rewrite, node: Apply, replacements: list[Variable]) -> None:
    if len(replacements) != len(node.outputs):
        raise RewriteTypeError(f"rewrite {rule.name!r} returned {len(replacements)} variables for {len(node.outputs)}")
    for old, new in zip(node.outputs, replacements):
        compatible = old.dtype == new.dtype and old.ndim == new.ndim
        compatible = compatible and all(
            a is None or b is None or a == b for a, b in zip(old.type.shape, new.type.shape)
        )
        if not compatible:
            raise RewriteTypeError(f"rewrite {rule.name!r} replaced {old.type} by {new.type}")


def _fold(node: Apply, inputs: Sequence[Variable]) -> tuple[Constant, ...] | None:
    if not all(isinstance(v, Constant) for v in inputs):
        return None
    for o in node.outputs:
        dims = o.type.shape
        if None in dims or math.prod(d for d in dims if d is not None) > FOLD_LIMIT:
            return None
    data = [v.data for v in inputs]  # type: ignore[attr-defined]
    with np.errstate(all="ignore"):
        values = node.op.perform(*data)
    if node.op.nout == 1:
        values = (values,)
    if not all(_finite(d) for d in data) or all(_finite(v) for v in values):
        return tuple(Constant(np.asarray(v, dtype=o.type.dtype)) for v, o in zip(values, node.outputs))
    # finite constants in, inf or NaN out: an overflow that recognition may still repair
    # (log(sum(exp(c))) of constants means logsumexp(c), as it does of inputs); it runs as written
    return None


def _finite(value) -> bool:
    array = np.asarray(value)
    return not is_inexact(array.dtype) or bool(np.isfinite(array).all())
