"""The two layers after the CRD schema: the CRDs' CEL rules and the KubeRay v1.7.0 operator's spec checks.

Each rule is shown failing a manifest with its own one-line message. The manifests come from the charts
(built once per module for the default configuration and for self-contained jobs) or from the
configuration and the KubeRay constructs, and are then changed in one place per case.
"""

from __future__ import annotations

import copy
import re
import warnings
from collections.abc import Callable
from pathlib import Path

import cdk8s
import pytest
import yaml
from cli_helpers import skyrl_hp
from conftest import KUBERAY_CRDS_DIR, REPO_ROOT

from charts import ChartInputs, build_charts, manifests
from charts.constructs.kuberay_resources import RayJob, RayJobProps
from charts.raycluster import training_cluster_spec
from skyrl_hyperpod.config import validate_config
from skyrl_hyperpod.validation import CheckSkipped, cel_rules, kuberay_operator, validate_manifests, validation_report
from skyrl_hyperpod.validation import crds as crd_module
from skyrl_hyperpod.values.job_files import JOB_SCRIPT_NAME
from skyrl_hyperpod.values.stack_outputs import StackOutputs

STUB_SCRIPT = "print('train_job stub')\n"
SELF_CONTAINED = {"training": {"jobs": {"self_contained_jobs": True}}}  # the default
# Jobs on the long-lived RayCluster (clusterSelector): the RayCluster object and the selector's rules.
SHARED = {"training": {"jobs": {"self_contained_jobs": False}}}


@pytest.fixture(autouse=True)
def isolated_environment(monkeypatch):
    monkeypatch.setenv(crd_module.CRDS_DIR_ENV_VAR, str(KUBERAY_CRDS_DIR))
    monkeypatch.setenv("SKYRL_HP_VALIDATION_CACHE", "off")


def chart_manifests(overrides: dict) -> tuple[object, list[dict]]:
    config = validate_config(overrides)
    inputs = ChartInputs(
        config=config, outputs=StackOutputs.placeholder(config), job_files={JOB_SCRIPT_NAME: STUB_SCRIPT}
    )
    return config, manifests(build_charts(cdk8s.App(), inputs))


@pytest.fixture(scope="module")
def charts() -> dict[str, tuple[object, list[dict]]]:
    return {"shared": chart_manifests(SHARED), "self-contained": chart_manifests({})}


def chart_object(charts, variant: str, kind: str) -> tuple[object, dict]:
    config, docs = charts[variant]
    (found,) = [doc for doc in docs if doc["kind"] == kind]
    return config, copy.deepcopy(found)


def label(doc: dict) -> str:
    return f"{doc['kind']}/{doc['metadata']['name']}"


def problems_of(doc: dict, config) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CheckSkipped)
        return validate_manifests([doc], config=config)


def crd_rules(kind: str) -> list[cel_rules.CelRule]:
    return cel_rules.schema_rules(kind, crd_module.crd_schema(KUBERAY_CRDS_DIR.resolve(), kind))


# --- CEL rules ---------------------------------------------------------------------------------------


def _validation_entries(node, count=0) -> int:
    """Every x-kubernetes-validations entry anywhere in a schema (not only where the walker looks)."""
    if isinstance(node, dict):
        count += len(node.get(cel_rules.VALIDATIONS_KEY) or ())
        return sum(_validation_entries(value) for value in node.values()) + count
    if isinstance(node, list):
        return sum(_validation_entries(value) for value in node)
    return count


@pytest.mark.parametrize("kind", sorted(crd_module.KUBERAY_KINDS))
def test_every_cel_rule_of_the_pinned_crds_is_found_and_compiles(kind):
    schema = crd_module.crd_schema(KUBERAY_CRDS_DIR.resolve(), kind)
    rules = crd_rules(kind)
    assert rules and len(rules) == _validation_entries(schema)
    compiled = crd_module.kind_cel_rules(KUBERAY_CRDS_DIR.resolve(), kind)
    assert compiled.unsupported == ()
    # The type checker's verdict agrees with a plain reading of the rules: transition rules name oldSelf.
    assert {rule for rule in compiled.update_only} == {rule for rule in rules if "oldSelf" in rule.rule}
    assert {rule for rule, _ in compiled.on_create} == {rule for rule in rules if "oldSelf" not in rule.rule}


def _set(path: list, value) -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        target = doc
        for key in path[:-1]:
            target = target[key] if isinstance(key, int) else target.setdefault(key, {})
        target[path[-1]] = value

    return mutate


_RULE = {"policy": "DeleteSelf", "condition": {"jobStatus": "SUCCEEDED"}}
_LEGACY = {"onSuccess": {"policy": "DeleteSelf"}, "onFailure": {"policy": "DeleteSelf"}}

# (variant, kind, rule's schema path, the rule, mutation, JSON path of the failure)
CEL_CASES = [
    ("shared", "RayCluster", "spec.managedBy", "self in [", _set(["spec", "managedBy"], "example.com/mine"), "spec.managedBy"),
    ("shared", "RayJob", "spec.managedBy", "self in [", _set(["spec", "managedBy"], "example.com/mine"), "spec.managedBy"),
    ("self-contained", "RayJob", "spec.rayClusterSpec.managedBy", "self in [",
     _set(["spec", "rayClusterSpec", "managedBy"], "example.com/mine"), "spec.rayClusterSpec.managedBy"),
    ("shared", "RayJob", "spec.deletionStrategy", "!((has(self.onSuccess)",
     _set(["spec", "deletionStrategy"], {**_LEGACY, "deletionRules": [_RULE]}), "spec.deletionStrategy"),
    ("shared", "RayJob", "spec.deletionStrategy", "((has(self.onSuccess) && has(self.onFailure))",
     _set(["spec", "deletionStrategy"], {"onSuccess": {"policy": "DeleteSelf"}}), "spec.deletionStrategy"),
    ("shared", "RayJob", "spec.deletionStrategy.deletionRules[*].condition", "!(has(self.jobStatus)",
     _set(["spec", "deletionStrategy"], {"deletionRules": [_RULE, {"policy": "DeleteNone", "condition": {
         "jobStatus": "FAILED", "jobDeploymentStatus": "Failed"}}]}), "spec.deletionStrategy.deletionRules[1].condition"),
    ("shared", "RayJob", "spec.deletionStrategy.deletionRules[*].condition", "has(self.jobStatus) ||",
     _set(["spec", "deletionStrategy"], {"deletionRules": [{"policy": "DeleteSelf", "condition": {"ttlSeconds": 60}}]}),
     "spec.deletionStrategy.deletionRules[0].condition"),
    ("shared", "RayService", "spec.managedBy", "self in [", _set(["spec", "managedBy"], "example.com/mine"), "spec.managedBy"),
    ("shared", "RayService", "spec.rayClusterConfig.managedBy", "self in [",
     _set(["spec", "rayClusterConfig", "managedBy"], "example.com/mine"), "spec.rayClusterConfig.managedBy"),
]  # fmt: skip


@pytest.mark.parametrize(("variant", "kind", "where", "rule_start", "mutate", "path"), CEL_CASES)
def test_each_cel_rule_that_applies_on_create_fails_a_manifest_with_its_own_message(
    charts, variant, kind, where, rule_start, mutate, path
):
    config, doc = chart_object(charts, variant, kind)
    assert problems_of(doc, config) == []
    mutate(doc)
    (rule,) = [r for r in crd_rules(kind) if r.where == where and r.rule.startswith(rule_start)]
    assert rule.message  # every rule of the pinned CRDs carries its own message
    assert problems_of(doc, config) == [f"{label(doc)}: {path}: {rule.message} (CRD rule: {rule.rule})"]


def test_every_cel_rule_that_applies_on_create_has_a_mutation_case():
    covered = {(kind, where, start) for _, kind, where, start, _, _ in CEL_CASES}
    for kind in crd_module.KUBERAY_KINDS:
        for rule, _ in crd_module.kind_cel_rules(KUBERAY_CRDS_DIR.resolve(), kind).on_create:
            assert any(k == kind and w == rule.where and rule.rule.startswith(s) for k, w, s in covered), rule


def test_update_only_rules_are_reported_not_evaluated_by_name(charts):
    config, docs = charts["shared"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        problems, skipped = validation_report(docs, config=config)
    assert problems == []
    cel_skips = [line for line in skipped if cel_rules.CHECK_NAME in line]
    warned = [str(w.message) for w in caught if issubclass(w.category, CheckSkipped)]
    assert sorted(cel_skips) == sorted(line for line in warned if cel_rules.CHECK_NAME in line)
    assert [line.split()[1] for line in cel_skips] == ["RayCluster", "RayJob", "RayService"]  # once per kind
    # The line counts them; the rules are named where it points (it is printed on every synth, so it stays short).
    docs = (REPO_ROOT / "docs" / "validation.md").read_text()
    for line in cel_skips:
        kind = line.split()[1]
        update_only = [rule for rule in crd_rules(kind) if "oldSelf" in rule.rule]
        assert update_only and f"not evaluated: {len(update_only)} apply only to updates" in line
        assert "(docs/validation.md)" in line
        for rule in update_only:
            field = next(f for f in ("managedBy", "gcsFaultToleranceOptions.backend") if rule.where.endswith(f))
            assert f"`{field}`" in docs


def test_a_rule_that_cannot_be_evaluated_is_a_problem_never_a_pass():
    rule = cel_rules.CelRule("RayJob", ("spec",), "self.entrypoint == 'x'", "m", "", "")
    compiled = cel_rules.compile_rules([rule])
    assert cel_rules.evaluate(compiled, {"spec": {"entrypoint": "x"}}) == []
    [problem] = cel_rules.evaluate(compiled, {"spec": {}})
    assert (
        problem.startswith("spec: rule \"self.entrypoint == 'x'\" cannot be evaluated here:")
        and "entrypoint" in problem
    )


def test_a_rule_that_needs_a_kubernetes_cel_library_is_reported_skipped():
    needs_quantity = cel_rules.CelRule(
        "RayJob", ("spec", "x"), "quantity(self).isGreaterThan(quantity('1'))", "m", "", ""
    )
    compiled = cel_rules.compile_rules([needs_quantity])
    assert compiled.on_create == () and [rule for rule, _ in compiled.unsupported] == [needs_quantity]
    reason = cel_rules.not_evaluated_reason(compiled)
    assert "1 need what this CEL environment lacks: spec.x" in reason and "quantity" in reason
    # A rule with optionalOldSelf also runs on create (oldSelf empty): not modelled, so reported, never passed.
    optional = cel_rules.CelRule("RayJob", ("spec",), "!has(oldSelf.x)", "m", "", "", optional_old_self=True)
    assert [rule for rule, _ in cel_rules.compile_rules([optional]).unsupported] == [optional]


def test_a_value_cel_has_no_type_for_is_a_problem_not_a_traceback():
    import datetime

    compiled = cel_rules.compile_rules([cel_rules.CelRule("RayJob", ("spec",), "has(self.a)", "m", "", "")])
    [problem] = cel_rules.evaluate(compiled, {"spec": {"a": datetime.date(2026, 1, 1)}})  # YAML reads dates as dates
    assert problem.startswith("spec: rule 'has(self.a)' cannot be evaluated here:")


def test_field_path_and_message_expression_shape_the_line():
    rule = cel_rules.CelRule(
        "RayJob", ("spec",), "self.replicas <= 2", "", "'replicas is ' + string(self.replicas)", ".replicas"
    )
    compiled = cel_rules.compile_rules([rule])
    assert cel_rules.evaluate(compiled, {"spec": {"replicas": 3}}) == [
        "spec.replicas: replicas is 3 (CRD rule: self.replicas <= 2)"
    ]
    plain = cel_rules.compile_rules([cel_rules.CelRule("RayJob", ("spec", "items", "[*]"), "self > 0", "", "", "")])
    assert cel_rules.evaluate(plain, {"spec": {"items": [1, 0]}}) == [
        "spec.items[1]: failed rule: self > 0 (CRD rule: self > 0)"
    ]


# --- KubeRay operator checks ----------------------------------------------------------------------


def _env(container_path: list, name: str, value: str = "x") -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        target = doc
        for key in container_path:
            target = target[key]
        target.setdefault("env", []).append({"name": name, "value": value})

    return mutate


def _all(*mutations: Callable[[dict], None]) -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        for mutation in mutations:
            mutation(doc)

    return mutate


HEAD = ["spec", "headGroupSpec"]
HEAD_CONTAINER = [*HEAD, "template", "spec", "containers", 0]
WORKER = ["spec", "workerGroupSpecs", 0]
SVC = ["spec", "rayClusterConfig"]
JOB_CLUSTER = ["spec", "rayClusterSpec"]
AUTOSCALING = _set(["spec", "enableInTreeAutoscaling"], True)
NO_SHUTDOWN = _all(_set(["spec", "shutdownAfterJobFinishes"], False), _set(["spec", "ttlSecondsAfterFinished"], 0))

# (id, variant, kind, mutation, JSON path, message, Go function)
OPERATOR_CASES = [
    # RayClusterSpec (ValidateRayClusterSpec and what it calls), on the RayCluster
    ("head-without-containers", "shared", "RayCluster", _set([*HEAD, "template", "spec", "containers"], []),
     "spec.headGroupSpec.template.spec.containers", "the head pod template needs at least one container", "ValidateRayClusterSpec"),
    ("worker-without-containers", "shared", "RayCluster", _set([*WORKER, "template", "spec", "containers"], []),
     "spec.workerGroupSpecs[0].template.spec.containers", "worker group gpu-workers needs at least one container", "ValidateRayClusterSpec"),
    ("min-above-max", "shared", "RayCluster", _set([*WORKER, "minReplicas"], 4),
     "spec.workerGroupSpecs[0].minReplicas", "worker group gpu-workers: minReplicas 4 > maxReplicas 3", "ValidateRayClusterSpec"),
    ("negative-min", "shared", "RayCluster", _set([*WORKER, "minReplicas"], -2),
     "spec.workerGroupSpecs[0].minReplicas", "worker group gpu-workers has a negative minReplicas (-2)", "ValidateRayClusterSpec"),
    ("resources-twice", "shared", "RayCluster", _set([*HEAD, "resources"], {"CPU": "1"}),
     "spec.headGroupSpec.resources", "the head group sets resources both here and in rayStartParams; use one", "validateRayGroupResources"),
    ("labels-in-ray-start-params", "shared", "RayCluster", _set([*WORKER, "rayStartParams", "labels"], "a=b"),
     "spec.workerGroupSpecs[0].rayStartParams.labels", "not supported for worker group gpu-workers; use the group's labels field", "validateRayGroupLabels"),
    ("bad-group-label", "shared", "RayCluster", _set([*WORKER, "labels"], {"zone": "not valid!"}),
     "spec.workerGroupSpecs[0].labels.zone", "'not valid!' is not a valid label value", "validateRayGroupLabels"),
    ("idle-timeout-without-v2", "shared", "RayCluster", _set([*WORKER, "idleTimeoutSeconds"], 60),
     "spec.workerGroupSpecs[0].idleTimeoutSeconds", "worker group gpu-workers: needs autoscaler v2 (autoscalerOptions.version: v2)", "validateWorkerGroupIdleTimeout"),
    ("priority-without-v2", "shared", "RayCluster", _set([*WORKER, "priority"], 1),
     "spec.workerGroupSpecs[0].priority", "worker group gpu-workers: priority needs autoscaler v2", "validateWorkerGroupPriority"),
    ("ft-annotation-and-options", "shared", "RayCluster",
     _all(_set(["metadata", "annotations"], {"ray.io/ft-enabled": "true"}), _set(["spec", "gcsFaultToleranceOptions"], {"redisAddress": "redis:6379"})),
     "spec.gcsFaultToleranceOptions", "the ray.io/ft-enabled annotation and gcsFaultToleranceOptions are both set; use only gcsFaultToleranceOptions", "ValidateRayClusterSpec"),
    ("redis-address-env-without-ft", "shared", "RayCluster", _env(HEAD_CONTAINER, "RAY_REDIS_ADDRESS"),
     "spec.headGroupSpec.template.spec.containers[0].env", "RAY_REDIS_ADDRESS in the head container turns on GCS fault tolerance; set gcsFaultToleranceOptions instead", "ValidateRayClusterSpec"),
    ("redis-password-with-ft", "shared", "RayCluster",
     _all(_set(["spec", "gcsFaultToleranceOptions"], {"redisAddress": "redis:6379"}), _env(HEAD_CONTAINER, "REDIS_PASSWORD")),
     "spec.headGroupSpec.template.spec.containers[0].env", "REDIS_PASSWORD in the head container conflicts with gcsFaultToleranceOptions; use gcsFaultToleranceOptions.redisPassword", "ValidateRayClusterSpec"),
    ("redis-username", "shared", "RayCluster", _set([*HEAD, "rayStartParams", "redis-username"], "ray"),
     "spec.headGroupSpec", "a Redis user name in rayStartParams or REDIS_USERNAME is refused; use gcsFaultToleranceOptions.redisUsername", "ValidateRayClusterSpec"),
    ("rocksdb-behind-its-gate", "shared", "RayCluster", _set(["spec", "gcsFaultToleranceOptions"], {"backend": "rocksdb"}),
     "spec.gcsFaultToleranceOptions.backend", "'rocksdb' needs the GCSFaultToleranceEmbeddedStorage feature gate, which is off", "validateGcsFaultToleranceBackend"),
    ("redis-with-storage", "shared", "RayCluster", _set(["spec", "gcsFaultToleranceOptions"], {"redisAddress": "r:6379", "storage": {"size": "1Gi"}}),
     "spec.gcsFaultToleranceOptions.storage", "applies only to the 'rocksdb' backend", "validateGcsFaultToleranceBackend"),
    ("autoscaler-v2-env-without-autoscaling", "shared", "RayCluster", _env(HEAD_CONTAINER, "RAY_enable_autoscaler_v2", "1"),
     "spec.headGroupSpec.template.spec.containers[0].env", "RAY_enable_autoscaler_v2=1 needs enableInTreeAutoscaling: true", "ValidateRayClusterSpec"),
    ("suspended-group-with-autoscaler", "shared", "RayCluster", _all(AUTOSCALING, _set([*WORKER, "suspend"], True)),
     "spec.workerGroupSpecs[0].suspend", "worker group gpu-workers cannot be suspended with the autoscaler on", "ValidateRayClusterSpec"),
    ("autoscaler-version-and-env", "shared", "RayCluster",
     _all(AUTOSCALING, _set(["spec", "autoscalerOptions", "version"], "v1"), _env(HEAD_CONTAINER, "RAY_enable_autoscaler_v2", "0")),
     "spec.autoscalerOptions.version", "set autoscalerOptions.version or the head's RAY_enable_autoscaler_v2, not both", "ValidateRayClusterSpec"),
    ("restart-policy-with-v2", "shared", "RayCluster",
     _all(AUTOSCALING, _set(["spec", "autoscalerOptions", "version"], "v2"), _set([*HEAD, "template", "spec", "restartPolicy"], "Always")),
     "spec.headGroupSpec.template.spec.restartPolicy", "restartPolicy must be Never or unset with autoscaler v2", "ValidateRayClusterSpec"),
    ("negative-autoscaler-idle-timeout", "shared", "RayCluster", _set(["spec", "autoscalerOptions", "idleTimeoutSeconds"], -1),
     "spec.autoscalerOptions.idleTimeoutSeconds", "must be non-negative", "ValidateRayClusterSpec"),
    ("autoscaler-start-command", "shared", "RayCluster", _set(["spec", "autoscalerOptions", "env"], [{"name": "KUBERAY_GEN_AUTOSCALER_START_CMD", "value": "x"}]),
     "spec.autoscalerOptions.env", "KUBERAY_GEN_AUTOSCALER_START_CMD is set by KubeRay and must not be set here", "ValidateRayClusterSpec"),
    ("history-server-behind-its-gate", "shared", "RayCluster", _set(["spec", "historyServerOptions"], {}),
     "spec.historyServerOptions", "needs the RayClusterHistoryServer feature gate, which is off", "ValidateRayClusterSpec"),
    ("token-auth-on-old-ray", "shared", "RayCluster", _all(_set(["spec", "authOptions"], {"mode": "token"}), _set(["spec", "rayVersion"], "2.51.0")),
     "spec.rayVersion", "authOptions.mode is 'token' but rayVersion is 2.51.0; Ray 2.52.0 or later is required", "ValidateRayClusterSpec"),
    ("k8s-token-auth-without-token-mode", "shared", "RayCluster", _set(["spec", "authOptions"], {"enableK8sTokenAuth": True}),
     "spec.authOptions.enableK8sTokenAuth", "needs authOptions.mode: token", "ValidateRayClusterSpec"),
    ("network-policy-behind-its-gate", "shared", "RayCluster", _set(["spec", "networkPolicy"], {}),
     "spec.networkPolicy", "needs the RayClusterNetworkPolicy feature gate, which is off", "ValidateRayClusterSpec"),
    ("tls-behind-its-gate", "shared", "RayCluster", _set(["spec", "tlsOptions"], {}),
     "spec.tlsOptions", "needs the RayClusterMTLS feature gate, which is off", "ValidateRayClusterSpec"),
    ("upgrade-strategy-of-a-service-cluster", "shared", "RayCluster",
     _all(_set(["metadata", "labels", "ray.io/originated-from-crd"], "RayService"), _set(["spec", "upgradeStrategy"], {"type": "Recreate"})),
     "spec.upgradeStrategy", "cannot be set on a RayCluster that a RayService creates", "ValidateRayClusterUpgradeOptions"),
    ("cluster-name-not-dns-1035", "shared", "RayCluster", _set(["metadata", "name"], "9-visgym"),
     "metadata.name", "'9-visgym' is not a DNS-1035 label (lowercase letters, digits, '-'; starts with a letter)", "ValidateRayClusterMetadata"),
    # RayJob (ValidateRayJobSpec and what it calls)
    ("suspend-without-shutdown", "self-contained", "RayJob", _all(_set(["spec", "suspend"], True), NO_SHUTDOWN),
     "spec.suspend", "a RayJob with shutdownAfterJobFinishes: false cannot be suspended", "ValidateRayJobSpec"),
    ("ttl-without-shutdown", "shared", "RayJob", _set(["spec", "ttlSecondsAfterFinished"], 60),
     "spec.ttlSecondsAfterFinished", "needs shutdownAfterJobFinishes: true", "validateDeletionConfiguration"),
    ("no-cluster", "shared", "RayJob", _set(["spec", "clusterSelector"], {}),
     "spec", "one of rayClusterSpec and clusterSelector must be set", "ValidateRayJobSpec"),
    ("empty-cluster-name", "shared", "RayJob", _set(["spec", "clusterSelector"], {"ray.io/cluster": ""}),
     'spec.clusterSelector["ray.io/cluster"]', "the cluster name must not be empty", "ValidateRayJobSpec"),
    ("backoff-with-cluster-selector", "shared", "RayJob", _set(["spec", "backoffLimit"], 2),
     "spec.backoffLimit", "2 > 0 is incompatible with clusterSelector (retries recreate the job's own cluster)", "ValidateRayJobSpec"),
    ("sidecar-with-submitter-template", "self-contained", "RayJob",
     _all(_set(["spec", "submissionMode"], "SidecarMode"), _set(["spec", "submitterConfig"], {})),
     "spec.submitterConfig", "SidecarMode does not support it", "ValidateRayJobSpec"),
    ("k8s-token-auth-in-job", "self-contained", "RayJob",
     _set([*JOB_CLUSTER, "authOptions"], {"mode": "token", "enableK8sTokenAuth": True}),
     "spec.rayClusterSpec.authOptions.enableK8sTokenAuth", "Kubernetes token auth is not supported for RayJob", "ValidateRayJobSpec"),
    ("job-cluster-spec-is-checked-too", "self-contained", "RayJob", _set([*JOB_CLUSTER, "workerGroupSpecs", 0, "minReplicas"], 9),
     "spec.rayClusterSpec.workerGroupSpecs[0].minReplicas", "worker group gpu-workers: minReplicas 9 > maxReplicas 3", "ValidateRayClusterSpec"),
    ("upgrade-strategy-in-a-job-cluster", "self-contained", "RayJob", _set([*JOB_CLUSTER, "upgradeStrategy"], {"type": "Recreate"}),
     "spec.rayClusterSpec.upgradeStrategy", "cannot be set on a RayCluster that a RayJob creates", "ValidateRayClusterUpgradeOptions"),
    ("runtime-env-not-a-mapping", "shared", "RayJob", _set(["spec", "runtimeEnvYAML"], "- a\n- b\n"),
     "spec.runtimeEnvYAML", "must be a YAML mapping, got list", "ValidateRayJobSpec"),
    ("deletion-rules-with-shutdown", "self-contained", "RayJob",
     _all(_set(["spec", "shutdownAfterJobFinishes"], True), _set(["spec", "deletionStrategy"], {"deletionRules": [_RULE]})),
     "spec.deletionStrategy.deletionRules", "cannot be combined with shutdownAfterJobFinishes: true", "validateDeletionConfiguration"),
    ("legacy-delete-cluster-with-selector", "shared", "RayJob",
     _set(["spec", "deletionStrategy"], {"onSuccess": {"policy": "DeleteCluster"}, "onFailure": {"policy": "DeleteSelf"}}),
     "spec.deletionStrategy.onSuccess.policy", "DeleteCluster is not supported with clusterSelector", "validateLegacyDeletionPolicies"),
    ("legacy-delete-none-with-shutdown", "self-contained", "RayJob",
     _all(_set(["spec", "shutdownAfterJobFinishes"], True),
          _set(["spec", "deletionStrategy"], {"onSuccess": {"policy": "DeleteNone"}, "onFailure": {"policy": "DeleteSelf"}})),
     "spec.deletionStrategy", "DeleteNone contradicts shutdownAfterJobFinishes: true", "validateLegacyDeletionPolicies"),
    ("rule-delete-workers-with-selector", "shared", "RayJob",
     _set(["spec", "deletionStrategy"], {"deletionRules": [{"policy": "DeleteWorkers", "condition": {"jobStatus": "FAILED"}}]}),
     "spec.deletionStrategy.deletionRules[0].policy", "DeleteWorkers is not supported with clusterSelector", "validateDeletionRules"),
    ("duplicate-deletion-rule", "shared", "RayJob",
     _set(["spec", "deletionStrategy"], {"deletionRules": [_RULE, _RULE]}),
     "spec.deletionStrategy.deletionRules[1]", "duplicate rule for DeleteSelf and jobStatus SUCCEEDED", "validateDeletionRules"),
    ("deletion-ttls-out-of-order", "self-contained", "RayJob",
     _all(NO_SHUTDOWN, _set(["spec", "deletionStrategy"], {"deletionRules": [
         {"policy": "DeleteSelf", "condition": {"jobStatus": "FAILED", "ttlSeconds": 10}},
         {"policy": "DeleteNone", "condition": {"jobStatus": "FAILED"}},
         {"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED", "ttlSeconds": 60}}]})),
     "spec.deletionStrategy.deletionRules", "for jobStatus FAILED: DeleteSelf TTL (10) must be >= DeleteCluster TTL (60)", "validateTTLConsistency"),
    ("job-name-not-dns-1035", "shared", "RayJob", _set(["metadata", "name"], "a.b"),
     "metadata.name", "'a.b' is not a DNS-1035 label (lowercase letters, digits, '-'; starts with a letter)", "ValidateRayJobMetadata"),
    # RayService (ValidateRayServiceSpec and what it calls)
    ("k8s-token-auth-in-service", "shared", "RayService",
     _set([*SVC, "authOptions"], {"mode": "token", "enableK8sTokenAuth": True}),
     "spec.rayClusterConfig.authOptions.enableK8sTokenAuth", "Kubernetes token auth is not supported for RayService", "ValidateRayServiceSpec"),
    ("head-service-name", "shared", "RayService", _set([*SVC, "headGroupSpec", "headService"], {"metadata": {"name": "mine"}}),
     "spec.rayClusterConfig.headGroupSpec.headService.metadata.name", "must not be set for a RayService", "ValidateRayServiceSpec"),
    ("service-upgrade-type", "shared", "RayService", _set(["spec", "upgradeStrategy", "type"], "Rolling"),
     "spec.upgradeStrategy.type", "'Rolling' is not one of NewClusterWithIncrementalUpgrade, NewCluster, None", "ValidateRayServiceSpec"),
    ("incremental-upgrade-without-options", "shared", "RayService",
     _all(_set(["spec", "upgradeStrategy", "type"], "NewClusterWithIncrementalUpgrade"), _set([*SVC, "enableInTreeAutoscaling"], True)),
     "spec.upgradeStrategy.clusterUpgradeOptions", "required for NewClusterWithIncrementalUpgrade", "ValidateClusterUpgradeOptions"),
    ("incremental-upgrade-step-above-surge", "shared", "RayService",
     _all(_set(["spec", "upgradeStrategy"], {"type": "NewClusterWithIncrementalUpgrade", "clusterUpgradeOptions": {
         "maxSurgePercent": 20, "stepSizePercent": 50, "intervalSeconds": 30, "gatewayClassName": "istio"}}),
         _set([*SVC, "enableInTreeAutoscaling"], True)),
     "spec.upgradeStrategy.clusterUpgradeOptions.stepSizePercent", "50 must not exceed maxSurgePercent 20", "ValidateClusterUpgradeOptions"),
    ("initializing-timeout", "shared", "RayService", _set(["metadata", "annotations"], {"ray.io/initializing-timeout": "-5m"}),
     'metadata.annotations["ray.io/initializing-timeout"]', "'-5m' must be a positive duration", "validateInitializingTimeout"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("variant", "kind", "mutate", "path", "message", "source"),
    [case[1:] for case in OPERATOR_CASES],
    ids=[case[0] for case in OPERATOR_CASES],
)
def test_each_operator_rule_fails_a_manifest_with_one_line(charts, variant, kind, mutate, path, message, source):
    config, doc = chart_object(charts, variant, kind)
    assert problems_of(doc, config) == []
    mutate(doc)
    assert problems_of(doc, config) == [f"{label(doc)}: {path}: {message} (KubeRay v1.7.0 {source})"]


def _cited_functions() -> set[str]:
    source = "".join(path.read_text() for path in sorted(Path(kuberay_operator.__file__).parent.glob("*.py")))
    cited = set(re.findall(r'"((?:V|v)alidate[A-Za-z]+)"', source))
    return cited | {f"Validate{kind}Metadata" for kind in crd_module.KUBERAY_KINDS}


# Rules behind a feature gate that the chart leaves off, shown with the gate on (operator_problems's `gates`).
GATED_CASES = [
    ("RayClusterNetworkPolicy", _set(["spec", "networkPolicy"], {"mode": "DenyAllEgress", "head": {"ingressRules": [{}]}}),
     "spec.networkPolicy.head.ingressRules", "cannot be set when mode is DenyAllEgress (ingress is not restricted)", "validateNetworkPolicy"),
    ("RayClusterNetworkPolicy", _set(["spec", "networkPolicy"], {"workerGroups": [{"groupName": "cpu-workers"}]}),
     "spec.networkPolicy.workerGroups[0].groupName", "'cpu-workers' matches no worker group", "validateNetworkPolicy"),
    ("GCSFaultToleranceEmbeddedStorage", _set(["spec", "gcsFaultToleranceOptions"], {"backend": "rocksdb", "redisAddress": "r:6379"}),
     "spec.gcsFaultToleranceOptions.redisAddress", "cannot be set with the 'rocksdb' backend", "validateGcsFaultToleranceBackend"),
]  # fmt: skip


@pytest.mark.parametrize(("gate", "mutate", "path", "message", "source"), GATED_CASES)
def test_rules_behind_a_feature_gate_apply_when_it_is_on(charts, gate, mutate, path, message, source):
    _, doc = chart_object(charts, "shared", "RayCluster")
    mutate(doc)
    gates = {**kuberay_operator.FEATURE_GATES, gate: True}
    assert kuberay_operator.operator_problems(doc, gates=gates) == [f"{path}: {message} (KubeRay v1.7.0 {source})"]
    assert kuberay_operator.FEATURE_GATES[gate] is False  # and off by default, as in the chart


def test_every_cited_go_function_has_a_mutation_case():
    covered = {case[-1] for case in OPERATOR_CASES + GATED_CASES}
    covered |= {"ValidateClusterUpgradeOptions", "ValidateRayServiceMetadata", "ValidateRayJobSpec"}  # below
    assert _cited_functions() <= covered, _cited_functions() - covered


@pytest.mark.parametrize("kind", ["RayCluster", "RayJob", "RayService"])
def test_kuberay_name_limits_cite_the_operator(charts, kind):
    config, doc = chart_object(charts, "shared", kind)
    limit = kuberay_operator.MAX_NAME_LENGTH[kind]
    doc["metadata"]["name"] = "a" * (limit + 1)
    assert problems_of(doc, config) == [
        f"{kind}/{'a' * (limit + 1)}: metadata.name: {'a' * (limit + 1)!r} has {limit + 1} characters; "
        f"KubeRay allows at most {limit} for {kind} (KubeRay v1.7.0 Validate{kind}Metadata)"
    ]


def test_objects_another_controller_manages_are_not_checked_by_the_operator_rules(charts):
    config, doc = chart_object(charts, "shared", "RayJob")
    doc["spec"]["backoffLimit"] = 2
    assert len(problems_of(doc, config)) == 1
    doc["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"  # allowed by the CRD's CEL rule
    assert problems_of(doc, config) == []


def test_operator_rules_wait_for_the_api_server_layers(charts):
    config, doc = chart_object(charts, "shared", "RayJob")
    doc["spec"]["backoffLimit"] = 2
    doc["spec"]["managedBy"] = "example.com/mine"  # refused by a CEL rule: the operator never sees the object
    [problem] = problems_of(doc, config)
    assert "(CRD rule:" in problem


def test_the_validate_command_prints_each_layers_problems_and_the_rules_it_did_not_evaluate(charts, tmp_path, capsys):

    docs = copy.deepcopy(charts["shared"][1])
    job = next(doc for doc in docs if doc["kind"] == "RayJob")
    service = next(doc for doc in docs if doc["kind"] == "RayService")
    job["spec"]["backoffLimit"] = 1
    service["spec"]["managedBy"] = "example.com/mine"
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all(docs))
    assert skyrl_hp("validate", str(tmp_path)) == 1
    out, err = capsys.readouterr()
    file = tmp_path / "all.yaml"  # each finding names its file
    assert out.splitlines() == [
        f"{file}: {label(job)}: spec.backoffLimit: 1 > 0 is incompatible with clusterSelector (retries recreate the "
        "job's own cluster) (KubeRay v1.7.0 ValidateRayJobSpec)",
        f"{file}: {label(service)}: spec.managedBy: the managedBy field value must be either 'ray.io/kuberay-operator' or "
        "'kueue.x-k8s.io/multikueue' (CRD rule: self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue'])",
    ]
    assert len([line for line in err.splitlines() if line.startswith("SKIPPED") and cel_rules.CHECK_NAME in line]) == 3


# --- through the configuration and the constructs -----------------------------------------------------


def test_incremental_upgrade_is_refused_like_the_operator_would(charts):
    # The configuration offers only NewCluster and None; a hand-edited manifest is still caught.
    config, service = chart_object(charts, "shared", "RayService")
    service["spec"]["upgradeStrategy"]["type"] = "NewClusterWithIncrementalUpgrade"
    assert problems_of(service, config) == [
        f"{label(service)}: spec.rayClusterConfig.enableInTreeAutoscaling: NewClusterWithIncrementalUpgrade needs the "
        "Ray autoscaler (enableInTreeAutoscaling: true) (KubeRay v1.7.0 ValidateClusterUpgradeOptions)"
    ]


def test_a_service_name_kuberay_refuses(charts):
    # The configuration refuses it too (KUBERAY_NAME_PATTERN); a hand-edited manifest is still caught.
    config, service = chart_object(charts, "shared", "RayService")
    service["metadata"]["name"] = "2-serve"
    assert problems_of(service, config) == [
        "RayService/2-serve: metadata.name: '2-serve' is not a DNS-1035 label (lowercase letters, digits, '-'; "
        "starts with a letter) (KubeRay v1.7.0 ValidateRayServiceMetadata)"
    ]


@pytest.mark.parametrize(
    ("mode", "cluster", "backoff", "path", "message"),
    [
        ("InteractiveMode", "own", 2, "spec.backoffLimit", "2 > 0 is incompatible with InteractiveMode"),
        ("SidecarMode", "existing", None, "spec.submissionMode", "SidecarMode does not support clusterSelector"),
    ],
)
def test_ray_job_construct_with_a_submission_mode_kuberay_refuses(mode, cluster, backoff, path, message):
    config = validate_config(SELF_CONTAINED)
    inputs = ChartInputs(
        config=config, outputs=StackOutputs.placeholder(config), job_files={JOB_SCRIPT_NAME: STUB_SCRIPT}
    )
    chart = cdk8s.Chart(cdk8s.App(), "jobs")
    props = RayJobProps(
        entrypoint="python -c pass",
        submission_mode=mode,
        active_deadline_seconds=3600,
        cluster_name=config.training.cluster.raycluster_name if cluster == "existing" else None,
        cluster_spec=training_cluster_spec(inputs) if cluster == "own" else None,
        backoff_limit=backoff,
    )
    RayJob(chart, "job", name="probe", namespace=config.workloads.namespace, props=props)
    assert problems_of(chart.to_json()[0], config) == [
        f"RayJob/probe: {path}: {message} (KubeRay v1.7.0 ValidateRayJobSpec)"
    ]


# --- every default and scale-variant manifest passes every layer ------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        SELF_CONTAINED,
        {
            "hyperpod": {
                "worker_group": {"name": "gpu-workers", "instance_type": "ml.g7e.48xlarge", "instance_count": 3}
            }
        },
        {
            "hyperpod": {
                "worker_group": {"name": "gpu-workers", "instance_type": "ml.g7e.12xlarge", "instance_count": 1}
            }
        },
        {"serving": {"upgrade_strategy": "None"}},
    ],
    ids=["defaults", "self-contained", "g7e-48xlarge", "one-gpu-node", "no-upgrades"],
)
def test_default_and_scale_variant_manifests_pass_every_layer(overrides):
    config, docs = chart_manifests(overrides)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        problems, skipped = validation_report(docs, config=config)
    assert problems == []
    # Only the update-only CEL rules are not evaluated; every other layer ran. Every synth prints these lines
    # and they ask nothing: one short line each, the rules themselves are in docs/validation.md.
    assert skipped and all(
        cel_rules.CHECK_NAME in line and "apply only to updates of a live object" in line for line in skipped
    )
    assert all(len(line) <= 160 and line.endswith("nothing to do (docs/validation.md)")
               for line in skipped), skipped  # fmt: skip
