"""Values this project gives the Helm charts it installs from aws/sagemaker-hyperpod-cli.

Computed here, once, from the typed configuration: the EKS stack passes them to the installer and
`skyrl-hp chart-check` checks them against the chart at the pinned
commit, so the two never disagree.
"""

from __future__ import annotations

from typing import Any

from .config import ProjectConfig
from .config.platform import InstanceGroupConfig
from .constants import INSTANCE_TYPE_LABEL

HEALTH_MONITORING_AGENT = "health-monitoring-agent"
NVIDIA_DEVICE_PLUGIN = "nvidia-device-plugin"
EFA_DEVICE_PLUGIN = "aws-efa-k8s-device-plugin"


def hyperpod_groups(config: ProjectConfig) -> tuple[InstanceGroupConfig, ...]:
    return (config.hyperpod.head_group, config.hyperpod.worker_group)


def gpu_instance_types(config: ProjectConfig) -> list[str]:
    return sorted({group.instance_type for group in hyperpod_groups(config) if group.spec.gpus > 0})


def efa_instance_types(config: ProjectConfig) -> list[str]:
    return sorted({group.instance_type for group in hyperpod_groups(config) if group.spec.efa_interfaces > 0})


def hyperpod_dependencies_values(config: ProjectConfig, region: str) -> dict[str, Any]:
    """Values for the HyperPod dependencies chart (helm_chart/HyperPodHelmChart), from the instance groups.

    The chart pins the NVIDIA and EFA device plugins to hard-coded instance-type lists; without a match
    the GPU nodes never advertise `nvidia.com/gpu` or `vpc.amazonaws.com/efa`. Helm replaces lists, so
    these values restrict the plugins to exactly the groups that have GPUs / EFA, whatever the chart's
    own lists hold. The health-monitoring agent's node affinity is a hard-coded list in its template
    (no value reaches it): the chart check proves it selects every configured GPU type.
    """
    values: dict[str, Any] = {
        # The agent's image lives in a per-region ECR repository; the chart otherwise guesses the region.
        HEALTH_MONITORING_AGENT: {"region": region},
        NVIDIA_DEVICE_PLUGIN: {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": gpu_instance_types(config)}
                                ]
                            }
                        ]
                    }
                }
            }
        },
    }
    efa_types = efa_instance_types(config)
    if efa_types:
        values[EFA_DEVICE_PLUGIN] = {"supportedInstanceLabels": {"values": efa_types}}
    return values


def ray_endpoint_operator_values(config: ProjectConfig, region: str) -> dict[str, Any]:
    """Values of the HyperPod Ray endpoint operator chart, named as AWS's install instructions name them
    (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ray-endpoint-operator.html)."""
    operator = config.ray_endpoint_operator
    values: dict[str, Any] = {
        "region": region,
        "domain": operator.domain,
        "namespace": operator.namespace,
        "manager": {"enableEndpointsByDefault": operator.enable_endpoints_by_default},
    }
    if operator.kms_key_arn:
        values["kmsKeyArn"] = operator.kms_key_arn
    if operator.admin_group:
        values["adminGroup"] = operator.admin_group
    return values
