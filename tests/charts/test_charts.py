"""cdk8s charts: behaviour of every manifest, scale, experiments, outputs and the entry point.

Charts are built in-process (cdk8s.App + Chart.to_json): no synth to disk, no subprocess,
except one test of the `k8s_app.py` entry point itself.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from chart_helpers import STUB_SCRIPT, objects, one, synth

from charts import ChartInputs, serve_config
from charts.rayjob import entrypoint
from drill.layout import write_config_map
from skyrl_hyperpod.config import INSTANCE_CATALOG, ConfigError, validate_config
from skyrl_hyperpod.config.serving import training_head_size
from skyrl_hyperpod.config.training_runs import resolve_runs
from skyrl_hyperpod.values.job_files import JOB_SCRIPT_NAME, read_job_files
from skyrl_hyperpod.values.stack_outputs import OutputKey, StackOutputs

REPO_ROOT = Path(__file__).resolve().parents[2]


def worker_group(spec: dict) -> dict:
    (group,) = spec["workerGroupSpecs"]
    return group


def ray_container(template: dict) -> dict:
    return template["spec"]["containers"][0]


def skyrl_overrides(rayjob: dict) -> dict[str, str]:
    words = shlex.split(rayjob["spec"]["entrypoint"])
    return dict(word.split("=", 1) for word in words[words.index("--") + 1 :])


def entrypoint_env(rayjob: dict) -> dict[str, str]:
    """The `env NAME=VALUE` words in front of the command."""
    words = shlex.split(rayjob["spec"]["entrypoint"])
    if words[0] != "env":
        return {}
    return dict(word.split("=", 1) for word in words[1 : words.index("python")])


def entrypoint_command(rayjob: dict) -> list[str]:
    words = shlex.split(rayjob["spec"]["entrypoint"])
    return words[words.index("python") :]


def entrypoint_options(rayjob: dict) -> dict[str, str]:
    words = entrypoint_command(rayjob)
    head = words[2 : words.index("--")]
    return dict(zip(head[::2], head[1::2], strict=True))


def runtime_env_vars(rayjob: dict) -> dict[str, str] | None:
    text = rayjob["spec"].get("runtimeEnvYAML")
    return None if text is None else yaml.safe_load(text)["env_vars"]


# Jobs on the long-lived RayCluster (training.jobs.self_contained_jobs: false): the charts with a RayCluster.
SHARED = {"training": {"jobs": {"self_contained_jobs": False}}}


@pytest.fixture(scope="module")
def default_charts():
    """The shared-cluster variant: most chart tests read its RayCluster (a self-contained job embeds the same spec)."""
    return synth(validate_config(SHARED))


def test_one_chart_per_deployable_unit_in_apply_order(default_charts):
    assert list(default_charts) == ["01-platform", "02-raycluster", "03-rayjobs", "04-publish-adapter", "05-rayservice"]
    assert [d["kind"] for d in default_charts["01-platform"]] == [
        "Namespace", *["NetworkPolicy"] * 6,  # default deny, egress, (pods, head) x (training, serving): test_ray_access.py
        "ServiceAccount", "ServiceAccount", "PersistentVolume", "PersistentVolumeClaim", "ConfigMap",
    ]  # fmt: skip


def test_namespaced_objects_live_in_the_configured_namespace(default_charts, default_config):
    cluster_scoped = {"Namespace", "PersistentVolume"}
    for docs in default_charts.values():
        for doc in docs:
            if doc["kind"] in cluster_scoped:
                assert "namespace" not in doc["metadata"]
            else:
                assert doc["metadata"]["namespace"] == default_config.workloads.namespace, doc["kind"]


def test_fsx_volume_and_claim_bind_statically(default_charts, default_config):
    outputs = StackOutputs.placeholder(default_config)
    volume, claim = one(default_charts, "PersistentVolume"), one(default_charts, "PersistentVolumeClaim")
    assert volume["spec"]["csi"] == {
        "driver": "fsx.csi.aws.com",
        "volumeHandle": outputs.fsx_file_system_id,
        "volumeAttributes": {"dnsname": outputs.fsx_dns_name, "mountname": outputs.fsx_mount_name},
    }
    assert volume["spec"]["accessModes"] == claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert "flock" in volume["spec"]["mountOptions"]
    assert claim["spec"]["volumeName"] == volume["metadata"]["name"]
    assert claim["spec"]["storageClassName"] == volume["spec"]["storageClassName"] == ""
    assert claim["metadata"]["name"] == default_config.workloads.shared_pvc_name


def test_service_accounts_match_the_pod_identity_associations(default_charts, default_config):
    names = {sa["metadata"]["name"] for sa in objects(default_charts, "ServiceAccount")}
    workloads = default_config.workloads
    assert names == {workloads.training_service_account, workloads.serving_service_account}


def test_raycluster_head(default_charts, default_config):
    cluster = one(default_charts, "RayCluster")
    head = cluster["spec"]["headGroupSpec"]
    assert cluster["metadata"]["name"] == default_config.training.cluster.raycluster_name == "skyrl-visgym"
    assert cluster["spec"]["rayVersion"] == default_config.training_image.ray_version == "2.57.0"
    # 8 GiB of /dev/shm: 6 GiB of object store, 2 GiB left for everything else.
    assert head["rayStartParams"] == {"num-gpus": "0", "dashboard-host": "0.0.0.0", "object-store-memory": str(6 * GIB)}
    assert head["serviceType"] == "ClusterIP"
    pod = head["template"]["spec"]
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": default_config.hyperpod.head_group.instance_type}
    container = ray_container(head["template"])
    cpus, memory = training_head_size(default_config.training, default_config.serving, default_config.hyperpod)
    assert container["resources"]["requests"] == {"cpu": str(cpus), "memory": f"{memory}Gi"}
    assert pod["serviceAccountName"] == default_config.workloads.training_service_account
    assert "tolerations" not in pod


def test_raycluster_workers(default_charts, default_config):
    group_config = default_config.hyperpod.worker_group
    group = worker_group(one(default_charts, "RayCluster")["spec"])
    assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == group_config.instance_count
    pod = group["template"]["spec"]
    container = ray_container(group["template"])
    assert container["name"] == "ray-worker"
    limits = container["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == group_config.spec.gpus == 2
    assert limits["vpc.amazonaws.com/efa"] == group_config.spec.efa_interfaces == 1
    assert container["resources"]["requests"] == limits
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": group_config.instance_type}
    # Only the GPU taint: pods must stay off nodes carrying HyperPod's node-health taint.
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_ray_pods_mount_shared_storage_caches_and_sized_shm(default_charts, default_config):
    cluster = one(default_charts, "RayCluster")["spec"]
    shared = default_config.workloads.shared_mount_path
    image = f"{StackOutputs.placeholder(default_config).ecr_repository_uri}:{default_config.training_image.tag}"
    for template in (cluster["headGroupSpec"]["template"], worker_group(cluster)["template"]):
        container = ray_container(template)
        volumes = {v["name"]: v for v in template["spec"]["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        assert volumes[mounts[shared]]["persistentVolumeClaim"]["claimName"] == default_config.workloads.shared_pvc_name
        shm = volumes[mounts["/dev/shm"]]["emptyDir"]
        assert shm["medium"] == "Memory" and shm["sizeLimit"].endswith("Gi")
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["HF_HOME"].startswith(shared + "/") and env["VLLM_CACHE_ROOT"].startswith(shared + "/")
        assert container["image"] == image and not container["image"].endswith(":latest")
        assert container["securityContext"]["runAsNonRoot"] is True


def test_head_mounts_the_training_script_and_prepares_shared_dirs(default_charts, default_config):
    head = one(default_charts, "RayCluster")["spec"]["headGroupSpec"]["template"]
    config_map = one(default_charts, "ConfigMap")
    volumes = {v["name"]: v for v in head["spec"]["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in ray_container(head)["volumeMounts"]}
    script_volume = volumes[mounts[default_config.training.cluster.job_script_mount]]
    assert script_volume["configMap"]["name"] == config_map["metadata"]["name"]
    assert "subPath" not in str(ray_container(head)["volumeMounts"])  # updates reach the running head
    (init,) = head["spec"]["initContainers"]
    assert (
        f"chown {default_config.training.cluster.run_as_user}:{default_config.training.cluster.run_as_group}"
        in init["command"][-1]
    )
    assert init["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_rayjob_submits_to_the_long_lived_cluster_when_jobs_are_not_self_contained(default_charts, default_config):
    job = one(default_charts, "RayJob")
    spec = job["spec"]
    assert spec["clusterSelector"] == {"ray.io/cluster": default_config.training.cluster.raycluster_name}
    assert "rayClusterSpec" not in spec and spec["shutdownAfterJobFinishes"] is False
    assert "deletionStrategy" not in spec
    assert spec["submissionMode"] == "K8sJobMode"
    # KubeRay rejects retries with clusterSelector: a retry deletes and recreates the job's cluster.
    assert "backoffLimit" not in spec
    assert spec["activeDeadlineSeconds"] == default_config.training.jobs.job_active_deadline_seconds


def test_rayjob_entrypoint_runs_the_mounted_script_with_typed_values(default_charts, default_config):
    job = one(default_charts, "RayJob")
    training = default_config.training
    assert entrypoint_command(job)[:2] == ["python", f"{training.cluster.job_script_mount}/train_job.py"]
    assert entrypoint_options(job) == {
        "--shared-dir": "/shared",
        "--model-repo": "VisGym/visgym_model",
        "--model-subfolder": "mixed_qwen3vl",
        "--model-dir": "/shared/models/visgym-sft",
        "--data-dir": "/shared/datasets/visgym-maze",
        "--env-id": "maze_2d/easy",
        "--train-rows": "256",
        "--eval-rows": "64",
        "--eval-seed": "42",
        "--skyrl-dir": "/home/ray/SkyRL",
        # The stall watchdog's bounds (training.jobs.stall_timeout_*, derived from the reference step time).
        "--stall-timeout-first-step": str(training.jobs.effective_stall_timeout_first_step_s),
        "--stall-timeout-step": str(training.jobs.effective_stall_timeout_step_s),
        # The checkpoint check's query example, in the run's directory (the publish Job copies it from there).
        "--query-example": "/shared/runs/maze-grpo/query-example.json",
    }
    overrides = skyrl_overrides(job)
    assert overrides["trainer.policy.model.lora.rank"] == "32"
    assert overrides["trainer.placement.colocate_all"] == "true"
    assert overrides["generator.inference_engine.num_engines"] == "6"
    assert overrides["generator.inference_engine.gpu_memory_utilization"] == "0.45"
    assert overrides["trainer.export_path"] == "/shared/runs/maze-grpo"
    assert overrides["trainer.ckpt_path"].startswith("/shared/runs/maze-grpo/")
    assert overrides["trainer.policy.model.lora.lora_sync_path"].startswith("/shared/")
    assert overrides["generator.vision_language_generator"] == "true"
    assert overrides["trainer.remove_microbatch_padding"] == "false"
    assert overrides["trainer.resume_mode"] == "latest"
    # The adapter adapts what vLLM applies, as a list SkyRL parses (tests/config/test_lora_targets.py), and the
    # engines profile for the conversations the job sends: one maze frame per turn, no video.
    assert (
        overrides["trainer.policy.model.lora.target_modules"]
        == "[q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj]"
    )
    limits = "generator.inference_engine.engine_init_kwargs.limit_mm_per_prompt"
    assert (overrides[f"{limits}.image"], overrides[f"{limits}.video"]) == (str(training.knobs.max_turns), "0")


def test_the_serving_engine_profiles_for_the_training_conversations(default_charts, default_config):
    serve_config = yaml.safe_load(one(default_charts, "RayService")["spec"]["serveConfigV2"])
    [llm_config] = serve_config["applications"][0]["args"]["llm_configs"]
    max_turns = default_config.training.knobs.max_turns
    assert llm_config["engine_kwargs"]["limit_mm_per_prompt"] == {"image": max_turns, "video": 0}
    longer = validate_config({"training": {"experiments": [
        {"name": "short", "overrides": {"generator.max_turns": 4}},
        {"name": "long", "overrides": {"generator.max_turns": 20}},
    ]}})  # fmt: skip
    [llm_config] = yaml.safe_load(one(synth(longer), "RayService")["spec"]["serveConfigV2"])["applications"][0]["args"][
        "llm_configs"
    ]
    assert llm_config["engine_kwargs"]["limit_mm_per_prompt"] == {"image": 20, "video": 0}


def test_entrypoint_is_accepted_by_the_training_script(default_config):
    script = REPO_ROOT / "docker" / "train_job.py"
    (run,) = resolve_runs(default_config.training, default_config.hyperpod, default_config.workloads)
    inputs = ChartInputs(
        config=default_config, outputs=StackOutputs.placeholder(default_config), job_files={JOB_SCRIPT_NAME: ""}
    )
    words = shlex.split(entrypoint(inputs, run))
    words = words[words.index("python") :]
    sys.path.insert(0, str(script.parent))
    try:
        from skyrl_hp_job.options import parse_args

        options = parse_args(words[2:])
    finally:
        sys.path.remove(str(script.parent))
    assert str(options.model_dir) == "/shared/models/visgym-sft"
    assert dict(options.overrides)["trainer.run_name"] == "maze-grpo"


def test_by_default_each_rayjob_owns_a_cluster_is_retried_and_keeps_a_failed_head(default_config):
    charts = synth(default_config)
    assert "02-raycluster" not in charts and objects(charts, "RayCluster") == []
    spec = one(charts, "RayJob")["spec"]
    assert "clusterSelector" not in spec
    assert spec["backoffLimit"] == default_config.training.jobs.effective_job_backoff_limit == 2
    # deletionRules replace shutdownAfterJobFinishes (KubeRay refuses both) and its single TTL.
    assert spec["shutdownAfterJobFinishes"] is False and "ttlSecondsAfterFinished" not in spec
    jobs = default_config.training.jobs
    assert spec["deletionStrategy"] == {
        "deletionRules": [
            {"condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": jobs.job_ttl_seconds_after_finished}, "policy": "DeleteCluster"},
            {"condition": {"jobDeploymentStatus": "Failed", "ttlSeconds": jobs.job_ttl_seconds_after_finished}, "policy": "DeleteWorkers"},
            {"condition": {"jobDeploymentStatus": "Failed", "ttlSeconds": jobs.failed_head_ttl_seconds}, "policy": "DeleteCluster"},
        ]
    }  # fmt: skip
    assert jobs.failed_head_ttl_seconds > jobs.job_ttl_seconds_after_finished
    long_lived = one(synth(validate_config(SHARED)), "RayCluster")["spec"]
    assert spec["rayClusterSpec"] == long_lived
    # Resume: SkyRL reads the newest complete checkpoint of this experiment's own directory.
    overrides = skyrl_overrides(one(charts, "RayJob"))
    assert overrides["trainer.resume_mode"] == "latest"
    assert overrides["trainer.ckpt_path"] == f"/shared/runs/{default_config.training.experiments[0].name}/ckpt"


def test_the_deletion_ttls_come_from_the_config():
    config = validate_config(
        {"training": {"jobs": {"job_ttl_seconds_after_finished": 600, "failed_head_ttl_seconds": 7200}}}
    )
    rules = one(synth(config), "RayJob")["spec"]["deletionStrategy"]["deletionRules"]
    assert [rule["condition"]["ttlSeconds"] for rule in rules] == [600, 600, 7200]


def test_job_variables_skyrl_passes_on_go_on_the_entrypoint_the_rest_into_runtime_env(default_config):
    # Ray refuses SkyRL's ray.init(runtime_env=...) when the job's runtime env repeats a name SkyRL forwards from
    # the driver's environment (SKYRL_*, NCCL_DEBUG, ...): those are set on the entrypoint, the rest in runtimeEnvYAML.
    variables = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "FI_EFA_USE_DEVICE_RDMA": "1", "SKYRL_X": "a b"}
    with pytest.raises(ConfigError) as caught:  # a SKYRL_* value crosses the submitter's shell quoting
        validate_config({"training": {"jobs": {"runtime_env_vars": variables}}})
    assert "runtime_env_vars['SKYRL_X'] = 'a b'" in caught.value.problems[0]
    variables["SKYRL_X"] = "a,b"
    job = one(synth(validate_config({"training": {"jobs": {"runtime_env_vars": variables}}})), "RayJob")
    timeout = str(default_config.training.jobs.placement_group_timeout_seconds)
    assert entrypoint_env(job) == {"SKYRL_RAY_PG_TIMEOUT_IN_S": timeout, "NCCL_DEBUG": "INFO", "SKYRL_X": "a,b"}
    assert runtime_env_vars(job) == {"NCCL_DEBUG_SUBSYS": "INIT,NET", "FI_EFA_USE_DEVICE_RDMA": "1"}
    # A value the submitter's shell would split stays whole in runtimeEnvYAML.
    spaced = validate_config({"training": {"jobs": {"runtime_env_vars": {"EXTRA_FLAGS": "--a --b"}}}})
    assert runtime_env_vars(one(synth(spaced), "RayJob")) == {"EXTRA_FLAGS": "--a --b"}


def test_default_rayjob_sets_no_runtime_env_variable_skyrl_forwards(default_charts, default_config):
    job = one(default_charts, "RayJob")
    release = default_config.training_image.skyrl_release
    assert "runtimeEnvYAML" not in job["spec"]
    assert all(release.passes_on(name) for name in entrypoint_env(job))
    shared = one(synth(validate_config(SHARED)), "RayJob")
    assert "runtimeEnvYAML" not in shared["spec"] and entrypoint_env(shared) == entrypoint_env(job)


def test_n_experiments_give_n_rayjobs_with_distinct_runs():
    lrs = [1e-5, 3e-5, 1e-4]
    config = validate_config(
        {
            "training": {
                "experiments": [
                    {"name": f"lr-{i}", "overrides": {"trainer.policy.optimizer_config.lr": lr}}
                    for i, lr in enumerate(lrs)
                ]
            }
        }
    )
    jobs = objects(synth(config), "RayJob")
    assert [j["metadata"]["name"] for j in jobs] == [f"skyrl-visgym-lr-{i}" for i in range(3)]
    overrides = [skyrl_overrides(j) for j in jobs]
    assert [float(o["trainer.policy.optimizer_config.lr"]) for o in overrides] == lrs
    for key in (
        "trainer.run_name",
        "trainer.export_path",
        "trainer.ckpt_path",
        "trainer.policy.model.lora.lora_sync_path",
    ):
        assert len({o[key] for o in overrides}) == 3, key
    assert all(o["trainer.export_path"] == f"/shared/runs/lr-{i}" for i, o in enumerate(overrides))


@pytest.mark.parametrize(
    ("instance_type", "count"),
    [
        ("ml.g7e.12xlarge", 1),
        ("ml.g7e.12xlarge", 3),
        ("ml.g7e.12xlarge", 8),
        ("ml.g7e.12xlarge", 16),
        ("ml.g7e.48xlarge", 3),
    ],
)
def test_scaling_the_gpu_group_rescales_cluster_and_skyrl_consistently(instance_type, count):
    config = validate_config(
        {"hyperpod": {"worker_group": {"name": "gpu-workers", "instance_type": instance_type, "instance_count": count}}}
        | SHARED
    )
    spec = config.hyperpod.worker_group.spec
    charts = synth(config)
    group = worker_group(one(charts, "RayCluster")["spec"])
    container = ray_container(group["template"])
    assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == count
    assert container["resources"]["limits"]["nvidia.com/gpu"] == spec.gpus
    assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == spec.efa_interfaces
    assert container["resources"]["requests"]["cpu"] == str(config.hyperpod.worker_group.allocatable_vcpus)
    assert group["template"]["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"] == instance_type
    overrides = skyrl_overrides(one(charts, "RayJob"))
    gpus = count * spec.gpus
    assert int(overrides["trainer.placement.policy_num_nodes"]) == count
    assert int(overrides["trainer.placement.policy_num_gpus_per_node"]) == spec.gpus
    assert (
        int(overrides["generator.inference_engine.num_engines"])
        * int(overrides["generator.inference_engine.tensor_parallel_size"])
        == gpus
    )
    # SkyRL's own batch rule (floor division) accepts what the RayJob carries.
    from skyrl_hyperpod.validation import validate_skyrl_overrides

    assert validate_skyrl_overrides([f"{key}={value}" for key, value in overrides.items()]) == []
    serving_group = worker_group(one(charts, "RayService")["spec"]["rayClusterConfig"])
    assert ray_container(serving_group["template"])["resources"]["limits"]["nvidia.com/gpu"] == spec.gpus


def test_rayservice(default_charts, default_config):
    service = one(default_charts, "RayService")
    spec = service["spec"]
    cluster = spec["rayClusterConfig"]
    assert cluster["rayVersion"] == default_config.serving_image.ray_version == "2.58.0"
    for template in (cluster["headGroupSpec"]["template"], worker_group(cluster)["template"]):
        assert template["spec"]["serviceAccountName"] == default_config.workloads.serving_service_account
        assert ray_container(template)["image"] == default_config.serving_image.image
    workers = worker_group(cluster)["template"]
    assert (
        workers["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"]
        == default_config.hyperpod.worker_group.instance_type
    )
    shared_mounts = [m for m in ray_container(workers)["volumeMounts"] if m["mountPath"] == "/shared"]
    assert shared_mounts and all(m["readOnly"] for m in shared_mounts)
    assert yaml.safe_load(spec["serveConfigV2"]) == serve_config(
        default_config, StackOutputs.placeholder(default_config)
    )


def test_serve_config(default_config):
    outputs = StackOutputs.placeholder(default_config)
    config = serve_config(default_config, outputs)
    (app,) = config["applications"]
    assert (app["import_path"], app["route_prefix"]) == ("ray.serve.llm:build_openai_app", "/")
    (llm,) = app["args"]["llm_configs"]
    assert llm["model_loading_config"] == {"model_id": "visgym-qwen3vl", "model_source": "/shared/models/visgym-sft"}
    engine = llm["engine_kwargs"]
    assert engine["enable_lora"] is True
    assert engine["max_lora_rank"] == default_config.training.knobs.lora_rank == 32
    assert engine["max_loras"] == llm["lora_config"]["max_num_adapters_per_replica"]
    assert llm["lora_config"]["dynamic_lora_loading_path"] == (
        f"s3://{outputs.artifacts_bucket_name}/{default_config.workloads.adapters_prefix}"
    )
    assert "accelerator_type" not in json.dumps(config)
    autoscaling = llm["deployment_config"]["autoscaling_config"]
    assert autoscaling["min_replicas"] <= autoscaling["max_replicas"]


def test_publish_job_copies_the_adapter_with_the_training_identity(default_charts, default_config):
    job = one(default_charts, "Job")
    pod = job["spec"]["template"]["spec"]
    outputs = StackOutputs.placeholder(default_config)
    [run] = default_config.derived.runs
    assert pod["serviceAccountName"] == default_config.workloads.training_service_account
    script = pod["containers"][0]["command"][-1]
    # The run's last step, under the experiment's own name.
    source = f"/shared/runs/maze-grpo/global_step_{run.total_steps}/policy"
    target = f"s3://{outputs.artifacts_bucket_name}/{default_config.workloads.adapters_prefix}/maze-grpo/"
    assert f"aws s3 sync {source} {target}" in script
    assert pod["containers"][0]["image"] == default_config.serving.publish.image
    claim = next(v for v in pod["volumes"] if "persistentVolumeClaim" in v)["persistentVolumeClaim"]
    assert claim == {"claimName": default_config.workloads.shared_pvc_name, "readOnly": True}
    assert job["metadata"]["name"] == f"publish-maze-grpo-step-{run.total_steps}"


SWEEP = {"training": {"experiments": [
    {"name": "lr-1e-5", "overrides": {"trainer.policy.optimizer_config.lr": 1.0e-5}},
    {"name": "rank-64", "overrides": {"trainer.policy.model.lora.rank": 64, "trainer.policy.model.lora.alpha": 64}},
    {"name": "full", "overrides": {"trainer.policy.model.lora.rank": 0}},
]}}  # fmt: skip


def test_a_sweep_publishes_each_lora_experiment_under_its_own_name():
    jobs = objects(synth(validate_config(SWEEP)), "Job")
    scripts = {job["metadata"]["name"]: job["spec"]["template"]["spec"]["containers"][0]["command"][-1] for job in jobs}
    # The full fine-tune has no adapter: no Job for it.
    assert sorted(scripts) == ["publish-lr-1e-5-step-160", "publish-rank-64-step-160"]
    for name in ("lr-1e-5", "rank-64"):
        assert f"/shared/runs/{name}/global_step_160/policy s3://" in scripts[f"publish-{name}-step-160"]
        assert scripts[f"publish-{name}-step-160"].rstrip().endswith(f"/adapters/{name}/")


def test_one_experiment_can_be_published_under_another_name():
    config = validate_config(
        {**SWEEP, "serving": {"publish": {"experiment": "rank-64", "adapter_name": "maze-best", "step": 80}}}
    )
    [job] = objects(synth(config), "Job")
    assert job["metadata"]["name"] == "publish-maze-best-step-80"
    assert (
        "/shared/runs/rank-64/global_step_80/policy" in job["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    )


def test_one_adapter_name_for_a_whole_sweep_is_refused():
    with pytest.raises(ConfigError) as raised:
        validate_config({**SWEEP, "serving": {"publish": {"adapter_name": "maze-grpo"}}})
    [line] = raised.value.problems
    assert "publish.adapter_name = 'maze-grpo': 2 experiments would publish into that one folder" in line


def test_serving_off_synthesizes_neither_publish_jobs_nor_the_rayservice():
    charts = synth(validate_config({"serving": {"enabled": False}}))
    assert "04-publish-adapter" not in charts and "05-rayservice" not in charts
    assert objects(charts, "RayService") == [] and objects(charts, "Job") == []
    assert objects(charts, "RayJob")  # training is unchanged


def test_deployed_outputs_replace_every_placeholder(default_config, tmp_path):
    from skyrl_hyperpod.values.stack_outputs import load_stack_outputs

    real = {
        OutputKey.REGION.value: "us-west-2",
        OutputKey.FSX_FILE_SYSTEM_ID.value: "fs-0123456789abcdef0",
        OutputKey.FSX_DNS_NAME.value: "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com",
        OutputKey.FSX_MOUNT_NAME.value: "abcdefgh",
        OutputKey.ECR_REPOSITORY_URI.value: "111111111111.dkr.ecr.us-west-2.amazonaws.com/skyrl-hp/skyrl-train",
        OutputKey.ARTIFACTS_BUCKET_NAME.value: "skyrl-hp-artifacts-111111111111",
        OutputKey.EKS_CLUSTER_NAME.value: "skyrl-hp-eks",
        OutputKey.HYPERPOD_CLUSTER_NAME.value: "skyrl-hp-hyperpod",
        OutputKey.SERVING_ROLE_ARN.value: "arn:aws:iam::111111111111:role/serving",
        OutputKey.TRAINING_ROLE_ARN.value: "arn:aws:iam::111111111111:role/training",
    }
    file = tmp_path / "outputs.json"
    file.write_text(json.dumps({"skyrl-hp-storage": real}))
    rendered = json.dumps(synth(default_config, load_stack_outputs(file, default_config)))
    assert "placeholder" not in rendered
    assert "fs-0123456789abcdef0" in rendered and "s3://skyrl-hp-artifacts-111111111111/adapters" in rendered


def test_synth_is_deterministic(default_charts):
    assert synth(validate_config(SHARED)) == default_charts


def run_k8s_app(cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """The cdk8s app as `cdk8s synth` starts it: a fresh process with only the given environment."""
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "k8s_app.py")],
        cwd=cwd,
        env={"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        check=False,
    )


def test_k8s_app_writes_one_file_per_chart_and_reports_placeholders(tmp_path):
    # `cdk8s synth -o DIR` passes DIR as CDK8S_OUTDIR.
    result = run_k8s_app(tmp_path, SKYRL_HP_OUTPUTS=str(tmp_path / "none.json"), CDK8S_OUTDIR=str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert "PLACEHOLDER" in result.stderr
    # Update-only CEL rules of the CRDs are named as not evaluated, one line per KubeRay kind.
    assert [line.split()[2] for line in result.stderr.splitlines() if line.startswith("warning: SKIPPED Ray")] == [
        "RayJob", "RayService"
    ]  # fmt: skip
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files == [
        f"{chart}.k8s.yaml" for chart in ("01-platform", "03-rayjobs", "04-publish-adapter", "05-rayservice")
    ]
    platform = list(yaml.safe_load_all((tmp_path / "out" / "01-platform.k8s.yaml").read_text()))
    config_map = next(doc for doc in platform if doc["kind"] == "ConfigMap")
    # The head's volume projects the ConfigMap's keys at their paths: train_job.py and its package, as in docker/.
    rayjobs = yaml.safe_load_all((tmp_path / "out" / "03-rayjobs.k8s.yaml").read_text())
    volumes = [
        volume["configMap"]
        for job in rayjobs
        for volume in job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["volumes"]
        if volume.get("configMap", {}).get("name") == config_map["metadata"]["name"]
    ]
    assert volumes
    mount = tmp_path / "mount"
    write_config_map(config_map, mount, volumes[0]["items"])
    projected = {path.relative_to(mount).as_posix(): path.read_text() for path in mount.rglob("*.py")}
    assert projected == read_job_files() and "skyrl_hp_job/main.py" in projected
    usage = subprocess.run([sys.executable, str(mount / JOB_SCRIPT_NAME)], capture_output=True, text=True)
    assert usage.returncode == 2 and usage.stderr.startswith("train_job: error: the following arguments are required")


def test_k8s_app_rejects_a_bad_config_in_one_line(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("training:\n  cluster:\n    worker_gpus: 9\n")
    result = run_k8s_app(tmp_path, SKYRL_HP_CONFIG=str(config))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "config error: training: cluster.worker_gpus = 9: ml.g7e.12xlarge has 2 GPUs per instance"
    ]
    assert not (tmp_path / "dist").exists()


def ray_groups(charts: dict[str, list[dict]]) -> list[dict]:
    """Every Ray head and worker group: RayCluster, RayService and self-contained RayJob clusters."""
    cluster_specs = [doc["spec"] for doc in objects(charts, "RayCluster")]
    cluster_specs += [doc["spec"]["rayClusterConfig"] for doc in objects(charts, "RayService")]
    cluster_specs += [
        job["spec"]["rayClusterSpec"] for job in objects(charts, "RayJob") if "rayClusterSpec" in job["spec"]
    ]
    groups = []
    for spec in cluster_specs:
        groups.append(spec["headGroupSpec"])
        groups += spec["workerGroupSpecs"]
    return groups


def ray_pod_templates(charts: dict[str, list[dict]]) -> list[dict]:
    """Every Ray pod template: RayCluster, RayService and self-contained RayJob clusters."""
    return [group["template"] for group in ray_groups(charts)]


GIB = 1024**3
_HEAD = {"name": "head", "instance_type": "ml.r5d.16xlarge", "instance_count": 1}
_WORKERS = {"name": "gpu-workers", "instance_type": "ml.g7e.12xlarge", "instance_count": 3}


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"training": {"jobs": {"self_contained_jobs": True}}},
        {"hyperpod": {"worker_group": {**_WORKERS, "instance_type": "ml.g7e.48xlarge", "instance_count": 2}}},
        {
            "training": {"cluster": {"worker_shm_gib": 2, "head_shm_gib": 3}},
            "serving": {"worker_shm_gib": 100, "head_shm_gib": 2},
        },
    ],
    ids=["defaults", "self-contained", "g7e-48xlarge", "small-and-large-shm"],
)
def test_every_ray_pods_object_store_fits_its_dev_shm(overrides):
    # Ray puts its object store in /dev/shm only when it fits there, else on disk (/tmp); NCCL, vLLM and
    # PyTorch need room beside it. Checked on every Ray pod of every manifest, from the manifests alone.
    charts = synth(validate_config(overrides))
    groups = ray_groups(charts)
    assert len(groups) == 4  # training head and workers (RayCluster or the RayJob's own), serving head and workers
    for group in groups:
        pod = group["template"]["spec"]
        container = ray_container(group["template"])
        shm_mounts = [m for m in container["volumeMounts"] if m["mountPath"] == "/dev/shm"]
        assert len(shm_mounts) == 1
        (volume,) = [v for v in pod["volumes"] if v["name"] == shm_mounts[0]["name"]]
        assert volume["emptyDir"]["medium"] == "Memory"
        shm_bytes = int(volume["emptyDir"]["sizeLimit"].removesuffix("Gi")) * GIB
        store = int(group["rayStartParams"]["object-store-memory"])
        # Ray's own floor, and at least 1 GiB and a quarter of /dev/shm left for everything else.
        assert store >= 75 * 1024**2
        assert shm_bytes - store >= max(GIB, shm_bytes // 4), (container["name"], shm_bytes, store)
        # /dev/shm is part of the pod's memory: the store never outgrows the memory limit either.
        assert store < int(container["resources"]["limits"]["memory"].removesuffix("Gi")) * GIB


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"training": {"jobs": {"self_contained_jobs": True}}},
        {"hyperpod": {"worker_group": {**_WORKERS, "instance_type": "ml.g7e.48xlarge", "instance_count": 2}}},
        {
            "hyperpod": {"worker_group": {**_WORKERS, "instance_type": "ml.g7e.4xlarge", "instance_count": 2}},
            "training": {"cluster": {"worker_shm_gib": 32}},
            "serving": {"max_replicas": 1},
        },
    ],
    ids=["defaults", "self-contained", "g7e-48xlarge-4-efa", "g7e-4xlarge-no-efa"],
)
def test_a_pod_requests_efa_only_with_the_environment_and_image_that_make_nccl_use_it(overrides):
    config = validate_config(overrides)
    spec = config.hyperpod.worker_group.spec
    training_image = ChartInputs(
        config=config, outputs=StackOutputs.placeholder(config), job_files={JOB_SCRIPT_NAME: STUB_SCRIPT}
    ).training_image
    requesting = 0
    for template in ray_pod_templates(synth(config)):
        container = ray_container(template)
        env = {item["name"]: item["value"] for item in container.get("env", [])}
        efa = container["resources"]["limits"].get("vpc.amazonaws.com/efa", 0)
        assert container["resources"]["requests"].get("vpc.amazonaws.com/efa", 0) == efa
        if not efa:
            assert "FI_PROVIDER" not in env
            continue
        requesting += 1
        assert efa == spec.efa_interfaces
        # libfabric's efa provider only, NCCL's sockets off loopback/docker, device RDMA only where documented.
        assert env["FI_PROVIDER"] == "efa" and env["NCCL_SOCKET_IFNAME"] == "^lo,docker"
        assert ("FI_EFA_USE_DEVICE_RDMA" in env) == spec.efa_device_rdma
        # The image that installs libfabric and aws-ofi-nccl (tests/test_image.py), nothing else.
        assert container["image"] == training_image
    assert requesting == (1 if spec.efa_interfaces else 0)  # the training worker group only


def test_device_rdma_is_set_exactly_when_the_instance_supports_it():
    from charts.constructs.ray_pods import RayPodProps, ray_pod_template

    def env_of(**efa) -> dict[str, str]:
        props = RayPodProps(
            container_name="ray-worker", image="image", service_account="sa", instance_type="ml.g7e.48xlarge",
            cpus=1, memory_gib=4, shm_gib=2, gpus=1, **efa,
        )  # fmt: skip
        container = ray_pod_template(props)["spec"]["containers"][0]
        return {item["name"]: item["value"] for item in container.get("env", [])}

    assert env_of(efa_devices=1, efa_device_rdma=True)["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert "FI_EFA_USE_DEVICE_RDMA" not in env_of(efa_devices=1)
    assert env_of() == {}


def test_a_dev_shm_too_small_for_rays_object_store_is_refused():
    with pytest.raises(ConfigError) as caught:
        validate_config({"serving": {"head_shm_gib": 1}})
    assert caught.value.problems == [
        "config error: serving.head_shm_gib = 1: Input should be greater than or equal to 2"
    ]


def cpu_and_memory_gib(container: dict) -> tuple[int, int]:
    requests = container["resources"]["requests"]
    assert requests["memory"].endswith("Gi")
    return int(requests["cpu"]), int(requests["memory"].removesuffix("Gi"))


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"hyperpod": {"worker_group": {**_WORKERS, "threads_per_core": 2}}},
        {"hyperpod": {"head_group": {**_HEAD, "threads_per_core": 1}}},
        {"hyperpod": {"worker_group": {**_WORKERS, "instance_type": "ml.g7e.48xlarge"}}},
        {"training": {"jobs": {"self_contained_jobs": True}}},
    ],
    ids=["defaults", "workers-ht-on", "head-ht-off", "g7e-48xlarge", "self-contained"],
)
def test_ray_pods_request_no_more_than_their_node_exposes(overrides):
    config = validate_config(overrides)
    groups = {group.instance_type: group for group in (config.hyperpod.head_group, config.hyperpod.worker_group)}
    charts = synth(config)
    heads: list[tuple[int, int]] = []
    for template in ray_pod_templates(charts):
        group = groups[template["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"]]
        catalog = INSTANCE_CATALOG[group.instance_type]
        # The catalog counts 2 threads per core; threads_per_core 1 (hyperthreading off) halves the vCPUs.
        node_vcpus = catalog.vcpus * group.threads_per_core // 2
        cpus, memory = cpu_and_memory_gib(ray_container(template))
        assert cpus < node_vcpus and memory < catalog.memory_gib, (group.instance_type, cpus, node_vcpus)
        if group is config.hyperpod.head_group:
            heads.append((cpus, memory))
    # The training head (the RayCluster's or a self-contained RayJob's) and the serving head share one head node.
    head = config.hyperpod.head_group
    assert len(heads) == 2
    assert sum(cpus for cpus, _ in heads) < INSTANCE_CATALOG[head.instance_type].vcpus * head.threads_per_core // 2
    assert sum(memory for _, memory in heads) < INSTANCE_CATALOG[head.instance_type].memory_gib


def test_placement_waits_are_bounded_and_configurable(default_config, default_charts):
    # A second experiment on the shared RayCluster outwaits the first (not SkyRL's 180 s), but a job whose
    # GPUs never come fails after two hours, not at the 48 h deadline.
    env = entrypoint_env(one(default_charts, "RayJob"))
    assert (
        env["SKYRL_RAY_PG_TIMEOUT_IN_S"] == str(default_config.training.jobs.placement_group_timeout_seconds) == "7200"
    )
    assert int(env["SKYRL_RAY_PG_TIMEOUT_IN_S"]) < default_config.training.jobs.job_active_deadline_seconds
    longer = validate_config({"training": {"jobs": {"placement_group_timeout_seconds": 43200}}})
    assert longer.derived.driver_env["SKYRL_RAY_PG_TIMEOUT_IN_S"] == "43200"
    explicit = validate_config({"training": {"jobs": {"runtime_env_vars": {"SKYRL_RAY_PG_TIMEOUT_IN_S": "600"}}}})
    assert explicit.derived.driver_env["SKYRL_RAY_PG_TIMEOUT_IN_S"] == "600"
    with pytest.raises(ConfigError) as caught:
        validate_config({"training": {"jobs": {"placement_group_timeout_seconds": 200000}}})
    assert "placement_group_timeout_seconds = 200000" in caught.value.problems[0]


def test_serving_pods_know_their_region_and_see_the_base_model(default_config, default_charts):
    service = one(default_charts, "RayService")
    cluster = service["spec"]["rayClusterConfig"]
    pods = [cluster["headGroupSpec"]["template"]["spec"]] + [g["template"]["spec"] for g in cluster["workerGroupSpecs"]]
    llm_config = yaml.safe_load(service["spec"]["serveConfigV2"])["applications"][0]["args"]["llm_configs"][0]
    region = StackOutputs.placeholder(default_config).region
    for pod in pods:
        container = pod["containers"][0]
        assert {"name": "AWS_REGION", "value": region} in container["env"]
        shared = {m["mountPath"]: m for m in container["volumeMounts"]}[default_config.workloads.shared_mount_path]
        assert shared["readOnly"] is True
        assert llm_config["model_loading_config"]["model_source"].startswith(shared["mountPath"] + "/")


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"hyperpod": {"worker_group": {"name": "gpu", "instance_type": "ml.g7e.48xlarge", "instance_count": 8}}},
        {"training": {"experiments": [{"name": "rank-64", "overrides": {"trainer.policy.model.lora.rank": 64}}]}},
    ],
)
def test_generated_overrides_parse_with_skyrls_own_config_classes(overrides):
    from skyrl_hyperpod.validation import skyrl_overrides, validate_skyrl_overrides

    assert skyrl_overrides.unavailable_reason() is None, "SkyRL's config classes must be installed for this check"
    config = validate_config(overrides)
    for run in resolve_runs(config.training, config.hyperpod, config.workloads):
        assert validate_skyrl_overrides([f"{key}={value}" for key, value in run.overrides().items()]) == []
