"""`skyrl-hp teardown --plan`: an ordered plan that runs nothing, and the README lists what it leaves behind."""

from __future__ import annotations

import re

import yaml
from click.testing import CliRunner
from conftest import REPO_ROOT

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.config import validate_config
from skyrl_hyperpod.ops.teardown import leftovers, plan


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
