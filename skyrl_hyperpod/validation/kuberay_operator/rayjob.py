"""The operator's checks of a RayJob: ValidateRayJobMetadata, ValidateRayJobSpec and what it calls.

ray-operator/controllers/ray/utils/validation.go at v1.7.0. CHECKS is the kind's table, in the order
ValidateRayJobSpec runs its rules; the deletion rules (validateDeletionConfiguration and the functions it
calls) sit behind the RayJobDeletionPolicy gate, and the job's own cluster goes through raycluster.py's
RayClusterSpec checks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import yaml

from ...plumbing.json_types import JsonArray, JsonObject, JsonPath
from .kind_checks import Finding, KindCheck, annotations_of, as_list, autoscaling, mapping, spec_of, validate_metadata
from .raycluster import ClusterSpec, cluster_spec_findings, upgrade_strategy_findings

SOURCE = "ValidateRayJobSpec"
CLUSTER_SELECTOR_KEY = "ray.io/cluster"
DELETION_ORDER = ("DeleteWorkers", "DeleteCluster", "DeleteSelf")


def validate_ray_job_spec_suspend_and_ttl(doc: JsonObject, gates: Mapping[str, bool]) -> Iterator[Finding]:
    spec = spec_of(doc)
    if spec.get("suspend") is True and spec.get("shutdownAfterJobFinishes") is not True:
        yield ["spec", "suspend"], "a RayJob with shutdownAfterJobFinishes: false cannot be suspended", SOURCE
    ttl = spec.get("ttlSecondsAfterFinished", 0)
    if isinstance(ttl, int) and ttl < 0:
        yield ["spec", "ttlSecondsAfterFinished"], "must be non-negative", SOURCE


# --- deletion --------------------------------------------------------------------------------------


def validate_deletion_configuration(doc: JsonObject, gates: Mapping[str, bool]) -> Iterator[Finding]:
    source = "validateDeletionConfiguration"
    spec = spec_of(doc)
    shutdown = spec.get("shutdownAfterJobFinishes") is True
    ttl = spec.get("ttlSecondsAfterFinished", 0)
    if not shutdown and isinstance(ttl, int) and ttl > 0:
        yield ["spec", "ttlSecondsAfterFinished"], "needs shutdownAfterJobFinishes: true", source
    if spec.get("deletionStrategy") is None:
        return
    at: JsonPath = ["spec", "deletionStrategy"]
    if not gates["RayJobDeletionPolicy"]:
        yield at, "needs the RayJobDeletionPolicy feature gate, which is off", source
        return
    strategy = mapping(spec.get("deletionStrategy"))
    legacy = strategy.get("onSuccess") is not None or strategy.get("onFailure") is not None
    rules = as_list(strategy.get("deletionRules"))
    if rules and shutdown:
        yield [*at, "deletionRules"], "cannot be combined with shutdownAfterJobFinishes: true", source
    if rules and legacy:
        yield at, "cannot combine onSuccess/onFailure with deletionRules", source
    elif legacy:
        yield from validate_legacy_deletion_policies(spec, strategy, at)
    elif rules:
        yield from validate_deletion_rules(spec, rules, [*at, "deletionRules"])
    else:
        yield at, "needs both onSuccess and onFailure, or deletionRules", source


def validate_legacy_deletion_policies(spec: JsonObject, strategy: JsonObject, at: JsonPath) -> Iterator[Finding]:
    source = "validateLegacyDeletionPolicies"
    if strategy.get("onSuccess") is None or strategy.get("onFailure") is None:
        yield at, "onSuccess and onFailure must both be set", source
        return
    policies = {}
    for field in ("onSuccess", "onFailure"):
        policies[field] = mapping(strategy[field]).get("policy")
        if policies[field] is None:
            yield [*at, field, "policy"], "must be set", source
    if None in policies.values():
        return
    if mapping(spec.get("clusterSelector")):
        for field, policy in policies.items():
            if policy in ("DeleteCluster", "DeleteWorkers"):
                yield [*at, field, "policy"], f"{policy} is not supported with clusterSelector", source
    if "DeleteWorkers" in policies.values() and autoscaling(mapping(spec.get("rayClusterSpec"))):
        yield at, "DeleteWorkers is not supported with autoscaling", source
    if spec.get("shutdownAfterJobFinishes") is True and "DeleteNone" in policies.values():
        yield at, "DeleteNone contradicts shutdownAfterJobFinishes: true", source


def validate_deletion_rules(spec: JsonObject, rules: JsonArray, at: JsonPath) -> Iterator[Finding]:
    source = "validateDeletionRules"
    selector = bool(mapping(spec.get("clusterSelector")))
    scaling = autoscaling(mapping(spec.get("rayClusterSpec")))
    ttls: dict[tuple[str, str], dict[str, int]] = {}
    for index, rule in enumerate(rules):
        rule = mapping(rule)
        condition, policy = mapping(rule.get("condition")), rule.get("policy")
        job_status, deployment_status = condition.get("jobStatus"), condition.get("jobDeploymentStatus")
        # validateDeletionCondition (exactly one status, ttlSeconds >= 0) is what the CRD's CEL rules and
        # minimum already enforce: such an object never reaches these checks.
        if (job_status is None) == (deployment_status is None):
            continue
        ttl = condition.get("ttlSeconds", 0)
        if selector and policy in ("DeleteCluster", "DeleteWorkers"):
            yield [*at, index, "policy"], f"{policy} is not supported with clusterSelector", source
            continue
        if scaling and policy == "DeleteWorkers":
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
    yield from validate_ttl_consistency(ttls, at)


def validate_ttl_consistency(ttls: dict[tuple[str, str], dict[str, int]], at: JsonPath) -> Iterator[Finding]:
    """Per status, a policy that deletes more waits at least as long as one that deletes less (DELETION_ORDER)."""
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


# --- the cluster the job runs on -------------------------------------------------------------------


def validate_ray_job_spec_cluster_selector(doc: JsonObject, gates: Mapping[str, bool]) -> Iterator[Finding]:
    """ValidateRayJobSpec: a job either brings its cluster (rayClusterSpec) or names one (clusterSelector)."""
    spec = spec_of(doc)
    selector = mapping(spec.get("clusterSelector"))
    backoff = spec.get("backoffLimit")
    if spec.get("suspend") is True and selector:
        yield ["spec", "suspend"], "the clusterSelector mode does not support suspend", SOURCE
    if spec.get("rayClusterSpec") is None and not selector:
        yield ["spec"], "one of rayClusterSpec and clusterSelector must be set", SOURCE
    if not selector:
        return
    if not selector.get(CLUSTER_SELECTOR_KEY):
        yield ["spec", "clusterSelector", CLUSTER_SELECTOR_KEY], "the cluster name must not be empty", SOURCE
    if spec.get("submissionMode") == "SidecarMode":
        yield ["spec", "submissionMode"], "SidecarMode does not support clusterSelector", SOURCE
    if isinstance(backoff, int) and backoff > 0:
        yield (
            ["spec", "backoffLimit"],
            f"{backoff} > 0 is incompatible with clusterSelector (retries recreate the job's own cluster)",
            SOURCE,
        )


def validate_ray_job_spec_interactive_mode(doc: JsonObject, gates: Mapping[str, bool]) -> Iterator[Finding]:
    spec = spec_of(doc)
    backoff = spec.get("backoffLimit")
    if spec.get("submissionMode") == "InteractiveMode" and isinstance(backoff, int) and backoff > 0:
        yield ["spec", "backoffLimit"], f"{backoff} > 0 is incompatible with InteractiveMode", SOURCE


def validate_ray_job_spec_sidecar_mode(doc: JsonObject, gates: Mapping[str, bool]) -> Iterator[Finding]:
    spec = spec_of(doc)
    if spec.get("submissionMode") != "SidecarMode":
        return
    for field in ("submitterPodTemplate", "submitterConfig"):
        if spec.get(field) is not None:
            yield ["spec", field], "SidecarMode does not support it", SOURCE
    head_template = mapping(mapping(mapping(spec.get("rayClusterSpec")).get("headGroupSpec")).get("template"))
    if mapping(head_template.get("spec")).get("restartPolicy") not in (None, "", "Never"):
        yield (
            ["spec", "rayClusterSpec", "headGroupSpec", "template", "spec", "restartPolicy"],
            "must be Never or unset in SidecarMode",
            SOURCE,
        )


def validate_ray_job_spec_ray_cluster_spec(doc: JsonObject, gates: Mapping[str, bool]) -> Iterator[Finding]:
    """ValidateRayJobSpec on spec.rayClusterSpec: ValidateRayClusterSpec with the job's annotations, then the
    rules the operator applies to the RayCluster it creates from it."""
    cluster_spec = spec_of(doc).get("rayClusterSpec")
    if cluster_spec is None:
        return
    cluster = mapping(cluster_spec)
    at: JsonPath = ["spec", "rayClusterSpec"]
    if mapping(cluster.get("authOptions")).get("enableK8sTokenAuth") is True:
        yield [*at, "authOptions", "enableK8sTokenAuth"], "Kubernetes token auth is not supported for RayJob", SOURCE
    yield from cluster_spec_findings(ClusterSpec(cluster, annotations_of(doc), at, gates))
    yield from upgrade_strategy_findings(cluster, at, "RayJob")


def validate_ray_job_spec_runtime_env_yaml(doc: JsonObject, gates: Mapping[str, bool]) -> Iterator[Finding]:
    """ValidateRayJobSpec: runtimeEnvYAML must parse (dashboardclient.UnmarshalRuntimeEnvYAML), as a mapping."""
    runtime_env = spec_of(doc).get("runtimeEnvYAML")
    if not runtime_env:
        return
    try:
        parsed = yaml.safe_load(runtime_env)
    except yaml.YAMLError as error:
        yield ["spec", "runtimeEnvYAML"], f"is not valid YAML: {getattr(error, 'problem', error)}", SOURCE
    else:
        if parsed is not None and not isinstance(parsed, dict):
            yield ["spec", "runtimeEnvYAML"], f"must be a YAML mapping, got {type(parsed).__name__}", SOURCE


def validate_ray_job_spec_deadline_and_backoff(doc: JsonObject, gates: Mapping[str, bool]) -> Iterator[Finding]:
    spec = spec_of(doc)
    # preRunningDeadlineSeconds > 0: the CRD's minimum already says so.
    if isinstance(spec.get("activeDeadlineSeconds"), int) and spec["activeDeadlineSeconds"] <= 0:
        yield ["spec", "activeDeadlineSeconds"], "must be a positive integer", SOURCE
    backoff = spec.get("backoffLimit")
    if isinstance(backoff, int) and backoff < 0:
        yield ["spec", "backoffLimit"], "must be non-negative", SOURCE


CHECKS: tuple[KindCheck, ...] = (
    validate_metadata,
    validate_ray_job_spec_suspend_and_ttl,
    validate_deletion_configuration,
    validate_ray_job_spec_cluster_selector,
    validate_ray_job_spec_interactive_mode,
    validate_ray_job_spec_sidecar_mode,
    validate_ray_job_spec_ray_cluster_spec,
    validate_ray_job_spec_runtime_env_yaml,
    validate_ray_job_spec_deadline_and_backoff,
)
