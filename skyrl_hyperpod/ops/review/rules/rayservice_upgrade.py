"""A RayService whose rayClusterConfig changes in a way KubeRay rolls out by building a second RayCluster, with the
GPUs both clusters need during the upgrade against the HyperPod group that holds them."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from ....plumbing.upstream import GPU_RESOURCE, INSTANCE_TYPE_LABEL
from ....validation.kuberay_operator.rayservice import UPGRADE_TYPES
from ..model import Disruption, ReviewContext, ReviewRule
from ..readers import hyperpod_clusters, instance_groups

# KubeRay v1.7.0, ray-operator/controllers/ray/utils/util.go GenerateHashWithoutReplicasAndWorkersToDelete and
# rayservice_controller.go shouldPrepareNewCluster / isZeroDowntimeUpgradeEnabled: a RayService builds a new
# RayCluster when its rayClusterConfig changes outside these fields (unless worker groups are only appended)
# and the upgrade strategy is NewCluster (the default when unset).
KUBERAY_SOURCE = (
    "https://github.com/ray-project/kuberay/blob/v1.7.0/ray-operator/controllers/ray/rayservice_controller.go"
)
# Every upgradeStrategy.type KubeRay accepts but "None" builds the new cluster.
NEW_CLUSTER_STRATEGIES = frozenset(UPGRADE_TYPES) - {"None"}


def _strip_fields(spec: dict[str, Any]) -> dict[str, Any]:
    """rayClusterConfig without the fields KubeRay v1.7.0 leaves out of its upgrade hash."""
    spec = json.loads(json.dumps(spec))
    spec.pop("suspend", None)
    spec.pop("upgradeStrategy", None)
    head_pod = ((spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
    head_pod.pop("tolerations", None)
    head_pod.pop("schedulingGates", None)
    for group in spec.get("workerGroupSpecs") or []:
        for key in ("replicas", "minReplicas", "maxReplicas"):
            group.pop(key, None)
        (group.get("scaleStrategy") or {}).pop("workersToDelete", None)
        pod = (group.get("template") or {}).get("spec") or {}
        pod.pop("tolerations", None)
        pod.pop("schedulingGates", None)
    return spec


def _pod_gpus(pod_spec: dict[str, Any]) -> int:
    total = 0
    for container in pod_spec.get("containers") or []:
        resources = container.get("resources") or {}
        value = (resources.get("limits") or {}).get(
            GPU_RESOURCE, (resources.get("requests") or {}).get(GPU_RESOURCE, 0)
        )
        with contextlib.suppress(TypeError, ValueError):
            total += int(value)
    return total


def ray_cluster_gpus(spec: dict[str, Any]) -> dict[str, int]:
    """Instance type (node selector) -> GPUs a RayCluster spec requests at its configured replicas."""
    demand: dict[str, int] = {}
    pods = [(((spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}, 1)]
    for group in spec.get("workerGroupSpecs") or []:
        replicas = group.get("replicas", group.get("minReplicas", 0)) or 0
        pods.append((((group.get("template") or {}).get("spec") or {}), int(replicas)))
    for pod, count in pods:
        gpus = _pod_gpus(pod) * count
        if gpus:
            instance_type = (pod.get("nodeSelector") or {}).get(INSTANCE_TYPE_LABEL, "(any node)")
            demand[instance_type] = demand.get(instance_type, 0) + gpus
    return demand


def _cluster_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    spec = obj.get("spec") or {}
    return {"RayService": spec.get("rayClusterConfig"), "RayCluster": spec, "RayJob": spec.get("rayClusterSpec")}.get(
        str(obj.get("kind"))
    )


def gpu_capacity(stacks: dict[str, dict[str, Any]] | None, fallback: dict[str, int]) -> dict[str, int]:
    """Instance type -> GPUs in the HyperPod groups of that type (HEAD's templates, else the configuration)."""
    from skyrl_hyperpod.config import INSTANCE_CATALOG

    capacity: dict[str, int] = {}
    for cluster in hyperpod_clusters(stacks or {}).values():
        for group in instance_groups(cluster).values():
            spec = INSTANCE_CATALOG.get(str(group.get("InstanceType")))
            count = group.get("InstanceCount")
            if spec is not None and isinstance(count, int):
                capacity[group["InstanceType"]] = capacity.get(group["InstanceType"], 0) + spec.gpus * count
    return capacity or fallback


def _builds_new_cluster(old_spec: dict[str, Any], new_spec: dict[str, Any]) -> bool:
    """The rayClusterConfig changed in KubeRay's upgrade hash, other than by worker groups appended only."""
    old_cluster = _strip_fields(old_spec.get("rayClusterConfig") or {})
    new_cluster = _strip_fields(new_spec.get("rayClusterConfig") or {})
    if old_cluster == new_cluster:
        return False
    old_groups, new_groups = old_cluster.get("workerGroupSpecs") or [], new_cluster.get("workerGroupSpecs") or []
    appended = (
        len(new_groups) > len(old_groups)
        and {**new_cluster, "workerGroupSpecs": new_groups[: len(old_groups)]} == old_cluster
    )
    return not appended


def _other_clusters_gpus(head: dict[str, dict[str, Any]], key: str) -> dict[str, int]:
    """Instance type -> GPUs every other Ray cluster in HEAD's manifests (RayService, RayCluster, RayJob) requests."""
    others: dict[str, int] = {}
    for other_key, obj in head.items():
        spec = _cluster_spec(obj) if other_key != key else None
        for instance_type, gpus in ray_cluster_gpus(spec or {}).items():
            others[instance_type] = others.get(instance_type, 0) + gpus
    return others


def _gpu_need(old: int, new: int, instance_type: str, have: int | None, other: int) -> tuple[str, bool]:
    """What the upgrade needs of one instance type against the group's GPUs, and whether it fits."""
    during = old + new
    text = (
        f"{new} GPU(s) on {instance_type} for the new cluster while the old one "
        f"holds {old}: {during} during the upgrade"
    )
    if have is None:
        return text + ", and no HyperPod group of that type is known", False
    text += f", against the group's {have}"
    if other and during <= have < during + other:
        text += f" (not while the other Ray clusters in the manifests hold their {other} there)"
    return text, during <= have


def _new_cluster_finding(
    key: str,
    old_spec: dict[str, Any],
    new_spec: dict[str, Any],
    strategy: str | None,
    capacity: dict[str, int],
    others: dict[str, int],
) -> Disruption:
    """KubeRay builds a second RayCluster: the GPUs both need during the upgrade, per instance type, and whether
    they fit."""
    old_gpus = ray_cluster_gpus(old_spec.get("rayClusterConfig") or {})
    new_gpus = ray_cluster_gpus(new_spec.get("rayClusterConfig") or {})
    needs = [
        _gpu_need(
            old_gpus.get(instance_type, 0),
            new_gpus.get(instance_type, 0),
            instance_type,
            capacity.get(instance_type),
            others.get(instance_type, 0),
        )
        for instance_type in sorted(set(old_gpus) | set(new_gpus))
    ]
    parts = [text for text, _ in needs]
    verdict = (
        "fits"
        if all(fits for _, fits in needs)
        else "does NOT fit: the new cluster's pods stay Pending and the upgrade never "
        "completes (the old cluster keeps serving) until GPUs are freed"
    )
    return Disruption(
        f"`{key}`",
        f"rayClusterConfig changed: KubeRay builds a new RayCluster (upgradeStrategy {strategy or 'unset = NewCluster'})"
        " and switches traffic when it is ready",
        KUBERAY_SOURCE,
        details=(*(f"needs {part}" for part in parts or ["no GPUs"]), f"verdict: {verdict}"),
    )


def _upgrade_finding(
    key: str, old: dict[str, Any], new: dict[str, Any], head: dict[str, dict[str, Any]], capacity: dict[str, int]
) -> Disruption | None:
    """One RayService present on both sides: None when KubeRay builds no new cluster for its change."""
    old_spec, new_spec = (old.get("spec") or {}), (new.get("spec") or {})
    if not _builds_new_cluster(old_spec, new_spec):
        return None
    strategy = (new_spec.get("upgradeStrategy") or {}).get("type")
    if strategy is not None and strategy not in NEW_CLUSTER_STRATEGIES:
        return Disruption(
            f"`{key}`",
            f"rayClusterConfig changed under upgradeStrategy {strategy}: "
            "KubeRay does not roll it out; the running cluster keeps the old spec",
            KUBERAY_SOURCE,
        )
    return _new_cluster_finding(key, old_spec, new_spec, strategy, capacity, _other_clusters_gpus(head, key))


def check(context: ReviewContext) -> list[Disruption]:
    base, head = context.base_manifests, context.head_manifests
    if base is None or head is None:
        return []
    capacity = gpu_capacity(context.head_assembly, context.gpu_fallback)
    found = []
    for key, new in head.items():
        old = base.get(key)
        if new.get("kind") != "RayService" or old is None:
            continue
        finding = _upgrade_finding(key, old, new, head, capacity)
        if finding is not None:
            found.append(finding)
    return found


RULE = ReviewRule(
    name="rayservice_upgrade",
    flags="a RayService rayClusterConfig change that KubeRay rolls out as a new RayCluster (and whether the GPUs "
    "fit), or that upgradeStrategy None never rolls out",
    section="disruptions",
    check=check,
)
