"""Graph rewrites: the engine, the phases' rules, and the pipeline that orders them."""

from __future__ import annotations

from collections.abc import Sequence

from ..graph.basic import Variable
from .engine import Change, ChangeLog, Kind, Phase, Rewrite, RewriteCycleError, rewrite
from .pipeline import PIPELINE, optimize, recognise


def recognise_for_grad(cost: Variable, wrt: Sequence[Variable], log: ChangeLog | None = None) -> Variable:
    """The cost with naive formulas replaced by stable primitives; `wrt` stay as they are."""
    return recognise([cost], keep=wrt, log=log)[0]
