"""The docs keep up with the code: every recognition rule has its catalogue entry."""

from pathlib import Path

from stablegrad.rewrite.engine import Kind
from stablegrad.rewrite.pipeline import BODY_RULES, PIPELINE

CATALOGUE = Path(__file__).parents[1] / "docs" / "recognition.md"


def test_every_recognition_rule_is_in_the_catalogue():
    text = CATALOGUE.read_text()
    rules = {r.name for _, rules in PIPELINE for r in rules if r.kind in (Kind.RECOGNITION, Kind.GUARD)}
    rules -= {r.name for r in BODY_RULES}  # these run the others inside composites and loops
    missing = sorted(name for name in rules if f"`{name}`" not in text)
    assert not missing, f"docs/recognition.md lacks {missing}"
