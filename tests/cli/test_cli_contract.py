"""What every `skyrl-hp` command shares: --help, exit codes, one configuration taken the same way everywhere,
a first line naming configuration, region and cluster, --json where it prints data, and one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner
from conftest import REPO_ROOT
from pydantic import BaseModel

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.config import ConfigError, ProjectConfig, load_config, validate_config
from skyrl_hyperpod.config.loader import PATTERN_SENTENCES, REFERENCE_DOC, ConfigSource
from skyrl_hyperpod.config.regions import hyperpod_instance_types_by_region
from skyrl_hyperpod.ops.kube import KubeError
from skyrl_hyperpod.plumbing.errors import InputError

pytestmark = pytest.mark.usefixtures("fake_aws_env", "no_config_in_env")


@pytest.fixture
def no_config_in_env(monkeypatch, tmp_path):
    monkeypatch.delenv("SKYRL_HP_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)  # no ./skyrl-hp.yaml unless a test writes one


def run(*args: str):
    return CliRunner().invoke(cli, list(args), prog_name="skyrl-hp")


def write(path, data) -> str:
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return str(path)


def all_commands(group: click.Group = cli, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, command in group.commands.items():
        found.append((*prefix, name))
        if isinstance(command, click.Group):
            found += all_commands(command, (*prefix, name))
    return found


@pytest.mark.parametrize("command", all_commands(), ids=" ".join)
def test_every_command_has_help(command):
    result = run(*command, "--help")
    assert result.exit_code == 0, result.output
    assert "Usage: " in result.stdout


def test_an_unknown_option_is_exit_2():
    assert run("cost", "--no-such-option").exit_code == 2


# --- one configuration, taken the same way everywhere ---------------------------------------------------------


def team_a(tmp_path) -> str:
    return write(
        tmp_path / "team-a.yaml",
        {"name_prefix": "team-a", "env": {"region": "us-east-1"}, "network": {"hyperpod_az_id": "use1-az4"}},
    )


@pytest.mark.parametrize(
    "args",
    [("--config", "{file}", "cost", "--json"), ("cost", "--config", "{file}", "--json")],
    ids=["before the command", "after the command"],
)
def test_config_is_read_in_either_position(tmp_path, args):
    file = team_a(tmp_path)
    result = run(*(a.format(file=file) for a in args))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["region"] == "us-east-1"
    first = result.stderr.splitlines()[0]
    assert first == (
        f"skyrl-hp: config {file} (--config) | region us-east-1 | cluster team-a-eks (HyperPod team-a-hyperpod)"
    )


def test_two_different_configs_are_refused(tmp_path):
    result = run("--config", team_a(tmp_path), "cost", "--config", write(tmp_path / "b.yaml", {"fsx": {}}))
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("config error: two configurations given")


def test_skyrl_hp_yaml_in_the_working_directory_is_the_default(tmp_path):
    write(tmp_path / "skyrl-hp.yaml", {"name_prefix": "local"})
    result = run("teardown", "--plan")
    assert result.exit_code == 0, result.output
    assert "cluster local-eks" in result.stderr.splitlines()[0]
    assert "skyrl-hp.yaml (./skyrl-hp.yaml)" in result.stderr.splitlines()[0]
    assert load_config(None).name_prefix == "local"  # the CDK and cdk8s apps read it the same way


def test_the_environment_variable_wins_over_the_working_directory(tmp_path, monkeypatch):
    write(tmp_path / "skyrl-hp.yaml", {"name_prefix": "local"})
    monkeypatch.setenv("SKYRL_HP_CONFIG", team_a(tmp_path))
    result = run("teardown", "--plan")
    assert "cluster team-a-eks" in result.stderr.splitlines()[0]
    assert "($SKYRL_HP_CONFIG)" in result.stderr.splitlines()[0]


def test_without_any_file_the_first_line_says_defaults():
    result = run("image", "tag")
    assert result.exit_code == 0
    assert result.stderr.splitlines()[0].startswith("skyrl-hp: config built-in defaults")
    assert "\n" not in result.stdout.strip()  # stdout stays the bare tag for $(skyrl-hp image tag)


def test_an_error_before_any_output_is_one_line_without_the_header(tmp_path):
    result = run("cost", "--prices", str(tmp_path / "absent.yaml"))
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [f"cost error: file {str(tmp_path / 'absent.yaml')!r} does not exist"]


# --- --json --------------------------------------------------------------------------------------------------


def test_teardown_plan_json_and_its_scope(tmp_path):
    file = team_a(tmp_path)
    result = run("--config", file, "teardown", "--plan", "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    first = plan["steps"][0]["commands"]
    assert first[:2] == [f"export SKYRL_HP_CONFIG={file}", "export AWS_REGION=us-east-1"]
    assert plan["steps"][-1]["commands"] == ["cdk destroy --all"]
    assert any("team-a/skyrl-train" in item["removal"] for item in plan["leftovers"])


def test_teardown_plan_text_is_scoped_to_the_configuration(tmp_path):
    file = team_a(tmp_path)
    out = run("--config", file, "teardown", "--plan").stdout
    assert (
        out.index(f"export SKYRL_HP_CONFIG={file}")
        < out.index("export AWS_REGION=us-east-1")
        < out.index("cdk destroy --all")
    )


def test_outputs_check_and_image_tag_print_json(tmp_path, default_config):
    from skyrl_hyperpod.values.stack_outputs import FIELD_BY_OUTPUT_KEY, StackOutputs

    placeholder = StackOutputs.placeholder(default_config).model_dump()
    outputs = {"skyrl-hp-storage": {key: placeholder[field] for key, field in FIELD_BY_OUTPUT_KEY.items()}}
    file = write(tmp_path / "outputs.json", json.dumps(outputs))
    result = run("outputs", "--check", "--file", file, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["eks_cluster_name"] == "skyrl-hp-eks"
    assert json.loads(run("image", "tag", "--json").stdout) == {"tag": default_config.training_image.tag}


# --- printed commands carry the configuration's region ------------------------------------------------------


def test_start_build_command_names_the_region_on_every_aws_call(tmp_path):
    out = run("--config", team_a(tmp_path), "image", "start-build-command").stdout
    aws_lines = [line for line in out.splitlines() if "aws " in line]
    assert aws_lines and all("--region us-east-1" in line for line in aws_lines)
    assert "--stack-name team-a-image-build" in out


def test_buildx_command_with_a_missing_outputs_file_is_one_line(tmp_path):
    result = run("image", "buildx-command", "--outputs-file", "missing.json")
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("image error: --outputs-file missing.json does not exist: write it with")
    assert "Errno" not in line


# --- configuration messages: one line naming the field and the fix -------------------------------------------


def problems(tmp_path, text: str) -> list[str]:
    file = tmp_path / "c.yaml"
    file.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_config(file)
    return raised.value.problems


def test_a_section_typo_suggests_the_section_and_an_existing_docs_anchor(tmp_path):
    [line] = problems(tmp_path, "trainig:\n  experiments: []\n")
    assert line == "config error: trainig: unknown section; did you mean 'training'? see docs/configuration.md#training"
    from conftest import REPO_ROOT

    assert "\n## training\n" in (REPO_ROOT / REFERENCE_DOC).read_text()


def test_an_unquoted_account_id_says_quote_it(tmp_path):
    [line] = problems(tmp_path, "env:\n  account: 111111111111\n")
    assert line == 'config error: env.account = 111111111111: YAML read a number; quote it: account: "111111111111"'


def test_a_bad_name_is_refused_with_a_sentence_not_a_regex(tmp_path):
    [line] = problems(tmp_path, "workloads:\n  namespace: My_Team\n")
    assert line == (
        "config error: workloads.namespace = 'My_Team': must be a Kubernetes name: lowercase letters, digits and '-', "
        "starting and ending with a letter or digit"
    )
    assert "^" not in line and "[a-z" not in line


def test_a_yaml_error_gives_line_and_reason(tmp_path):
    [line] = problems(tmp_path, "env:\n  region: us-west-2\n\tfsx: {}\n")
    assert line.startswith(f"config error: {tmp_path / 'c.yaml'} is not valid YAML at line 3")
    assert "indent with spaces, never tabs" in line


def test_an_empty_file_is_refused(tmp_path):
    [line] = problems(tmp_path, "# nothing but a comment\n")
    assert line.startswith(f"config error: {tmp_path / 'c.yaml'} is empty")


def _patterns(model: type[BaseModel]) -> set[str]:
    found = set()
    for field in model.model_fields.values():
        for meta in field.metadata:
            if getattr(meta, "pattern", None):
                found.add(meta.pattern)
        stack = [field.annotation]
        while stack:
            annotation = stack.pop()
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                found |= _patterns(annotation)
            for arg in typing.get_args(annotation):
                if hasattr(arg, "pattern") and arg.pattern:
                    found.add(arg.pattern)
                stack.append(arg)
    return found


def test_every_pattern_of_the_configuration_has_a_sentence():
    patterns = _patterns(ProjectConfig)
    assert len(patterns) > 10  # the walk reaches nested sections and Annotated types
    assert patterns - set(PATTERN_SENTENCES) == set()


# --- regions ---------------------------------------------------------------------------------------------------


def test_a_region_that_does_not_exist_is_refused_with_a_suggestion():
    with pytest.raises(ConfigError) as raised:
        validate_config({"env": {"region": "us-west-9"}, "network": {"hyperpod_az_id": "usw9-az1"}})
    assert raised.value.problems == [
        "config error: env: region = 'us-west-9': not an AWS region; did you mean us-west-2?"
    ]


def test_an_instance_type_hyperpod_does_not_offer_in_the_region_is_refused():
    region = "eu-west-1"
    assert "ml.g7e.12xlarge" not in hyperpod_instance_types_by_region()[region]  # cfn-lint's data, as shipped
    with pytest.raises(ConfigError) as raised:
        validate_config({"env": {"region": region}, "network": {"hyperpod_az_id": "euw1-az1"}})
    [line] = raised.value.problems
    assert line.startswith(
        "config error: hyperpod: worker_group.instance_type = 'ml.g7e.12xlarge': not offered by HyperPod in eu-west-1"
    )
    assert "us-west-2" in line  # where it is offered


def test_a_region_without_hyperpod_is_refused():
    with pytest.raises(ConfigError) as raised:
        validate_config({"env": {"region": "af-south-1"}, "network": {"hyperpod_az_id": "afs1-az1"}})
    [line] = raised.value.problems
    assert "SageMaker HyperPod is not offered there" in line


# --- what synth prints -----------------------------------------------------------------------------------------


def test_synth_summary_names_file_region_gpus_price_and_each_schedule(tmp_path):
    from skyrl_hyperpod.config.loader import load_config_with_source
    from skyrl_hyperpod.ops.summary import platform_summary, workloads_summary

    # 6 x g7e.12xlarge = 12 GPUs: SkyRL refuses the recipe's 32 / 16 there, so the schedule moves (README).
    file = write(
        tmp_path / "big.yaml",
        {"env": {"region": "us-west-2"}, "hyperpod": {"worker_group": {"instance_count": 6}}},
    )
    config, source = load_config_with_source(file)
    platform = platform_summary(config, source)
    assert platform[0] == f"configuration: {file} (--config)"
    assert platform[1] == "region: us-west-2"
    assert platform[2].startswith("GPUs: 6 x ml.g7e.12xlarge = 12 ")
    assert platform[3] == (
        "scaling: fixed: 6 GPU nodes bill from deploy to teardown; deep health checks: InstanceStress, "
        "InstanceConnectivity"
    )
    assert platform[4].startswith("price: $") and " an hour" in platform[4]
    [schedule] = workloads_summary(config, source)[2:]
    # 12 ranks, 8 samples: SkyRL keeps multiples of 3 prompts, so 30 / 15; 15 x 8 // 12 = 10 per GPU admits micro 2.
    assert schedule.startswith(
        "experiment maze-grpo: batch 30 / mini 15 / micro 2 / 20 epochs / 160 steps on 6 x 2 GPUs; checkpoint every "
    )


# 18 GPU-hours of failure budget on 6 GPUs: 20 steps at 540 s; at 54 s the budget outlasts the 160-step run.
@pytest.mark.parametrize(("step_seconds", "interval"), [(540, 20), (54, 160)])
def test_the_synth_summary_shows_the_checkpoint_interval_the_step_estimate_gives(step_seconds, interval):
    # A step estimate typed ten times too small makes checkpoints ten times rarer: the synth says so.
    from skyrl_hyperpod.ops.summary import workloads_summary

    config = validate_config({"training": {"jobs": {"estimated_step_seconds": step_seconds}}})
    assert config.derived.runs[0].knobs.ckpt_interval == interval
    [schedule] = [line for line in workloads_summary(config, ConfigSource(None, "defaults")) if "experiment" in line]
    assert schedule.endswith(
        f"; checkpoint every {interval} steps (at an estimated {step_seconds} s a step: "
        "training.jobs.estimated_step_seconds)"
    )


def test_synth_summary_names_the_trade_of_on_demand_nodes():
    from conftest import VARIANT_ON_DEMAND

    from skyrl_hyperpod.ops.summary import scaling_line

    assert scaling_line(validate_config(VARIANT_ON_DEMAND)) == (
        "scaling: on_demand: HyperPod's managed Karpenter starts 0 to 3 GPU nodes for pending Ray pods and removes "
        "them 10 min after they empty; new nodes get no deep health checks (HyperPod's autoscaling does not take them)"
    )


def test_synth_names_each_of_the_examples_placeholders_in_one_line():
    from skyrl_hyperpod.config.loader import load_config_with_source
    from skyrl_hyperpod.ops.summary import platform_summary, workloads_summary

    config, source = load_config_with_source(Path(__file__).resolve().parents[2] / "config" / "example.yaml")
    for lines in (platform_summary(config, source), workloads_summary(config, source)):
        warnings = [line for line in lines if line.startswith("warning: ")]
        assert len(warnings) == 2, lines
        assert "eks.public_access_cidrs: 203.0.113.10/32 is in a range reserved for documentation" in warnings[0]
        assert (
            "eks.admin_principal_arns: arn:aws:iam::111111111111:role/PlatformAdmin is in the example account"
            in warnings[1]
        )
    # Your own values are not placeholders.
    own = validate_config(
        {
            "eks": {
                "public_access_cidrs": ["198.18.0.0/24"],
                "admin_principal_arns": ["arn:aws:iam::222222222222:role/Admin"],
            }
        }
    )
    assert [line for line in workloads_summary(own, source) if line.startswith("warning: ")] == []


def test_the_price_line_moves_with_the_gpu_count(tmp_path):
    from skyrl_hyperpod.ops.summary import price_line

    def hourly(count: int) -> float:
        line = price_line(validate_config({"hyperpod": {"worker_group": {"instance_count": count}}}))
        return float(line.split("$", 1)[1].split(" ", 1)[0].replace(",", ""))

    assert hourly(4) > hourly(3)


@pytest.mark.parametrize("instance_type", ["ml.g7e.4xlarge", "ml.g7e.8xlarge"])
def test_a_gpu_type_the_price_file_lacks_is_a_note_in_the_synth_summary(instance_type):
    # The catalog offers both sizes; the shipped price files have no figure for them. The summary is what the
    # CDK app prints before it synthesizes: it must not end the synth.
    from skyrl_hyperpod.ops.cost import PriceError, estimate, load_price_book, price_file_for
    from skyrl_hyperpod.ops.summary import platform_summary

    config = validate_config(
        {
            "env": {"region": "us-west-2"},
            "hyperpod": {"worker_group": {"instance_type": instance_type}},
            "serving": {"max_replicas": 1},
            "training": {"cluster": {"worker_shm_gib": 16}},
        }
    )
    book = load_price_book(price_file_for("us-west-2"))
    with pytest.raises(PriceError):  # the premise: the file has no price for it
        estimate(config, book, price_file="us-west-2.yaml", run_hours=1)
    lines = platform_summary(config, ConfigSource(None, "defaults"))
    [price] = [line for line in lines if line.startswith("price: ")]
    assert price.startswith("price: not estimated: ") and f"has no hourly price for {instance_type}" in price


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (
            {"hyperpod": {"worker_group": {"instance_type": "ml.g7e.12xlage"}}},
            "config error: hyperpod.worker_group.instance_type = 'ml.g7e.12xlage': unknown instance type; did you mean "
            "ml.g7e.12xlarge?",
        ),
        ({"training": {"experiments": "maze"}}, "config error: training.experiments = 'maze': must be a list"),
        (
            {"fsx": {"storage_capacity_gib": "big"}},
            "config error: fsx.storage_capacity_gib = 'big': must be a whole number",
        ),
        ({"serving": {"enabled": "maybe"}}, "config error: serving.enabled = 'maybe': must be true or false"),
        ({"hyperpod": "x"}, "config error: hyperpod = 'x': must be a section of 'key: value' lines"),
        (
            {"training": {"experiments": [{"name": "Maze"}]}},
            "config error: training.experiments[0].name = 'Maze': must be a Kubernetes name",
        ),
    ],
)
def test_newcomer_mistakes_are_one_line_naming_the_field_and_what_to_write(data, line):
    with pytest.raises(ConfigError) as raised:
        validate_config(data)
    [problem] = raised.value.problems
    assert problem.startswith(line)


def test_a_usage_error_is_one_line_with_where_the_help_is():
    result = run("cost", "--hours", "-1")
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("skyrl-hp cost: Invalid value for '--hours'") and line.endswith("(see skyrl-hp cost --help)")


def test_help_lists_the_commands_in_the_order_of_the_run_book():
    result = run("--help")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    headings = [line for line in lines if line.endswith(":") and not line.startswith(" ")]
    assert headings == ["Options:", "Set up:", "Deploy:", "Train:", "Watch:", "Serve:", "Tear down:"]
    commands_part = lines[lines.index("Set up:") :]
    listed = [line.split()[0] for line in commands_part if line.startswith("  ") and not line.startswith("   ")]
    order = {name: index for index, name in enumerate(listed)}
    # The run book's path: estimate and check, deploy, train, watch, serve, tear down.
    path = [
        "preflight",
        "outputs",
        "kubeconfig",
        "verify",
        "train",
        "status",
        "dashboard",
        "adapter",
        "serve",
        "teardown",
    ]
    assert [order[name] for name in path] == sorted(order[name] for name in path)
    # Every command is listed exactly once, a new one too (under "Other commands").
    assert sorted(listed) == sorted(name for name, command in cli.commands.items() if not command.hidden)
    extra = copy_with_extra_command()
    text = CliRunner().invoke(extra, ["--help"]).stdout
    assert "Other commands:\n  extra" in text


def copy_with_extra_command() -> click.Group:
    import copy

    tree = copy.deepcopy(cli)
    tree.add_command(click.Command("extra", help="A command added later."))
    return tree


# --- errors a command did not catch ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "code", "line"),
    [
        (InputError(["input error: no CRDs in /nowhere"]), 2, "input error: no CRDs in /nowhere"),
        (KubeError("GET /apis/ray.io/v1: 403 Forbidden"), 1, "GET /apis/ray.io/v1: 403 Forbidden"),
    ],
    ids=["a check's problems", "a cluster call"],
)
def test_an_error_of_the_project_a_command_did_not_catch_is_one_line(monkeypatch, error, code, line):
    @click.command("raises")
    def raises() -> None:
        raise error

    monkeypatch.setitem(cli.commands, "raises", raises)
    result = CliRunner().invoke(cli, ["raises"])
    assert (result.exit_code, result.stderr.strip()) == (code, line)
    assert "Traceback" not in result.output + result.stderr


def test_grafana_without_the_observability_stack_is_refused_not_dropped():
    with pytest.raises(ConfigError) as error:
        validate_config({"observability": {"enabled": False, "grafana": True}})
    assert error.value.problems == [
        "config error: observability: grafana = True: Grafana reads the Prometheus workspace of the observability "
        "stack, which enabled: false leaves out; set enabled: true, or grafana: false"
    ]


def test_turning_observability_off_says_the_job_alerts_go_with_it():
    from skyrl_hyperpod.ops.summary import platform_summary

    source = ConfigSource(None, "defaults")
    assert not [line for line in platform_summary(validate_config({}), source) if "alerts" in line]
    lines = platform_summary(validate_config({"observability": {"enabled": False}}), source)
    assert any(
        line.startswith("note: observability.enabled is false: no Prometheus workspace, so no alerts") for line in lines
    )


def test_a_relative_config_path_that_does_not_exist_names_the_directory_it_was_looked_for_in(tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = CliRunner().invoke(cli, ["cost", "--config", "my-config.yaml"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"config error: file 'my-config.yaml' does not exist (looked for in {elsewhere}, the current directory)"
    )


def test_an_account_with_a_leading_zero_is_shown_as_typed_not_as_yamls_octal_reading(tmp_path):
    # YAML 1.1 reads 012345670123 as the octal number 1402433619: the line shows the digits the user typed.
    [line] = problems(tmp_path, "env:\n  account: 012345670123\n")
    assert line.endswith(
        "env.account = 012345670123 is read as the octal number 1402433619 (YAML reads digits after a leading 0 that "
        'way); quote it: account: "012345670123"'
    )
    assert "1402433619" not in line.split("quote it:")[1]


def test_env_account_without_credentials_says_how_to_synthesize_offline():
    from skyrl_hyperpod.ops.synth_lookups import lookup_problem

    with_account = validate_config({"env": {"account": "111111111111", "region": "us-west-2"}})
    line = lookup_problem(with_account, {}, has_credentials=False)
    assert line == (
        'config error: env.account = "111111111111": with an account set, cdk synth asks AWS for its availability '
        "zones (a CDK context lookup) and no AWS credentials are configured: to synthesize offline leave "
        "env.account unset (the stacks then take the deploying credentials' account), or synthesize once with "
        "credentials (cdk.context.json keeps the answer)"
    )
    # Nothing to say with credentials, with the lookup cached, or without an account (offline synth).
    assert lookup_problem(with_account, {}, has_credentials=True) is None
    cached = {"availability-zones:account=111111111111:region=us-west-2": ["us-west-2a", "us-west-2b"]}
    assert lookup_problem(with_account, cached, has_credentials=False) is None
    assert lookup_problem(validate_config({}), {}, has_credentials=False) is None


def test_the_cdk_app_stops_at_that_line_before_the_cdk_starts(tmp_path):
    config = tmp_path / "account.yaml"
    config.write_text('env:\n  account: "111111111111"\n  region: us-west-2\n')
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AWS_", "CDK_"))}
    env |= {"SKYRL_HP_CONFIG": str(config), "AWS_CONFIG_FILE": str(tmp_path / "none"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_EC2_METADATA_DISABLED": "true"}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "app.py"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode != 0
    assert done.stderr.splitlines()[-1].startswith('config error: env.account = "111111111111": with an account set')
