"""rules/custom_name.py: a replaced resource whose custom name stays the same cannot be replaced."""

from __future__ import annotations

from typing import Any

from skyrl_hyperpod.ops.review import ReplacementFacts
from skyrl_hyperpod.ops.review.model import ChangeEvent, ResourceChange
from skyrl_hyperpod.ops.review.rules import custom_name


def replaced(resource_type: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    change = ResourceChange("skyrl-hp-hyperpod", "Cluster", resource_type, "REPLACE")
    event = ChangeEvent(
        "replaced",
        change,
        {"Type": resource_type, "Properties": old},
        {"Type": resource_type, "Properties": new},
        ReplacementFacts(),
    )
    custom_name.RULE.check(event)
    return change.risks


def test_fires_when_the_name_is_unchanged():
    # ClusterName is the HyperPod cluster's schema primaryIdentifier, so the name that must change.
    [risk] = replaced(
        "AWS::SageMaker::Cluster",
        {"ClusterName": "skyrl-hp-hyperpod", "VpcConfig": {"Subnets": ["subnet-1"]}},
        {"ClusterName": "skyrl-hp-hyperpod", "VpcConfig": {"Subnets": ["subnet-2"]}},
    )
    assert risk.startswith("custom name ClusterName is unchanged: CloudFormation cannot replace")


def test_quiet_when_the_name_changes_or_is_generated():
    assert replaced("AWS::SageMaker::Cluster", {"ClusterName": "a"}, {"ClusterName": "b"}) == []
    # No name set: CloudFormation generates a new one for the replacement.
    assert replaced("AWS::SageMaker::Cluster", {}, {}) == []
