"""The `hyperpod:` section: the cluster's instance groups (the Ray head's and the GPU workers') and node recovery."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ..plumbing.upstream import AUTOSCALING_NODE_RECOVERY, NODECLASS_MAX_INSTANCE_GROUPS
from .base import StrictModel
from .catalog import INSTANCE_CATALOG, InstanceSpec, unknown_instance_type

_HYPERPOD_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")

DeepHealthCheck = Literal["InstanceStress", "InstanceConnectivity"]
# `fixed`: the group's nodes run (and bill) from deploy to teardown. `on_demand`: HyperPod's managed Karpenter adds
# nodes while pods wait for them and removes them once empty; the group is created with 0 nodes and instance_count is
# its maximum (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling.html).
Scaling = Literal["fixed", "on_demand"]


class InstanceGroupConfig(StrictModel):
    name: str
    instance_type: str = Field(description="An instance type from the catalog (skyrl_hyperpod/config/catalog.py).")
    instance_count: int = Field(ge=0, le=256, description="Nodes in the group.")
    ebs_volume_gb: int = Field(
        default=500, ge=1, le=16384, description="Secondary EBS volume mounted at /opt/sagemaker."
    )
    threads_per_core: Literal[1, 2] = Field(
        default=1, description="1 turns hyperthreading off: the node then exposes half the catalog's vCPUs."
    )
    deep_health_checks: list[DeepHealthCheck] = Field(default_factory=list, description="GPU groups only.")
    system_reserved_vcpus: int | None = Field(
        default=None,
        ge=1,
        description="vCPUs per node left to kubelet, HyperPod agents and daemon sets (device plugins, CNI, CSI, "
        "observability) when sizing Ray pods. Default: max(4, node vCPUs / 8), at most half the node.",
    )
    training_plan_arn: str | None = Field(
        default=None, pattern=r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:[0-9]{12}:training-plan/.+$"
    )
    scaling: Scaling = Field(
        default="fixed",
        description="fixed: instance_count nodes from deploy to teardown. on_demand: HyperPod's managed Karpenter "
        "starts nodes while Ray pods wait for them and removes empty ones; instance_count is the maximum, the group "
        "is created with 0 nodes and may have no deep health checks (worker_group only; docs/autoscaling.md).",
    )
    scale_down_after_minutes: int = Field(
        default=10,
        ge=0,
        le=1440,
        description="scaling on_demand: how long a node stays empty before Karpenter removes it (its NodePool's "
        "consolidateAfter); nodes running a Ray pod are never removed.",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _HYPERPOD_NAME.fullmatch(value):
            raise ValueError("must be 1-63 letters, digits or hyphens, starting and ending with a letter or digit")
        return value

    @field_validator("instance_type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        if value not in INSTANCE_CATALOG:
            raise ValueError(unknown_instance_type(value))
        return value

    @model_validator(mode="after")
    def _health_checks_need_gpus(self) -> InstanceGroupConfig:
        if self.deep_health_checks and self.spec.gpus == 0:
            raise ValueError(
                f"deep_health_checks {self.deep_health_checks} need a GPU instance type; {self.instance_type} has none"
            )
        if self.scaling == "on_demand":
            # Both ruled out by https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-nodeclass.html
            if self.deep_health_checks:
                raise ValueError(
                    f"deep_health_checks {self.deep_health_checks} with scaling on_demand: HyperPod's Karpenter "
                    "autoscaling does not take instance groups with deep health checks (60-90 minutes per new node); "
                    "set deep_health_checks: [] or scaling: fixed"
                )
            if self.training_plan_arn:
                raise ValueError(
                    f"training_plan_arn {self.training_plan_arn} with scaling on_demand: HyperPod's Karpenter "
                    "autoscaling uses on-demand capacity only (no training plan or reserved capacity); remove "
                    "training_plan_arn or set scaling: fixed"
                )
        if self.system_reserved_vcpus is not None and self.system_reserved_vcpus >= self.node_vcpus:
            raise ValueError(
                f"system_reserved_vcpus {self.system_reserved_vcpus} leaves nothing for Ray: a {self.instance_type} "
                f"node with threads_per_core {self.threads_per_core} exposes {self.node_vcpus} vCPUs"
            )
        return self

    @property
    def spec(self) -> InstanceSpec:
        return INSTANCE_CATALOG[self.instance_type]

    @property
    def autoscaled(self) -> bool:
        return self.scaling == "on_demand"

    @property
    def initial_instance_count(self) -> int:
        """The count the cluster is created with: an autoscaled group starts at 0 (Karpenter scales any other count
        down to 0) and grows up to instance_count."""
        return 0 if self.autoscaled else self.instance_count

    @property
    def node_vcpus(self) -> int:
        """vCPUs the OS, and so the kubelet, sees on one node of this group."""
        return self.spec.physical_cores * self.threads_per_core

    @property
    def allocatable_vcpus(self) -> int:
        """vCPUs one pod per node may request: leaves room for kubelet, HyperPod agents and daemon sets."""
        reserved = self.system_reserved_vcpus or min(self.node_vcpus // 2, max(4, self.node_vcpus // 8))
        return self.node_vcpus - reserved

    @property
    def allocatable_memory_gib(self) -> int:
        """Memory one pod per node may request after system reservations (kubelet, agents, page cache)."""
        memory = self.spec.memory_gib
        return memory - max(8, memory // 10)


DEFAULT_HEAD_GROUP = InstanceGroupConfig(
    name="head", instance_type="ml.r5d.16xlarge", instance_count=1, threads_per_core=2
)


class HyperPodConfig(StrictModel):
    node_recovery: Literal["Automatic", "None"] = "Automatic"
    head_group: InstanceGroupConfig = DEFAULT_HEAD_GROUP
    worker_group: InstanceGroupConfig = InstanceGroupConfig(
        name="gpu-workers",
        instance_type="ml.g7e.12xlarge",
        instance_count=3,
        deep_health_checks=["InstanceStress", "InstanceConnectivity"],
    )
    lifecycle_bucket_name: str | None = Field(
        default=None,
        description="Default: derived from name_prefix. Must start with 'sagemaker-' (the instance role policy reads only those).",
    )

    @field_validator("lifecycle_bucket_name")
    @classmethod
    def _lifecycle_bucket(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not value.startswith("sagemaker-"):
            raise ValueError("must start with 'sagemaker-' (AmazonSageMakerClusterInstanceRolePolicy reads only those)")
        if not _BUCKET.fullmatch(value) or ".." in value:
            raise ValueError("must be a valid S3 bucket name: 3-63 lowercase letters, digits, dots or hyphens")
        return value

    @property
    def instance_groups(self) -> dict[str, InstanceGroupConfig]:
        """Every instance group of the HyperPod cluster by its configuration key, in the order the cluster lists
        them (the Ray head's first). What applies to every group (the cluster's groups, prices, capacity,
        status, device plugins) reads this, so another group is one more entry here; what needs the Ray head or
        the GPU workers reads `head_group` or `worker_group`."""
        return {"head_group": self.head_group, "worker_group": self.worker_group}

    @property
    def autoscaled_groups(self) -> list[InstanceGroupConfig]:
        """The groups HyperPod's Karpenter scales: the HyperpodNodeClass names them, the cluster's AutoScaling is on
        when there is one."""
        return [group for group in self.instance_groups.values() if group.autoscaled]

    @model_validator(mode="after")
    def _groups(self) -> HyperPodConfig:
        if self.head_group.autoscaled:
            raise ValueError(
                "head_group.scaling on_demand: the Ray head (and the KubeRay autoscaler in it) must always run; "
                "only worker_group.scaling may be on_demand"
            )
        check_nodeclass_groups(self.autoscaled_groups)
        if self.autoscaled_groups and self.node_recovery != AUTOSCALING_NODE_RECOVERY:
            # https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling.html (prerequisites)
            raise ValueError(
                f"node_recovery = {self.node_recovery!r} with worker_group.scaling on_demand: HyperPod's autoscaling "
                f"needs node_recovery: {AUTOSCALING_NODE_RECOVERY}"
            )
        if self.head_group.instance_count < 1:
            raise ValueError("head_group.instance_count must be at least 1: the Ray head needs a node")
        head = self.head_group
        if head.spec.gpus:
            raise ValueError(
                f"head_group.instance_type {head.instance_type} has {head.spec.gpus} GPU(s), and no Ray head asks for "
                "one (the training and serving heads run the driver, the GCS and the proxy): they would be billed unused; "
                f"choose a CPU type such as {DEFAULT_HEAD_GROUP.instance_type}"
            )
        if self.worker_group.spec.gpus == 0:
            raise ValueError(f"worker_group.instance_type {self.worker_group.instance_type} has no GPUs")
        if self.worker_group.instance_count < 1:
            raise ValueError("worker_group.instance_count must be at least 1")
        seen: dict[str, str] = {}
        for key, group in self.instance_groups.items():
            if group.name in seen:
                raise ValueError(f"{seen[group.name]}.name and {key}.name are both {group.name!r}")
            seen[group.name] = key
        return self


def check_nodeclass_groups(groups: list[InstanceGroupConfig]) -> None:
    """A HyperpodNodeClass names at most NODECLASS_MAX_INSTANCE_GROUPS instance groups."""
    if len(groups) > NODECLASS_MAX_INSTANCE_GROUPS:
        raise ValueError(
            f"{len(groups)} instance groups with scaling on_demand ({', '.join(g.name for g in groups)}): a "
            f"HyperpodNodeClass takes at most {NODECLASS_MAX_INSTANCE_GROUPS}; set scaling: fixed on the others"
        )
