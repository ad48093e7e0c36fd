"""The operator's checks of a RayClusterSpec and of a RayCluster.

ValidateRayClusterSpec (ray-operator/controllers/ray/utils/validation.go) runs on every RayClusterSpec the
operator reconciles: RayCluster.spec, and the cluster a RayJob (spec.rayClusterSpec) or a RayService
(spec.rayClusterConfig) creates, so `cluster_spec_findings` and `upgrade_strategy_findings` are also what
rayjob.py and rayservice.py call. The spec checks are the table CLUSTER_SPEC_CHECKS, run in the order the
Go function runs them; each worker group goes through GROUP_CHECKS in turn, so a cluster's findings come
group by group as the operator's loop meets them. CHECKS is the RayCluster kind's table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from ...plumbing.json_types import JsonObject, JsonPath
from ...plumbing.upstream import DNS1123_LABEL_PATTERN, DNS1123_SUBDOMAIN_PATTERN
from .kind_checks import (
    Finding,
    KindCheck,
    annotations_of,
    as_list,
    autoscaling,
    env_by_name,
    mapping,
    metadata,
    spec_of,
    validate_metadata,
)

SOURCE = "ValidateRayClusterSpec"
ORIGINATED_FROM_CRD_LABEL = "ray.io/originated-from-crd"
FT_ENABLED_ANNOTATION = "ray.io/ft-enabled"
EXTERNAL_STORAGE_NS_ANNOTATION = "ray.io/external-storage-namespace"
AUTOSCALER_V2_ENV = "RAY_enable_autoscaler_v2"
AUTOSCALER_START_CMD_ENV = "KUBERAY_GEN_AUTOSCALER_START_CMD"
RAY_START_RESOURCE_PARAMS = ("num-cpus", "num-gpus", "memory", "resources")
MIN_TOKEN_AUTH_RAY = (2, 52, 0)
MIN_K8S_TOKEN_AUTH_RAY = (2, 55, 0)
MIN_PRIORITY_RAY = (2, 56, 0)

_DNS1123_LABEL = re.compile(DNS1123_LABEL_PATTERN)
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(DNS1123_SUBDOMAIN_PATTERN)
# k8s.io/apimachinery/pkg/util/version ParseGeneric: "v"-prefix optional, two or more numeric parts.
_GENERIC_VERSION = re.compile(r"^\s*v?([0-9]+(?:\.[0-9]+)+)(.*)$")


@dataclass(frozen=True)
class RayGroup:
    """The head group or one worker group: its spec, where it sits and how a message names it."""

    spec: JsonObject
    at: JsonPath
    what: str

    @property
    def name(self) -> Any:
        return self.spec.get("groupName")

    @property
    def template_spec(self) -> JsonObject:
        return mapping(mapping(self.spec.get("template")).get("spec"))

    @property
    def containers(self) -> list[Any]:
        return as_list(self.template_spec.get("containers"))

    @property
    def ray_container(self) -> JsonObject:
        """KubeRay treats the first container of a pod template as the Ray container (RayContainerIndex 0)."""
        return mapping(self.containers[0]) if self.containers else {}


@dataclass(frozen=True)
class ClusterSpec:
    """A RayClusterSpec where it sits, with its owner's annotations and the feature gates."""

    spec: JsonObject
    annotations: JsonObject
    at: JsonPath
    gates: Mapping[str, bool]

    @property
    def head(self) -> RayGroup:
        return RayGroup(mapping(self.spec.get("headGroupSpec")), [*self.at, "headGroupSpec"], "the head group")

    @property
    def workers(self) -> list[RayGroup]:
        groups = [mapping(group) for group in as_list(self.spec.get("workerGroupSpecs"))]
        return [
            RayGroup(group, [*self.at, "workerGroupSpecs", index], f"worker group {group.get('groupName')}")
            for index, group in enumerate(groups)
        ]

    @property
    def head_env(self) -> dict[str, JsonObject]:
        return env_by_name(self.head.ray_container)

    @property
    def head_env_at(self) -> JsonPath:
        return [*self.head.at, "template", "spec", "containers", 0, "env"]

    @property
    def autoscaling(self) -> bool:
        return autoscaling(self.spec)

    @property
    def ft_options(self) -> Any:
        return self.spec.get("gcsFaultToleranceOptions")

    @property
    def ft_at(self) -> JsonPath:
        return [*self.at, "gcsFaultToleranceOptions"]


ClusterSpecCheck: TypeAlias = Callable[[ClusterSpec], Iterator[Finding]]
GroupCheck: TypeAlias = Callable[[ClusterSpec, RayGroup], Iterator[Finding]]


def cluster_spec_findings(cluster: ClusterSpec) -> Iterator[Finding]:
    """ValidateRayClusterSpec and the functions it calls: every check of CLUSTER_SPEC_CHECKS, in order."""
    for check in CLUSTER_SPEC_CHECKS:
        yield from check(cluster)


def upgrade_strategy_findings(spec: JsonObject, at: JsonPath, created_by: str | None) -> Iterator[Finding]:
    """ValidateRayClusterUpgradeOptions: who may set a RayCluster's upgradeStrategy (the CRD's enum already
    limits its type to Recreate and None)."""
    if mapping(spec.get("upgradeStrategy")).get("type") is None:
        return
    if created_by in ("RayJob", "RayService"):
        yield (
            [*at, "upgradeStrategy"],
            f"cannot be set on a RayCluster that a {created_by} creates",
            "ValidateRayClusterUpgradeOptions",
        )


# --- helpers ---------------------------------------------------------------------------------------


def _autoscaler_v2(spec: JsonObject) -> bool:
    """IsAutoscalingV2Enabled (ray-operator/controllers/ray/utils/util.go) as far as the spec says."""
    return mapping(spec.get("autoscalerOptions")).get("version") == "v2"


def _autoscaler_v2_asked(cluster: ClusterSpec) -> bool:
    """autoscalerOptions.version v2, or the head's RAY_enable_autoscaler_v2 set to 1 or true."""
    env = cluster.head_env.get(AUTOSCALER_V2_ENV)
    return _autoscaler_v2(cluster.spec) or (env is not None and env.get("value") in ("1", "true"))


def parse_generic_version(text: str) -> tuple[int, ...] | None:
    """k8s.io/apimachinery/pkg/util/version ParseGeneric, as KubeRay reads rayVersion; None when Go refuses it."""
    match = _GENERIC_VERSION.match(text)
    if not match:
        return None
    parts = match.group(1).split(".")
    if any(len(part) > 1 and part.startswith("0") for part in parts):
        return None
    return tuple(int(part) for part in parts)


def _ray_version_problem(spec: JsonObject, minimum: tuple[int, ...], what: str) -> str | None:
    wanted = ".".join(map(str, minimum))
    ray_version = str(spec.get("rayVersion") or "")
    if not ray_version:
        return f"{what} but rayVersion is not set; Ray {wanted} or later is required"
    parsed = parse_generic_version(ray_version)
    if parsed is None:
        return f"{what} but rayVersion {ray_version!r} is not a version"
    if parsed + (0,) * (3 - len(parsed)) < minimum:
        return f"{what} but rayVersion is {ray_version}; Ray {wanted} or later is required"
    return None


def _qualified_name(key: str) -> bool:
    """k8s.io/apimachinery/pkg/util/validation IsQualifiedName: an optional DNS-1123 subdomain prefix and a name."""
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_QUALIFIED_NAME.match(name))


# --- the head group and each worker group ----------------------------------------------------------


def validate_ray_group_resources(cluster: ClusterSpec, group: RayGroup) -> Iterator[Finding]:
    params = mapping(group.spec.get("rayStartParams"))
    if any(params.get(key) for key in RAY_START_RESOURCE_PARAMS) and mapping(group.spec.get("resources")):
        yield (
            [*group.at, "resources"],
            f"{group.what} sets resources both here and in rayStartParams; use one",
            "validateRayGroupResources",
        )


def validate_ray_group_labels(cluster: ClusterSpec, group: RayGroup) -> Iterator[Finding]:
    if "labels" in mapping(group.spec.get("rayStartParams")):
        yield (
            [*group.at, "rayStartParams", "labels"],
            f"not supported for {group.what}; use the group's labels field",
            "validateRayGroupLabels",
        )
    for key, value in mapping(group.spec.get("labels")).items():
        if not _qualified_name(str(key)):
            yield [*group.at, "labels", key], f"{key!r} is not a valid label key", "validateRayGroupLabels"
        if len(str(value)) > 63 or not _LABEL_VALUE.match(str(value)):
            yield [*group.at, "labels", key], f"{value!r} is not a valid label value", "validateRayGroupLabels"


def validate_ray_cluster_spec_head_group(cluster: ClusterSpec) -> Iterator[Finding]:
    """ValidateRayClusterSpec on the head group: a container, then its resources and labels."""
    head = cluster.head
    if not head.containers:
        yield [*head.at, "template", "spec", "containers"], "the head pod template needs at least one container", SOURCE
    yield from validate_ray_group_resources(cluster, head)
    yield from validate_ray_group_labels(cluster, head)


def validate_ray_cluster_spec_worker_containers(cluster: ClusterSpec, group: RayGroup) -> Iterator[Finding]:
    if not group.containers:
        yield [*group.at, "template", "spec", "containers"], f"{group.what} needs at least one container", SOURCE


def validate_ray_cluster_spec_replicas(cluster: ClusterSpec, group: RayGroup) -> Iterator[Finding]:
    """ValidateRayClusterSpec on a worker group's minReplicas and maxReplicas."""
    name, low, high = group.name, group.spec.get("minReplicas"), group.spec.get("maxReplicas")
    if not cluster.autoscaling and (low is None or high is None):
        yield group.at, f"worker group {name} must set minReplicas and maxReplicas when autoscaling is off", SOURCE
    for field, value in (("minReplicas", low), ("maxReplicas", high)):
        if isinstance(value, int) and value < 0:
            yield [*group.at, field], f"worker group {name} has a negative {field} ({value})", SOURCE
    if isinstance(low, int) and isinstance(high, int) and low > high:
        yield [*group.at, "minReplicas"], f"worker group {name}: minReplicas {low} > maxReplicas {high}", SOURCE


def validate_worker_group_idle_timeout(cluster: ClusterSpec, group: RayGroup) -> Iterator[Finding]:
    value, name = group.spec.get("idleTimeoutSeconds"), group.name
    if value is None:
        return
    if isinstance(value, int) and value < 0:
        yield (
            [*group.at, "idleTimeoutSeconds"],
            f"worker group {name}: must be non-negative",
            "validateWorkerGroupIdleTimeout",
        )
    elif not _autoscaler_v2_asked(cluster):
        yield (
            [*group.at, "idleTimeoutSeconds"],
            f"worker group {name}: needs autoscaler v2 (autoscalerOptions.version: v2)",
            "validateWorkerGroupIdleTimeout",
        )


def validate_worker_group_priority(cluster: ClusterSpec, group: RayGroup) -> Iterator[Finding]:
    value, name = group.spec.get("priority"), group.name
    if not value:
        return
    problem = _ray_version_problem(cluster.spec, MIN_PRIORITY_RAY, f"worker group {name} sets priority")
    if problem:
        yield [*group.at, "priority"], problem, "validateWorkerGroupPriority"
    elif not _autoscaler_v2_asked(cluster):
        yield (
            [*group.at, "priority"],
            f"worker group {name}: priority needs autoscaler v2",
            "validateWorkerGroupPriority",
        )


def validate_ray_cluster_spec_worker_groups(cluster: ClusterSpec) -> Iterator[Finding]:
    """ValidateRayClusterSpec's loop over the worker groups: GROUP_CHECKS, one group after the other."""
    for group in cluster.workers:
        for check in GROUP_CHECKS:
            yield from check(cluster, group)


# --- GCS fault tolerance ---------------------------------------------------------------------------


def validate_ray_cluster_spec_gcs_fault_tolerance(cluster: ClusterSpec) -> Iterator[Finding]:
    """ValidateRayClusterSpec: the annotation and the options are exclusive; RAY_REDIS_ADDRESS needs the options."""
    annotations, ft_options = cluster.annotations, cluster.ft_options
    if annotations.get(FT_ENABLED_ANNOTATION) and ft_options is not None:
        yield (
            cluster.ft_at,
            f"the {FT_ENABLED_ANNOTATION} annotation and gcsFaultToleranceOptions are both set; use only gcsFaultToleranceOptions",
            SOURCE,
        )
    # IsGCSFaultToleranceEnabled (ray-operator/controllers/ray/utils/util.go).
    ft_enabled = str(annotations.get(FT_ENABLED_ANNOTATION, "")).lower() == "true" or ft_options is not None
    if not ft_enabled and "RAY_REDIS_ADDRESS" in cluster.head_env:
        yield (
            cluster.head_env_at,
            "RAY_REDIS_ADDRESS in the head container turns on GCS fault tolerance; set gcsFaultToleranceOptions instead",
            SOURCE,
        )


def validate_ray_cluster_spec_gcs_fault_tolerance_options(cluster: ClusterSpec) -> Iterator[Finding]:
    """ValidateRayClusterSpec with gcsFaultToleranceOptions set: the settings it replaces must not be set too."""
    if cluster.ft_options is None:
        return
    head = cluster.head
    if mapping(head.spec.get("rayStartParams")).get("redis-password"):
        yield (
            [*head.at, "rayStartParams", "redis-password"],
            "use gcsFaultToleranceOptions.redisPassword, not rayStartParams, with GCS fault tolerance",
            SOURCE,
        )
    for name, instead in (("REDIS_PASSWORD", "redisPassword"), ("RAY_REDIS_ADDRESS", "redisAddress")):
        if name in cluster.head_env:
            yield (
                cluster.head_env_at,
                f"{name} in the head container conflicts with gcsFaultToleranceOptions; use gcsFaultToleranceOptions.{instead}",
                SOURCE,
            )
    if cluster.annotations.get(EXTERNAL_STORAGE_NS_ANNOTATION):
        yield (
            cluster.ft_at,
            f"the {EXTERNAL_STORAGE_NS_ANNOTATION} annotation conflicts with gcsFaultToleranceOptions; use its externalStorageNamespace",
            SOURCE,
        )


def validate_gcs_fault_tolerance_backend(cluster: ClusterSpec) -> Iterator[Finding]:
    if cluster.ft_options is None:
        return
    source = "validateGcsFaultToleranceBackend"
    options, at = mapping(cluster.ft_options), cluster.ft_at
    if (options.get("backend") or "redis") != "rocksdb":
        if options.get("storage") is not None:
            yield [*at, "storage"], "applies only to the 'rocksdb' backend", source
        return
    if not cluster.gates["GCSFaultToleranceEmbeddedStorage"]:
        yield (
            [*at, "backend"],
            "'rocksdb' needs the GCSFaultToleranceEmbeddedStorage feature gate, which is off",
            source,
        )
        return
    for field in ("redisAddress", "externalStorageNamespace"):
        if options.get(field):
            yield [*at, field], "cannot be set with the 'rocksdb' backend", source
    for field in ("redisUsername", "redisPassword"):
        if options.get(field) is not None:
            yield [*at, field], "cannot be set with the 'rocksdb' backend", source
    storage = mapping(options.get("storage"))
    if storage.get("claimName") and (
        storage.get("size") is not None or storage.get("storageClassName") is not None or storage.get("accessModes")
    ):
        yield [*at, "storage", "claimName"], "excludes size, storageClassName and accessModes", source
    yield from _rocksdb_managed_head_settings(cluster, at)


def _rocksdb_managed_head_settings(cluster: ClusterSpec, at: JsonPath) -> Iterator[Finding]:
    """validateGcsFaultToleranceBackend with 'rocksdb': what KubeRay adds to the head pod must not be there."""
    source = "validateGcsFaultToleranceBackend"
    head_container = cluster.head.ray_container
    env = env_by_name(head_container)
    if "RAY_gcs_storage" in env or "RAY_gcs_storage_path" in env:
        yield (
            [*at, "backend"],
            "RAY_gcs_storage / RAY_gcs_storage_path in the head container are managed by KubeRay with 'rocksdb'",
            source,
        )
    for mount in as_list(head_container.get("volumeMounts")):
        if mapping(mount).get("mountPath") == "/data/gcs" or mapping(mount).get("name") == "gcs-storage":
            yield (
                [*at, "backend"],
                "the head container's gcs-storage mount (/data/gcs) is managed by KubeRay with 'rocksdb'",
                source,
            )
    for volume in as_list(cluster.head.template_spec.get("volumes")):
        if mapping(volume).get("name") == "gcs-storage":
            yield [*at, "backend"], "the head pod's gcs-storage volume is managed by KubeRay with 'rocksdb'", source


def validate_ray_cluster_spec_redis_username(cluster: ClusterSpec) -> Iterator[Finding]:
    head = cluster.head
    if mapping(head.spec.get("rayStartParams")).get("redis-username") or "REDIS_USERNAME" in cluster.head_env:
        yield (
            head.at,
            "a Redis user name in rayStartParams or REDIS_USERNAME is refused; use gcsFaultToleranceOptions.redisUsername",
            SOURCE,
        )


# --- suspension and the autoscaler -----------------------------------------------------------------


def validate_ray_cluster_spec_suspended_worker_groups(cluster: ClusterSpec) -> Iterator[Finding]:
    for group in cluster.workers:
        if group.spec.get("suspend") is not True:
            continue
        if not cluster.gates["RayJobDeletionPolicy"]:
            yield (
                [*group.at, "suspend"],
                f"worker group {group.name} can be suspended only with the RayJobDeletionPolicy feature gate",
                SOURCE,
            )
        elif cluster.autoscaling:
            yield (
                [*group.at, "suspend"],
                f"worker group {group.name} cannot be suspended with the autoscaler on",
                SOURCE,
            )


def validate_ray_cluster_spec_autoscaler_v2(cluster: ClusterSpec) -> Iterator[Finding]:
    """ValidateRayClusterSpec on how autoscaler v2 is asked for and what it needs of the pods."""
    v2_env = cluster.head_env.get(AUTOSCALER_V2_ENV)
    if not cluster.autoscaling:
        if v2_env is not None and v2_env.get("value") in ("1", "true"):
            yield (
                cluster.head_env_at,
                f"{AUTOSCALER_V2_ENV}={v2_env.get('value')} needs enableInTreeAutoscaling: true",
                SOURCE,
            )
        return
    if mapping(cluster.spec.get("autoscalerOptions")).get("version") is not None and v2_env is not None:
        yield (
            [*cluster.at, "autoscalerOptions", "version"],
            f"set autoscalerOptions.version or the head's {AUTOSCALER_V2_ENV}, not both",
            SOURCE,
        )
    if not _autoscaler_v2(cluster.spec):
        return
    for group in [cluster.head, *cluster.workers]:
        if group.template_spec.get("restartPolicy") not in (None, "", "Never"):
            yield (
                [*group.at, "template", "spec", "restartPolicy"],
                "restartPolicy must be Never or unset with autoscaler v2",
                SOURCE,
            )


def validate_ray_cluster_spec_autoscaler_options(cluster: ClusterSpec) -> Iterator[Finding]:
    autoscaler = mapping(cluster.spec.get("autoscalerOptions"))
    if isinstance(autoscaler.get("idleTimeoutSeconds"), int) and autoscaler["idleTimeoutSeconds"] < 0:
        yield [*cluster.at, "autoscalerOptions", "idleTimeoutSeconds"], "must be non-negative", SOURCE
    if AUTOSCALER_START_CMD_ENV in env_by_name(autoscaler):
        yield (
            [*cluster.at, "autoscalerOptions", "env"],
            f"{AUTOSCALER_START_CMD_ENV} is set by KubeRay and must not be set here",
            SOURCE,
        )


# --- history server, auth, network policy, TLS -----------------------------------------------------


def validate_ray_cluster_spec_history_server(cluster: ClusterSpec) -> Iterator[Finding]:
    if cluster.spec.get("historyServerOptions") is not None and not cluster.gates["RayClusterHistoryServer"]:
        yield (
            [*cluster.at, "historyServerOptions"],
            "needs the RayClusterHistoryServer feature gate, which is off",
            SOURCE,
        )


def validate_ray_cluster_spec_auth(cluster: ClusterSpec) -> Iterator[Finding]:
    spec, at = cluster.spec, cluster.at
    options = mapping(spec.get("authOptions"))
    k8s_token = options.get("enableK8sTokenAuth") is True
    if options.get("mode") == "token":
        problem = _ray_version_problem(spec, MIN_TOKEN_AUTH_RAY, "authOptions.mode is 'token'")
        if problem:
            yield [*at, "rayVersion"], problem, SOURCE
        elif k8s_token:
            problem = _ray_version_problem(spec, MIN_K8S_TOKEN_AUTH_RAY, "authOptions.enableK8sTokenAuth is on")
            if problem:
                yield [*at, "rayVersion"], problem, SOURCE
            if options.get("secretName"):
                yield [*at, "authOptions", "secretName"], "cannot be set with enableK8sTokenAuth", SOURCE
    elif k8s_token:
        yield [*at, "authOptions", "enableK8sTokenAuth"], "needs authOptions.mode: token", SOURCE


def validate_ray_cluster_spec_network_policy(cluster: ClusterSpec) -> Iterator[Finding]:
    """ValidateRayClusterSpec: networkPolicy stops at its feature gate; past it, validateNetworkPolicy."""
    if cluster.spec.get("networkPolicy") is None:
        return
    if not cluster.gates["RayClusterNetworkPolicy"]:
        yield [*cluster.at, "networkPolicy"], "needs the RayClusterNetworkPolicy feature gate, which is off", SOURCE
    else:
        yield from validate_network_policy(cluster)


def _network_policy_rules(mode: str, part: JsonObject, part_at: JsonPath) -> Iterator[Finding]:
    """validateNetworkPolicy on one head, worker or workerGroups entry: rules only for the restricted direction."""
    source = "validateNetworkPolicy"
    if mode == "DenyAllEgress" and as_list(part.get("ingressRules")):
        yield [*part_at, "ingressRules"], f"cannot be set when mode is {mode} (ingress is not restricted)", source
    if mode == "DenyAllIngress" and as_list(part.get("egressRules")):
        yield [*part_at, "egressRules"], f"cannot be set when mode is {mode} (egress is not restricted)", source


def validate_network_policy(cluster: ClusterSpec) -> Iterator[Finding]:
    source = "validateNetworkPolicy"
    spec, at = cluster.spec, cluster.at
    policy = mapping(spec.get("networkPolicy"))
    mode = policy.get("mode") or "DenyAll"
    np_at = [*at, "networkPolicy"]
    for part in ("head", "worker"):
        if policy.get(part) is not None:
            yield from _network_policy_rules(mode, mapping(policy[part]), [*np_at, part])
    names = set()
    for index, group in enumerate(as_list(spec.get("workerGroupSpecs"))):
        name = str(mapping(group).get("groupName", ""))
        if len(name) > 63 or not _DNS1123_LABEL.match(name):
            yield (
                [*at, "workerGroupSpecs", index, "groupName"],
                f"{name!r} must be a DNS-1123 label with networkPolicy",
                source,
            )
        names.add(name)
    for index, entry in enumerate(as_list(policy.get("workerGroups"))):
        entry = mapping(entry)
        yield from _network_policy_rules(mode, entry, [*np_at, "workerGroups", index])
        if entry.get("groupName") not in names:
            yield (
                [*np_at, "workerGroups", index, "groupName"],
                f"{entry.get('groupName')!r} matches no worker group",
                source,
            )


def validate_ray_cluster_spec_tls(cluster: ClusterSpec) -> Iterator[Finding]:
    if cluster.spec.get("tlsOptions") is not None and not cluster.gates["RayClusterMTLS"]:
        yield [*cluster.at, "tlsOptions"], "needs the RayClusterMTLS feature gate, which is off", SOURCE


# --- the RayCluster kind ---------------------------------------------------------------------------


def validate_ray_cluster_spec(doc: JsonObject, gates: Mapping[str, bool]) -> Iterator[Finding]:
    """ValidateRayClusterSpec(&instance.Spec, instance.Annotations) in the RayCluster controller."""
    yield from cluster_spec_findings(ClusterSpec(spec_of(doc), annotations_of(doc), ["spec"], gates))


def validate_ray_cluster_upgrade_options(doc: JsonObject, gates: Mapping[str, bool]) -> Iterator[Finding]:
    """ValidateRayClusterUpgradeOptions: a RayJob's or RayService's cluster carries its creator's label."""
    created_by = mapping(metadata(doc).get("labels")).get(ORIGINATED_FROM_CRD_LABEL)
    yield from upgrade_strategy_findings(spec_of(doc), ["spec"], created_by)


GROUP_CHECKS: tuple[GroupCheck, ...] = (
    validate_ray_cluster_spec_worker_containers,
    validate_ray_cluster_spec_replicas,
    validate_ray_group_resources,
    validate_ray_group_labels,
    validate_worker_group_idle_timeout,
    validate_worker_group_priority,
)

CLUSTER_SPEC_CHECKS: tuple[ClusterSpecCheck, ...] = (
    validate_ray_cluster_spec_head_group,
    validate_ray_cluster_spec_worker_groups,
    validate_ray_cluster_spec_gcs_fault_tolerance,
    validate_ray_cluster_spec_gcs_fault_tolerance_options,
    validate_gcs_fault_tolerance_backend,
    validate_ray_cluster_spec_redis_username,
    validate_ray_cluster_spec_suspended_worker_groups,
    validate_ray_cluster_spec_autoscaler_v2,
    validate_ray_cluster_spec_autoscaler_options,
    validate_ray_cluster_spec_history_server,
    validate_ray_cluster_spec_auth,
    validate_ray_cluster_spec_network_policy,
    validate_ray_cluster_spec_tls,
)

CHECKS: tuple[KindCheck, ...] = (
    validate_metadata,
    validate_ray_cluster_spec,
    validate_ray_cluster_upgrade_options,
)
