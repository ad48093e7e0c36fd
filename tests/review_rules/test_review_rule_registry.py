"""The review rules' registry: every file in rules/ is registered, every registered rule has its file and its test."""

from __future__ import annotations

from pathlib import Path

from skyrl_hyperpod.ops.review import rules
from skyrl_hyperpod.ops.review.model import ReviewRule, Rule
from skyrl_hyperpod.ops.review.render import SECTION_HEADINGS

RULES_DIR = Path(rules.__file__).parent
TESTS_DIR = Path(__file__).parent


def module_name(rule: Rule) -> str:
    return rule.check.__module__.rsplit(".", 1)[-1]


def test_every_rule_file_is_registered_and_every_registered_rule_is_a_file():
    files = sorted(p.stem for p in RULES_DIR.glob("*.py") if p.name != "__init__.py")
    assert sorted(module_name(rule) for rule in rules.RULES) == files
    assert not [p for p in RULES_DIR.iterdir() if p.is_dir() and p.name != "__pycache__"]


def test_each_rule_is_named_after_its_file_once_and_has_its_own_test():
    names = [rule.name for rule in rules.RULES]
    assert names == [module_name(rule) for rule in rules.RULES]
    assert len(set(names)) == len(names)
    assert [name for name in names if not (TESTS_DIR / f"test_rule_{name}.py").is_file()] == []


def test_each_rule_says_what_it_flags_and_its_findings_have_a_heading():
    for rule in rules.RULES:
        assert rule.flags.strip(), rule.name
        # A review rule's findings show only under a heading of their section; a change rule's on the resource.
        assert rule.section in SECTION_HEADINGS if isinstance(rule, ReviewRule) else rule.section == "risks"
