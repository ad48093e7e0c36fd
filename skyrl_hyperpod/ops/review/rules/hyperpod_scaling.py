"""A HyperPod cluster whose autoscaling is switched on or off, or an instance group that loses nodes: what the update
does to the nodes and so to the jobs running on them (more nodes of a fixed group stop nothing, and are not flagged)."""

from __future__ import annotations

from typing import Any

from ..model import MISSING, Disruption, ReviewContext, ReviewRule, display_value, strip_strength
from ..readers import hyperpod_clusters, instance_groups

AUTOSCALING_GUIDE = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling.html"
NODECLASS_GUIDE = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-nodeclass.html"
SCALING_GUIDE = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-scaling-eks.html"


def _autoscaling_on(cluster: dict[str, Any]) -> bool:
    setting = (cluster.get("Properties") or {}).get("AutoScaling")
    return isinstance(setting, dict) and strip_strength(setting.get("Mode")) == "Enable"


def _count(group: dict[str, Any] | None) -> Any:
    return MISSING if group is None else strip_strength(group.get("InstanceCount", MISSING))


def _count_effect(old: Any, new: Any, *, autoscaled: bool) -> str | None:
    """What a count change does to the pods on the group's nodes; None when it stops none (more nodes)."""
    if autoscaled:
        return (
            f"the group now starts at 0 and Karpenter adds nodes for pending pods: its {display_value(old)} running "
            "node(s) go and the pods on them stop"
        )
    if isinstance(old, int) and isinstance(new, int) and new < old:
        return (
            f"HyperPod removes {old - new} node(s) of its choosing: the pods on them stop (a training job's attempt "
            "fails and retries from its newest checkpoint once nodes are back)"
        )
    return None


def check(context: ReviewContext) -> list[Disruption]:
    base, head = context.base_templates, context.head_templates
    if base is None or head is None:
        return []
    found = []
    base_clusters = hyperpod_clusters(base)
    for node, cluster in hyperpod_clusters(head).items():
        if node not in base_clusters or node in context.replaced:
            continue
        old_cluster = base_clusters[node]
        was_on, is_on = _autoscaling_on(old_cluster), _autoscaling_on(cluster)
        where = f"`{node[0]}/{node[1]}`"
        if was_on != is_on:
            switch = (
                "managed Karpenter starts and removes the autoscaled groups' nodes from now on: a group created with "
                "nodes is scaled down to 0 and the pods on those nodes stop (hyperpod.worker_group.scaling on_demand)"
                if is_on
                else "Karpenter stops adding nodes for pending pods: jobs that wait for GPU nodes get the group's fixed "
                "count once HyperPod has provisioned it, with its deep health checks (hyperpod.worker_group.scaling fixed)"
            )
            found.append(
                Disruption(
                    f"HyperPod cluster {where}",
                    f"AutoScaling {'off → on' if is_on else 'on → off'}: {switch}",
                    AUTOSCALING_GUIDE if is_on else NODECLASS_GUIDE,
                )
            )
        old_groups = instance_groups(old_cluster)
        for name, group in instance_groups(cluster).items():
            old, new = _count(old_groups.get(name)), _count(group)
            effect = (
                _count_effect(old, new, autoscaled=is_on and new == 0) if name in old_groups and old != new else None
            )
            if effect is not None:
                found.append(
                    Disruption(
                        f"HyperPod group `{name}`, {where}",
                        f"InstanceCount {display_value(old)} → {display_value(new)}: {effect}",
                        SCALING_GUIDE,
                    )
                )
    return found


RULE = ReviewRule(
    name="hyperpod_scaling",
    flags="a HyperPod cluster's autoscaling switched on or off, or an instance group's node count lowered",
    section="disruptions",
    check=check,
)
