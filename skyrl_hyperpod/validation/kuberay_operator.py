"""The KubeRay v1.7.0 operator's own checks of RayCluster, RayJob and RayService specs, offline.

The API server accepts objects that the operator then refuses before reconciling (the object sits
with a warning event and nothing runs). These checks restate, as facts, the rules in
ray-operator/controllers/ray/utils/validation.go at the v1.7.0 tag
(https://github.com/ray-project/kuberay/blob/v1.7.0/ray-operator/controllers/ray/utils/validation.go);
each problem line ends with the Go function it comes from. Where the operator stops at the first
failure, every failing rule is reported here.

They run on the defaulted object, and only on objects that pass the CRD schema and its CEL rules (the
operator never sees any other). Objects whose `spec.managedBy` names another controller are not
checked: the operator does not reconcile them. Status checks (ValidateRayClusterStatus,
ValidateRayJobStatus) concern what the operator writes, not a manifest. KubeRay's optional admission
webhooks (the kuberay-operator Helm chart installs none) are not modelled. Rules that the CRD already
enforces (an enum, a minimum, a CEL rule) are left to that layer, so that each failure has one line.

Feature gates: FEATURE_GATES holds what the kuberay-operator Helm chart 1.7.0 that the platform installs
sets (its values.yaml `featureGates`, the same as the operator's defaults in
ray-operator/pkg/features/features.go). Rules behind a gate that is off stop at the gate, as the operator
does; the rules after such a gate (mTLS, history-server collector details) are not encoded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import yaml

from ..json_types import JsonArray, JsonObject, JsonPath
from ..upstream import (
    DNS1123_LABEL_PATTERN,
    DNS1123_SUBDOMAIN_PATTERN,
    KUBERAY_NAME_PATTERN,
    KUBERAY_TAG,
    RAYCLUSTER_NAME_MAX,
    RAYJOB_NAME_MAX,
)
from ._report import json_path

VALIDATION_SOURCE = "ray-operator/controllers/ray/utils/validation.go"

FEATURE_GATES: Mapping[str, bool] = {
    "RayJobDeletionPolicy": True,
    "RayServiceIncrementalUpgrade": True,
    "RayClusterNetworkPolicy": False,
    "GCSFaultToleranceEmbeddedStorage": False,
    "RayClusterMTLS": False,
    "RayClusterHistoryServer": False,
}

KUBERAY_CONTROLLER = "ray.io/kuberay-operator"
# Longest object names, as KubeRay's utils/constant.go sets them: it derives the names of pods, services
# and the clusters of jobs and services from them.
MAX_NAME_LENGTH = {"RayCluster": RAYCLUSTER_NAME_MAX, "RayJob": RAYJOB_NAME_MAX, "RayService": RAYJOB_NAME_MAX}
CLUSTER_SELECTOR_KEY = "ray.io/cluster"
ORIGINATED_FROM_CRD_LABEL = "ray.io/originated-from-crd"
FT_ENABLED_ANNOTATION = "ray.io/ft-enabled"
EXTERNAL_STORAGE_NS_ANNOTATION = "ray.io/external-storage-namespace"
INITIALIZING_TIMEOUT_ANNOTATION = "ray.io/initializing-timeout"
AUTOSCALER_V2_ENV = "RAY_enable_autoscaler_v2"
AUTOSCALER_START_CMD_ENV = "KUBERAY_GEN_AUTOSCALER_START_CMD"
RAY_START_RESOURCE_PARAMS = ("num-cpus", "num-gpus", "memory", "resources")
MIN_TOKEN_AUTH_RAY = (2, 52, 0)
MIN_K8S_TOKEN_AUTH_RAY = (2, 55, 0)
MIN_PRIORITY_RAY = (2, 56, 0)
DELETION_ORDER = ("DeleteWorkers", "DeleteCluster", "DeleteSelf")

_DNS1035_LABEL = re.compile(KUBERAY_NAME_PATTERN)
_DNS1123_LABEL = re.compile(DNS1123_LABEL_PATTERN)
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(DNS1123_SUBDOMAIN_PATTERN)
# k8s.io/apimachinery/pkg/util/version ParseGeneric: "v"-prefix optional, two or more numeric parts.
_GENERIC_VERSION = re.compile(r"^\s*v?([0-9]+(?:\.[0-9]+)+)(.*)$")

Finding = tuple[JsonPath, str, str]  # (JSON path, message, Go function)


def operator_problems(doc: JsonObject, *, gates: Mapping[str, bool] = FEATURE_GATES) -> list[str]:
    """Problems (" <json path>: <message> (KubeRay v1.7.0 <Go function>)") of a schema-valid, defaulted object."""
    check = _KIND_CHECKS.get(str(doc.get("kind")))
    spec = _mapping(doc.get("spec"))
    if check is None or spec.get("managedBy", KUBERAY_CONTROLLER) != KUBERAY_CONTROLLER:
        return []
    return [
        f"{json_path(path)}: {message} (KubeRay {KUBERAY_TAG} {source})" for path, message, source in check(doc, gates)
    ]


# --- helpers ---------------------------------------------------------------------------------------


def _mapping(value: Any) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> JsonArray:
    return value if isinstance(value, list) else []


def _metadata(doc: JsonObject) -> JsonObject:
    return _mapping(doc.get("metadata"))


def _containers(group: JsonObject) -> JsonArray:
    return _list(_mapping(_mapping(group.get("template")).get("spec")).get("containers"))


def _ray_container(group: JsonObject) -> JsonObject:
    """KubeRay treats the first container of a pod template as the Ray container (RayContainerIndex 0)."""
    containers = _containers(group)
    return _mapping(containers[0]) if containers else {}


def _env(container_or_options: JsonObject) -> dict[str, JsonObject]:
    return {str(e.get("name")): e for e in _list(container_or_options.get("env")) if isinstance(e, dict)}


def _autoscaling(spec: JsonObject) -> bool:
    return spec.get("enableInTreeAutoscaling") is True


def _autoscaler_v2(spec: JsonObject) -> bool:
    return _mapping(spec.get("autoscalerOptions")).get("version") == "v2"


def _v2_by_env(spec: JsonObject) -> bool:
    env = _env(_ray_container(_mapping(spec.get("headGroupSpec")))).get(AUTOSCALER_V2_ENV)
    return env is not None and env.get("value") in ("1", "true")


def parse_generic_version(text: str) -> tuple[int, ...] | None:
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


# --- RayClusterSpec (RayCluster.spec, RayJob.spec.rayClusterSpec, RayService.spec.rayClusterConfig) ---


def cluster_spec_findings(
    spec: JsonObject, annotations: JsonObject, at: JsonPath, gates: Mapping[str, bool]
) -> Iterator[Finding]:
    """ValidateRayClusterSpec and the functions it calls."""
    source = "ValidateRayClusterSpec"
    head = _mapping(spec.get("headGroupSpec"))
    head_at = [*at, "headGroupSpec"]
    if not _containers(head):
        yield [*head_at, "template", "spec", "containers"], "the head pod template needs at least one container", source
    head_container = _ray_container(head)
    head_env = _env(head_container)
    groups = [(_mapping(g), [*at, "workerGroupSpecs", i]) for i, g in enumerate(_list(spec.get("workerGroupSpecs")))]
    yield from _group_resources_and_labels(head, head_at, "the head group")
    autoscaling = _autoscaling(spec)
    for group, group_at in groups:
        name = group.get("groupName")
        if not _containers(group):
            yield (
                [*group_at, "template", "spec", "containers"],
                f"worker group {name} needs at least one container",
                source,
            )
        if not autoscaling and (group.get("minReplicas") is None or group.get("maxReplicas") is None):
            yield group_at, f"worker group {name} must set minReplicas and maxReplicas when autoscaling is off", source
        for field in ("minReplicas", "maxReplicas"):
            if isinstance(group.get(field), int) and group[field] < 0:
                yield [*group_at, field], f"worker group {name} has a negative {field} ({group[field]})", source
        low, high = group.get("minReplicas"), group.get("maxReplicas")
        if isinstance(low, int) and isinstance(high, int) and low > high:
            yield [*group_at, "minReplicas"], f"worker group {name}: minReplicas {low} > maxReplicas {high}", source
        yield from _group_resources_and_labels(group, group_at, f"worker group {name}")
        yield from _idle_timeout(spec, group, group_at)
        yield from _priority(spec, group, group_at)

    ft_options = spec.get("gcsFaultToleranceOptions")
    ft_at = [*at, "gcsFaultToleranceOptions"]
    if annotations.get(FT_ENABLED_ANNOTATION) and ft_options is not None:
        yield (
            ft_at,
            f"the {FT_ENABLED_ANNOTATION} annotation and gcsFaultToleranceOptions are both set; use only gcsFaultToleranceOptions",
            source,
        )
    ft_enabled = str(annotations.get(FT_ENABLED_ANNOTATION, "")).lower() == "true" or ft_options is not None
    env_at = [*head_at, "template", "spec", "containers", 0, "env"]
    if not ft_enabled and "RAY_REDIS_ADDRESS" in head_env:
        yield (
            env_at,
            "RAY_REDIS_ADDRESS in the head container turns on GCS fault tolerance; set gcsFaultToleranceOptions instead",
            source,
        )
    if ft_options is not None:
        options = _mapping(ft_options)
        if _mapping(head.get("rayStartParams")).get("redis-password"):
            yield (
                [*head_at, "rayStartParams", "redis-password"],
                "use gcsFaultToleranceOptions.redisPassword, not rayStartParams, with GCS fault tolerance",
                source,
            )
        for name, instead in (("REDIS_PASSWORD", "redisPassword"), ("RAY_REDIS_ADDRESS", "redisAddress")):
            if name in head_env:
                yield (
                    env_at,
                    f"{name} in the head container conflicts with gcsFaultToleranceOptions; use gcsFaultToleranceOptions.{instead}",
                    source,
                )
        if annotations.get(EXTERNAL_STORAGE_NS_ANNOTATION):
            yield (
                ft_at,
                f"the {EXTERNAL_STORAGE_NS_ANNOTATION} annotation conflicts with gcsFaultToleranceOptions; use its externalStorageNamespace",
                source,
            )
        yield from _gcs_backend(options, head_container, head, ft_at, gates)
    if _mapping(head.get("rayStartParams")).get("redis-username") or "REDIS_USERNAME" in head_env:
        yield (
            head_at,
            "a Redis user name in rayStartParams or REDIS_USERNAME is refused; use gcsFaultToleranceOptions.redisUsername",
            source,
        )

    for group, group_at in groups:
        if group.get("suspend") is True:
            if not gates["RayJobDeletionPolicy"]:
                yield (
                    [*group_at, "suspend"],
                    f"worker group {group.get('groupName')} can be suspended only with the RayJobDeletionPolicy feature gate",
                    source,
                )
            elif autoscaling:
                yield (
                    [*group_at, "suspend"],
                    f"worker group {group.get('groupName')} cannot be suspended with the autoscaler on",
                    source,
                )
    v2_env = head_env.get(AUTOSCALER_V2_ENV)
    if not autoscaling and v2_env is not None and v2_env.get("value") in ("1", "true"):
        yield env_at, f"{AUTOSCALER_V2_ENV}={v2_env.get('value')} needs enableInTreeAutoscaling: true", source
    autoscaler = _mapping(spec.get("autoscalerOptions"))
    if autoscaling:
        if autoscaler.get("version") is not None and v2_env is not None:
            yield (
                [*at, "autoscalerOptions", "version"],
                f"set autoscalerOptions.version or the head's {AUTOSCALER_V2_ENV}, not both",
                source,
            )
        if _autoscaler_v2(spec):
            for template_at, group in [(head_at, head), *((g_at, g) for g, g_at in groups)]:
                policy = _mapping(_mapping(group.get("template")).get("spec")).get("restartPolicy")
                if policy not in (None, "", "Never"):
                    yield (
                        [*template_at, "template", "spec", "restartPolicy"],
                        "restartPolicy must be Never or unset with autoscaler v2",
                        source,
                    )
    if isinstance(autoscaler.get("idleTimeoutSeconds"), int) and autoscaler["idleTimeoutSeconds"] < 0:
        yield [*at, "autoscalerOptions", "idleTimeoutSeconds"], "must be non-negative", source
    if AUTOSCALER_START_CMD_ENV in _env(autoscaler):
        yield (
            [*at, "autoscalerOptions", "env"],
            f"{AUTOSCALER_START_CMD_ENV} is set by KubeRay and must not be set here",
            source,
        )

    if spec.get("historyServerOptions") is not None and not gates["RayClusterHistoryServer"]:
        yield [*at, "historyServerOptions"], "needs the RayClusterHistoryServer feature gate, which is off", source
    yield from _auth(spec, at)
    if spec.get("networkPolicy") is not None:
        if not gates["RayClusterNetworkPolicy"]:
            yield [*at, "networkPolicy"], "needs the RayClusterNetworkPolicy feature gate, which is off", source
        else:
            yield from _network_policy(spec, at)
    if spec.get("tlsOptions") is not None and not gates["RayClusterMTLS"]:
        yield [*at, "tlsOptions"], "needs the RayClusterMTLS feature gate, which is off", source


def _group_resources_and_labels(group: JsonObject, at: JsonPath, what: str) -> Iterator[Finding]:
    params = _mapping(group.get("rayStartParams"))
    if any(params.get(key) for key in RAY_START_RESOURCE_PARAMS) and _mapping(group.get("resources")):
        yield (
            [*at, "resources"],
            f"{what} sets resources both here and in rayStartParams; use one",
            "validateRayGroupResources",
        )
    if "labels" in params:
        yield (
            [*at, "rayStartParams", "labels"],
            f"not supported for {what}; use the group's labels field",
            "validateRayGroupLabels",
        )
    for key, value in _mapping(group.get("labels")).items():
        if not _qualified_name(str(key)):
            yield [*at, "labels", key], f"{key!r} is not a valid label key", "validateRayGroupLabels"
        if len(str(value)) > 63 or not _LABEL_VALUE.match(str(value)):
            yield [*at, "labels", key], f"{value!r} is not a valid label value", "validateRayGroupLabels"


def _qualified_name(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_QUALIFIED_NAME.match(name))


def _idle_timeout(spec: JsonObject, group: JsonObject, at: JsonPath) -> Iterator[Finding]:
    value, name = group.get("idleTimeoutSeconds"), group.get("groupName")
    if value is None:
        return
    if isinstance(value, int) and value < 0:
        yield (
            [*at, "idleTimeoutSeconds"],
            f"worker group {name}: must be non-negative",
            "validateWorkerGroupIdleTimeout",
        )
    elif not (_autoscaler_v2(spec) or _v2_by_env(spec)):
        yield (
            [*at, "idleTimeoutSeconds"],
            f"worker group {name}: needs autoscaler v2 (autoscalerOptions.version: v2)",
            "validateWorkerGroupIdleTimeout",
        )


def _priority(spec: JsonObject, group: JsonObject, at: JsonPath) -> Iterator[Finding]:
    value, name = group.get("priority"), group.get("groupName")
    if not value:
        return
    problem = _ray_version_problem(spec, MIN_PRIORITY_RAY, f"worker group {name} sets priority")
    if problem:
        yield [*at, "priority"], problem, "validateWorkerGroupPriority"
    elif not (_autoscaler_v2(spec) or _v2_by_env(spec)):
        yield [*at, "priority"], f"worker group {name}: priority needs autoscaler v2", "validateWorkerGroupPriority"


def _gcs_backend(
    options: JsonObject, head_container: JsonObject, head: JsonObject, at: JsonPath, gates: Mapping[str, bool]
) -> Iterator[Finding]:
    source = "validateGcsFaultToleranceBackend"
    if (options.get("backend") or "redis") != "rocksdb":
        if options.get("storage") is not None:
            yield [*at, "storage"], "applies only to the 'rocksdb' backend", source
        return
    if not gates["GCSFaultToleranceEmbeddedStorage"]:
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
    storage = _mapping(options.get("storage"))
    if storage.get("claimName") and (
        storage.get("size") is not None or storage.get("storageClassName") is not None or storage.get("accessModes")
    ):
        yield [*at, "storage", "claimName"], "excludes size, storageClassName and accessModes", source
    env = _env(head_container)
    if "RAY_gcs_storage" in env or "RAY_gcs_storage_path" in env:
        yield (
            [*at, "backend"],
            "RAY_gcs_storage / RAY_gcs_storage_path in the head container are managed by KubeRay with 'rocksdb'",
            source,
        )
    for mount in _list(head_container.get("volumeMounts")):
        if _mapping(mount).get("mountPath") == "/data/gcs" or _mapping(mount).get("name") == "gcs-storage":
            yield (
                [*at, "backend"],
                "the head container's gcs-storage mount (/data/gcs) is managed by KubeRay with 'rocksdb'",
                source,
            )
    for volume in _list(_mapping(_mapping(head.get("template")).get("spec")).get("volumes")):
        if _mapping(volume).get("name") == "gcs-storage":
            yield [*at, "backend"], "the head pod's gcs-storage volume is managed by KubeRay with 'rocksdb'", source


def _auth(spec: JsonObject, at: JsonPath) -> Iterator[Finding]:
    source = "ValidateRayClusterSpec"
    options = _mapping(spec.get("authOptions"))
    k8s_token = options.get("enableK8sTokenAuth") is True
    if options.get("mode") == "token":
        problem = _ray_version_problem(spec, MIN_TOKEN_AUTH_RAY, "authOptions.mode is 'token'")
        if problem:
            yield [*at, "rayVersion"], problem, source
        elif k8s_token:
            problem = _ray_version_problem(spec, MIN_K8S_TOKEN_AUTH_RAY, "authOptions.enableK8sTokenAuth is on")
            if problem:
                yield [*at, "rayVersion"], problem, source
            if options.get("secretName"):
                yield [*at, "authOptions", "secretName"], "cannot be set with enableK8sTokenAuth", source
    elif k8s_token:
        yield [*at, "authOptions", "enableK8sTokenAuth"], "needs authOptions.mode: token", source


def _network_policy(spec: JsonObject, at: JsonPath) -> Iterator[Finding]:
    source = "validateNetworkPolicy"
    policy = _mapping(spec.get("networkPolicy"))
    mode = policy.get("mode") or "DenyAll"
    np_at = [*at, "networkPolicy"]

    def rules(part: JsonObject, part_at: JsonPath) -> Iterator[Finding]:
        if mode == "DenyAllEgress" and _list(part.get("ingressRules")):
            yield [*part_at, "ingressRules"], f"cannot be set when mode is {mode} (ingress is not restricted)", source
        if mode == "DenyAllIngress" and _list(part.get("egressRules")):
            yield [*part_at, "egressRules"], f"cannot be set when mode is {mode} (egress is not restricted)", source

    for part in ("head", "worker"):
        if policy.get(part) is not None:
            yield from rules(_mapping(policy[part]), [*np_at, part])
    names = set()
    for index, group in enumerate(_list(spec.get("workerGroupSpecs"))):
        name = str(_mapping(group).get("groupName", ""))
        if len(name) > 63 or not _DNS1123_LABEL.match(name):
            yield (
                [*at, "workerGroupSpecs", index, "groupName"],
                f"{name!r} must be a DNS-1123 label with networkPolicy",
                source,
            )
        names.add(name)
    for index, entry in enumerate(_list(policy.get("workerGroups"))):
        entry = _mapping(entry)
        yield from rules(entry, [*np_at, "workerGroups", index])
        if entry.get("groupName") not in names:
            yield (
                [*np_at, "workerGroups", index, "groupName"],
                f"{entry.get('groupName')!r} matches no worker group",
                source,
            )


def _upgrade_strategy_of_cluster(spec: JsonObject, at: JsonPath, created_by: str | None) -> Iterator[Finding]:
    """ValidateRayClusterUpgradeOptions: who may set a RayCluster's upgradeStrategy (the CRD's enum already
    limits its type to Recreate and None)."""
    if _mapping(spec.get("upgradeStrategy")).get("type") is None:
        return
    if created_by in ("RayJob", "RayService"):
        yield (
            [*at, "upgradeStrategy"],
            f"cannot be set on a RayCluster that a {created_by} creates",
            "ValidateRayClusterUpgradeOptions",
        )


# --- metadata --------------------------------------------------------------------------------------


def metadata_findings(doc: JsonObject) -> Iterator[Finding]:
    kind, name = doc["kind"], _metadata(doc).get("name")
    source = f"Validate{kind}Metadata"
    if not isinstance(name, str):
        return
    limit = MAX_NAME_LENGTH[kind]
    if len(name) > limit:
        yield (
            ["metadata", "name"],
            f"{name!r} has {len(name)} characters; KubeRay allows at most {limit} for {kind}",
            source,
        )
    if len(name) > 63 or not _DNS1035_LABEL.match(name):
        yield (
            ["metadata", "name"],
            f"{name!r} is not a DNS-1035 label (lowercase letters, digits, '-'; starts with a letter)",
            source,
        )


# --- kinds -----------------------------------------------------------------------------------------


def _ray_cluster(doc: JsonObject, gates: Mapping[str, bool]) -> Iterator[Finding]:
    yield from metadata_findings(doc)
    metadata = _metadata(doc)
    spec = _mapping(doc.get("spec"))
    yield from cluster_spec_findings(spec, _mapping(metadata.get("annotations")), ["spec"], gates)
    created_by = _mapping(metadata.get("labels")).get(ORIGINATED_FROM_CRD_LABEL)
    yield from _upgrade_strategy_of_cluster(spec, ["spec"], created_by)


def _ray_job(doc: JsonObject, gates: Mapping[str, bool]) -> Iterator[Finding]:
    yield from metadata_findings(doc)
    source = "ValidateRayJobSpec"
    spec = _mapping(doc.get("spec"))
    annotations = _mapping(_metadata(doc).get("annotations"))
    suspend, shutdown = spec.get("suspend") is True, spec.get("shutdownAfterJobFinishes") is True
    selector = _mapping(spec.get("clusterSelector"))
    mode = spec.get("submissionMode")
    backoff = spec.get("backoffLimit")
    cluster_spec = spec.get("rayClusterSpec")
    if suspend and not shutdown:
        yield ["spec", "suspend"], "a RayJob with shutdownAfterJobFinishes: false cannot be suspended", source
    ttl = spec.get("ttlSecondsAfterFinished", 0)
    if isinstance(ttl, int) and ttl < 0:
        yield ["spec", "ttlSecondsAfterFinished"], "must be non-negative", source
    yield from _deletion(spec, gates)
    if suspend and selector:
        yield ["spec", "suspend"], "the clusterSelector mode does not support suspend", source
    if cluster_spec is None and not selector:
        yield ["spec"], "one of rayClusterSpec and clusterSelector must be set", source
    if selector:
        if not selector.get(CLUSTER_SELECTOR_KEY):
            yield ["spec", "clusterSelector", CLUSTER_SELECTOR_KEY], "the cluster name must not be empty", source
        if mode == "SidecarMode":
            yield ["spec", "submissionMode"], "SidecarMode does not support clusterSelector", source
        if isinstance(backoff, int) and backoff > 0:
            yield (
                ["spec", "backoffLimit"],
                f"{backoff} > 0 is incompatible with clusterSelector (retries recreate the job's own cluster)",
                source,
            )
    if mode == "InteractiveMode" and isinstance(backoff, int) and backoff > 0:
        yield ["spec", "backoffLimit"], f"{backoff} > 0 is incompatible with InteractiveMode", source
    if mode == "SidecarMode":
        for field in ("submitterPodTemplate", "submitterConfig"):
            if spec.get(field) is not None:
                yield ["spec", field], "SidecarMode does not support it", source
        head_template = _mapping(_mapping(_mapping(cluster_spec).get("headGroupSpec")).get("template"))
        if _mapping(head_template.get("spec")).get("restartPolicy") not in (None, "", "Never"):
            yield (
                ["spec", "rayClusterSpec", "headGroupSpec", "template", "spec", "restartPolicy"],
                "must be Never or unset in SidecarMode",
                source,
            )
    if cluster_spec is not None:
        cluster = _mapping(cluster_spec)
        if _mapping(cluster.get("authOptions")).get("enableK8sTokenAuth") is True:
            yield (
                ["spec", "rayClusterSpec", "authOptions", "enableK8sTokenAuth"],
                "Kubernetes token auth is not supported for RayJob",
                source,
            )
        yield from cluster_spec_findings(cluster, annotations, ["spec", "rayClusterSpec"], gates)
        yield from _upgrade_strategy_of_cluster(cluster, ["spec", "rayClusterSpec"], "RayJob")
    runtime_env = spec.get("runtimeEnvYAML")
    if runtime_env:
        try:
            parsed = yaml.safe_load(runtime_env)
        except yaml.YAMLError as error:
            yield ["spec", "runtimeEnvYAML"], f"is not valid YAML: {getattr(error, 'problem', error)}", source
        else:
            if parsed is not None and not isinstance(parsed, dict):
                yield ["spec", "runtimeEnvYAML"], f"must be a YAML mapping, got {type(parsed).__name__}", source
    # preRunningDeadlineSeconds > 0: the CRD's minimum already says so.
    if isinstance(spec.get("activeDeadlineSeconds"), int) and spec["activeDeadlineSeconds"] <= 0:
        yield ["spec", "activeDeadlineSeconds"], "must be a positive integer", source
    if isinstance(backoff, int) and backoff < 0:
        yield ["spec", "backoffLimit"], "must be non-negative", source


def _deletion(spec: JsonObject, gates: Mapping[str, bool]) -> Iterator[Finding]:
    source = "validateDeletionConfiguration"
    shutdown = spec.get("shutdownAfterJobFinishes") is True
    ttl = spec.get("ttlSecondsAfterFinished", 0)
    if not shutdown and isinstance(ttl, int) and ttl > 0:
        yield ["spec", "ttlSecondsAfterFinished"], "needs shutdownAfterJobFinishes: true", source
    strategy = spec.get("deletionStrategy")
    if strategy is None:
        return
    at: JsonPath = ["spec", "deletionStrategy"]
    if not gates["RayJobDeletionPolicy"]:
        yield at, "needs the RayJobDeletionPolicy feature gate, which is off", source
        return
    strategy = _mapping(strategy)
    legacy = strategy.get("onSuccess") is not None or strategy.get("onFailure") is not None
    rules = _list(strategy.get("deletionRules"))
    if rules and shutdown:
        yield [*at, "deletionRules"], "cannot be combined with shutdownAfterJobFinishes: true", source
    if rules and legacy:
        yield at, "cannot combine onSuccess/onFailure with deletionRules", source
    elif legacy:
        yield from _legacy_deletion(spec, strategy, at)
    elif rules:
        yield from _deletion_rules(spec, rules, [*at, "deletionRules"])
    else:
        yield at, "needs both onSuccess and onFailure, or deletionRules", source


def _legacy_deletion(spec: JsonObject, strategy: JsonObject, at: JsonPath) -> Iterator[Finding]:
    source = "validateLegacyDeletionPolicies"
    if strategy.get("onSuccess") is None or strategy.get("onFailure") is None:
        yield at, "onSuccess and onFailure must both be set", source
        return
    policies = {}
    for field in ("onSuccess", "onFailure"):
        policies[field] = _mapping(strategy[field]).get("policy")
        if policies[field] is None:
            yield [*at, field, "policy"], "must be set", source
    if None in policies.values():
        return
    if _mapping(spec.get("clusterSelector")):
        for field, policy in policies.items():
            if policy in ("DeleteCluster", "DeleteWorkers"):
                yield [*at, field, "policy"], f"{policy} is not supported with clusterSelector", source
    if "DeleteWorkers" in policies.values() and _autoscaling(_mapping(spec.get("rayClusterSpec"))):
        yield at, "DeleteWorkers is not supported with autoscaling", source
    if spec.get("shutdownAfterJobFinishes") is True and "DeleteNone" in policies.values():
        yield at, "DeleteNone contradicts shutdownAfterJobFinishes: true", source


def _deletion_rules(spec: JsonObject, rules: JsonArray, at: JsonPath) -> Iterator[Finding]:
    source = "validateDeletionRules"
    selector = bool(_mapping(spec.get("clusterSelector")))
    autoscaling = _autoscaling(_mapping(spec.get("rayClusterSpec")))
    ttls: dict[tuple[str, str], dict[str, int]] = {}
    for index, rule in enumerate(rules):
        rule = _mapping(rule)
        condition, policy = _mapping(rule.get("condition")), rule.get("policy")
        job_status, deployment_status = condition.get("jobStatus"), condition.get("jobDeploymentStatus")
        # validateDeletionCondition (exactly one status, ttlSeconds >= 0) is what the CRD's CEL rules and
        # minimum already enforce: such an object never reaches these checks.
        if (job_status is None) == (deployment_status is None):
            continue
        ttl = condition.get("ttlSeconds", 0)
        if selector and policy in ("DeleteCluster", "DeleteWorkers"):
            yield [*at, index, "policy"], f"{policy} is not supported with clusterSelector", source
            continue
        if autoscaling and policy == "DeleteWorkers":
            yield [*at, index, "policy"], "DeleteWorkers is not supported with autoscaling", source
            continue
        key = (
            ("jobStatus", str(job_status))
            if job_status is not None
            else ("jobDeploymentStatus", str(deployment_status))
        )
        if policy in ttls.setdefault(key, {}):
            yield [*at, index], f"duplicate rule for {policy} and {key[0]} {key[1]}", source
            continue
        ttls[key][str(policy)] = ttl
    for (field, status), by_policy in ttls.items():
        previous = None
        for policy in DELETION_ORDER:
            if policy not in by_policy:
                continue
            if previous is not None and by_policy[policy] < by_policy[previous]:
                yield (
                    at,
                    (
                        f"for {field} {status}: {policy} TTL ({by_policy[policy]}) must be >= {previous} TTL "
                        f"({by_policy[previous]})"
                    ),
                    "validateTTLConsistency",
                )
            previous = policy


def _ray_service(doc: JsonObject, gates: Mapping[str, bool]) -> Iterator[Finding]:
    yield from metadata_findings(doc)
    annotations = _mapping(_metadata(doc).get("annotations"))
    timeout = annotations.get(INITIALIZING_TIMEOUT_ANNOTATION)
    if timeout:
        yield from _initializing_timeout(str(timeout))
    source = "ValidateRayServiceSpec"
    spec = _mapping(doc.get("spec"))
    cluster = _mapping(spec.get("rayClusterConfig"))
    cluster_at: JsonPath = ["spec", "rayClusterConfig"]
    if _mapping(cluster.get("authOptions")).get("enableK8sTokenAuth") is True:
        yield (
            [*cluster_at, "authOptions", "enableK8sTokenAuth"],
            "Kubernetes token auth is not supported for RayService",
            source,
        )
    yield from cluster_spec_findings(cluster, annotations, cluster_at, gates)
    yield from _upgrade_strategy_of_cluster(cluster, cluster_at, "RayService")
    head_service = _mapping(_mapping(cluster.get("headGroupSpec")).get("headService"))
    if _mapping(head_service.get("metadata")).get("name"):
        yield (
            [*cluster_at, "headGroupSpec", "headService", "metadata", "name"],
            "must not be set for a RayService",
            source,
        )
    strategy = _mapping(spec.get("upgradeStrategy"))
    kind = strategy.get("type")
    allowed = ("NewClusterWithIncrementalUpgrade", "NewCluster", "None")
    if kind is not None and kind not in allowed:
        yield ["spec", "upgradeStrategy", "type"], f"{kind!r} is not one of {', '.join(allowed)}", source
    # rayClusterDeletionDelaySeconds >= 0: the CRD's minimum already says so.
    if gates["RayServiceIncrementalUpgrade"] and kind == "NewClusterWithIncrementalUpgrade":
        yield from _incremental_upgrade(cluster, strategy)


def _initializing_timeout(value: str) -> Iterator[Finding]:
    at: JsonPath = ["metadata", "annotations", INITIALIZING_TIMEOUT_ANNOTATION]
    source = "validateInitializingTimeout"
    seconds = go_duration_seconds(value)
    if seconds is None and re.fullmatch(r"[-+]?\d+", value):
        seconds = int(value)
    if seconds is None:
        yield at, f"{value!r} is neither a Go duration (5m, 1h) nor whole seconds", source
    elif seconds <= 0:
        yield at, f"{value!r} must be a positive duration", source


_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")


def go_duration_seconds(value: str) -> float | None:
    """Go's time.ParseDuration ("1h30m", "-5s", "0"), in seconds; None when Go would refuse it."""
    sign, text = (-1, value[1:]) if value[:1] == "-" else (1, value[1:] if value[:1] == "+" else value)
    if text == "0":
        return 0.0
    parts = _DURATION_PART.findall(text)
    if not text or "".join(number + unit for number, unit in parts) != text:
        return None
    return sign * sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)


def _incremental_upgrade(cluster: JsonObject, strategy: JsonObject) -> Iterator[Finding]:
    source = "ValidateClusterUpgradeOptions"
    at = ["spec", "upgradeStrategy"]
    if not _autoscaling(cluster):
        yield (
            ["spec", "rayClusterConfig", "enableInTreeAutoscaling"],
            "NewClusterWithIncrementalUpgrade needs the Ray autoscaler (enableInTreeAutoscaling: true)",
            source,
        )
        return
    options = strategy.get("clusterUpgradeOptions")
    if options is None:
        yield [*at, "clusterUpgradeOptions"], "required for NewClusterWithIncrementalUpgrade", source
        return
    options, at = _mapping(options), [*at, "clusterUpgradeOptions"]
    surge, step, interval = (
        options.get("maxSurgePercent", 100),
        options.get("stepSizePercent"),
        options.get("intervalSeconds"),
    )
    if not 0 <= surge <= 100:
        yield [*at, "maxSurgePercent"], "must be between 0 and 100", source
    elif step is None or not 0 <= step <= 100:
        yield [*at, "stepSizePercent"], "must be between 0 and 100", source
    elif step > surge:
        yield [*at, "stepSizePercent"], f"{step} must not exceed maxSurgePercent {surge}", source
    elif interval is None or interval <= 0:
        yield [*at, "intervalSeconds"], "must be greater than 0", source
    elif not options.get("gatewayClassName"):
        yield [*at, "gatewayClassName"], "required for NewClusterWithIncrementalUpgrade", source


_KIND_CHECKS: dict[str, Callable[[JsonObject, Mapping[str, bool]], Iterator[Finding]]] = {
    "RayCluster": _ray_cluster,
    "RayJob": _ray_job,
    "RayService": _ray_service,
}
