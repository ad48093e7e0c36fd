"""`skyrl-hp review` on synthesized cdk8s manifests (KubeRay's RayService upgrade).

Runs outside the CDK worker: the manifests are built in-process from the charts, no CloudFormation involved.
"""

from __future__ import annotations

from pathlib import Path

import cdk8s
import pytest
import yaml
from click.testing import CliRunner

from charts import ChartInputs, build_charts
from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.config import validate_config
from skyrl_hyperpod.values.stack_outputs import StackOutputs

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO_ROOT / ".github" / "workflows"


def write_dist(directory: Path, overrides: dict) -> Path:
    config = validate_config(overrides)
    inputs = ChartInputs(config=config, outputs=StackOutputs.placeholder(config), job_script="print('stub')\n")
    (directory / "dist").mkdir(parents=True)
    for chart in build_charts(cdk8s.App(), inputs):
        (directory / "dist" / f"{chart.node.id}.k8s.yaml").write_text(yaml.safe_dump_all(chart.to_json()))
    return directory


@pytest.fixture(scope="module")
def base_dist(tmp_path_factory) -> Path:
    return write_dist(tmp_path_factory.mktemp("base"), {})


def disruptions(markdown: str) -> str:
    return (
        markdown.split("### ⚠️ Disruptive updates", 1)[1].split("\n### ", 1)[0]
        if "Disruptive updates" in markdown
        else ""
    )


def test_rayservice_cluster_change_needs_a_second_cluster_s_gpus(base_dist, tmp_path):
    from skyrl_hyperpod.config import load_config

    config = load_config(None)
    head = write_dist(tmp_path, {"serving": {"head_cpus": config.serving.head_cpus + 4}})
    result = CliRunner().invoke(cli, ["review", str(base_dist), str(head)])
    assert result.exit_code == 0, result.output
    text = disruptions(result.stdout)
    group = config.hyperpod.worker_group
    per_pod = group.spec.gpus  # one serving worker pod per GPU node
    replicas = config.serving.worker_replicas
    capacity = group.spec.gpus * group.instance_count
    assert "KubeRay builds a new RayCluster (upgradeStrategy NewCluster)" in text
    assert (
        f"{per_pod * replicas} GPU(s) on {group.instance_type} for the new cluster while the old one holds "
        f"{per_pod * replicas}: {2 * per_pod * replicas} during the upgrade"
    ) in text
    assert f"against the group's {capacity}" in text


@pytest.mark.parametrize(
    "overrides",
    [{"serving": {"target_ongoing_requests": 8}}, {"serving": {"worker_replicas": 2}}],
    ids=["serve-config-only", "worker-replicas-only"],
)
def test_rayservice_changes_kuberay_applies_in_place_are_not_flagged(base_dist, tmp_path, overrides):
    head = write_dist(tmp_path, overrides)
    result = CliRunner().invoke(cli, ["review", str(base_dist), str(head)])
    assert result.exit_code == 0, result.output
    assert "MODIFY** `RayService" in result.stdout
    assert "RayService" not in disruptions(result.stdout)


def test_rayservice_upgrade_that_outgrows_the_gpu_group_is_called_out(base_dist, tmp_path):
    from skyrl_hyperpod.config import load_config

    config = load_config(None)
    group = config.hyperpod.worker_group
    # Every GPU node serves: the old cluster's pods and the new one's cannot both be placed.
    head = write_dist(
        tmp_path, {"serving": {"head_cpus": config.serving.head_cpus + 4, "worker_replicas": group.instance_count}}
    )
    result = CliRunner().invoke(cli, ["review", str(base_dist), str(head)])
    assert result.exit_code == 0, result.output
    text = disruptions(result.stdout)
    new = group.spec.gpus * group.instance_count
    old = group.spec.gpus * config.serving.worker_replicas
    assert f"{new} GPU(s) on {group.instance_type} for the new cluster while the old one holds {old}" in text
    assert "does NOT fit: the new cluster's pods stay Pending" in text


def manifest_section(markdown: str) -> str:
    return markdown.split("### Kubernetes manifests", 1)[1]


def test_an_entrypoint_change_is_shown_by_argument(base_dist, tmp_path):
    head = write_dist(tmp_path, {"training": {"knobs": {"trainer.policy.optimizer_config.lr": 1.0e-5}}})
    result = CliRunner().invoke(cli, ["review", str(base_dist), str(head)])
    assert result.exit_code == 0, result.output
    text = manifest_section(result.stdout)
    assert "- `spec.entrypoint`:" in text
    # The one argument that changed, whole; not two identical truncated prefixes of the command line.
    assert (
        "  - argument `trainer.policy.optimizer_config.lr=3e-05` → `trainer.policy.optimizer_config.lr=1e-05`" in text
    )
    assert "…" not in text.split("spec.entrypoint", 1)[1].split("\n- ", 1)[0]


def test_a_json_or_yaml_value_is_shown_by_key(base_dist, tmp_path):
    head = write_dist(tmp_path, {"serving": {"target_ongoing_requests": 8}})
    text = manifest_section(CliRunner().invoke(cli, ["review", str(base_dist), str(head)]).stdout)
    # serveConfigV2 is a YAML document in a string: the key inside it that changed, with both values.
    assert "target_ongoing_requests`: `16` → `8`" in text


def test_the_rayservice_upgrade_finding_is_a_list_of_bullets(base_dist, tmp_path):
    from skyrl_hyperpod.config import load_config

    config = load_config(None)
    head = write_dist(tmp_path, {"serving": {"head_cpus": config.serving.head_cpus + 4}})
    text = disruptions(CliRunner().invoke(cli, ["review", str(base_dist), str(head)]).stdout)
    [finding] = [line for line in text.splitlines() if line.startswith("- ")]
    assert len(finding) < 300
    bullets = [line for line in text.splitlines() if line.startswith("  - ")]
    assert bullets[-1].startswith("  - verdict: ")
    assert any(line.startswith("  - needs ") for line in bullets)
