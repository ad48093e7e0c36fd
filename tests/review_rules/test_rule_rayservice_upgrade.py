"""rules/rayservice_upgrade.py: a RayService change KubeRay rolls out by building a second RayCluster."""

from __future__ import annotations

import copy
from typing import Any

from skyrl_hyperpod.ops.review.model import Disruption, Objects, ReviewContext
from skyrl_hyperpod.ops.review.rules import rayservice_upgrade

KEY = "RayService serving/visgym-serve"
GPU_TYPE = "ml.g7e.12xlarge"


def rayservice(image: str = "serve:1", replicas: int = 1) -> dict[str, Any]:
    worker = {
        "groupName": "gpu",
        "replicas": replicas,
        "template": {
            "spec": {
                "nodeSelector": {"node.kubernetes.io/instance-type": GPU_TYPE},
                "containers": [{"image": image, "resources": {"limits": {"nvidia.com/gpu": 2}}}],
            }
        },
    }
    head = {"template": {"spec": {"containers": [{"image": image}]}}}
    return {
        "kind": "RayService",
        "metadata": {"name": "visgym-serve", "namespace": "serving"},
        "spec": {"rayClusterConfig": {"headGroupSpec": head, "workerGroupSpecs": [worker]}},
    }


def findings(base: Objects, head: Objects, gpus: int) -> list[Disruption]:
    context = ReviewContext(
        stacks=[],
        base_templates=None,
        head_templates=None,
        head_assembly=None,  # no templates: the GPUs come from the configuration's fallback
        base_manifests=base,
        head_manifests=head,
        gpu_fallback={GPU_TYPE: gpus},
    )
    return rayservice_upgrade.RULE.check(context)


def test_fires_on_a_new_image_with_the_gpus_both_clusters_need():
    [finding] = findings({KEY: rayservice()}, {KEY: rayservice(image="serve:2")}, gpus=8)
    assert finding.subject == f"`{KEY}`" and "KubeRay builds a new RayCluster" in finding.text
    assert finding.details == (
        f"needs 2 GPU(s) on {GPU_TYPE} for the new cluster while the old one holds 2: 4 during the upgrade, "
        "against the group's 8",
        "verdict: fits",
    )
    [tight] = findings({KEY: rayservice()}, {KEY: rayservice(image="serve:2")}, gpus=2)
    assert tight.details[-1].startswith("verdict: does NOT fit")


def test_upgrade_strategy_none_is_flagged_as_never_rolled_out():
    head = rayservice(image="serve:2")
    head["spec"]["upgradeStrategy"] = {"type": "None"}
    [finding] = findings({KEY: rayservice()}, {KEY: head}, gpus=8)
    assert "KubeRay does not roll it out" in finding.text


def test_quiet_on_fields_kuberay_applies_in_place_and_on_no_change():
    assert findings({KEY: rayservice()}, {KEY: rayservice(replicas=2)}, gpus=8) == []
    assert findings({KEY: rayservice()}, {KEY: copy.deepcopy(rayservice())}, gpus=8) == []
