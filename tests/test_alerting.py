"""The alert rules and the alert manager definition, checked by Prometheus' own tools: `promtool check rules`,
`promtool test rules` (input series -> the alerts that must and must not fire) and `amtool check-config`.

No stand-in: when promtool or amtool is missing the tests fail with how to install them (`make promtool`).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.config.names import RAY_HEAD_CONTAINER
from skyrl_hyperpod.values import alerting

INSTALL_HINT = "run `make promtool` (Debian's prometheus and prometheus-alertmanager, unpacked into .build/)"
# Where `make promtool` unpacks them; `make test` also puts it on PATH.
UNPACKED = Path(__file__).resolve().parent.parent / ".build" / "prometheus" / "usr" / "bin"
TOPIC = "arn:aws:sns:us-west-2:111111111111:skyrl-hp-failures"


def tool(name: str) -> str:
    path = shutil.which(name, path=str(UNPACKED)) or shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: {INSTALL_HINT}")
    return path


def tool_version(name: str) -> str:
    result = subprocess.run([tool(name), "--version"], capture_output=True, text=True, check=True)
    return (result.stdout or result.stderr).splitlines()[0]


@pytest.fixture(scope="module")
def config() -> ProjectConfig:
    return ProjectConfig()


@pytest.fixture(scope="module")
def rules_file(config: ProjectConfig, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rules") / "skyrl-hp.rules.yml"
    path.write_text(alerting.rules_yaml(config), encoding="utf-8")
    return path


def test_promtool_accepts_the_rule_file(rules_file: Path, record_property) -> None:
    version = tool_version("promtool")
    record_property("promtool", version)
    print(f"checked with {version}")
    result = subprocess.run([tool("promtool"), "check", "rules", str(rules_file)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alerting.alert_rules(ProjectConfig()))} rules found" in result.stdout


def test_promtool_refuses_a_broken_rule(tmp_path: Path) -> None:
    # The check itself can fail: a rule with a PromQL syntax error.
    broken = {"groups": [{"name": "x", "rules": [{"alert": "Broken", "expr": "max by (name (up)"}]}]}
    path = tmp_path / "broken.yml"
    path.write_text(yaml.safe_dump(broken), encoding="utf-8")
    result = subprocess.run([tool("promtool"), "check", "rules", str(path)], capture_output=True, text=True)
    assert result.returncode != 0


def case(interval: str, series: list[tuple[str, str]], checks: list[tuple[str, str, list[dict]]]) -> dict:
    return {
        "interval": interval,
        "input_series": [{"series": s, "values": v} for s, v in series],
        "alert_rule_test": [
            {"eval_time": at, "alertname": name, "exp_alerts": [{"exp_labels": e} for e in expected]}
            for at, name, expected in checks
        ],
    }


def unit_tests(config: ProjectConfig) -> list[dict]:
    ns = config.workloads.namespace
    job = config.derived.runs[0].job_name
    stall_minutes = config.training.jobs.stall_alert_minutes
    low = config.training.jobs.stall_gpu_utilization_percent / 2
    running = f'kuberay_job_deployment_status{{namespace="{ns}", name="{job}", uid="u1", deployment_status="Running"}}'
    gpus = [f'DCGM_FI_DEV_GPU_UTIL{{gpu="{i}", UUID="GPU-{i}"}}' for i in range(2)]
    return [
        # A failed RayJob of this configuration fires; another namespace's failed job does not.
        case(
            "1m",
            [
                (
                    f'kuberay_job_deployment_status{{namespace="{ns}", name="{job}", uid="u1", deployment_status="Failed"}}',
                    "1x10",
                ),
                (
                    f'kuberay_job_deployment_status{{namespace="other", name="{job}", uid="u2", deployment_status="Failed"}}',
                    "1x10",
                ),
            ],
            [
                (
                    "5m",
                    "RayJobFailed",
                    [{"severity": "critical", "namespace": ns, "name": job, "deployment_status": "Failed"}],
                )
            ],
        ),
        # A Running job never fires RayJobFailed.
        case("1m", [(running, "1x10")], [("5m", "RayJobFailed", [])]),
        # A retry: a new Retrying series fires for the retry window, then stops.
        case(
            "1m",
            [
                (
                    f'kuberay_job_execution_duration_seconds{{namespace="{ns}", name="{job}", uid="u1", job_deployment_status="Retrying", retry_count="0"}}',
                    "_x10 1800x100",
                )
            ],
            [
                ("5m", "RayJobRetried", []),
                ("20m", "RayJobRetried", [{"severity": "warning", "namespace": ns, "name": job, "retry_count": "0"}]),
                ("90m", "RayJobRetried", []),
            ],
        ),
        # Running with idle GPUs: pending until the configured time, firing after it.
        case(
            "1m",
            [(running, f"1x{stall_minutes + 20}"), *((g, f"{low:g}x{stall_minutes + 20}") for g in gpus)],
            [
                (f"{stall_minutes - 5}m", "RayJobStalled", []),
                (f"{stall_minutes + 5}m", "RayJobStalled", [{"severity": "critical", "namespace": ns, "name": job}]),
            ],
        ),
        # Running with busy GPUs does not fire.
        case(
            "1m",
            [(running, f"1x{stall_minutes + 20}"), *((g, f"90x{stall_minutes + 20}") for g in gpus)],
            [(f"{stall_minutes + 5}m", "RayJobStalled", [])],
        ),  # fmt: skip
        # An XID fires when it appears, and stops once it is old news.
        case(
            "1m",
            [('DCGM_FI_DEV_XID_ERRORS{gpu="1", UUID="GPU-1"}', "0x10 79x40")],
            [
                ("5m", "GpuXidError", []),
                ("15m", "GpuXidError", [{"severity": "critical", "gpu": "1", "UUID": "GPU-1"}]),
                ("40m", "GpuXidError", []),
            ],
        ),
        # A node NotReady for long enough fires; a Ready node does not.
        case(
            "1m",
            [
                ('kube_node_status_condition{node="hyperpod-i-1", condition="Ready", status="true"}', "0x10"),
                ('kube_node_status_condition{node="hyperpod-i-2", condition="Ready", status="true"}', "1x10"),
            ],
            [
                ("3m", "NodeNotReady", []),
                (
                    "8m",
                    "NodeNotReady",
                    [{"severity": "critical", "node": "hyperpod-i-1", "condition": "Ready", "status": "true"}],
                ),
            ],
        ),
        # A head restart fires; a worker restart does not.
        case(
            "1m",
            [
                (
                    f'kube_pod_container_status_restarts_total{{namespace="{ns}", pod="h", container="{RAY_HEAD_CONTAINER}"}}',
                    "0 0 0 1x40",
                ),
                (
                    f'kube_pod_container_status_restarts_total{{namespace="{ns}", pod="w", container="ray-worker"}}',
                    "0 0 0 1x40",
                ),
            ],
            [
                (
                    "5m",
                    "RayHeadRestarted",
                    [{"severity": "critical", "namespace": ns, "pod": "h", "container": RAY_HEAD_CONTAINER}],
                ),
                ("40m", "RayHeadRestarted", []),
            ],
        ),
        # Blind spots are reported: no GPU or kube-state-metrics series, and a submitter pod without KubeRay metrics.
        case(
            "1m",
            [
                (
                    f'kube_pod_info{{namespace="{ns}", pod="{job}-abc", created_by_kind="Job", created_by_name="{job}"}}',
                    "1x60",
                )
            ],
            [
                ("40m", "GpuMetricsMissing", [{"severity": "warning"}]),
                ("40m", "KubeRayMetricsMissing", [{"severity": "warning"}]),
                ("40m", "ClusterStateMetricsMissing", [{"severity": "warning"}]),
            ],
        ),
        case(
            "1m",
            [
                (
                    f'kube_pod_info{{namespace="{ns}", pod="{job}-abc", created_by_kind="Job", created_by_name="{job}"}}',
                    "1x60",
                ),
                (f'kuberay_job_info{{namespace="{ns}", name="{job}", uid="u1"}}', "1x60"),
                ('kube_node_status_condition{node="hyperpod-i-1", condition="Ready", status="true"}', "1x60"),
                ('DCGM_FI_DEV_GPU_UTIL{gpu="0", UUID="GPU-0"}', "50x60"),
            ],
            [
                ("40m", "KubeRayMetricsMissing", []),
                ("40m", "ClusterStateMetricsMissing", []),
                ("40m", "GpuMetricsMissing", []),
            ],
        ),
    ]


@pytest.fixture(scope="module")
def behaviour_rules_file(config: ProjectConfig, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same rules without their annotations: promtool compares the annotations of a fired alert too, and
    these tests are about when each alert fires and with which labels (`check rules` checks the templates)."""
    rules = alerting.rule_file(config)
    for rule in rules["groups"][0]["rules"]:
        rule.pop("annotations")
    path = tmp_path_factory.mktemp("behaviour") / "skyrl-hp.rules.yml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    return path


def test_promtool_unit_tests_fire_each_alert_when_it_should(
    config: ProjectConfig, behaviour_rules_file: Path, tmp_path: Path
) -> None:
    print(f"run with {tool_version('promtool')}")
    cases = unit_tests(config)
    tests = {"rule_files": [str(behaviour_rules_file)], "evaluation_interval": "1m", "tests": cases}
    path = tmp_path / "alerts.test.yml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False), encoding="utf-8")
    result = subprocess.run([tool("promtool"), "test", "rules", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    # Every alert the rule file defines is exercised.
    tested = {check["alertname"] for test in cases for check in test["alert_rule_test"]}
    assert tested == {rule["alert"] for rule in alerting.alert_rules(config)}


def test_promtool_unit_tests_catch_a_wrong_expectation(
    config: ProjectConfig, behaviour_rules_file: Path, tmp_path: Path
) -> None:
    wrong = unit_tests(config)[:1]
    wrong[0]["alert_rule_test"][0]["exp_alerts"] = []  # the failed job does fire
    path = tmp_path / "wrong.test.yml"
    path.write_text(yaml.safe_dump({"rule_files": [str(behaviour_rules_file)], "tests": wrong}), encoding="utf-8")
    result = subprocess.run([tool("promtool"), "test", "rules", str(path)], capture_output=True, text=True)
    assert result.returncode != 0


def test_stall_time_and_threshold_come_from_the_config() -> None:
    config = ProjectConfig.model_validate(
        {"training": {"jobs": {"stall_alert_minutes": 45, "stall_gpu_utilization_percent": 25}}}
    )
    stalled = next(rule for rule in alerting.alert_rules(config) if rule["alert"] == "RayJobStalled")
    assert stalled["for"] == "45m"
    assert "avg(DCGM_FI_DEV_GPU_UTIL) < 25" in stalled["expr"]


def test_rules_watch_every_experiment_and_the_configured_namespace() -> None:
    config = ProjectConfig.model_validate(
        {"workloads": {"namespace": "team-a"}, "training": {"experiments": [{"name": "one"}, {"name": "two"}]}}
    )
    failed = next(rule for rule in alerting.alert_rules(config) if rule["alert"] == "RayJobFailed")
    match = re.search(r'name=~"([^"]+)"', failed["expr"])
    assert match is not None
    assert set(match.group(1).split("|")) == {run.job_name for run in config.derived.runs}
    assert 'namespace="team-a"' in failed["expr"]


def test_amtool_accepts_the_alert_manager_definition(tmp_path: Path) -> None:
    print(f"checked with {tool_version('amtool')}")
    definition = yaml.safe_load(alerting.alertmanager_definition(TOPIC, "us-west-2"))
    assert set(definition) == {"alertmanager_config"}
    path = tmp_path / "alertmanager.yml"
    path.write_text(definition["alertmanager_config"], encoding="utf-8")
    result = subprocess.run([tool("amtool"), "check-config", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    receiver = yaml.safe_load(definition["alertmanager_config"])["receivers"][0]["sns_configs"][0]
    assert receiver["topic_arn"] == TOPIC and receiver["sigv4"] == {"region": "us-west-2"}
