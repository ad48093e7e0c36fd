"""rules/replace_or_fail.py: an update the service cannot apply in place, on a stateful or retained resource."""

from __future__ import annotations

from typing import Any

from skyrl_hyperpod.ops.review import ReplacementFacts
from skyrl_hyperpod.ops.review.model import ChangeEvent, ResourceChange
from skyrl_hyperpod.ops.review.rules import replace_or_fail


def ask(old: dict[str, Any]) -> ResourceChange:
    change = ResourceChange("skyrl-hp-storage", "Thing", str(old["Type"]), "MODIFY")
    replace_or_fail.RULE.check(ChangeEvent("update_may_fail", change, old, old, ReplacementFacts()))
    return change


def test_fires_on_a_stateful_resource():
    change = ask({"Type": "AWS::FSx::FileSystem"})
    assert change.risks == ["if CloudFormation replaces it: loses its data (stateful per the CDK service spec)"]
    assert change.stateful_loss


def test_fires_on_a_retained_resource():
    change = ask({"Type": "AWS::EC2::SecurityGroup", "UpdateReplacePolicy": "Retain"})
    assert change.risks == ["if CloudFormation replaces it: orphans the retained resource"] and change.stateful_loss


def test_quiet_on_a_stateless_resource():
    change = ask({"Type": "AWS::EC2::SecurityGroup"})
    assert change.risks == [] and not change.stateful_loss
