"""The review's rules: one rule per file in this folder, and this list, the registry, in the order they run.

Adding a rule is one file, one registry line and one test:

1. `rules/<name>.py` defines `RULE`, a `ChangeRule` or a `ReviewRule` (model.py) named `<name>`, with what it
   flags (one line) and the section its findings show in (`risks`, `helm` or `disruptions`). A `ChangeRule`'s
   `check` gets each resource change at the moments it names (replaced, removed, an update that may fail) and adds
   risk lines to it; setting `stateful_loss` fails `--fail-on-stateful-replacement`. A `ReviewRule`'s `check`
   reads the whole review after the diff and returns `Disruption`s.
2. One line in `RULES` below. Order matters: change rules add their lines in this order, and review rules'
   findings show in this order within their section.
3. `tests/review_rules/test_rule_<name>.py`: the rule fires on its own input and stays quiet on a clean one.
   tests/review_rules/test_review_rule_registry.py fails when a file here is not in `RULES` or the other way round.
"""

from __future__ import annotations

from ..model import ChangeEvent, ChangeRule, Disruption, ReviewContext, ReviewRule, Rule
from . import (
    cdk_helm_release,
    custom_name,
    helm_release,
    hyperpod_nodes,
    hyperpod_scaling,
    rayservice_upgrade,
    replace_or_fail,
    stateful_loss,
)

RULES: list[Rule] = [
    stateful_loss.RULE,
    custom_name.RULE,
    replace_or_fail.RULE,
    helm_release.RULE,
    cdk_helm_release.RULE,
    hyperpod_nodes.RULE,
    hyperpod_scaling.RULE,
    rayservice_upgrade.RULE,
]


def apply_change_rules(event: ChangeEvent) -> None:
    """Every change rule for this moment, in registry order."""
    for rule in RULES:
        if isinstance(rule, ChangeRule) and event.moment in rule.moments:
            rule.check(event)


def run_review_rules(context: ReviewContext) -> list[Disruption]:
    """Every review rule's findings, in registry order, each in its rule's section."""
    found: list[Disruption] = []
    for rule in RULES:
        if isinstance(rule, ReviewRule):
            for finding in rule.check(context):
                finding.section = rule.section
                found.append(finding)
    return found
