"""Ray workers land only on HyperPod nodes that passed their health checks.

HyperPod labels every node `sagemaker.amazonaws.com/node-health-status` and recommends selecting
`Schedulable` for workloads
(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-node-labels.html):
the other values mark a node under deep health checks or waiting for a reboot or a replacement.
"""

from __future__ import annotations

import pytest
from chart_helpers import objects, synth

from skyrl_hyperpod.config import validate_config

SCHEDULABLE = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "sagemaker.amazonaws.com/node-health-status",
                            "operator": "In",
                            "values": ["Schedulable"],
                        }
                    ]
                }
            ]
        }
    }
}


def worker_templates(charts: dict[str, list[dict]]) -> list[tuple[str, dict]]:
    specs = [(f"RayCluster/{d['metadata']['name']}", d["spec"]) for d in objects(charts, "RayCluster")]
    specs += [
        (f"RayService/{d['metadata']['name']}", d["spec"]["rayClusterConfig"]) for d in objects(charts, "RayService")
    ]
    specs += [(f"RayJob/{d['metadata']['name']}", d["spec"]["rayClusterSpec"])
              for d in objects(charts, "RayJob") if "rayClusterSpec" in d["spec"]]  # fmt: skip
    return [
        (f"{name} {group['groupName']}", group["template"])
        for name, spec in specs
        for group in spec["workerGroupSpecs"]
    ]


@pytest.mark.parametrize(
    ("overrides", "expected_workloads"),
    [
        ({"training": {"jobs": {"self_contained_jobs": False}}}, {"RayCluster", "RayService"}),
        ({}, {"RayJob", "RayService"}),
    ],
    ids=["shared-cluster", "self-contained-jobs"],
)
def test_every_ray_worker_requires_a_schedulable_node(overrides, expected_workloads):
    templates = worker_templates(synth(validate_config(overrides)))
    assert {name.split("/")[0] for name, _ in templates} == expected_workloads
    for name, template in templates:
        assert template["spec"].get("affinity") == SCHEDULABLE, name
        # Still on the GPU group's instance type, and still tolerating only the GPU taint.
        assert "node.kubernetes.io/instance-type" in template["spec"]["nodeSelector"], name
