"""Offline manifest validation: KubeRay CRD schemas, core Kubernetes schemas, Ray Serve and SkyRL
config classes, placeholders, the CLI and the CRD download command."""

from __future__ import annotations

import copy
import hashlib
import importlib
import io
import json
import os
import subprocess
import sys
import warnings
from importlib import metadata
from typing import Any

import pytest
import yaml
from cli_helpers import skyrl_hp
from conftest import KUBERAY_CRDS_DIR

from skyrl_hyperpod.plumbing.errors import InputError
from skyrl_hyperpod.plumbing.yaml_loading import safe_load
from skyrl_hyperpod.validation import (
    CheckSkipped,
    deployability_problems,
    fetch_crds,
    serve_config,
    skyrl_overrides,
    validate_manifests,
    validate_skyrl_overrides,
    validation_report,
)
from skyrl_hyperpod.validation import crds as crd_module
from skyrl_hyperpod.validation.structural import apply_defaults
from skyrl_hyperpod.values.stack_outputs import StackOutputs


@pytest.fixture(autouse=True)
def isolated_environment(monkeypatch):
    monkeypatch.setenv(crd_module.CRDS_DIR_ENV_VAR, str(KUBERAY_CRDS_DIR))
    # No on-disk cache: every check here must really run.
    monkeypatch.setenv("SKYRL_HP_VALIDATION_CACHE", "off")


# --- minimal objects ------------------------------------------------------------------------------


def ray_container(name: str, image: str) -> dict:
    return {"name": name, "image": image, "resources": {"limits": {"cpu": "4", "memory": "16Gi"}}}


def cluster_spec(ray_version: str, image: str) -> dict:
    return {
        "rayVersion": ray_version,
        "headGroupSpec": {
            "rayStartParams": {"num-gpus": "0", "dashboard-host": "0.0.0.0"},
            "template": {
                "metadata": {"labels": {"app": "skyrl"}},
                "spec": {"containers": [ray_container("ray-head", image)]},
            },
        },
        "workerGroupSpecs": [
            {
                "groupName": "gpu-workers",
                "replicas": 1,
                "minReplicas": 1,
                "maxReplicas": 1,
                "rayStartParams": {},
                "template": {"spec": {"containers": [ray_container("ray-worker", image)]}},
            }
        ],
    }


def ray_cluster(config, name: str = "skyrl-visgym") -> dict:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": config.workloads.namespace},
        "spec": cluster_spec(config.training_image.ray_version, "example.com/skyrl:1"),
    }


def ray_job(config, name: str = "skyrl-grpo") -> dict:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": config.workloads.namespace},
        "spec": {
            "entrypoint": "python examples/train/visgym/entrypoint.py --env_variant sft",
            "clusterSelector": {"ray.io/cluster": "skyrl-visgym"},
            "backoffLimit": 0,
        },
    }


def llm_config(lora_path: str = "s3://bucket/adapters") -> dict:
    return {
        "model_loading_config": {"model_id": "visgym-qwen3vl", "model_source": "/shared/models/sft"},
        "engine_kwargs": {"enable_lora": True, "max_lora_rank": 32, "max_loras": 16},
        "lora_config": {"dynamic_lora_loading_path": lora_path, "max_num_adapters_per_replica": 16},
        "deployment_config": {"autoscaling_config": {"min_replicas": 1, "max_replicas": 3}},
    }


def serve_app(**overrides) -> dict:
    app: dict[str, Any] = {"name": "llm", "import_path": "ray.serve.llm:build_openai_app", "route_prefix": "/"}
    app["args"] = {"llm_configs": [llm_config()]}
    app.update(overrides)
    return {"applications": [app]}


def ray_service(config, serve: dict | None = None, name: str = "skyrl-serve") -> dict:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": name, "namespace": config.workloads.namespace},
        "spec": {
            "serveConfigV2": yaml.safe_dump(serve if serve is not None else serve_app()),
            "rayClusterConfig": cluster_spec(config.serving_image.ray_version, config.serving_image.image),
        },
    }


def core_objects(config) -> list[dict]:
    namespace = config.workloads.namespace
    outputs = StackOutputs.placeholder(config)
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": config.workloads.serving_service_account, "namespace": namespace},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "fsx-shared"},
            "spec": {
                "capacity": {"storage": "1200Gi"},
                "accessModes": ["ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "mountOptions": ["flock"],
                "csi": {
                    "driver": "fsx.csi.aws.com",
                    "volumeHandle": outputs.fsx_file_system_id,
                    "volumeAttributes": {"dnsname": outputs.fsx_dns_name, "mountname": outputs.fsx_mount_name},
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "fsx-shared", "namespace": namespace},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "volumeName": "fsx-shared",
                "resources": {"requests": {"storage": "1200Gi"}},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "train", "namespace": namespace},
            "data": {"a": "b"},
        },
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "publish-adapter", "namespace": namespace},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "copy", "image": "amazon/aws-cli:2"}]}
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "skyrl-serve-lb", "namespace": namespace},
            "spec": {"ports": [{"port": 8000, "targetPort": 8000}], "selector": {"app": "x"}},
        },
    ]


def problems_for(doc, config) -> list[str]:
    return validate_manifests([doc], config=config)


# --- KubeRay objects -----------------------------------------------------------------------------


@pytest.mark.parametrize("build", [ray_cluster, ray_job, ray_service], ids=["RayCluster", "RayJob", "RayService"])
def test_minimal_kuberay_objects_are_valid(build, default_config):
    assert problems_for(build(default_config), default_config) == []


def test_core_objects_are_valid(default_config):
    assert validate_manifests(core_objects(default_config), config=default_config) == []


@pytest.mark.parametrize(
    ("misspelt", "intended"), [("rayStartParam", "rayStartParams"), ("replica", "replicas"), ("groupNme", "groupName")]
)
def test_misspelt_field_is_rejected_with_its_path(misspelt, intended, default_config):
    doc = ray_cluster(default_config)
    group = doc["spec"]["workerGroupSpecs"][0]
    group[misspelt] = group.pop(intended) if misspelt != "groupNme" else "x"
    problems = problems_for(doc, default_config)
    assert f"RayCluster/skyrl-visgym: spec.workerGroupSpecs[0].{misspelt}: unknown field" in "\n".join(problems)
    assert any(f"did you mean {intended!r}" in line for line in problems)


def test_wrong_type_is_rejected_with_its_path(default_config):
    doc = ray_cluster(default_config)
    doc["spec"]["headGroupSpec"]["rayStartParams"]["num-gpus"] = 0
    assert problems_for(doc, default_config) == [
        "RayCluster/skyrl-visgym: spec.headGroupSpec.rayStartParams.num-gpus: 0 is an integer, expected string"
    ]


def test_missing_required_field_is_rejected(default_config):
    doc = ray_cluster(default_config)
    del doc["spec"]["workerGroupSpecs"][0]["groupName"]
    assert problems_for(doc, default_config) == [
        "RayCluster/skyrl-visgym: spec.workerGroupSpecs[0].groupName: required field is missing"
    ]


def test_schema_defaults_are_applied_before_validation(default_config):
    doc = ray_cluster(default_config)
    group = doc["spec"]["workerGroupSpecs"][0]
    del group["minReplicas"], group["maxReplicas"]  # required by the schema, but defaulted (0 and 2**31-1)
    assert problems_for(doc, default_config) == []
    # Control: the same object without defaulting is missing both fields, so the defaulting matters.
    validator = crd_module.crd_validator(
        KUBERAY_CRDS_DIR.resolve(), "RayCluster", default_config.eks.kubernetes_version
    )
    missing = {e.message for e in validator.iter_errors(doc) if e.validator == "required"}
    assert missing == {"'minReplicas' is a required property", "'maxReplicas' is a required property"}
    schema = crd_module.crd_schema(KUBERAY_CRDS_DIR.resolve(), "RayCluster")
    apply_defaults(doc, schema)
    assert (group["minReplicas"], group["maxReplicas"]) == (0, 2**31 - 1)


def test_int_or_string_quantities(default_config):
    doc = ray_cluster(default_config)
    limits = doc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    limits["cpu"] = 4
    assert problems_for(doc, default_config) == []
    limits["cpu"] = "four"
    [problem] = problems_for(doc, default_config)
    assert "spec.headGroupSpec.template.spec.containers[0].resources.limits.cpu:" in problem
    assert "not a Kubernetes quantity" in problem


def test_metadata_is_checked_as_object_meta(default_config):
    doc = ray_cluster(default_config)
    doc["metadata"]["labelz"] = {"a": "b"}
    doc["spec"]["headGroupSpec"]["template"]["metadata"]["annotation"] = {"a": "b"}
    problems = "\n".join(problems_for(doc, default_config))
    assert "RayCluster/skyrl-visgym: metadata.labelz: unknown field" in problems
    assert "spec.headGroupSpec.template.metadata.annotation: unknown field" in problems


@pytest.mark.parametrize(("build", "limit"), [(ray_cluster, 53), (ray_job, 47), (ray_service, 47)])
def test_kuberay_name_limits(build, limit, default_config):
    assert problems_for(build(default_config, name="a" * limit), default_config) == []
    [problem] = problems_for(build(default_config, name="a" * (limit + 1)), default_config)
    kind = build(default_config)["kind"]
    assert problem.endswith(f"metadata.name: {'a' * (limit + 1)!r} has {limit + 1} characters; "
                            f"KubeRay allows at most {limit} for {kind} (KubeRay v1.7.0 Validate{kind}Metadata)")  # fmt: skip


def test_only_ray_io_v1_kinds_are_accepted(default_config):
    doc = ray_cluster(default_config)
    doc["apiVersion"] = "ray.io/v1alpha1"
    assert "use 'ray.io/v1'" in problems_for(doc, default_config)[0]


def test_schemas_are_loaded_once_per_process(default_config):
    for _ in range(3):
        problems_for(ray_cluster(default_config), default_config)
    before = crd_module.crd_validator.cache_info()
    problems_for(ray_cluster(default_config), default_config)
    after = crd_module.crd_validator.cache_info()
    assert (after.misses, after.hits) == (before.misses, before.hits + 1)


# --- CRD location --------------------------------------------------------------------------------


def test_crds_dir_comes_from_the_environment_variable(monkeypatch, tmp_path, default_config):
    assert crd_module.resolve_crds_dir() == KUBERAY_CRDS_DIR.resolve()
    monkeypatch.setenv(crd_module.CRDS_DIR_ENV_VAR, str(tmp_path / "missing"))
    with pytest.raises(InputError) as raised:
        problems_for(ray_cluster(default_config), default_config)
    [line] = raised.value.problems
    assert "missing" in line and "KUBERAY_CRDS_DIR" in line and "skyrl-hp fetch crds" in line


@pytest.mark.parametrize("kind", sorted(crd_module.KUBERAY_KINDS))
def test_reading_only_the_v1_entry_of_a_crd_gives_what_a_full_parse_gives(kind):
    data = (KUBERAY_CRDS_DIR / crd_module.KUBERAY_KINDS[kind].file_name).read_bytes()
    full = safe_load(data)
    full["spec"]["versions"] = [v for v in full["spec"]["versions"] if v["name"] == "v1"]
    assert len(full["spec"]["versions"]) == 1
    assert crd_module.v1_only_document(data) == full


def test_a_crd_in_another_layout_is_parsed_whole(default_config):
    flow_style = yaml.safe_dump(
        {"spec": {"names": {"kind": "RayJob"}, "versions": [{"name": "v1"}]}}, default_flow_style=True
    ).encode()
    assert crd_module.v1_only_document(flow_style) is None


def test_crds_that_are_not_v1_7_0_are_refused(tmp_path, default_config):
    for spec in crd_module.KUBERAY_KINDS.values():
        data = (KUBERAY_CRDS_DIR / spec.file_name).read_bytes()
        (tmp_path / spec.file_name).write_bytes(data + b"\n# edited\n" if spec.kind == "RayJob" else data)
    with pytest.raises(InputError) as raised:
        validate_manifests([ray_job(default_config)], config=default_config, crds_dir=tmp_path)
    [line] = raised.value.problems
    assert "ray.io_rayjobs.yaml is not the KubeRay v1.7.0 CRD" in line


# --- core objects --------------------------------------------------------------------------------


def test_core_objects_reject_unknown_fields(default_config):
    account = core_objects(default_config)[1]
    account["automountToken"] = False
    assert problems_for(account, default_config) == [
        f"ServiceAccount/{account['metadata']['name']}: automountToken: unknown field: the API server would "
        "drop it silently; did you mean 'automountServiceAccountToken'?"
    ]


def test_core_objects_reject_wrong_types_and_unknown_kinds(default_config):
    claim = core_objects(default_config)[3]
    claim["spec"]["accessModes"] = "ReadWriteMany"
    assert any("spec.accessModes:" in line for line in problems_for(claim, default_config))
    unknown = {"apiVersion": "v1", "kind": "Podd", "metadata": {"name": "x"}}
    assert "unknown kind or apiVersion" in problems_for(unknown, default_config)[0]


def test_duplicate_objects_are_reported(default_config):
    account = core_objects(default_config)[1]
    [problem] = validate_manifests([account, copy.deepcopy(account)], config=default_config)
    assert "duplicates document 0" in problem


# --- serveConfigV2 with Ray's classes -------------------------------------------------------------


def test_serve_config_is_checked_by_rays_classes_or_reported_skipped(default_config):
    ray_version = default_config.serving_image.ray_version
    reason = serve_config.unavailable_reason(ray_version)
    bad = serve_app(route_prefx="/", args={"llm_configs": [dict(llm_config(), lora_confg={})]})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        problems, skipped = validation_report([ray_service(default_config, bad)], config=default_config)
    skipped = [line for line in skipped if serve_config.CHECK_NAME in line]
    caught = [w for w in caught if issubclass(w.category, CheckSkipped) and serve_config.CHECK_NAME in str(w.message)]
    if reason is None:  # Ray at the serving version is installed here: its classes must reject both keys
        assert metadata.version("ray") == ray_version
        assert skipped == [] and caught == []
        assert "RayService/skyrl-serve: spec.serveConfigV2: applications[0].route_prefx: unknown key" in problems[0]
        assert any("applications[0].args.llm_configs[0].lora_confg: unknown key" in line for line in problems)
    else:
        assert problems == [] and len(skipped) == 1 and skipped[0].startswith("SKIPPED")
        assert caught


@pytest.mark.parametrize(
    ("serve", "path"),
    [
        (serve_app(args={"llm_configs": [llm_config(lora_path="/shared/adapters")]}), "lora_config"),
        (serve_app(args={"llm_configs": [dict(llm_config(), lora_config={"dynamic_lora_loading_path": "s3://b/a",
                                                                           "max_num_adapters_per_replica": "many"})]}),
         "lora_config.max_num_adapters_per_replica"),
        (serve_app(route_prefix=5), "applications[0].route_prefix"),
        (serve_app(args={"llm_configs": [dict(llm_config(), deployment_config={"autoscaling_config": {"min_replica": 1}})]}),
         "deployment_config.autoscaling_config.min_replica"),
    ],
    ids=["local-lora-path", "wrong-type", "route-prefix-type", "autoscaling-typo"],
)  # fmt: skip
def test_serve_config_rules_from_ray(serve, path, default_config):
    if serve_config.unavailable_reason(default_config.serving_image.ray_version):
        pytest.skip("Ray at the serving version is not installed (covered by the skip test above)")
    problems = problems_for(ray_service(default_config, serve), default_config)
    assert problems and all(line.startswith("RayService/skyrl-serve: spec.serveConfigV2: ") for line in problems)
    assert any(path in line for line in problems), problems


def test_serve_config_check_runs_here_with_the_pinned_ray(default_config):
    # Ray at the serving image's version is pinned in requirements-dev.txt: the check must not be skipped.
    assert serve_config.unavailable_reason(default_config.serving_image.ray_version) is None


def test_serve_config_check_does_not_import_torch_or_transformers(default_config):
    # Both are installed (requirements-dev.txt) and Ray LLM imports them when it can: seconds of a cold
    # `cdk8s synth` for classes the schemas never use. A fresh process, so that no other test imported them.
    code = (
        "import sys\n"
        "from skyrl_hyperpod.validation import serve_config\n"
        f"problems, skipped = serve_config.serve_config_problems({yaml.safe_dump(serve_app())!r}, {default_config.serving_image.ray_version!r})\n"
        "assert (problems, skipped) == ([], None), (problems, skipped)\n"
        "loaded = sorted({'torch', 'transformers'} & set(sys.modules))\n"
        "from importlib.util import find_spec  # None while hidden\n"
        "print(loaded, find_spec('torch').name, find_spec('transformers').name)\n"
    )
    env = {**os.environ, "SKYRL_HP_VALIDATION_CACHE": "off"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["[]", "torch", "transformers"]


def test_modules_already_imported_are_not_hidden():
    with serve_config.hidden_unless_loaded(("json", "a_module_that_is_not_loaded")):
        import json

        assert json.dumps(1) == "1"
        with pytest.raises(ImportError):
            importlib.import_module("a_module_that_is_not_loaded")
    assert "a_module_that_is_not_loaded" not in sys.modules


def test_serve_config_that_is_not_yaml_is_rejected(default_config):
    doc = ray_service(default_config)
    doc["spec"]["serveConfigV2"] = "applications: [\n"
    [problem] = problems_for(doc, default_config)
    assert problem.startswith("RayService/skyrl-serve: spec.serveConfigV2: .: not valid YAML")


def test_serve_check_reports_itself_skipped_when_ray_differs(monkeypatch, default_config):
    monkeypatch.setattr(serve_config, "installed_version", lambda name: "0.0.1" if name == "ray" else "1")
    with pytest.warns(CheckSkipped, match="installed Ray 0.0.1 differs"):
        problems, skipped = validation_report([ray_service(default_config, serve_app(bogus=1))], config=default_config)
    assert problems == []
    assert [line for line in skipped if line.startswith("SKIPPED serveConfigV2 check")]


# --- SkyRL overrides -----------------------------------------------------------------------------


REFERENCE_OVERRIDES = [
    "trainer.policy.model.lora.rank=32",
    "trainer.placement.colocate_all=true",
    "generator.inference_engine.num_engines=6",
    "generator.inference_engine.gpu_memory_utilization=0.45",
    "generator.n_samples_per_prompt=8",
    "generator.max_turns=15",
    "generator.vision_language_generator=true",
    "trainer.remove_microbatch_padding=false",
    "trainer.resume_mode=latest",
]


def test_skyrl_overrides_are_checked_by_skyrl_or_reported_skipped():
    bad = [*REFERENCE_OVERRIDES, "trainer.policy.model.lora.rnk=8"]
    if skyrl_overrides.unavailable_reason() is None:
        assert validate_skyrl_overrides(REFERENCE_OVERRIDES) == []
        [problem] = validate_skyrl_overrides(bad)
        assert "rnk" in problem
        [plus] = validate_skyrl_overrides(["+trainer.extra=1"])
        assert "'+' prefix" in plus
    else:
        with pytest.warns(CheckSkipped):
            assert validate_skyrl_overrides(bad) == []


# --- placeholders --------------------------------------------------------------------------------


def test_placeholders_pass_validation_but_are_not_deployable(default_config):
    docs = core_objects(default_config)
    assert validate_manifests(docs, config=default_config) == []
    problems = deployability_problems(docs)
    outputs = StackOutputs.placeholder(default_config)
    assert any(f"spec.csi.volumeHandle: placeholder value {outputs.fsx_file_system_id!r}" in p for p in problems)
    assert all("placeholder" in line for line in problems)
    deployed = json.loads(json.dumps(docs).replace("placeholder", "0123456789abcdef"))
    assert deployability_problems(deployed) == []


# --- command line --------------------------------------------------------------------------------


def write_manifests(directory, docs) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "workloads.k8s.yaml").write_text(yaml.safe_dump_all(docs), encoding="utf-8")


def test_cli_validates_a_directory(tmp_path, capsys, default_config):
    write_manifests(tmp_path / "dist", [*core_objects(default_config), ray_cluster(default_config)])
    assert skyrl_hp("validate", str(tmp_path / "dist")) == 0
    assert skyrl_hp("validate", str(tmp_path / "dist"), "--deployable") == 1
    assert "placeholder value" in capsys.readouterr().out


def test_cli_reports_each_problem_on_one_line(tmp_path, capsys, default_config):
    doc = ray_cluster(default_config)
    doc["spec"]["workerGroupSpecs"][0]["replica"] = 2
    write_manifests(tmp_path, [doc])
    assert skyrl_hp("validate", str(tmp_path)) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{tmp_path / 'workloads.k8s.yaml'}: RayCluster/skyrl-visgym: spec.workerGroupSpecs[0].replica: unknown "
        "field: the API server would drop it silently; did you mean 'replicas'?"
    ]


@pytest.mark.parametrize("case", ["missing-dir", "bad-yaml", "missing-crds"])
def test_cli_bad_input_is_one_line_without_traceback(case, tmp_path, capsys, monkeypatch, default_config):
    target = tmp_path / "dist"
    if case == "bad-yaml":
        target.mkdir()
        (target / "broken.yaml").write_text("kind: [unclosed\n", encoding="utf-8")
    elif case == "missing-crds":
        write_manifests(target, [ray_cluster(default_config)])
        monkeypatch.setenv(crd_module.CRDS_DIR_ENV_VAR, str(tmp_path / "no-crds"))
    assert skyrl_hp("validate", str(target)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert {"missing-dir": "does not exist", "bad-yaml": "not valid YAML", "missing-crds": "KUBERAY_CRDS_DIR"}[
        case
    ] in err


# --- fetch_crds ----------------------------------------------------------------------------------


class LocalOpener:
    """Serves the CRDs from ../shared as if from GitHub, optionally tampering with one file."""

    def __init__(self, tamper: str | None = None):
        self.urls: list[str] = []
        self.tamper = tamper

    def open(self, url, timeout=None):
        self.urls.append(url)
        name = url.rsplit("/", 1)[1]
        data = (KUBERAY_CRDS_DIR / name).read_bytes()
        return io.BytesIO(data + b"# tampered\n" if name == self.tamper else data)


def test_fetch_crds_downloads_the_pinned_tag_and_verifies_checksums(monkeypatch, tmp_path):
    opener = LocalOpener()
    monkeypatch.setattr(fetch_crds, "opener", opener)
    assert skyrl_hp("fetch", "crds", "--dest", str(tmp_path)) == 0
    assert sorted(opener.urls) == [
        f"https://raw.githubusercontent.com/ray-project/kuberay/v1.7.0/ray-operator/config/crd/bases/ray.io_{p}.yaml"
        for p in ("rayclusters", "rayjobs", "rayservices")
    ]
    sums = {line.split()[1]: line.split()[0] for line in (KUBERAY_CRDS_DIR / "SOURCE.md").read_text().splitlines()
            if line.strip().endswith(".yaml") and len(line.split()) == 2}  # fmt: skip
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()} == sums


def test_fetch_crds_refuses_and_deletes_a_tampered_file(monkeypatch, tmp_path, capsys):
    stale = tmp_path / "ray.io_rayjobs.yaml"
    stale.write_text("old copy")
    monkeypatch.setattr(fetch_crds, "opener", LocalOpener(tamper="ray.io_rayjobs.yaml"))
    assert skyrl_hp("fetch", "crds", "--dest", str(tmp_path)) == 1
    assert not stale.exists()
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "ray.io_rayjobs.yaml has sha256" in line and "refused" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ray.io_rayclusters.yaml", "ray.io_rayservices.yaml"]


class KarpenterOpener:
    """Serves Karpenter's NodePool CRD as if from GitHub: `data`, else the verified copy validation reads."""

    def __init__(self, data: bytes | None = None):
        self.urls: list[str] = []
        self.data = data

    def open(self, url, timeout=None):
        self.urls.append(url)
        from skyrl_hyperpod.validation import karpenter

        data = (
            self.data if self.data is not None else (karpenter.resolve_crds_dir() / url.rsplit("/", 1)[1]).read_bytes()
        )
        return io.BytesIO(data)


def test_fetch_karpenter_crds_downloads_the_pinned_release(monkeypatch, tmp_path):
    from skyrl_hyperpod.validation import karpenter

    if reason := karpenter.missing_crd_reason():
        pytest.skip(f"{karpenter.CHECK_NAME}: {reason}")
    opener = KarpenterOpener()
    monkeypatch.setattr(fetch_crds, "opener", opener)
    assert skyrl_hp("fetch", "karpenter-crds", "--dest", str(tmp_path)) == 0
    assert opener.urls == [
        "https://raw.githubusercontent.com/kubernetes-sigs/karpenter/v1.14.1/pkg/apis/crds/karpenter.sh_nodepools.yaml"
    ]
    written = tmp_path / karpenter.NODEPOOL.file_name
    assert hashlib.sha256(written.read_bytes()).hexdigest() == karpenter.NODEPOOL.sha256
    assert karpenter.missing_crd_reason(tmp_path) is None


def test_fetch_karpenter_crds_refuses_another_file(monkeypatch, tmp_path, capsys):
    from skyrl_hyperpod.validation import karpenter

    stale = tmp_path / karpenter.NODEPOOL.file_name
    stale.write_text("old copy")
    monkeypatch.setattr(fetch_crds, "opener", KarpenterOpener(b"kind: CustomResourceDefinition\n"))
    assert skyrl_hp("fetch", "karpenter-crds", "--dest", str(tmp_path)) == 1
    assert not stale.exists()
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "karpenter.sh_nodepools.yaml has sha256" in line and "(Karpenter v1.14.1); refused" in line
