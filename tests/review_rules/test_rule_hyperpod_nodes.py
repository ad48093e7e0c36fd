"""rules/hyperpod_nodes.py: an instance-group field whose update replaces or re-provisions the group's nodes."""

from __future__ import annotations

from typing import Any

from skyrl_hyperpod.ops.review.model import ResourceChange, ReviewContext, StackDiff, Templates
from skyrl_hyperpod.ops.review.rules import hyperpod_nodes

STACK = "skyrl-hp-hyperpod"


def templates(**group: Any) -> Templates:
    fields = {"InstanceGroupName": "gpu-workers", "InstanceType": "ml.g7e.12xlarge", "InstanceCount": 2, **group}
    cluster = {"Type": "AWS::SageMaker::Cluster", "Properties": {"InstanceGroups": [fields]}}
    return {STACK: {"Resources": {"Cluster": cluster}}}


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
    return [f"{d.subject}: {d.text}" for d in hyperpod_nodes.RULE.check(context)]


def test_fires_on_an_instance_type_change():
    [finding] = findings(templates(), templates(InstanceType="ml.g7e.24xlarge"))
    assert finding.startswith(
        'HyperPod group `gpu-workers` (2 node(s)), `skyrl-hp-hyperpod/Cluster`: InstanceType "ml.g7e.12xlarge" → '
        '"ml.g7e.24xlarge": every node of the group is replaced'
    )


def test_quiet_on_a_count_change_and_on_a_replaced_cluster():
    assert findings(templates(), templates(InstanceCount=3)) == []
    # A replaced cluster is the replacement's finding, not an update in place.
    replaced = ResourceChange(STACK, "Cluster", "AWS::SageMaker::Cluster", "REPLACE")
    assert findings(templates(), templates(InstanceType="ml.g7e.24xlarge"), replaced) == []
