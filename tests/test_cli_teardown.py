"""`skyrl-hp teardown --plan`: an ordered plan that runs nothing, and the README lists what it leaves behind."""

from __future__ import annotations

import re

import yaml
from click.testing import CliRunner
from conftest import REPO_ROOT

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.config import validate_config
from skyrl_hyperpod.ops.teardown import leftovers, plan, replaced_file_systems_query


def run(*args):
    return CliRunner().invoke(cli, ["teardown", *args])


def test_plan_orders_workloads_then_stacks_and_names_the_projects_resources(default_config):
    result = run("--plan")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("Teardown plan (nothing has been run")
    titles = [step.title for step in plan(default_config)]
    positions = [out.index(f"{n}. {title}") for n, title in enumerate(titles, start=1)]
    assert positions == sorted(positions)
    # The FSx id is recorded before the stacks (and their outputs) go; workloads stop before the final backup.
    assert out.index("FSX_ID=") < out.index("kubectl delete") < out.index("cdk destroy --all")
    assert f"--stack-name {default_config.names.stack('storage')}" in out
    assert "Studio" not in "".join(titles)  # Studio is off by default


def test_plan_with_studio_takes_the_home_efs_out_of_the_vpc_before_the_network_goes(tmp_path):
    file = tmp_path / "studio.yaml"
    file.write_text(yaml.safe_dump({"studio": {"enabled": True}, "name_prefix": "team-a"}))
    result = run("--plan", "--config", str(file))
    assert result.exit_code == 0, result.output
    out = result.stdout
    order = ["delete-user-profile", "cdk destroy team-a-studio", "delete-mount-target", "delete-security-group",
             "cdk destroy --all"]  # fmt: skip
    assert [out.index(marker) for marker in order] == sorted(out.index(marker) for marker in order)
    assert "Studio home EFS file system" in out


def test_without_plan_nothing_happens_and_the_flag_is_named():
    result = run()
    assert result.exit_code == 2
    assert "--plan" in result.output


def test_readme_teardown_section_lists_every_leftover_and_the_plan_command():
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("## Teardown") :]
    section = section[: section.index("\n## ", 1)]
    assert "skyrl-hp teardown --plan" in section
    everything = validate_config({"studio": {"enabled": True}, "observability": {"enabled": True}})
    for item in leftovers(everything):
        # The README names each leftover by its first words, generically (no prefix).
        words = re.sub(r"skyrl-hp", "<name_prefix>", item.what).split(" (")[0]
        assert words.split(":")[0] in section, words


def test_plan_backs_up_fsx_and_lifts_the_storage_stacks_protection_before_the_destroy(default_config):
    out = run("--plan").stdout
    storage = default_config.names.stack("storage")
    order = [
        "kubectl delete",
        "aws fsx create-backup --file-system-id $FSX_ID",
        "aws fsx describe-backups --backup-ids $BACKUP_ID",
        "aws fsx delete-file-system",
        f"update-termination-protection --no-enable-termination-protection --stack-name {storage}",
        "cdk destroy --all",
    ]
    positions = [out.index(marker) for marker in order]
    assert positions == sorted(positions)
    # CloudFormation's hour (ServiceTimeout 1-3600 s) bounds the final backup; nothing promises two.
    assert "2 hours" not in out and "an hour" in out


def test_replaced_file_systems_query_finds_only_the_projects_other_file_systems(default_config):
    import jmespath  # type: ignore[import-untyped]  # botocore's dependency; ships no type information

    current = "fs-0123456789abcdef0"
    listed = {"FileSystems": [
        {"FileSystemId": current, "Tags": [{"Key": "project", "Value": default_config.name_prefix}]},
        {"FileSystemId": "fs-0aaaaaaaaaaaaaaa0", "Tags": [{"Key": "project", "Value": default_config.name_prefix}]},
        {"FileSystemId": "fs-0bbbbbbbbbbbbbbb0", "Tags": [{"Key": "project", "Value": "another-project"}]},
        {"FileSystemId": "fs-0ccccccccccccccc0", "Tags": []},
    ]}  # fmt: skip
    query = replaced_file_systems_query(default_config.name_prefix, current=current)
    assert jmespath.search(query, listed) == ["fs-0aaaaaaaaaaaaaaa0"]
    # The plan prints the same query, reading the id recorded in its first step.
    assert replaced_file_systems_query(default_config.name_prefix) in run("--plan").stdout


def test_readme_teardown_matches_the_plan():
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("## Teardown") :]
    section = section[: section.index("\n## ", 1)]
    assert "2 hours" not in section
    for marker in ("aws fsx create-backup", "UpdateReplacePolicy: Retain", "update-termination-protection"):
        assert marker in section, marker
