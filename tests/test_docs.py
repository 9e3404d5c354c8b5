"""The docs keep up with the code: the recognition catalogue is what the rules say now."""

from pathlib import Path

from stablegrad.rewrite.catalogue import catalogued_rules, markdown

CATALOGUE = Path(__file__).parents[1] / "docs" / "recognition.md"


def test_the_catalogue_is_generated_from_the_rules_as_they_are():
    assert CATALOGUE.read_text() == markdown(), (
        "docs/recognition.md is out of date: python -m stablegrad.rewrite.catalogue > docs/recognition.md"
    )


def test_every_catalogued_rule_has_a_pattern_and_a_name():
    rules = catalogued_rules()
    assert len({r.name for r in rules}) == len(rules) > 30
    for rule in rules:
        assert rule.fn.__doc__ and "→" in rule.fn.__doc__.split("\n\n")[0], rule.name
