"""The rewrite pipeline, in order.  This module is the one place that says what runs when.

    canonicalize → stabilize (recognition) → gradient (only before differentiating) → specialize (late inlining)
    → range (products kept in range)

Each phase is one linear bottom-up pass (`engine.Rebuilder`) that also merges
duplicate subgraphs and folds constants.  `recognise` is the value-preserving
prefix that `grad` runs before differentiating.

Ops with a body — user composites and loops — get their bodies recognised by the two
rules below (`BODY_RULES`), which recurse into this pipeline (a body is recognised like any
graph); that is why they live here.  A library SymbolicOp has no such rule: its body
is only ever seen after stabilize.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ..graph import names
from ..graph.basic import Apply, Op, Variable, substitute
from ..ops.composite import OpFromGraph
from ..ops.scan import Scan
from . import (
    branches,
    canonicalize,
    exponentials,
    identities,
    monomials,
    norms,
    partials,
    probability,
    products,
    quadratic,
    scaled,
    specialize,
    stabilize,
    trigonometric,
)
from .engine import ChangeLog, Kind, Phase, Rebuilder, Rewrite, active_log, rewrite
from .reroll import reroll

#: rounds of `specialize.lift_shape_only` (each a linear pass; a deeper chain of broadcasts read
#: only for their shape keeps the rest)
SHAPE_LIFTS = 4


# -- ops with a body ----------------------------------------------------------------------------------
# (ALGEBRA: the recognitions in a body are logged one by one, with their own lines; the op rebuilt
# around them is no advice of its own to the user)
@rewrite(Phase.STABILIZE, Kind.ALGEBRA, OpFromGraph)
def composite_body_recognised(node):
    """A user composite whose body has naive formulas → the same composite with a recognised body."""
    op = node.op
    rewritten = _recognised_body(op, op.inputs, op.outputs, lambda body: op.with_body(op.inputs, body))
    if rewritten is op:
        return None
    outputs = rewritten(*node.inputs)
    return [outputs] if isinstance(outputs, Variable) else list(outputs)


@rewrite(Phase.STABILIZE, Kind.ALGEBRA, Scan)
def scan_body_recognised(node):
    """A loop whose step has naive formulas → the same loop with a recognised step (so its gradient is stable)."""
    op = node.op
    rewritten = _recognised_body(op, op.inner.inputs, op.inner.outputs, op.with_body)
    if rewritten is op:
        return None
    return list(Apply(rewritten, node.inputs, [o.type for o in node.outputs], node.location).outputs)


def _recognised_body(op, inputs, outputs, rebuild_op):
    """The op with its body recognised (the op itself when nothing changed), cached on the op.

    The body's changes are logged into the running pass's log every time, so
    `explain` shows them however often the op is compiled.
    """
    cached = getattr(op, "_recognised", None)
    if cached is None:
        changes = ChangeLog()
        body = recognise(outputs, keep=inputs, log=changes)
        unchanged = all(a is b for a, b in zip(body, outputs))
        rewritten = op if unchanged else rebuild_op(body)
        cached = op._recognised = (rewritten, changes.changes)
        rewritten._recognised = (rewritten, [])
    log = active_log()
    if log is not None:
        log.changes.extend(cached[1])
    return cached[0]


BODY_RULES = (composite_body_recognised, scan_body_recognised)


PIPELINE: tuple[tuple[Phase, tuple[Rewrite, ...]], ...] = (
    (Phase.CANONICALIZE, canonicalize.RULES),
    # the normal forms stay in force while recognising: a freshly recognised
    # `expand_dims(logsumexp(x))` must read as `logsumexp(x, keepdims=True)` to its parent
    (
        Phase.STABILIZE,
        canonicalize.RULES
        + stabilize.RULES
        + identities.RULES
        + exponentials.RULES
        + trigonometric.RULES
        + quadratic.RULES
        + probability.RULES
        + scaled.RULES
        + norms.RULES
        + products.RULES
        + branches.RULES
        + BODY_RULES,
    ),
    # only `recognise` runs it: these rules would hide a quotient from a value's recognition
    (
        Phase.GRADIENT,
        partials.RULES + trigonometric.LATE_RULES + products.LATE_RULES + exponentials.LATE_RULES + monomials.RULES,
    ),
    (Phase.SPECIALIZE, specialize.RULES),
    (Phase.RANGE, trigonometric.LATE_RULES + products.LATE_RULES + exponentials.LATE_RULES + monomials.RULES),
)


def run_phases(
    outputs: Sequence[Variable],
    phases: Iterable[Phase],
    keep: Iterable[Variable] = (),
    log: ChangeLog | None = None,
) -> list[Variable]:
    """`outputs` rebuilt through the given phases (in pipeline order); `keep` variables stay as they are.

    A kept variable with an owner (an intermediate someone differentiates with
    respect to) is hidden behind a stand-in leaf while rewriting, so no rule can
    look through it and rewrite it away.
    """
    wanted = set(phases)
    stand_ins = {v.id: Variable(v.type, name=v.name) for v in keep if v.owner is not None}
    leaves = [v for v in keep if v.owner is None]
    result = list(outputs)
    if Phase.STABILIZE in wanted:  # before it: a rolled-up loop's step is recognised as a loop body
        result = reroll(result, keep, log)
    for phase, rules in PIPELINE:
        if phase is Phase.CANONICALIZE and Phase.STABILIZE in wanted:
            continue  # stabilize applies the normal forms as well, in the same pass
        if phase in wanted:
            rebuild = Rebuilder(rules, log=log, keep=leaves, context=specialize.KEEP_WHOLE.get())
            rebuild.done.update(stand_ins)
            result = rebuild(result)
    if stand_ins:
        originals = {v.id: v for v in keep}
        result = substitute(result, {s.id: originals[k] for k, s in stand_ins.items()})
    return result


@names.positional()  # rewrites build by position: names are the user's (graph.names)
def optimize(
    outputs: Sequence[Variable],
    keep: Iterable[Variable] = (),
    recognition: bool = True,
    log: ChangeLog | None = None,
    keep_whole: Callable[[Op], bool] | None = None,
) -> list[Variable]:
    """The whole pipeline; with `recognition=False` formulas stay exactly as written.

    Without recognition the normal forms of canonicalize are skipped too (one of
    them, `log(exp(x)) → x`, already repairs an overflow); what remains is merging,
    constant folding and inlining, none of which changes a value.  `keep_whole`
    says which composites the target backend runs as one node instead of inlining.
    """
    phases = [Phase.CANONICALIZE, Phase.STABILIZE, Phase.SPECIALIZE, Phase.RANGE] if recognition else [Phase.SPECIALIZE]
    token = specialize.KEEP_WHOLE.set(keep_whole)
    try:
        result = run_phases(outputs, phases, keep, log)
        for _ in range(SHAPE_LIFTS):  # each round spares one more layer of values read for their shape
            lifted = specialize.lift_shape_only(result, keep)
            if lifted is None:
                break
            result = run_phases(lifted, [Phase.SPECIALIZE], keep, log)
        return result
    finally:
        specialize.KEEP_WHOLE.reset(token)


@names.positional()
def recognise(
    outputs: Sequence[Variable], keep: Iterable[Variable] = (), log: ChangeLog | None = None
) -> list[Variable]:
    """Canonicalize, stabilize and the gradient guards: naive formulas become stable
    primitives, composites stay, and what will be differentiated is prepared for it."""
    return run_phases(outputs, [Phase.CANONICALIZE, Phase.STABILIZE, Phase.GRADIENT], keep, log)
