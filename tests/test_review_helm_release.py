"""`skyrl-hp review` on the git Helm installer's releases: a replacement or a renamed release is disruptive.

Hand-written assemblies (manifest.json + one template) on each side, reviewed by the real command.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from click.testing import CliRunner

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.cli.common import EXIT_STATEFUL_CHANGE

STACK = "skyrl-hp-eks"


def write_assembly(directory: Path, template: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{STACK}.template.json").write_text(json.dumps(template))
    artifacts = {STACK: {"type": "aws:cloudformation:stack", "properties": {"templateFile": f"{STACK}.template.json"}}}
    (directory / "manifest.json").write_text(json.dumps({"version": "48.0.0", "artifacts": artifacts}))
    return directory


def release(name: str = "hyperpod-dependencies", token: str = "Installer") -> dict:
    return {
        "Type": "Custom::HelmChartFromGit",
        "Properties": {
            "ServiceToken": {"Fn::GetAtt": [token, "Arn"]},
            "ClusterName": "skyrl-hp-eks",
            "Release": name,
            "Namespace": "kube-system",
            "Commit": "b" * 40,
            "Values": "{}",
        },  # fmt: skip
    }


def review(tmp_path: Path, base: dict, head: dict, *args: str):
    base_dir = write_assembly(tmp_path / "base", {"Resources": base})
    head_dir = write_assembly(tmp_path / "head", {"Resources": head})
    return CliRunner().invoke(cli, ["review", str(base_dir), str(head_dir), *args])


def section_lines(markdown: str, heading: str) -> list[str]:
    if f"### ⚠️ {heading}" not in markdown:
        return []
    section = markdown.split(f"### ⚠️ {heading}", 1)[1].split("\n### ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("- ")]


def disruptions(markdown: str) -> list[str]:
    """The Helm findings, which have their own section: a replaced release is no in-place update."""
    return section_lines(markdown, "Helm releases replaced or removed")


def test_renaming_the_release_is_a_disruptive_replacement_that_fails_the_gate(tmp_path):
    result = review(tmp_path, {"Deps": release("dependencies")}, {"Deps": release()}, "--fail-on-stateful-replacement")
    assert result.exit_code == EXIT_STATEFUL_CHANGE, result.output
    [line] = disruptions(result.stdout)
    assert (
        "Helm release `skyrl-hp-eks/Deps`" in line
        and "kube-system/dependencies → kube-system/hyperpod-dependencies" in line
    )
    assert (
        "release kube-system/dependencies is uninstalled after kube-system/hyperpod-dependencies is installed"
        in result.stdout
    )
    assert "- **REPLACE** `skyrl-hp-eks/Deps` (Custom::HelmChartFromGit)" in result.stdout


def test_a_new_service_token_or_logical_id_is_flagged(tmp_path):
    result = review(tmp_path, {"Deps": release()}, {"Deps": release(token="OtherInstaller")})
    assert result.exit_code == 0, result.output
    [line] = disruptions(result.stdout)
    assert "new ServiceToken" in line
    result = review(tmp_path / "renamed", {"Deps": release()}, {"DepsRenamed": release()})
    [line] = disruptions(result.stdout)
    assert "removed while `DepsRenamed` is added" in line


def test_a_values_change_is_an_ordinary_upgrade(tmp_path):
    head = copy.deepcopy(release())
    head["Properties"]["Values"] = '{"a": 1}'
    result = review(tmp_path, {"Deps": release()}, {"Deps": head}, "--fail-on-stateful-replacement")
    assert result.exit_code == 0, result.output
    assert disruptions(result.stdout) == [] and "- **MODIFY** `Deps` (Custom::HelmChartFromGit)" in result.stdout


def hyperpod_cluster(instance_type: str) -> dict:
    group = {"InstanceGroupName": "gpu-workers", "InstanceType": instance_type, "InstanceCount": 2, "ThreadsPerCore": 1}
    return {
        "Type": "AWS::SageMaker::Cluster",
        "Properties": {"ClusterName": "skyrl-hp-hyperpod", "InstanceGroups": [group]},
    }


def test_replaced_releases_are_not_listed_as_updates_without_replacement(tmp_path):
    # One pull request that renames a release (a replacement) and changes a HyperPod group's instance type (an
    # update in place that replaces the group's nodes): each under the heading whose words are true of it.
    base = {"Deps": release("dependencies"), "Cluster": hyperpod_cluster("ml.g7e.12xlarge")}
    head = {"Deps": release(), "Cluster": hyperpod_cluster("ml.g7e.24xlarge")}
    markdown = review(tmp_path, base, head).stdout
    [helm] = disruptions(markdown)
    [in_place] = section_lines(markdown, "Disruptive updates (no replacement, but workloads are interrupted)")
    assert helm.startswith("- Helm release `skyrl-hp-eks/Deps`: replaced:")
    assert in_place.startswith("- HyperPod group `gpu-workers` (2 node(s)), `skyrl-hp-eks/Cluster`: InstanceType")
    assert (
        markdown.index("### ⚠️ Replacements")
        < markdown.index("### ⚠️ Helm releases")
        < markdown.index("### ⚠️ Disruptive updates")
    )
    # Only the Helm change: no "Disruptive updates" heading at all.
    markdown = review(tmp_path / "helm-only", {"Deps": release("dependencies")}, {"Deps": release()}).stdout
    assert "Disruptive updates" not in markdown and len(disruptions(markdown)) == 1
