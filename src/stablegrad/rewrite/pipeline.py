"""The rewrite pipeline, in order.  This module is the one place that says what runs when.

    canonicalize → stabilize (recognition) → specialize (late inlining)

Each phase is one linear bottom-up pass (`engine.Rebuilder`) that also merges
duplicate subgraphs and folds constants.  `recognise` is the value-preserving
prefix that `grad` runs before differentiating.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..graph.basic import Variable
from . import canonicalize, specialize, stabilize
from .engine import ChangeLog, Phase, Rebuilder, Rewrite

PIPELINE: tuple[tuple[Phase, tuple[Rewrite, ...]], ...] = (
    (Phase.CANONICALIZE, canonicalize.RULES),
    (Phase.STABILIZE, stabilize.RULES),
    (Phase.SPECIALIZE, specialize.RULES),
)


def run_phases(
    outputs: Sequence[Variable],
    phases: Iterable[Phase],
    keep: Iterable[Variable] = (),
    log: ChangeLog | None = None,
) -> list[Variable]:
    """`outputs` rebuilt through the given phases (in pipeline order); `keep` variables stay leaves."""
    wanted = set(phases)
    if not _stable_family_ready():  # TEMPORARY while the stable family lands
        wanted.discard(Phase.STABILIZE)
    keep = list(keep)
    result = list(outputs)
    for phase, rules in PIPELINE:
        if phase in wanted:
            result = Rebuilder(rules, log=log, keep=keep)(result)
    return result


def optimize(
    outputs: Sequence[Variable], keep: Iterable[Variable] = (), recognition: bool = True, log: ChangeLog | None = None
) -> list[Variable]:
    """The whole pipeline; with `recognition=False` formulas stay as written (only merged, folded, inlined)."""
    phases = [Phase.CANONICALIZE, Phase.SPECIALIZE] + ([Phase.STABILIZE] if recognition else [])
    return run_phases(outputs, phases, keep, log)


def recognise(
    outputs: Sequence[Variable], keep: Iterable[Variable] = (), log: ChangeLog | None = None
) -> list[Variable]:
    """Canonicalize and stabilize only: naive formulas become stable primitives, composites stay."""
    return run_phases(outputs, [Phase.CANONICALIZE, Phase.STABILIZE], keep, log)


def _stable_family_ready() -> bool:  # TEMPORARY
    try:
        from ..ops import stable

        return all(
            hasattr(stable, n) for n in ("LogSumExp", "Softmax", "LogSoftmax", "Sigmoid", "Softplus", "log_erfc")
        )
    except ImportError:
        return False
