"""hyperpod.worker_group.scaling on_demand in the manifests: HyperPod's NodeClass and a Karpenter NodePool, Ray pods
Karpenter never disrupts, a RayService whose GPU workers scale from zero, and all of it through the offline checks
(Karpenter's NodePool CRD at the pinned release, the NodeClass fields AWS documents, KubeRay's CRD, Ray Serve's
schema)."""

from __future__ import annotations

import copy
import warnings

import pytest
import yaml
from chart_helpers import objects, one, synth
from conftest import VARIANT_ON_DEMAND

from skyrl_hyperpod.config import validate_config
from skyrl_hyperpod.plumbing.upstream import (
    GPU_RESOURCE,
    HYPERPOD_NODECLASS_API_VERSION,
    INSTANCE_TYPE_LABEL,
    KARPENTER_API_VERSION,
    KARPENTER_DO_NOT_DISRUPT,
)
from skyrl_hyperpod.validation import karpenter, serve_config, validation_report

SCHEDULABLE = "sagemaker.amazonaws.com/node-health-status"


@pytest.fixture(scope="module")
def on_demand_config():
    return validate_config(VARIANT_ON_DEMAND)


@pytest.fixture(scope="module")
def on_demand(on_demand_config):
    return synth(on_demand_config)


@pytest.fixture(scope="module")
def fixed(default_config):
    return synth(default_config)


def ray_pod_templates(charts) -> list[dict]:
    specs = [job["spec"]["rayClusterSpec"] for job in objects(charts, "RayJob")]
    specs += [service["spec"]["rayClusterConfig"] for service in objects(charts, "RayService")]
    specs += [cluster["spec"] for cluster in objects(charts, "RayCluster")]
    return [group["template"] for spec in specs for group in (spec["headGroupSpec"], *spec["workerGroupSpecs"])]


def required_labels(template: dict) -> set[str]:
    terms = template["spec"].get("affinity", {}).get("nodeAffinity", {})
    terms = terms.get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
    return {e["key"] for term in terms for e in term["matchExpressions"]}


def test_on_demand_applies_a_nodeclass_and_a_nodepool_with_the_platform(on_demand, on_demand_config):
    group = on_demand_config.hyperpod.worker_group
    node_class, node_pool = one(on_demand, "HyperpodNodeClass"), one(on_demand, "NodePool")
    assert node_class in on_demand["01-platform"] and node_pool in on_demand["01-platform"]
    assert node_class["apiVersion"] == HYPERPOD_NODECLASS_API_VERSION
    assert node_class["spec"] == {"instanceGroups": [group.name]}
    spec = node_pool["spec"]
    assert node_pool["apiVersion"] == KARPENTER_API_VERSION
    assert spec["template"]["spec"]["nodeClassRef"]["name"] == node_class["metadata"]["name"]
    assert spec["template"]["spec"]["requirements"] == [
        {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": [group.instance_type]}
    ]
    # At most instance_count nodes' GPUs; a node goes only once empty, one at a time.
    assert spec["limits"] == {GPU_RESOURCE: group.instance_count * group.spec.gpus} == {GPU_RESOURCE: 6}
    assert spec["disruption"] == {
        "consolidationPolicy": "WhenEmpty",
        "consolidateAfter": f"{group.scale_down_after_minutes}m",
        "budgets": [{"nodes": "1"}],
    }


def test_the_nodepool_follows_the_configured_maximum_and_idle_time():
    config = validate_config(
        {"hyperpod": {"worker_group": {**VARIANT_ON_DEMAND["hyperpod"]["worker_group"], "instance_count": 5,
                                        "scale_down_after_minutes": 30}}}
    )  # fmt: skip
    spec = one(synth(config), "NodePool")["spec"]
    assert spec["limits"] == {GPU_RESOURCE: 10}
    assert spec["disruption"]["consolidateAfter"] == "30m"


def test_fixed_nodes_get_no_karpenter_objects(fixed):
    assert objects(fixed, "HyperpodNodeClass") == objects(fixed, "NodePool") == []


def test_karpenter_never_disrupts_a_ray_pod_and_waits_for_no_health_label(on_demand, fixed):
    templates = ray_pod_templates(on_demand)
    assert len(templates) >= 4  # the RayJobs' and the RayService's heads and workers
    assert all(t["metadata"]["annotations"] == {KARPENTER_DO_NOT_DISRUPT: "true"} for t in templates)
    # Karpenter starts a node only for labels the NodePool promises; HyperPod sets the health label itself.
    assert all(SCHEDULABLE not in required_labels(t) for t in templates)
    fixed_templates = ray_pod_templates(fixed)
    assert all("annotations" not in t.get("metadata", {}) for t in fixed_templates)
    assert any(SCHEDULABLE in required_labels(t) for t in fixed_templates)


def test_the_rayservice_scales_its_gpu_workers_from_zero(on_demand, on_demand_config):
    serving = on_demand_config.serving
    spec = one(on_demand, "RayService")["spec"]
    cluster = spec["rayClusterConfig"]
    assert cluster["enableInTreeAutoscaling"] is True
    options = cluster["autoscalerOptions"]
    assert options["idleTimeoutSeconds"] == serving.worker_idle_seconds
    assert options["resources"]["limits"] == {
        "cpu": str(serving.autoscaler_cpus),
        "memory": f"{serving.autoscaler_memory_gib}Gi",
    }
    [group] = cluster["workerGroupSpecs"]
    assert (group["minReplicas"], group["replicas"], group["maxReplicas"]) == (0, 0, serving.worker_replicas)
    [app] = yaml.safe_load(spec["serveConfigV2"])["applications"]
    autoscaling = app["args"]["llm_configs"][0]["deployment_config"]["autoscaling_config"]
    assert (autoscaling["min_replicas"], autoscaling["max_replicas"]) == (serving.min_replicas, serving.max_replicas)


def test_fixed_nodes_keep_a_fixed_serving_worker_group(fixed, default_config):
    cluster = one(fixed, "RayService")["spec"]["rayClusterConfig"]
    assert cluster["enableInTreeAutoscaling"] is False and "autoscalerOptions" not in cluster
    [group] = cluster["workerGroupSpecs"]
    assert group["minReplicas"] == group["maxReplicas"] == default_config.serving.worker_replicas


def report(charts, config):
    docs = [doc for chart in charts.values() for doc in chart]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return validation_report(docs, config=config)


def test_every_manifest_passes_the_offline_checks(on_demand, on_demand_config):
    problems, skipped = report(on_demand, on_demand_config)
    assert problems == []
    # The RayService's autoscaling fields went through KubeRay's CRD and its serveConfigV2 through Ray Serve's schema.
    assert not any(serve_config.CHECK_NAME in line for line in skipped), skipped
    reason = karpenter.missing_crd_reason()
    if reason:
        assert f"SKIPPED {karpenter.CHECK_NAME}: {reason}" in skipped
        pytest.skip(f"{karpenter.CHECK_NAME}: {reason}")
    assert not any(karpenter.CHECK_NAME in line for line in skipped), skipped
    # Karpenter's rules that compare with the live object (nodeClassRef's group and kind are immutable) are named.
    [update_only] = [line for line in skipped if line.startswith("SKIPPED NodePool CRD CEL rules")]
    assert "self.group == oldSelf.group" in update_only


def with_change(charts, kind: str, change) -> dict:
    changed = copy.deepcopy(charts)
    change(one(changed, kind))
    return changed


def test_the_checks_catch_a_broken_nodepool(on_demand, on_demand_config):
    reason = karpenter.missing_crd_reason()
    if reason:
        pytest.skip(f"{karpenter.CHECK_NAME}: {reason}")

    def bad(pool):
        pool["spec"]["disruption"]["consolidationPolicy"] = "Never"
        pool["spec"]["disruption"]["budgets"] = [{"nodes": "one"}]
        pool["spec"]["template"]["spec"]["requirements"].append({"key": "karpenter.sh/nodepool", "operator": "Exists"})

    problems, _ = report(with_change(on_demand, "NodePool", bad), on_demand_config)
    assert any("spec.disruption.consolidationPolicy" in p and "Never" in p for p in problems), problems
    assert any("spec.disruption.budgets[0].nodes" in p for p in problems), problems
    assert any("karpenter.sh/nodepool" in p and "CRD rule" in p for p in problems), problems


def test_the_checks_catch_a_broken_nodeclass_and_autoscaler(on_demand, on_demand_config):
    def bad_class(node_class):
        node_class["spec"]["instanceGroups"] = [f"g{i}" for i in range(11)]
        node_class["spec"]["subnets"] = ["subnet-1"]

    problems, _ = report(with_change(on_demand, "HyperpodNodeClass", bad_class), on_demand_config)
    assert any("spec.instanceGroups" in p and "too long" in p for p in problems), problems
    assert any("subnets" in p for p in problems), problems

    def bad_autoscaler(service):
        service["spec"]["rayClusterConfig"]["autoscalerOptions"]["upscalingMode"] = "Fast"

    problems, _ = report(with_change(on_demand, "RayService", bad_autoscaler), on_demand_config)
    assert any("autoscalerOptions.upscalingMode" in p for p in problems), problems


def test_a_missing_nodepool_crd_is_reported_skipped_never_passed(on_demand, on_demand_config, tmp_path, monkeypatch):
    monkeypatch.setenv(karpenter.CRDS_DIR_ENV_VAR, str(tmp_path))
    problems, skipped = report(on_demand, on_demand_config)
    assert problems == []
    [line] = [line for line in skipped if "NodePool" in line]
    assert line == f"SKIPPED {karpenter.CHECK_NAME}: {karpenter.missing_crd_reason()}"
    assert str(tmp_path) in line


def test_a_nodepool_crd_with_another_checksum_is_refused(on_demand, on_demand_config, tmp_path, monkeypatch):
    from skyrl_hyperpod.plumbing.errors import InputError

    (tmp_path / karpenter.NODEPOOL.file_name).write_text("kind: CustomResourceDefinition\n")
    monkeypatch.setenv(karpenter.CRDS_DIR_ENV_VAR, str(tmp_path))
    with pytest.raises(InputError, match="is not the Karpenter v1.14.1 NodePool CRD"):
        karpenter.nodepool_problems(one(on_demand, "NodePool"))
