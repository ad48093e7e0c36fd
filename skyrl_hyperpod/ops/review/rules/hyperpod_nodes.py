"""HyperPod instance-group fields whose change UpdateCluster applies in place by replacing or re-provisioning the
group's nodes: no CloudFormation replacement, but the nodes' pods stop."""

from __future__ import annotations

from ..model import MISSING, Disruption, ReviewContext, ReviewRule, display_value, strip_strength
from ..readers import hyperpod_clusters, instance_groups

# What no machine-readable source has: instance-group fields whose change replaces or re-provisions HyperPod
# nodes in place (UpdateCluster, no CloudFormation replacement). Each row: field, effect, primary source.
HYPERPOD_UPDATE_GUIDE = (
    "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-operate-cli-command-update-cluster.html"
)
HYPERPOD_LIFECYCLE_GUIDE = (
    "https://docs.aws.amazon.com/sagemaker/latest/dg/"
    "sagemaker-hyperpod-lifecycle-best-practices-slurm-slurm-update-cluster-lifecycle.html"
)
HYPERPOD_NODE_DISRUPTIONS: dict[str, tuple[str, str]] = {
    "InstanceType": (
        "every node of the group is replaced by an instance of the new type: its pods stop and node-local data "
        "(instance store, the secondary EBS volume) is lost", HYPERPOD_UPDATE_GUIDE),
    "ThreadsPerCore": (
        "CPU options are fixed when an instance launches: the group's nodes are replaced", HYPERPOD_UPDATE_GUIDE),
    "InstanceStorageConfigs": (
        "the secondary EBS volume is attached when a node launches: the group's nodes are replaced or keep the "
        "old volume until they are", HYPERPOD_UPDATE_GUIDE),
    "LifeCycleConfig": (
        "UpdateCluster runs lifecycle scripts only on new nodes; existing nodes keep the old set-up until "
        "UpdateClusterSoftware re-runs the scripts on the whole group (a rolling node replacement)",
        HYPERPOD_LIFECYCLE_GUIDE),
}  # fmt: skip


def check(context: ReviewContext) -> list[Disruption]:
    base, head = context.base_templates, context.head_templates
    if base is None or head is None:
        return []
    replaced = context.replaced
    found = []
    base_clusters = hyperpod_clusters(base)
    for node, cluster in hyperpod_clusters(head).items():
        if node not in base_clusters or node in replaced:
            continue
        old_groups = instance_groups(base_clusters[node])
        for name, group in instance_groups(cluster).items():
            old = old_groups.get(name)
            if old is None:
                continue
            for field_name, (effect, source) in HYPERPOD_NODE_DISRUPTIONS.items():
                if strip_strength(old.get(field_name)) != strip_strength(group.get(field_name)):
                    nodes = old.get("InstanceCount", "?")
                    change = f"{display_value(old.get(field_name, MISSING))} → {display_value(group.get(field_name, MISSING))}"
                    found.append(
                        Disruption(
                            f"HyperPod group `{name}` ({nodes} node(s)), `{node[0]}/{node[1]}`",
                            f"{field_name} {change}: {effect}",
                            source,
                        )
                    )
    return found


RULE = ReviewRule(
    name="hyperpod_nodes",
    flags="a HyperPod instance-group field (instance type, threads per core, instance storage, lifecycle scripts) "
    "changed on a cluster that is not replaced",
    section="disruptions",
    check=check,
)
