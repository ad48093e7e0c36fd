"""rules/hyperpod_scaling.py: autoscaling switched on or off, or a group's node count changed, and what it does to
the jobs on those nodes."""

from __future__ import annotations

from typing import Any

from skyrl_hyperpod.ops.review.model import ResourceChange, ReviewContext, StackDiff, Templates
from skyrl_hyperpod.ops.review.rules import hyperpod_scaling

STACK = "skyrl-hp-hyperpod"
AUTOSCALING = {"Mode": "Enable", "AutoScalerType": "Karpenter"}


def templates(autoscaling: dict | None = None, **group: Any) -> Templates:
    fields = {"InstanceGroupName": "gpu-workers", "InstanceType": "ml.g7e.12xlarge", "InstanceCount": 3, **group}
    properties: dict[str, Any] = {"InstanceGroups": [fields]}
    if autoscaling is not None:
        properties["AutoScaling"] = autoscaling
    return {STACK: {"Resources": {"Cluster": {"Type": "AWS::SageMaker::Cluster", "Properties": properties}}}}


def findings(base: Templates, head: Templates, *changes: ResourceChange) -> list[str]:
    context = ReviewContext(
        stacks=[StackDiff(STACK, "changed", list(changes), {})],
        base_templates=base,
        head_templates=head,
        head_assembly=head,
        base_manifests=None,
        head_manifests=None,
        gpu_fallback={},
    )
    return [f"{d.subject}: {d.text}" for d in hyperpod_scaling.RULE.check(context)]


def test_switching_to_on_demand_names_the_nodes_that_go():
    autoscaling, count = findings(templates(), templates(AUTOSCALING, InstanceCount=0))
    assert autoscaling.startswith("HyperPod cluster `skyrl-hp-hyperpod/Cluster`: AutoScaling off → on: ")
    assert "the pods on those nodes stop" in autoscaling
    assert count == (
        "HyperPod group `gpu-workers`, `skyrl-hp-hyperpod/Cluster`: InstanceCount 3 → 0: the group now starts at 0 "
        "and Karpenter adds nodes for pending pods: its 3 running node(s) go and the pods on them stop"
    )


def test_switching_back_to_fixed_says_jobs_wait_for_the_fixed_count():
    # The count going up stops nothing: only the switch is flagged.
    [autoscaling] = findings(templates(AUTOSCALING, InstanceCount=0), templates())
    assert "AutoScaling on → off: Karpenter stops adding nodes for pending pods" in autoscaling


def test_a_smaller_fixed_group_stops_the_pods_on_the_removed_nodes():
    [finding] = findings(templates(), templates(InstanceCount=1))
    assert "InstanceCount 3 → 1: HyperPod removes 2 node(s) of its choosing: the pods on them stop" in finding


def test_quiet_when_nothing_changes_more_nodes_come_or_the_cluster_is_replaced():
    assert findings(templates(AUTOSCALING, InstanceCount=0), templates(AUTOSCALING, InstanceCount=0)) == []
    assert findings(templates(), templates(InstanceCount=4)) == []
    assert findings(templates(), templates(InstanceType="ml.g7e.24xlarge")) == []
    replaced = ResourceChange(STACK, "Cluster", "AWS::SageMaker::Cluster", "REPLACE")
    assert findings(templates(), templates(AUTOSCALING, InstanceCount=0), replaced) == []
