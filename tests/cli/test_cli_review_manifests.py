"""`skyrl-hp review` on synthesized cdk8s manifests (KubeRay's RayService upgrade).

Runs outside the CDK worker: the manifests are built in-process from the charts, no CloudFormation involved.
"""

from __future__ import annotations

import re
import resource
import subprocess
import sys
from pathlib import Path

import deployed_cluster
import pytest
import yaml
from click.testing import CliRunner

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.config import validate_config
from skyrl_hyperpod.plumbing.yaml_loading import SAFE_DUMPER, safe_load_all
from skyrl_hyperpod.values.stack_outputs import StackOutputs

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO_ROOT / ".github" / "workflows"


def write_dist(directory: Path, overrides: dict) -> Path:
    """`directory`/dist as `make synth-k8s` writes it before any deploy (placeholder outputs), without the stamp."""
    config = validate_config(overrides)
    deployed_cluster.write_dist(directory / "dist", config, StackOutputs.placeholder(config), stamp=False)
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


# --- what a pull request's own code may put into dist/ ---------------------------------------------------------

# Made-up credentials (none is a real key), as a pull request whose chart code skips the configuration's guard would
# write them into its manifests.
SECRETS = {
    "OPENAI_APIKEY": "sk-" + "proj-" + "a8Fq2Lx9Vt4Rm7Wc1Zp6Nb3Yk5Hd0Gs",
    "GH_PAT": "ghp" + "_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "MLFLOW_TRACKING_URI": "https://admin:" + "password@mlflow.example.com",
}


def edit_dist(directory: Path, edit) -> None:
    """Load every document of `directory`/dist, let `edit(kind, document)` change it, write it back."""
    for file in (directory / "dist").glob("*.yaml"):
        documents = safe_load_all(file.read_text())
        for document in documents:
            if document:
                edit(document["kind"], document)
        file.write_text(yaml.dump_all(documents, Dumper=SAFE_DUMPER))


def plant_secrets(kind: str, document: dict) -> None:
    if kind != "RayJob":
        return
    spec = document["spec"]
    assignments = " ".join(f"{name}={value}" for name, value in SECRETS.items())
    spec["entrypoint"] = spec["entrypoint"].replace("env ", f"env {assignments} ", 1)
    spec["runtimeEnvYAML"] = yaml.safe_dump({"env_vars": {"EXTRA_CREDENTIAL": SECRETS["GH_PAT"]}})
    head = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    head["env"] = [*head.get("env", []), {"name": "DATABASE_URL", "value": SECRETS["MLFLOW_TRACKING_URI"]}]


def test_the_review_shows_which_environment_variable_changed_never_its_value(base_dist, tmp_path):
    head = write_dist(tmp_path, {})
    edit_dist(head, plant_secrets)
    result = CliRunner().invoke(cli, ["review", str(base_dist), str(head)])
    assert result.exit_code == 0, result.output
    for value in SECRETS.values():
        assert value not in result.stdout
        assert value.split("://")[-1].split("@")[0] not in result.stdout  # not even the secret part
    text = manifest_section(result.stdout)
    assert "MODIFY** `RayJob" in text
    # The names, and that a value is there, stay visible.
    [added] = [line for line in text.splitlines() if "argument added: `" in line]
    for name in SECRETS:
        assert re.search(rf"[` ]{name}=redacted:[0-9a-f]{{8}}[` ]", added), added
    assert re.search(r"EXTRA_CREDENTIAL: redacted:[0-9a-f]{8}", text), text
    assert re.search(r'"name": "DATABASE_URL", "value": "redacted:[0-9a-f]{8}"', text), text


def test_a_changed_environment_value_is_still_a_change(base_dist, tmp_path):
    def change(kind: str, document: dict) -> None:
        if kind == "RayJob":
            document["spec"]["entrypoint"] = document["spec"]["entrypoint"].replace(
                "SKYRL_RAY_PG_TIMEOUT_IN_S=7200", "SKYRL_RAY_PG_TIMEOUT_IN_S=7201"
            )

    head = write_dist(tmp_path, {})
    edit_dist(head, change)
    text = manifest_section(CliRunner().invoke(cli, ["review", str(base_dist), str(head)]).stdout)
    [line] = [line for line in text.splitlines() if "SKYRL_RAY_PG_TIMEOUT_IN_S" in line]
    before, after = re.findall(r"SKYRL_RAY_PG_TIMEOUT_IN_S=(redacted:[0-9a-f]{8})", line)
    assert before != after and "7200" not in line and "7201" not in line


def alias_bomb(levels: int, indent: str = "") -> str:
    """YAML whose `bomb` key expands to 9**levels values from a few hundred bytes."""
    lines = [f'{indent}l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"{indent}l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, levels)]
    return "\n".join(lines) + f"\n{indent}bomb: *l{levels - 1}\n"


def bounded_review(base: Path, head: Path) -> subprocess.CompletedProcess:
    # A bound, not a timing: the review of a few kilobytes runs in seconds; an unbounded reader would walk
    # 387 million values (it ran for minutes and took gigabytes). 2 GiB of address space and 120 s cap the test itself.
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))

    return subprocess.run([str(Path(sys.executable).parent / "skyrl-hp"), "review", str(base), str(head)],
                          capture_output=True, text=True, timeout=120, preexec_fn=limit)  # fmt: skip


def test_an_alias_bomb_in_a_manifest_is_refused_in_one_line(base_dist, tmp_path):
    head = write_dist(tmp_path, {})
    bomb = head / "dist" / "06-extra.k8s.yaml"
    bomb.write_text("kind: ConfigMap\napiVersion: v1\nmetadata: {name: x}\ndata:\n" + alias_bomb(9, "  "))
    run = bounded_review(base_dist, head)
    assert run.returncode == 2, run.stderr[-2000:]
    [line] = run.stderr.splitlines()
    assert line.startswith(f"review error: {bomb} at line ")
    assert line.endswith(
        "expands the document to more than 100,000 values (keys, values and list items, an alias counted in full at "
        "each use); the default synthesis writes fewer than 500 per file"
    )


def test_an_alias_bomb_inside_a_changed_value_is_shown_as_one_redacted_value(base_dist, tmp_path):
    # serveConfigV2 is YAML inside a string: the review reads it, bounded, to show what changed and to redact it.
    def plant(kind: str, document: dict) -> None:
        if kind == "RayService":
            document["spec"]["serveConfigV2"] = alias_bomb(9)

    head = write_dist(tmp_path, {})
    edit_dist(head, plant)
    run = bounded_review(base_dist, head)
    assert run.returncode == 0, run.stderr[-2000:]
    [line] = [line for line in manifest_section(run.stdout).splitlines() if "spec.serveConfigV2" in line]
    assert re.search(r"→ `\"redacted:[0-9a-f]{8}\"`$", line), line
    assert "lol" not in run.stdout
