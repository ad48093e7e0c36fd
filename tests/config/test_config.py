"""The typed configuration: defaults reproduce the reference deployment; bad input fails early and clearly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from skyrl_hyperpod.config import INSTANCE_CATALOG, ConfigError, load_config, validate_config
from skyrl_hyperpod.config.eks import MIN_PUBLIC_ACCESS_PREFIX
from skyrl_hyperpod.config.hyperpod import InstanceGroupConfig
from skyrl_hyperpod.config.project import NAME_PREFIX_MAX

REPO_ROOT = Path(__file__).resolve().parents[2]


def problems_for(data: dict) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        validate_config(data)
    return caught.value.problems


def test_defaults_reproduce_the_reference_deployment(default_config):
    hyperpod = default_config.hyperpod
    assert (hyperpod.head_group.instance_type, hyperpod.head_group.instance_count) == ("ml.r5d.16xlarge", 1)
    assert (hyperpod.worker_group.instance_type, hyperpod.worker_group.instance_count) == ("ml.g7e.12xlarge", 3)
    assert hyperpod.worker_group.spec.gpus == 2
    assert hyperpod.head_group.spec.gpus == 0
    assert hyperpod.node_recovery == "Automatic"
    assert default_config.fsx.deployment_type == "PERSISTENT_2"
    assert default_config.fsx.storage_capacity_gib == 1200
    assert default_config.versions.kuberay_operator_chart == "1.7.0"
    assert default_config.eks.public_access_cidrs == []  # private API endpoint by default
    assert not default_config.eks.endpoint_public


def exposed_vcpus(instance_type: str, threads_per_core: int) -> int:
    """What the OS sees: the catalog lists vCPUs with 2 threads per core; 1 thread per core halves them."""
    return INSTANCE_CATALOG[instance_type].vcpus * threads_per_core // 2


@pytest.mark.parametrize("threads_per_core", [1, 2])
@pytest.mark.parametrize("instance_type", sorted(INSTANCE_CATALOG))
def test_group_allocatable_fits_what_the_node_exposes_and_leaves_room_for_daemons(instance_type, threads_per_core):
    group = InstanceGroupConfig(
        name="g", instance_type=instance_type, instance_count=1, threads_per_core=threads_per_core
    )
    node = exposed_vcpus(instance_type, threads_per_core)
    assert group.node_vcpus == node
    assert 0 < group.allocatable_vcpus < node
    assert 0 < group.allocatable_memory_gib < INSTANCE_CATALOG[instance_type].memory_gib


def test_hyperthreading_off_halves_what_a_gpu_worker_pod_may_request():
    def worker(threads_per_core: int) -> InstanceGroupConfig:
        return InstanceGroupConfig(
            name="w", instance_type="ml.g7e.12xlarge", instance_count=1, threads_per_core=threads_per_core
        )

    # ml.g7e.12xlarge: 48 vCPUs with hyperthreading, 24 cores. At least 2 vCPUs stay for the kubelet,
    # HyperPod agents and daemon sets.
    assert worker(1).allocatable_vcpus <= 24 - 2
    assert 24 < worker(2).allocatable_vcpus <= 48 - 2
    assert worker(1).allocatable_memory_gib == worker(2).allocatable_memory_gib


def test_daemon_set_reservation_is_at_least_four_vcpus_on_gpu_nodes_and_configurable():
    def worker(**extra) -> InstanceGroupConfig:
        return InstanceGroupConfig(name="w", instance_type="ml.g7e.12xlarge", instance_count=1, **extra)

    # Device plugins, CNI, CSI, HyperPod agents and collectors all run beside the Ray worker.
    assert worker().node_vcpus - worker().allocatable_vcpus >= 4
    assert worker(system_reserved_vcpus=6).allocatable_vcpus == worker().node_vcpus - 6
    with pytest.raises(ValidationError, match="system_reserved_vcpus 24 leaves nothing for Ray"):
        worker(system_reserved_vcpus=24)


def test_yaml_file_overrides_only_what_it_names(tmp_path):
    file = tmp_path / "config.yaml"
    file.write_text(
        "hyperpod:\n  worker_group:\n    name: gpu\n    instance_type: ml.g7e.48xlarge\n    instance_count: 8\n"
    )
    config = load_config(file)
    assert config.hyperpod.worker_group.instance_count == 8
    assert config.hyperpod.worker_group.spec.gpus == 8
    assert config.hyperpod.head_group.instance_type == "ml.r5d.16xlarge"  # untouched default


def test_environment_variable_selects_the_file(tmp_path, monkeypatch):
    file = tmp_path / "c.yaml"
    file.write_text("name_prefix: team-a\n")
    monkeypatch.setenv("SKYRL_HP_CONFIG", str(file))
    assert load_config(None).names.eks_cluster == "team-a-eks"


@pytest.mark.parametrize(
    ("data", "field", "hint"),
    [
        (
            {"hyperpod": {"worker_group": {"name": "w", "instance_type": "ml.p9.huge", "instance_count": 1}}},
            "hyperpod.worker_group.instance_type = 'ml.p9.huge'",
            "unknown instance type",
        ),
        (
            {"hyperpod": {"worker_group": {"name": "w", "instance_type": "ml.g7e.12xlarge", "instance_count": -1}}},
            "hyperpod.worker_group.instance_count = -1",
            "greater than or equal to 0",
        ),
        ({"fsx": {"storage_capacity_gib": 3000}}, "fsx.storage_capacity_gib = 3000", "multiple of 2400"),
        (
            {"fsx": {"deployment_type": "PERSISTENT_2", "per_unit_storage_throughput": 200}},
            "fsx",
            "200 is not allowed for PERSISTENT_2",
        ),
        (
            {"fsx": {"deployment_type": "PERSISTENT_1", "per_unit_storage_throughput": 250}},
            "fsx",
            "250 is not allowed for PERSISTENT_1",
        ),
        ({"fsx": {"data_compression": "GZIP"}}, "fsx.data_compression = 'GZIP'", "'NONE' or 'LZ4'"),
        ({"eks": {"kubernetes_version": "1.29"}}, "eks.kubernetes_version = '1.29'", "must be one of 1.33"),
        ({"eks": {"public_access_cidrs": ["0.0.0.0/0"]}}, "eks.public_access_cidrs", "broader than /16"),
        # Two halves are the whole internet too: the limit is on each CIDR's prefix, not on 0.0.0.0/0 alone.
        (
            {"eks": {"public_access_cidrs": ["0.0.0.0/1", "128.0.0.0/1"]}},
            "eks.public_access_cidrs",
            "0.0.0.0/1 is broader than /16",
        ),
        (
            {"eks": {"public_access_cidrs": ["203.0.113.0/24", "10.0.0.0/15"]}},
            "eks.public_access_cidrs",
            "10.0.0.0/15 is broader than /16",
        ),
        ({"eks": {"public_access_cidrs": ["203.0.113.0/33"]}}, "eks.public_access_cidrs[0]", "IPv4 CIDR"),
        ({"eks": {"admin_principal_arns": ["alice"]}}, "eks.admin_principal_arns", "not an IAM role or user ARN"),
        (
            {"serving_image": {"ray_version": "2.51.0"}},
            "serving_image.ray_version = '2.51.0'",
            "needs Ray 2.52.0 or newer",
        ),
        (
            {"training": {"cluster": {"head_service_source_ranges": ["10.0.0.0/33"]}}},
            "training.cluster.head_service_source_ranges[0]",
            "IPv4 CIDR",
        ),
        ({"serving": {"client_namespaces": ["Apps"]}}, "serving.client_namespaces", "not a Kubernetes namespace name"),
        ({"name_prefix": "a-very-long-name-prefix-for-aws"}, "name_prefix", f"at most {NAME_PREFIX_MAX} characters"),
        ({"name_prefix": "Bad_Prefix"}, "name_prefix = 'Bad_Prefix'", "must be lowercase letters, digits and '-'"),
        # KubeRay's own rules for its names and upgrade strategies, refused before anything is synthesized.
        ({"serving": {"rayservice_name": "2-serve"}}, "serving.rayservice_name = '2-serve'", "starting with a letter"),
        (
            {"training": {"cluster": {"raycluster_name": "9-visgym"}}},
            "training.cluster.raycluster_name = '9-visgym'",
            "must be a Kubernetes service name",
        ),
        (
            {"serving": {"upgrade_strategy": "NewClusterWithIncrementalUpgrade"}},
            "serving.upgrade_strategy = 'NewClusterWithIncrementalUpgrade'",
            "'NewCluster' or 'None'",
        ),
        (
            {"hyperpod": {"lifecycle_bucket_name": "my-lifecycle-bucket"}},
            "hyperpod.lifecycle_bucket_name = 'my-lifecycle-bucket'",
            "must start with 'sagemaker-'",
        ),
        (
            {"hyperpod": {"lifecycle_bucket_name": "sagemaker-" + "x" * 60}},
            "hyperpod.lifecycle_bucket_name",
            "valid S3 bucket name",
        ),
        (
            {
                "hyperpod": {
                    "head_group": {
                        "name": "h",
                        "instance_type": "ml.r5d.16xlarge",
                        "instance_count": 1,
                        "deep_health_checks": ["InstanceStress"],
                    }
                }
            },
            "hyperpod.head_group",
            "need a GPU instance type",
        ),
        # deep_health_checks: [] because the default group's checks carry over (they need GPUs themselves).
        (
            {
                "hyperpod": {
                    "worker_group": {
                        "name": "w",
                        "instance_type": "ml.r5d.16xlarge",
                        "instance_count": 3,
                        "deep_health_checks": [],
                    }
                }
            },
            "hyperpod",
            "has no GPUs",
        ),
        (
            {"hyperpod": {"head_group": {"name": "h", "instance_type": "ml.r5d.16xlarge", "instance_count": 0}}},
            "hyperpod",
            "head_group.instance_count must be at least 1",
        ),
        (
            {"hyperpod": {"worker_group": {"name": "-bad", "instance_type": "ml.g7e.12xlarge", "instance_count": 1}}},
            "hyperpod.worker_group.name = '-bad'",
            "1-63 letters",
        ),
        (
            {
                "hyperpod": {
                    "worker_group": {
                        "name": "w",
                        "instance_type": "ml.g7e.12xlarge",
                        "instance_count": 1,
                        "threads_per_core": 4,
                    }
                }
            },
            "hyperpod.worker_group.threads_per_core = 4",
            "1 or 2",
        ),
        (
            {"network": {"hyperpod_az_id": "us-west-2b"}},
            "network.hyperpod_az_id = 'us-west-2b'",
            "availability zone id",
        ),
        (
            {"network": {"vpc_cidr": "10.0.0.0/16", "hyperpod_subnet_cidr": "10.1.0.0/18"}},
            "network",
            "must lie inside vpc_cidr",
        ),
        ({"network": {"max_azs": 1}}, "network.max_azs = 1", "greater than or equal to 2"),
        (
            {"network": {"hyperpod_subnet_cidr": "10.192.0.0/18"}},
            "network: hyperpod_subnet_cidr 10.192.0.0/18",
            "overlaps the VPC's public/private subnet",
        ),
        ({"env": {"account": "12345"}}, "env.account = '12345'", "must be a 12-digit AWS account id, in quotes"),
        ({"env": {"region": "mars-1"}}, "env.region = 'mars-1'", "must be an AWS region name such as us-west-2"),
        ({"versions": {"hyperpod_cli_commit": "main"}}, "versions.hyperpod_cli_commit = 'main'", "40-character"),
        (
            {"versions": {"kuberay_operator_chart": "latest"}},
            "versions.kuberay_operator_chart = 'latest'",
            "exact chart version",
        ),
        (
            {"versions": {"kuberay_operator_chart": "1.8.0"}},
            "versions.kuberay_operator_chart = '1.8.0'",
            "validated against the KubeRay v1.7.0 CRDs",
        ),
        ({"ray_endpoint_operator": {"enabled": True}}, "ray_endpoint_operator", "set domain"),
        (
            {
                "ray_endpoint_operator": {
                    "enabled": True,
                    "domain": "ray.example.com",
                    "spaces_addon_configuration": {"k": "v"},
                }
            },
            "ray_endpoint_operator: enabled is true but commit is empty",
            "contains helm_chart/HyperPodHelmChart/charts/hyperpod-ray-endpoint-operator (release v3.10.0 or later",
        ),
        (
            {"ray_endpoint_operator": {"enabled": True, "domain": "ray.example.com", "commit": "a" * 40}},
            "ray_endpoint_operator: enabled is true but spaces_addon_configuration is empty",
            "web browser access",
        ),
        ({"ray_endpoint_operator": {"commit": "v3.10.0"}}, "ray_endpoint_operator.commit = 'v3.10.0'", "40-character"),
        ({"hyperpd": {}}, "hyperpd", "unknown section; did you mean 'hyperpod'? see docs/configuration.md#hyperpod"),
        ({"fsx": {"capacity": 1200}}, "fsx.capacity", "unknown key; see docs/configuration.md#fsx"),
    ],
)
def test_bad_input_is_one_clear_line_naming_field_value_and_rule(data, field, hint):
    problems = problems_for(data)
    assert len(problems) == 1, problems
    line = problems[0]
    assert line.startswith("config error: ")
    assert field in line, line
    assert hint in line, line
    assert "\n" not in line


def test_public_access_cidrs_up_to_the_documented_limit_are_accepted():
    config = validate_config({"eks": {"public_access_cidrs": ["10.0.0.0/16", "203.0.113.7/32"]}})
    assert config.eks.public_access_cidrs == ["10.0.0.0/16", "203.0.113.7/32"]
    assert MIN_PUBLIC_ACCESS_PREFIX == 16  # the limit README's configuration section documents


def test_every_problem_is_reported_at_once():
    problems = problems_for({"fsx": {"storage_capacity_gib": 1}, "eks": {"kubernetes_version": "1.2"}, "bogus": 1})
    assert len(problems) == 3


@pytest.mark.parametrize(
    ("content", "message"),
    [("hyperpod: [unclosed", "is not valid YAML at line 1"), ("- a\n- b\n", "must hold a mapping")],
)
def test_unreadable_files_are_reported_not_raised(tmp_path, content, message):
    file = tmp_path / "bad.yaml"
    file.write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_config(file)


def test_missing_file_is_reported(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")


def test_cdk_app_prints_one_line_per_problem_and_no_traceback(tmp_path):
    file = tmp_path / "bad.yaml"
    file.write_text("fsx:\n  storage_capacity_gib: 1000\n")
    out = tmp_path / "cdk.out"
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO_ROOT,
        env={"PATH": str(Path(sys.executable).parent), "SKYRL_HP_CONFIG": str(file), "CDK_OUTDIR": str(out)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == "config error: fsx.storage_capacity_gib = 1000: must be 1200, 2400 or a multiple of 2400 GiB"
    )
    assert "Traceback" not in result.stderr
    assert not out.exists() or not any(out.iterdir())  # nothing half-written


def test_unreadable_cdk_context_is_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO_ROOT,
        env={"PATH": str(Path(sys.executable).parent), "CDK_OUTDIR": str(tmp_path / "cdk.out"),
             "CDK_CONTEXT_JSON": "{not json"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.startswith("config error: the CDK context (CDK_CONTEXT_JSON) is not readable JSON")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("channel", ["environment", "overflow file"])
def test_cdk_context_config_is_refused_so_stacks_and_manifests_read_the_same_file(tmp_path, channel):
    # The CDK CLI hands the app its context in $CDK_CONTEXT_JSON, or in a file when it is too large.
    context = {"config": "mine.yaml", "@aws-cdk/core:newStyleStackSynthesis": True}
    if channel == "environment":
        passed = {"CDK_CONTEXT_JSON": json.dumps(context)}
    else:
        (tmp_path / "context.json").write_text(json.dumps(context))
        passed = {"CDK_CONTEXT_JSON": "{}", "CONTEXT_OVERFLOW_LOCATION_ENV": str(tmp_path / "context.json")}
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO_ROOT,
        env={"PATH": str(Path(sys.executable).parent), "CDK_OUTDIR": str(tmp_path / "cdk.out"), **passed},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip().startswith("config error: -c config=FILE is not supported; set SKYRL_HP_CONFIG=FILE")


# --- partial overrides: a file names only what it changes -------------------------------------------


def nested_sections(model, prefix: str = "") -> list[str]:
    """Dotted path of every section whose default is itself a model (what a YAML mapping may override)."""
    from pydantic import BaseModel

    found = []
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            found.append(f"{prefix}{name}")
            found += nested_sections(value, f"{prefix}{name}.")
    return found


# One override per nested section: a field set to a valid non-default value. A new section without an
# entry fails test_every_nested_section_has_a_partial_override_case.
PARTIAL_OVERRIDES = {
    "env": ("region", "us-west-2"),
    "network": ("nat_gateways", 2),
    "eks": ("kubernetes_version", "1.34"),
    "hyperpod": ("node_recovery", "None"),
    "hyperpod.head_group": ("ebs_volume_gb", 800),
    "hyperpod.worker_group": ("instance_type", "ml.g7e.24xlarge"),
    "fsx": ("data_compression", "NONE"),
    "observability": ("grafana", True),
    "studio": ("enabled", True),
    "ray_endpoint_operator": ("enable_endpoints_by_default", True),
    "versions": ("coredns_addon", "v1.12.4-eksbuild.1"),
    "training_image": ("build_timeout_minutes", 120),
    "serving_image": ("image", "public.ecr.aws/deep-learning-containers/ray:serve-llm-cuda-v1.1"),
    "workloads": ("namespace", "research"),
    "training": ("experiments", [{"name": "maze-grpo-2", "run_id": None, "overrides": {}}]),
    "training.data": ("train_rows", 128),
    "training.cluster": ("worker_shm_gib", 32),
    "training.jobs": ("job_ttl_seconds_after_finished", 600),
    "training.knobs": ("lora_alpha", 64),
    "serving": ("max_replicas", 1),
    "serving.publish": ("adapter_name", "maze-grpo-2"),
    "alerts": ("email_addresses", ["oncall@example.com"]),
    "helm_installer": ("archive_mirror", "s3://example-helm-mirror/hyperpod"),
    "tracking": ("backend", "mlflow"),
}


def test_every_nested_section_has_a_partial_override_case(default_config):
    assert set(nested_sections(default_config)) == set(PARTIAL_OVERRIDES)


def nest(path: str, leaf: dict) -> dict:
    for part in reversed(path.split(".")):
        leaf = {part: leaf}
    return leaf


@pytest.mark.parametrize("section", sorted(PARTIAL_OVERRIDES))
def test_a_partial_section_changes_only_the_named_field(section, default_config):
    field, value = PARTIAL_OVERRIDES[section]
    config = validate_config(nest(section, {field: value}))
    expected = default_config.model_dump()
    target = expected
    for part in section.split("."):
        target = target[part]
    assert target[field] != value, f"{section}.{field}: pick a value that differs from the default"
    target[field] = value
    assert config.model_dump() == expected


def test_the_readme_override_synthesizes_the_worker_type_alone(tmp_path):
    file = tmp_path / "override.yaml"
    file.write_text("hyperpod:\n  worker_group:\n    instance_type: ml.g7e.24xlarge\n")
    config = load_config(file)
    worker = config.hyperpod.worker_group
    default = load_config(None).hyperpod.worker_group
    assert worker.instance_type == "ml.g7e.24xlarge"
    assert worker.model_dump(exclude={"instance_type"}) == default.model_dump(exclude={"instance_type"})


def test_lists_in_an_override_replace_the_default_list():
    config = validate_config({"hyperpod": {"worker_group": {"deep_health_checks": ["InstanceStress"]}}})
    assert config.hyperpod.worker_group.deep_health_checks == ["InstanceStress"]
    assert config.hyperpod.worker_group.name == "gpu-workers"


def test_a_misspelt_key_inside_a_partial_section_is_still_an_error():
    assert problems_for({"hyperpod": {"worker_group": {"instance_typ": "ml.g7e.24xlarge"}}}) == [
        "config error: hyperpod.worker_group.instance_typ: unknown key; did you mean "
        "'hyperpod.worker_group.instance_type'? see docs/configuration.md#hyperpod"
    ]


def test_the_example_file_is_valid_and_names_only_what_it_changes():
    import yaml

    data = yaml.safe_load((REPO_ROOT / "config" / "example.yaml").read_text())
    load_config(REPO_ROOT / "config" / "example.yaml")
    defaults = load_config(None).model_dump()

    def unchanged(override: dict, default: dict, path: str = "") -> list[str]:
        same = []
        for key, value in override.items():
            if isinstance(value, dict) and isinstance(default.get(key), dict):
                same += unchanged(value, default[key], f"{path}{key}.")
            elif default.get(key) == value:
                same.append(f"{path}{key}")
        return same

    assert unchanged(data, defaults) == []


# --- region and AZ id, unreadable files ------------------------------------------------------------


@pytest.mark.parametrize(("region", "az_id"), [("us-west-2", "usw2-az4"), ("us-east-1", "use1-az6"),
                                              ("ap-northeast-1", "apne1-az1"), ("eu-north-1", "eun1-az1")])  # fmt: skip
def test_an_az_id_of_the_configured_region_is_accepted(region, az_id):
    config = validate_config({"env": {"region": region}, "network": {"hyperpod_az_id": az_id}})
    assert config.network.hyperpod_az_id == az_id


def test_an_az_id_of_another_region_is_one_line():
    assert problems_for({"env": {"region": "us-west-2"}, "network": {"hyperpod_az_id": "use1-az1"}}) == [
        "config error: network: hyperpod_az_id 'use1-az1' is an availability zone id of another region: "
        "env.region us-west-2 has ids usw2-az1, usw2-az2, ..."
    ]


def test_the_default_az_id_with_another_region_is_refused_too():
    [line] = problems_for({"env": {"region": "eu-west-2"}})
    assert "hyperpod_az_id 'usw2-az2'" in line and "euw2-az1" in line


@pytest.mark.parametrize(
    "content",
    [
        b"hyperpod:\n  worker_group:\n    name: gr\xfcn\n",
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00",
        b"\xff\xfe\x00\x01binary",
    ],
    ids=["latin-1 text", "png header", "binary"],
)
def test_a_file_that_is_not_utf8_is_one_line(tmp_path, content):
    file = tmp_path / "bad.yaml"
    file.write_bytes(content)
    with pytest.raises(ConfigError) as raised:
        load_config(file)
    [line] = raised.value.problems
    assert line.startswith(f"config error: {file} is not UTF-8 text")


def test_a_utf8_file_with_control_bytes_is_one_line_naming_the_character_and_where(tmp_path):
    # Once "is not valid YAML" and nothing else: the reader refuses the character before any YAML is parsed.
    file = tmp_path / "bad.yaml"
    file.write_bytes(b"env:\n  region: \x00\x01\n")
    with pytest.raises(ConfigError) as raised:
        load_config(file)
    [line] = raised.value.problems
    assert line.startswith(f"config error: {file} at line 2, column 11: character U+0000 (NUL) is not allowed in YAML")
    file.write_bytes(b"env:\n  region: us-west-2\x1b\n")
    with pytest.raises(ConfigError) as raised:
        load_config(file)
    assert raised.value.problems[0].startswith(f"config error: {file} at line 2, column 20: character U+001B (ESC)")


# --- messages that say what to write ---------------------------------------------------------------------------------


def experiment_overrides(overrides: dict) -> dict:
    return {"training": {"experiments": [{"name": "maze-grpo", "overrides": overrides}]}}


def test_hydra_style_nested_overrides_are_one_line_with_the_dotted_form():
    assert problems_for(experiment_overrides({"trainer": {"policy": {"optimizer_config": {"lr": "1e-6"}}}})) == [
        "config error: training.experiments[0].overrides: overrides take SkyRL's dotted keys, not nested sections: "
        "write overrides: {trainer.policy.optimizer_config.lr: 1e-6}"
    ]


def test_nested_overrides_beside_dotted_ones_show_every_key_dotted():
    [line] = problems_for(experiment_overrides({"trainer.epochs": 2, "generator": {"max_turns": 10, "batched": True}}))
    assert line.endswith("write overrides: {trainer.epochs: 2, generator.max_turns: 10, generator.batched: true}")


def test_a_knob_name_as_an_override_points_to_its_skyrl_key():
    assert problems_for(experiment_overrides({"learning_rate": 1.0e-6})) == [
        "config error: training.experiments[0].overrides: unknown SkyRL key 'learning_rate': overrides take SkyRL's "
        "dotted keys, and training.knobs.learning_rate is SkyRL's 'trainer.policy.optimizer_config.lr'"
    ]


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (
            {"hyperpod.worker_group.instance_count": 2},
            "config error: hyperpod.worker_group.instance_count: YAML does not split a key at its dots, so this is "
            "one unknown key; nest it: hyperpod: {worker_group: {instance_count: 2}} (one key per indented line)",
        ),
        (
            {"hyperpod": {"worker_group.instance_type": "ml.g7e.24xlarge"}},
            "config error: hyperpod.worker_group.instance_type: YAML does not split a key at its dots, so this is "
            "one unknown key; nest it: hyperpod: {worker_group: {instance_type: ml.g7e.24xlarge}} (one key per "
            "indented line)",
        ),
    ],
)
def test_a_dotted_key_says_to_nest_it_with_the_nested_form(data, line):
    assert problems_for(data) == [line]


def test_the_nested_form_a_dotted_key_error_shows_is_accepted(tmp_path):
    [line] = problems_for({"hyperpod.worker_group.instance_count": 2})
    file = tmp_path / "c.yaml"
    file.write_text(line.split("nest it: ", 1)[1].removesuffix(" (one key per indented line)") + "\n")
    assert load_config(file).hyperpod.worker_group.instance_count == 2


def test_an_unknown_gpu_type_suggests_only_gpu_types_and_how_to_add_one():
    [line] = problems_for({"hyperpod": {"worker_group": {"instance_type": "ml.g5.8xlarge"}}})
    gpu_types = [name for name, spec in INSTANCE_CATALOG.items() if spec.gpus]
    assert line == (
        "config error: hyperpod.worker_group.instance_type = 'ml.g5.8xlarge': unknown instance type; did you mean "
        f"ml.g7e.8xlarge? the catalog's GPU types are {', '.join(gpu_types)}; to add a type, give its facts in "
        "skyrl_hyperpod/config/catalog.py and its price in skyrl_hyperpod/prices/<region>.yaml"
    )
    assert not any(name in line for name, spec in INSTANCE_CATALOG.items() if not spec.gpus)


def test_an_unknown_cpu_type_suggests_only_cpu_types():
    # By name, ml.c7e.12xlarge is closest to the GPU type ml.g7e.12xlarge; for a CPU type, that is no suggestion.
    [line] = problems_for({"hyperpod": {"head_group": {"instance_type": "ml.c7e.12xlarge"}}})
    cpu_types = [name for name, spec in INSTANCE_CATALOG.items() if not spec.gpus]
    assert f"unknown instance type; the catalog's CPU types are {', '.join(cpu_types)}; to add a type" in line
    assert "ml.g7e" not in line


@pytest.mark.parametrize(
    ("session", "role_arn", "where"),
    [
        (
            "arn:aws:sts::111111111111:assumed-role/AWSReservedSSO_Admin_abc123/user@example.com",
            "arn:aws:iam::111111111111:role/aws-reserved/sso.amazonaws.com/AWSReservedSSO_Admin_abc123",
            "with <region>/ before AWSReservedSSO_Admin_abc123 when IAM Identity Center is not in us-east-1",
        ),
        (
            "arn:aws:sts::111111111111:assumed-role/PlatformAdmin/alice",
            "arn:aws:iam::111111111111:role/PlatformAdmin",
            "with the role's path, if it has one, before PlatformAdmin",
        ),
    ],
    ids=["sso", "assumed-role"],
)
def test_a_session_arn_as_admin_principal_gives_the_role_arn(session, role_arn, where):
    [line] = problems_for({"eks": {"admin_principal_arns": [session]}})
    role = role_arn.rsplit("/", 1)[1]
    assert line.endswith(
        f"{session!r} is an STS session of IAM role {role} (as aws sts get-caller-identity prints it), and EKS access "
        f"entries take the role: list {role_arn} ({where}; `aws iam get-role --role-name {role} --query Role.Arn` "
        "prints it exactly)"
    )
    # The ARN it names is one the field accepts.
    assert validate_config({"eks": {"admin_principal_arns": [role_arn]}}).eks.admin_principal_arns == [role_arn]


def test_experiments_as_a_mapping_says_it_is_a_list_with_the_list_it_meant():
    data = {"training": {"experiments": {"maze-grpo": {"overrides": {"trainer.epochs": 2}}, "maze-long": None}}}
    assert problems_for(data) == [
        "config error: training.experiments: must be a list, one '- name: ...' entry per item, not a mapping keyed by "
        "name: write experiments: [{name: maze-grpo, overrides: {trainer.epochs: 2}}, {name: maze-long}] (or one "
        "'- name: ...' line per item)"
    ]
    written = [{"name": "maze-grpo", "overrides": {"trainer.epochs": 2}}, {"name": "maze-long"}]
    experiments = validate_config({"training": {"experiments": written}}).training.experiments
    assert [e.name for e in experiments] == ["maze-grpo", "maze-long"]
