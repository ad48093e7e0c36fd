"""HyperPod's managed Karpenter objects for the autoscaled instance groups: one HyperpodNodeClass naming them and one
Karpenter v1 NodePool per group.

Sources: https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-nodeclass.html and
https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-nodepool.html (HyperPod's
provider), https://karpenter.sh/docs/concepts/nodepools/ and https://karpenter.sh/docs/concepts/disruption/ (the
NodePool's fields). Validated against Karpenter's NodePool CRD and the NodeClass schema in
skyrl_hyperpod/validation/karpenter.py.
"""

from __future__ import annotations

import cdk8s
from constructs import Construct

from skyrl_hyperpod.config.hyperpod import InstanceGroupConfig
from skyrl_hyperpod.plumbing.upstream import (
    GPU_RESOURCE,
    HYPERPOD_NODECLASS_API_VERSION,
    HYPERPOD_NODECLASS_GROUP,
    HYPERPOD_NODECLASS_KIND,
    INSTANCE_TYPE_LABEL,
    KARPENTER_API_VERSION,
)


def node_class(name: str, groups: list[InstanceGroupConfig]) -> dict:
    return {
        "apiVersion": HYPERPOD_NODECLASS_API_VERSION,
        "kind": HYPERPOD_NODECLASS_KIND,
        "metadata": {"name": name},
        "spec": {"instanceGroups": [group.name for group in groups]},
    }


def node_pool(name: str, *, node_class_name: str, group: InstanceGroupConfig) -> dict:
    """Nodes of one instance group, up to its instance_count, removed only once empty.

    WhenEmpty: Karpenter never consolidates a node that runs a pod (a Ray worker holds GPU memory and actors that
    cannot move); each Ray pod also carries karpenter.sh/do-not-disrupt, which covers drift and expiry. One node at a
    time: a budget of 1. expireAfter Never, as the AWS page's sample: a long training run is not cut by a node's age.
    """
    return {
        "apiVersion": KARPENTER_API_VERSION,
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": HYPERPOD_NODECLASS_GROUP,
                        "kind": HYPERPOD_NODECLASS_KIND,
                        "name": node_class_name,
                    },
                    "requirements": [
                        {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": [group.instance_type]},
                    ],
                    "expireAfter": "Never",
                }
            },
            # The GPUs of instance_count nodes: Karpenter starts no node past this.
            "limits": {GPU_RESOURCE: group.spec.gpus * group.instance_count},
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": f"{group.scale_down_after_minutes}m",
                "budgets": [{"nodes": "1"}],
            },
        },
    }


class HyperPodAutoscaling(Construct):
    """The NodeClass and NodePools as ApiObjects (no `cdk8s import`: validation reads the CRD and the schema)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        node_class_name: str,
        node_pool_names: dict[str, str],
        groups: list[InstanceGroupConfig],
    ) -> None:
        super().__init__(scope, construct_id)
        objects = [node_class(node_class_name, groups)]
        objects += [
            node_pool(node_pool_names[group.name], node_class_name=node_class_name, group=group) for group in groups
        ]
        for document in objects:
            metadata = document["metadata"]
            api_object = cdk8s.ApiObject(
                self,
                f"{document['kind']}-{metadata['name']}",
                api_version=document["apiVersion"],
                kind=document["kind"],
                metadata=metadata,
            )
            api_object.add_json_patch(cdk8s.JsonPatch.add("/spec", document["spec"]))
