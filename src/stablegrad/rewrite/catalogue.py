"""The recognition catalogue, written from the rules themselves so that it cannot drift.

Every recognition (and guard) rule of the stabilize phase is one row: its module, its name,
the first paragraph of its docstring (pattern → replacement) and the rest (when it must not
fire, notes).  `docs/recognition.md` is this module's output; `tests/test_docs.py` checks
that the committed file is what the rules say now.

Regenerate with ``python -m stablegrad.rewrite.catalogue > docs/recognition.md``.

>>> "| stabilize | `logsumexp_from_naive` |" in markdown()
True
"""

from __future__ import annotations

import inspect

from .engine import Kind, Rewrite
from .pipeline import PIPELINE

HEADER = """\
# Recognition catalogue

Every rule the stabilize phase runs, in the order it tries them: the pattern, its replacement,
and when it must not fire (the soundness contract in `design.md`).  Rules chain: a
replacement is rewritten again, so `log(1 + exp(x))` → `log1p(exp(x))` → `softplus(x)`.
Every rule also fires inside `sg.OpFromGraph` composites and `sg.scan` bodies, and sees
through layout ops (`design.md`, Rewrites); `sg.explain` names the rule behind each rewrite.
This page is generated from the rules' docstrings (`python -m stablegrad.rewrite.catalogue`);
`tests/test_docs.py` checks that it is up to date.

| module | rule | pattern → replacement | must not fire / notes |
|---|---|---|---|
"""


def catalogued_rules() -> list[Rewrite]:
    """The recognition and guard rules, in pipeline order (the ones that only recurse into
    bodies are `ALGEBRA`: their rules are listed themselves)."""
    seen: set[str] = set()
    rules = []
    for _, phase_rules in PIPELINE:
        for rule in phase_rules:
            if rule.kind in (Kind.RECOGNITION, Kind.GUARD) and rule.name not in seen:
                seen.add(rule.name)
                rules.append(rule)
    return rules


def row(rule: Rewrite) -> str:
    """One table row: the docstring's first paragraph, then the rest, each joined onto one line."""
    paragraphs = [" ".join(p.split()) for p in inspect.cleandoc(rule.fn.__doc__ or "").split("\n\n")]
    summary, notes = paragraphs[0], " ".join(p for p in paragraphs[1:] if p)
    module = rule.fn.__module__.rsplit(".", 1)[-1]
    cells = [module, f"`{rule.name}`", _cell(summary), _cell(notes)]
    return "| " + " | ".join(cells) + " |"


def _cell(text: str) -> str:
    # a `|` inside a cell would end it; two spaces after a sentence are one in Markdown anyway
    return text.replace("|", "\\|").replace(".  ", ". ")


def markdown() -> str:
    """The whole catalogue page."""
    return HEADER + "".join(row(rule) + "\n" for rule in catalogued_rules())


if __name__ == "__main__":
    print(markdown(), end="")
