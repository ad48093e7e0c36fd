"""Values this project gives the Helm charts it installs from aws/sagemaker-hyperpod-cli, and what it
knows about their archives.

Computed here, once, from the typed configuration: the EKS stack passes them to the installer and
`skyrl-hp chart-check` checks them against (and renders with) the chart at the pinned commit, so the two
never disagree.
"""

from __future__ import annotations

from typing import Any

from ..config import ProjectConfig
from ..plumbing.upstream import INSTANCE_TYPE_LABEL, KUBE_SYSTEM_NAMESPACE

# AWS's install guide names the release `hyperpod-dependencies` in kube-system
# (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-install-packages-using-helm-chart.html),
# so a later `helm upgrade` from that guide targets this release instead of creating a second one.
HYPERPOD_DEPENDENCIES_RELEASE = "hyperpod-dependencies"
HYPERPOD_DEPENDENCIES_NAMESPACE = KUBE_SYSTEM_NAMESPACE

# sha256 of the remote sub-chart archives the chart at the pinned commit downloads (Chart.yaml at
# b01cf906, release v3.9.0), by the file name `helm pull` writes. Each is the `digest` of that version in
# the chart repository's index.yaml (Helm's digest is the sha256 of the .tgz), and the archive committed
# next to it hashes to the same value:
# - https://nvidia.github.io/k8s-device-plugin/index.yaml (NVIDIA/k8s-device-plugin, branch gh-pages,
#   stable/nvidia-device-plugin-0.16.1.tgz, added 2024-07-26);
# - https://aws.github.io/eks-charts/index.yaml (aws/eks-charts, branch gh-pages,
#   aws-efa-k8s-device-plugin-v0.5.20.tgz, published 2025-12-25).
# cert-manager v1.18.2 (oci://quay.io/jetstack/charts) is disabled by the chart's values, so the installer
# does not download it and it needs no pin. Archives of a different commit need pins of their own
# (`helm_installer.archive_sha256`); without one the installer refuses the archive.
UPSTREAM_ARCHIVE_SHA256 = {
    "nvidia-device-plugin-0.16.1.tgz": "a77b4e81fd56a11e39536500a7a6538899b952c4b4370200280bce313dffda6a",
    "aws-efa-k8s-device-plugin-v0.5.20.tgz": "252967e2083799987d576ac86986b3316ce350dd1da2d07a8b83b5c4288fbcf4",
}

HEALTH_MONITORING_AGENT = "health-monitoring-agent"
NVIDIA_DEVICE_PLUGIN = "nvidia-device-plugin"
EFA_DEVICE_PLUGIN = "aws-efa-k8s-device-plugin"


def archive_pins(config: ProjectConfig) -> dict[str, str]:
    """The archive pins the installer enforces: the known upstream digests, then the configuration's own
    (which win, so a mirror's re-built archive can be pinned)."""
    return {**UPSTREAM_ARCHIVE_SHA256, **config.helm_installer.archive_sha256}


def gpu_instance_types(config: ProjectConfig) -> list[str]:
    return sorted({group.instance_type for group in config.hyperpod.instance_groups.values() if group.spec.gpus > 0})


def efa_instance_types(config: ProjectConfig) -> list[str]:
    return sorted(
        {group.instance_type for group in config.hyperpod.instance_groups.values() if group.spec.efa_interfaces > 0}
    )


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
