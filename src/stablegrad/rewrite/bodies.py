"""Stabilize, for ops with a body: user composites and loops get their bodies recognised.

These rules recurse into the pipeline (a body is recognised like any graph), which
is why they live apart from the pattern rules of stabilize.py.  A library
SymbolicOp has no such rule: its body is only ever seen after stabilize.
"""

from __future__ import annotations

from ..graph.basic import Apply, Variable
from ..ops.composite import OpFromGraph
from ..ops.scan import Scan
from .engine import ChangeLog, Kind, Phase, active_log, rewrite

_S = Phase.STABILIZE
_REC = Kind.RECOGNITION


@rewrite(_S, _REC, OpFromGraph)
def composite_body_recognised(node):
    """A user composite whose body has naive formulas → the same composite with a recognised body."""
    op = node.op
    rewritten = _recognised_body(op, op.inputs, op.outputs, lambda body: op.with_body(op.inputs, body))
    if rewritten is op:
        return None
    outputs = rewritten(*node.inputs)
    return [outputs] if isinstance(outputs, Variable) else list(outputs)


@rewrite(_S, _REC, Scan)
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
        from .pipeline import recognise

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
