"""The offline chart check: the values this project sets, against the HyperPod chart at the pinned commit.

Each failure mode is shown by mutating one input (the pin, a values path, an affinity list, the
operator's commit) and asserting the one line that names it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import stat
import tarfile
from pathlib import Path

import pytest
import yaml
from cli_helpers import skyrl_hp
from conftest import REPO_ROOT

from skyrl_hyperpod.config import validate_config
from skyrl_hyperpod.config.workloads import RESERVED_NAMESPACES
from skyrl_hyperpod.plumbing.errors import InputError
from skyrl_hyperpod.plumbing.upstream import (
    HYPERPOD_CHART_PATH,
    HYPERPOD_DEPENDENCIES_CHART_NAMESPACES,
    RAY_ENDPOINT_OPERATOR_CHART_PATH,
)
from skyrl_hyperpod.validation import hyperpod_chart, verified_archive
from skyrl_hyperpod.validation.hyperpod_chart import (
    chart_assembly_module,
    check_charts,
    external_plugin_problems,
    render_chart,
    values_path_problems,
)
from skyrl_hyperpod.values.helm_values import hyperpod_dependencies_values

pytestmark = pytest.mark.long_running

PINNED = validate_config({}).versions.hyperpod_cli_commit
# ../shared holds the chart at the pinned commit (never committed); override with HYPERPOD_CHARTS_DIR.
CHARTS_DIR = Path(os.environ.get("HYPERPOD_CHARTS_DIR", REPO_ROOT.parent / "shared" / "hyperpod-helm-chart"))
CHART = CHARTS_DIR / PINNED / HYPERPOD_CHART_PATH
HEALTH_AGENT_TEMPLATE = "charts/health-monitoring-agent/templates/health-monitoring-agent.yaml"
# The commit AWS's console templates pinned in August 2025, before g7e reached the chart.
OLD_PIN = "f57185916d4f7d2fa85caf6a03c04fd17172d330"
GPU_TYPE = "ml.g7e.12xlarge"


def copy_chart(tmp_path: Path, commit: str, edit=None) -> Path:
    """The pinned chart copied to <tmp>/<commit>/, optionally edited (path below the chart -> new text)."""
    target = tmp_path / commit
    shutil.copytree(CHARTS_DIR / PINNED, target)
    # CI's copy of ../shared has no write bits, and copytree keeps them.
    for path in (target, *target.rglob("*")):
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    for relative, change in (edit or {}).items():
        path = target / HYPERPOD_CHART_PATH / relative
        path.write_text(change(path.read_text()))
    return tmp_path


def without_line(text: str, needle: str) -> str:
    lines = text.splitlines(keepends=True)
    kept = [line for line in lines if line.strip() != needle]
    assert len(kept) < len(lines), f"{needle!r} not in the file: the mutation would prove nothing"
    return "".join(kept)


def test_the_chart_copy_is_the_one_the_tests_read():
    assert (CHART / "Chart.yaml").is_file(), f"no chart at {CHART}: set HYPERPOD_CHARTS_DIR or fetch it"
    assert PINNED == "b01cf90676553a711ab1a8ac51422adbb09aef6b"  # release v3.9.0


def test_default_values_pass_the_chart_check_and_the_agent_is_really_rendered():
    report = check_charts(validate_config({}))
    assert report.problems == []
    assert report.skipped == []  # the helm render ran: a skipped check is not a pass


def test_larger_worker_types_pass_too():
    # Larger worker types (the smaller ones do not fit the default training and serving layout) pass too.
    for instance_type in ("ml.g7e.24xlarge", "ml.g7e.48xlarge"):
        config = validate_config({"hyperpod": {"worker_group": {"instance_type": instance_type}}})
        assert check_charts(config).problems == [], instance_type


def test_an_old_pin_whose_agent_misses_g7e_fails(tmp_path):
    # The chart at the August 2025 pin: the agent's affinity list had no ml.g7e type.
    charts = copy_chart(tmp_path, OLD_PIN, {HEALTH_AGENT_TEMPLATE: lambda text: "".join(
        line for line in text.splitlines(keepends=True) if "ml.g7e." not in line)})  # fmt: skip
    config = validate_config({"versions": {"hyperpod_cli_commit": OLD_PIN}})
    assert check_charts(config, charts_dir=charts).problems == [
        f"chart check: health-monitoring-agent would not select GPU instance type {GPU_TYPE}"
    ]


def test_a_gpu_type_absent_from_the_agent_affinity_fails(tmp_path):
    commit = "1" * 40
    charts = copy_chart(tmp_path, commit, {HEALTH_AGENT_TEMPLATE: lambda t: without_line(t, f"- {GPU_TYPE}")})
    config = validate_config({"versions": {"hyperpod_cli_commit": commit}})
    assert check_charts(config, charts_dir=charts).problems == [
        f"chart check: health-monitoring-agent would not select GPU instance type {GPU_TYPE}"
    ]


def test_a_disabled_health_agent_fails(tmp_path):
    commit = "2" * 40
    charts = copy_chart(tmp_path, commit, {"values.yaml": lambda t: t.replace(
        "health-monitoring-agent:\n  enabled: true", "health-monitoring-agent:\n  enabled: false")})  # fmt: skip
    config = validate_config({"versions": {"hyperpod_cli_commit": commit}})
    [line] = check_charts(config, charts_dir=charts).problems
    assert line.startswith("chart check: health-monitoring-agent is disabled (health-monitoring-agent.enabled)")


def test_a_misspelt_values_path_fails():
    values = hyperpod_dependencies_values(validate_config({}), "us-west-2")
    values["nvidia-device-plugin"]["afinity"] = values["nvidia-device-plugin"].pop("affinity")
    assert values_path_problems(values, CHART) == [
        "chart check: values path nvidia-device-plugin.afinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms does not exist in HyperPodHelmChart/values.yaml"
    ]


def test_a_path_below_a_local_sub_chart_is_read_from_its_own_values():
    # `health-monitoring-agent.region` is only in the sub-chart's values.yaml; a typo there is named with both files.
    assert values_path_problems({"health-monitoring-agent": {"region": "us-west-2"}}, CHART) == []
    assert values_path_problems({"health-monitoring-agent": {"regoin": "us-west-2"}}, CHART) == [
        "chart check: values path health-monitoring-agent.regoin does not exist in HyperPodHelmChart/values.yaml "
        "or charts/health-monitoring-agent/values.yaml"
    ]


def test_a_key_the_chart_does_not_have_at_the_pin_fails():
    # `kuberay` (a sub-chart of later revisions) is no key of the chart at this pin.
    assert values_path_problems({"kuberay": {"enabled": False}}, CHART) == [
        "chart check: values path kuberay.enabled does not exist in HyperPodHelmChart/values.yaml"
    ]


def test_device_plugins_that_would_miss_a_gpu_type_fail():
    config = validate_config({})
    values = hyperpod_dependencies_values(config, "us-west-2")
    [term] = values["nvidia-device-plugin"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    term["matchExpressions"][0]["values"] = ["ml.g6e.12xlarge"]
    values["aws-efa-k8s-device-plugin"]["supportedInstanceLabels"]["values"] = ["ml.p5.48xlarge"]
    assert external_plugin_problems(values, CHART, config) == [
        f"chart check: nvidia-device-plugin would not select GPU instance type {GPU_TYPE}",
        f"chart check: aws-efa-k8s-device-plugin would not select GPU instance type {GPU_TYPE}",
    ]


def test_without_our_values_the_chart_defaults_are_judged():
    # Helm merges our values over the chart's; with none, the chart's own lists decide (v3.9.0 lists g7e).
    assert external_plugin_problems({}, CHART, validate_config({})) == []


def test_a_tampered_copy_of_the_pinned_commit_is_refused(tmp_path):
    charts = copy_chart(tmp_path, PINNED, {"values.yaml": lambda t: t + "\n# tampered\n"})
    with pytest.raises(InputError) as raised:
        check_charts(validate_config({}), charts_dir=charts)
    [line] = raised.value.problems
    assert "HyperPodHelmChart/values.yaml" in line and "sha256 differs" in line and "refused" in line


def test_a_missing_copy_names_the_fetch_command(tmp_path):
    with pytest.raises(InputError) as raised:
        check_charts(validate_config({"versions": {"hyperpod_cli_commit": OLD_PIN}}), charts_dir=tmp_path)
    [line] = raised.value.problems
    assert OLD_PIN in line and f"skyrl-hp fetch hyperpod-chart --commit {OLD_PIN}" in line


# --- the Ray endpoint operator ---------------------------------------------------------------------

OPERATOR = {
    "enabled": True,
    "domain": "ray.example.com",
    "spaces_addon_configuration": {"placeholder": {"enabled": True}},
}


def test_the_operator_at_a_commit_without_its_chart_fails():
    # v3.9.0 predates the operator's chart (release v3.10.0).
    config = validate_config({"ray_endpoint_operator": {**OPERATOR, "commit": PINNED}})
    assert check_charts(config).problems == [
        f"chart check: ray_endpoint_operator.commit {PINNED} has no {RAY_ENDPOINT_OPERATOR_CHART_PATH} "
        "(it arrived in release v3.10.0)"
    ]


def test_the_operator_values_are_checked_against_its_chart(tmp_path):
    commit = "3" * 40
    charts = copy_chart(copy_chart(tmp_path, PINNED), commit)
    operator_chart = charts / commit / RAY_ENDPOINT_OPERATOR_CHART_PATH
    operator_chart.mkdir()
    (operator_chart / "Chart.yaml").write_text("apiVersion: v2\nname: hyperpod-ray-endpoint-operator\nversion: 0.1.0\n")
    # A stand-in for the operator's values.yaml without `adminGroup`.
    (operator_chart / "values.yaml").write_text(
        'region: ""\ndomain: ""\nnamespace: hyperpod-ray\nkmsKeyArn: ""\nmanager:\n  enableEndpointsByDefault: false\n'
    )
    config = validate_config({"ray_endpoint_operator": {**OPERATOR, "commit": commit, "admin_group": "admins"}})
    assert check_charts(config, charts_dir=charts).problems == [
        "chart check: values path adminGroup does not exist in hyperpod-ray-endpoint-operator/values.yaml"
    ]


def test_an_operator_commit_without_a_copy_is_reported_as_skipped_not_passed():
    commit = "4" * 40
    report = check_charts(validate_config({"ray_endpoint_operator": {**OPERATOR, "commit": commit}}))
    assert report.problems == []
    [line] = report.skipped
    assert (
        line.startswith("SKIPPED chart check: ray_endpoint_operator.commit 4444")
        and "skyrl-hp fetch hyperpod-chart" in line
    )


# --- the command ------------------------------------------------------------------------------------


def test_command_exits_0_on_the_default_and_1_with_one_line_per_problem(tmp_path, capsys, monkeypatch):
    assert skyrl_hp("chart-check") == 0
    assert "are valid" in capsys.readouterr().err
    charts = copy_chart(tmp_path, OLD_PIN, {HEALTH_AGENT_TEMPLATE: lambda t: without_line(t, f"- {GPU_TYPE}")})
    config_file = tmp_path / "old.yaml"
    config_file.write_text(f"versions:\n  hyperpod_cli_commit: {OLD_PIN}\n")
    assert skyrl_hp("chart-check", "--config", str(config_file), "--charts-dir", str(charts)) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"chart check: health-monitoring-agent would not select GPU instance type {GPU_TYPE}"
    ]


def test_without_a_helm_binary_the_render_is_skipped_not_passed():
    report = check_charts(validate_config({}), helm=None)
    assert report.problems == []
    [line] = report.skipped
    assert line.startswith("SKIPPED chart check: health-monitoring-agent not rendered")


# --- the render: the installer's assembly, Helm's template ---------------------------------------------------

# What Helm's --output-dir writes for the chart: <chart name>/charts/<sub-chart>/templates/...
RENDERED = "hyperpod-helm-chart/charts"
# Disabled by the chart's values at v3.9.0 (and not enabled by ours): the chart's own values.yaml says so.
DISABLED = {"cert-manager", "mlflow", "storage", "cluster-role-and-bindings", "namespaced-role-and-bindings",
            "team-role-and-bindings", "hyperpod-inference-operator", "gpu-operator"}  # fmt: skip


def rendered_docs(out: Path, sub_chart: str) -> list[dict]:
    folder = out / RENDERED / sub_chart
    return [d for f in sorted(folder.rglob("*")) if f.is_file() for d in yaml.safe_load_all(f.read_text()) if d]


def selected_instance_types(pod_spec: dict) -> set[str]:
    terms = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return {
        v
        for t in terms
        for e in t["matchExpressions"]
        if e["key"] == "node.kubernetes.io/instance-type"
        for v in e["values"]
    }


def test_render_installs_the_pinned_chart_as_the_installer_assembles_it(tmp_path, capsys):
    out = tmp_path / "out"
    assert skyrl_hp("chart-check", "--render", str(out)) == 0
    err = capsys.readouterr().err
    assert (
        "14 file:// sub-charts kept as folders" in err
        and "stale archives removed: health-monitoring-agent-0.1.0.tgz" in err
    )
    rendered = {p.name for p in (out / RENDERED).iterdir()}
    assert rendered == {"training-operators", "nvidia-device-plugin", "aws-efa-k8s-device-plugin", "neuron-device-plugin",
                        "health-monitoring-agent", "mpi-operator", "deep-health-check", "job-auto-restart",
                        "hyperpod-patching"}  # fmt: skip
    # Every dependency the values disable renders nothing (and the chart's own Chart.yaml lists them all).
    declared = {d["name"] for d in yaml.safe_load((CHART / "Chart.yaml").read_text())["dependencies"]}
    assert declared > DISABLED and not DISABLED & rendered and declared - DISABLED == rendered
    # The agent's DaemonSet comes from the folder (the stale archive has no g7e types) and selects the GPU group.
    daemonsets = {
        d["metadata"]["name"]: d for d in rendered_docs(out, "health-monitoring-agent") if d["kind"] == "DaemonSet"
    }
    daemonset = daemonsets["health-monitoring-agent"]  # the GPU nodes' one (there is a non-NVIDIA one too)
    assert GPU_TYPE in selected_instance_types(daemonset["spec"]["template"]["spec"])
    # The stand-in of the NVIDIA plugin shows the values Helm hands the real chart: our affinity, its tolerations.
    [stand_in] = rendered_docs(out, "nvidia-device-plugin")
    assert "offline stand-in" in stand_in["metadata"]["annotations"]["skyrl-hp/offline-stand-in"]
    assert stand_in["metadata"]["namespace"] == "kube-system"  # the release's namespace, as the stack installs it
    handed = json.loads(stand_in["data"]["values.json"])
    assert handed["devicePlugin"] == {"enabled": True} and selected_instance_types(handed) == {GPU_TYPE}
    # Every namespace the chart puts anything in is one the workloads may not take (workloads.namespace).
    docs = [d for sub_chart in rendered for d in rendered_docs(out, sub_chart)]
    namespaces = {d["metadata"]["namespace"] for d in docs if d["metadata"].get("namespace")}
    namespaces |= {d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"}
    assert namespaces == {"kube-system", *HYPERPOD_DEPENDENCIES_CHART_NAMESPACES}
    assert namespaces <= set(RESERVED_NAMESPACES)


def test_the_old_package_every_local_sub_chart_step_fails_the_render(tmp_path, capsys, monkeypatch):
    # What the installer did before: `helm package` of every file:// sub-chart into charts/, disabled ones too.
    assembly = chart_assembly_module()
    helm = str(hyperpod_chart.helm_binary("1.33"))

    def package_every_local_subchart(dependency, source, charts_dir):
        env = assembly.helm_environment(str(tmp_path), {"PATH": os.environ["PATH"]})
        assembly.run_command([helm, "package", source, "--destination", charts_dir], env, 120, quiet=True)
        return source

    monkeypatch.setattr(assembly, "place_local_subchart", package_every_local_subchart)
    assert skyrl_hp("chart-check", "--render", str(tmp_path / "out")) == 1
    err = capsys.readouterr().err
    assert "Error: found in Chart.yaml, but missing in charts/ directory: aws-mountpoint-s3-csi-driver" in err


def test_a_helm_error_exits_1_with_helms_own_message(tmp_path, capsys):
    commit = "5" * 40
    charts = copy_chart(
        tmp_path, commit, {"charts/mpi-operator/templates/deployment.yaml": lambda t: t + "\n{{ .Values.x.y.z }}\n"}
    )
    config = tmp_path / "c.yaml"
    config.write_text(f"versions:\n  hyperpod_cli_commit: '{commit}'\n")
    assert (
        skyrl_hp("chart-check", "--config", str(config), "--charts-dir", str(charts), "--render", str(tmp_path / "o"))
        == 1
    )
    err = capsys.readouterr().err
    assert "mpi-operator/templates/deployment.yaml" in err and "nil pointer evaluating interface {}.y" in err


def test_an_agent_that_misses_a_gpu_type_fails_in_the_render(tmp_path):
    commit = "6" * 40
    charts = copy_chart(tmp_path, commit, {HEALTH_AGENT_TEMPLATE: lambda t: without_line(t, f"- {GPU_TYPE}")})
    config = validate_config({"versions": {"hyperpod_cli_commit": commit}})
    report = render_chart(config, tmp_path / "out", charts_dir=charts)
    assert report.problems == [
        f"chart check: no rendered health-monitoring-agent DaemonSet selects GPU instance type {GPU_TYPE}"
    ]


def test_a_disabled_component_that_renders_fails(tmp_path, monkeypatch):
    # The installer judges `storage` disabled while Helm (values edited) enables it: the render shows it.
    commit = "7" * 40
    charts = copy_chart(
        tmp_path,
        commit,
        {"values.yaml": lambda t: t.replace("storage:\n  enabled: false", "storage:\n  enabled: true")},
    )
    assembly = chart_assembly_module()
    judged = assembly.dependency_enabled
    monkeypatch.setattr(assembly, "dependency_enabled", lambda d, v: False if d.name == "storage" else judged(d, v))
    report = render_chart(
        validate_config({"versions": {"hyperpod_cli_commit": commit}}), tmp_path / "out", charts_dir=charts
    )
    [line] = report.problems
    assert line.startswith("chart check: storage is disabled by the values but rendered ")


def test_render_refuses_a_directory_it_did_not_write_and_a_tampered_archive(tmp_path, capsys):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    assert skyrl_hp("chart-check", "--render", str(tmp_path / "mine")) == 2
    assert "is not empty and holds no earlier render: refused" in capsys.readouterr().err
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"
    archives = tmp_path / "archives"
    archives.mkdir()
    (archives / "nvidia-device-plugin-0.16.1.tgz").write_bytes(b"not the published archive")
    assert skyrl_hp("chart-check", "--render", str(tmp_path / "out"), "--archives", str(archives)) == 2
    err = capsys.readouterr().err
    assert "nvidia-device-plugin-0.16.1.tgz has sha256 " in err and "expected a77b4e81" in err


# --- fetch_hyperpod_chart ---------------------------------------------------------------------------


def archive_of(commit_dir: Path, commit: str) -> bytes:
    """A GitHub-style archive (one top folder) holding the chart folder of `commit_dir`."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(commit_dir / "helm_chart", arcname=f"sagemaker-hyperpod-cli-{commit}/helm_chart")
    return buffer.getvalue()


class ArchiveOpener:
    def __init__(self, data: bytes):
        self.data, self.urls = data, list[str]()

    def open(self, url, timeout=None):
        self.urls.append(url)
        return io.BytesIO(self.data)


def test_fetch_writes_the_verified_chart(monkeypatch, tmp_path):
    opener = ArchiveOpener(archive_of(CHARTS_DIR / PINNED, PINNED))
    monkeypatch.setattr(verified_archive, "opener", opener)
    assert skyrl_hp("fetch", "hyperpod-chart", "--dest", str(tmp_path / "charts")) == 0
    assert opener.urls == [f"https://codeload.github.com/aws/sagemaker-hyperpod-cli/tar.gz/{PINNED}"]
    written = tmp_path / "charts" / PINNED / HYPERPOD_CHART_PATH / "values.yaml"
    assert (
        hashlib.sha256(written.read_bytes()).digest() == hashlib.sha256((CHART / "values.yaml").read_bytes()).digest()
    )
    assert check_charts(validate_config({}), charts_dir=tmp_path / "charts").problems == []


def test_fetch_refuses_a_tampered_archive_and_writes_nothing(monkeypatch, tmp_path, capsys):
    tampered = copy_chart(tmp_path / "src", PINNED, {"Chart.yaml": lambda t: t + "\n# tampered\n"})
    monkeypatch.setattr(verified_archive, "opener", ArchiveOpener(archive_of(tampered / PINNED, PINNED)))
    assert skyrl_hp("fetch", "hyperpod-chart", "--dest", str(tmp_path / "charts")) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert f"{HYPERPOD_CHART_PATH}/Chart.yaml has sha256" in line and "refused" in line
    assert not (tmp_path / "charts" / PINNED).exists()


def test_fetch_refuses_a_commit_without_a_sha256_list(tmp_path, capsys):
    assert skyrl_hp("fetch", "hyperpod-chart", "--dest", str(tmp_path), "--commit", OLD_PIN) == 1
    assert "no sha256 list for commit" in capsys.readouterr().err


def test_fetch_if_missing_keeps_a_verified_copy_and_refuses_a_tampered_one(monkeypatch, tmp_path, capsys):
    opener = ArchiveOpener(b"")
    monkeypatch.setattr(verified_archive, "opener", opener)
    charts = copy_chart(tmp_path, PINNED)
    assert skyrl_hp("fetch", "hyperpod-chart", "--if-missing", "--dest", str(charts)) == 0
    assert opener.urls == []  # nothing downloaded
    (charts / PINNED / HYPERPOD_CHART_PATH / "Chart.yaml").write_text("name: x\n")
    assert skyrl_hp("fetch", "hyperpod-chart", "--if-missing", "--dest", str(charts)) == 1
    assert "sha256 differs" in capsys.readouterr().err
