"""Pod templates of Ray head and worker groups, as plain dicts for KubeRay's CRDs.

KubeRay's pod templates are core PodTemplateSpecs inside a custom resource, so they are built as
data here (cdk8s-plus objects cannot be nested in an ApiObject). Every figure comes from the
props, which the charts fill from the configuration (instance groups and the catalog).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from skyrl_hyperpod.config.efa import efa_environment
from skyrl_hyperpod.config.hyperpod import InstanceGroupConfig
from skyrl_hyperpod.plumbing.upstream import (
    GPU_RESOURCE,
    INSTANCE_TYPE_LABEL,
    RAY_CLIENT_PORT,
    RAY_DASHBOARD_PORT,
    RAY_GCS_PORT,
    RAY_SERVE_HTTP_PORT,
)

EFA_RESOURCE = "vpc.amazonaws.com/efa"

SHARED_VOLUME = "shared"
SHM_VOLUME = "dshm"
JOB_SCRIPT_VOLUME = "job-script"

# Ray's default ports; KubeRay's head Service publishes the named ones.
HEAD_PORTS = (("gcs-server", RAY_GCS_PORT), ("dashboard", RAY_DASHBOARD_PORT), ("client", RAY_CLIENT_PORT))
SERVE_PORT = ("serve", RAY_SERVE_HTTP_PORT)

# HyperPod labels every node with its health; AWS recommends selecting `Schedulable` for workloads, which
# keeps pods off nodes under deep health checks or waiting for a reboot or a replacement
# (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-node-labels.html).
NODE_HEALTH_STATUS_LABEL = "sagemaker.amazonaws.com/node-health-status"
SCHEDULABLE_NODE = ((NODE_HEALTH_STATUS_LABEL, "Schedulable"),)


@dataclass(frozen=True)
class SharedVolume:
    """The ReadWriteMany FSx PVC and where pods mount it."""

    claim_name: str
    mount_path: str
    read_only: bool = False


@dataclass(frozen=True)
class ScriptVolume:
    """A ConfigMap mounted as a directory (no subPath, so an update reaches running pods), each key at its path
    (items: a key cannot hold the '/' of a file in a subdirectory)."""

    config_map: str
    mount_path: str
    items: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class RayPodProps:
    """One Ray pod: where it runs, what it requests, what it mounts."""

    container_name: str
    image: str
    service_account: str
    instance_type: str
    cpus: int
    memory_gib: int
    shm_gib: int
    gpus: int = 0
    efa_devices: int = 0
    # Whether the node's EFA devices support RDMA (InstanceSpec.efa_device_rdma).
    efa_device_rdma: bool = False
    ports: tuple[tuple[str, int], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    # (name, Secret, key): variables the kubelet reads from a Secret of the pod's namespace when the container starts
    # (secretKeyRef), so no value is in the manifest; a container started before a Secret update keeps the old value.
    # https://kubernetes.io/docs/concepts/configuration/secret/#using-secrets-as-environment-variables
    secret_env: tuple[tuple[str, str, str], ...] = ()
    shared: SharedVolume | None = None
    script: ScriptVolume | None = None
    run_as: tuple[int, int] | None = None
    init_containers: tuple[dict, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    # (label, value) pairs the node must carry: a required node affinity, so a node that loses
    # one is not picked for new pods (running pods stay: IgnoredDuringExecution).
    required_node_labels: tuple[tuple[str, str], ...] = ()


def allocatable_pod(group: InstanceGroupConfig) -> tuple[int, int]:
    """(vCPUs, GiB) one pod per node of the group may request after system reservations."""
    return group.allocatable_vcpus, group.allocatable_memory_gib


def ray_pod_template(props: RayPodProps) -> dict:
    """PodTemplateSpec with the Ray container first (KubeRay requires it), requests = limits
    (Guaranteed QoS: Ray sizes itself from the limits), and an explicitly sized /dev/shm."""
    quantities: dict[str, str | int] = {"cpu": str(props.cpus), "memory": f"{props.memory_gib}Gi"}
    if props.gpus:
        quantities[GPU_RESOURCE] = props.gpus
    if props.efa_devices:
        quantities[EFA_RESOURCE] = props.efa_devices
    mounts: list[dict[str, Any]] = [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}]
    volumes: list[dict[str, Any]] = [
        {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": f"{props.shm_gib}Gi"}}
    ]
    if props.shared:
        mounts.append({"name": SHARED_VOLUME, "mountPath": props.shared.mount_path, "readOnly": props.shared.read_only})
        volumes.append(
            {
                "name": SHARED_VOLUME,
                "persistentVolumeClaim": {"claimName": props.shared.claim_name, "readOnly": props.shared.read_only},
            }
        )
    if props.script:
        mounts.append({"name": JOB_SCRIPT_VOLUME, "mountPath": props.script.mount_path, "readOnly": True})
        volumes.append(
            {
                "name": JOB_SCRIPT_VOLUME,
                "configMap": {
                    "name": props.script.config_map,
                    "defaultMode": 0o444,
                    "items": [{"key": key, "path": path} for key, path in props.script.items],
                },
            }
        )
    security: dict = {"allowPrivilegeEscalation": False}
    if props.run_as:
        security.update({"runAsNonRoot": True, "runAsUser": props.run_as[0], "runAsGroup": props.run_as[1]})
    container: dict = {
        "name": props.container_name,
        "image": props.image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": dict(quantities), "limits": dict(quantities)},
        "volumeMounts": mounts,
        "securityContext": security,
    }
    if props.ports:
        container["ports"] = [{"name": name, "containerPort": port} for name, port in props.ports]
    env = list(props.env)
    if props.efa_devices:
        # The EFA request and the environment that makes NCCL use it always go together.
        env += efa_environment(device_rdma=props.efa_device_rdma)
    entries: list[dict[str, Any]] = [{"name": name, "value": value} for name, value in env]
    entries += [
        {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
        for name, secret, key in props.secret_env
    ]
    names = [entry["name"] for entry in entries]
    if repeated := sorted({name for name in names if names.count(name) > 1}):
        # Kubernetes keeps the last of two entries with one name: a Secret must not silently replace a set value.
        raise ValueError(f"{props.container_name}: environment variable(s) {', '.join(repeated)} set twice")
    if entries:
        container["env"] = entries
    spec: dict = {
        "serviceAccountName": props.service_account,
        "nodeSelector": {INSTANCE_TYPE_LABEL: props.instance_type},
        "containers": [container],
        "volumes": volumes,
    }
    if props.gpus:
        # Tolerate the GPU taint only: HyperPod's node-health taint keeps Ray off nodes under
        # deep health checks or repair.
        spec["tolerations"] = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
    if props.required_node_labels:
        expressions = [{"key": key, "operator": "In", "values": [value]} for key, value in props.required_node_labels]
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": expressions}]
                }
            }
        }
    if props.init_containers:
        spec["initContainers"] = list(props.init_containers)
    template: dict = {"spec": spec}
    metadata = {
        key: dict(value) for key, value in (("labels", props.labels), ("annotations", props.annotations)) if value
    }
    if metadata:
        template["metadata"] = metadata
    return template


def prepare_shared_dirs_container(
    *, image: str, mount_path: str, relative_dirs: list[str], owner: tuple[int, int]
) -> dict:
    """Init container that creates the project's directories on the fresh (root-owned) file system
    and hands them and their parents to the image's non-root user. Idempotent and not recursive:
    an fsGroup would make the kubelet walk the whole Lustre file system on every start."""
    uid, gid = owner
    chain: list[str] = [mount_path]
    for relative in relative_dirs:
        parts = relative.split("/")
        for depth in range(1, len(parts) + 1):
            path = posixpath.join(mount_path, *parts[:depth])
            if path not in chain:
                chain.append(path)
    leaves = " ".join(posixpath.join(mount_path, relative) for relative in relative_dirs)
    script = f"mkdir -p {leaves} && chown {uid}:{gid} {' '.join(chain)}"
    return {
        "name": "prepare-shared-dirs",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-ec", script],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
        "securityContext": {
            "runAsUser": 0,
            "runAsNonRoot": False,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "DAC_OVERRIDE"]},
        },
        "volumeMounts": [{"name": SHARED_VOLUME, "mountPath": mount_path}],
    }
