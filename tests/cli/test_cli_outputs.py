"""`skyrl-hp outputs`: the outputs file from CloudFormation (a Stubber-checked describe_stacks answer), round-tripped
through load_stack_outputs."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import TEST_REGION as REGION
from conftest import stub_cloudformation

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.cli.common import AwsClients
from skyrl_hyperpod.values.stack_outputs import FIELD_BY_OUTPUT_KEY, OutputKey, load_stack_outputs

pytestmark = pytest.mark.usefixtures("fake_aws_env")


def deploy(config, drop: str | None = None) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """The project's outputs spread over two stacks, plus another app's stack that must be ignored:
    (the project's stacks, everything CloudFormation lists)."""
    values = {key: f"value-of-{key}" for key in sorted(FIELD_BY_OUTPUT_KEY) if key != drop}
    keys = sorted(values)
    expected = {
        config.names.stack("storage"): {k: values[k] for k in keys[: len(keys) // 2]},
        config.names.stack("eks"): {k: values[k] for k in keys[len(keys) // 2 :]},
    }
    return expected, {**expected, "someone-elses-stack": {OutputKey.REGION.value: "eu-north-1"}}


def run(*args, stub_aws=None, stacks: dict[str, dict[str, str]] | None = None):
    """`skyrl-hp outputs ...`; with `stacks`, CloudFormation (stubbed) lists them."""
    obj = (
        AwsClients(overrides={"cloudformation": stub_cloudformation(stub_aws, stacks, REGION)})
        if stacks is not None
        else None
    )
    return CliRunner().invoke(cli, ["outputs", "--region", REGION, *args], obj=obj)


def test_writes_the_cdk_outputs_file_format_and_round_trips(tmp_path, default_config, stub_aws):
    expected, listed = deploy(default_config)
    file = tmp_path / "outputs.json"
    result = run("--file", str(file), stub_aws=stub_aws, stacks=listed)
    assert result.exit_code == 0, result.output
    assert json.loads(file.read_text()) == expected
    loaded = load_stack_outputs(file, default_config)
    for key, field in FIELD_BY_OUTPUT_KEY.items():
        assert getattr(loaded, field) == f"value-of-{key}"
    assert not loaded.is_placeholder
    assert f"wrote {file}" in result.stdout


def test_refuses_when_a_required_output_is_missing(tmp_path, default_config, stub_aws):
    _, listed = deploy(default_config, drop=OutputKey.FSX_MOUNT_NAME.value)
    file = tmp_path / "outputs.json"
    result = run("--file", str(file), stub_aws=stub_aws, stacks=listed)
    assert result.exit_code == 1
    assert not file.exists()
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and OutputKey.FSX_MOUNT_NAME.value in lines[0] and "refusing to write" in lines[0]


def test_no_project_stacks_is_one_line(tmp_path, default_config, stub_aws):
    someone_elses = {"someone-elses-stack": {OutputKey.REGION.value: "eu-north-1"}}
    result = run("--file", str(tmp_path / "outputs.json"), stub_aws=stub_aws, stacks=someone_elses)
    assert result.exit_code == 1
    assert (
        f"none of this deployment's CloudFormation stacks ({default_config.name_prefix}-<component>: " in result.stderr
    )


def test_check_of_a_missing_file_is_one_line(tmp_path):
    result = run("--check", "--file", str(tmp_path / "outputs.json"))
    assert result.exit_code == 2
    assert "--outputs-file" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_check_prints_the_typed_values(tmp_path, default_config):
    file = tmp_path / "outputs.json"
    file.write_text(json.dumps({default_config.names.stack("storage"): {k: f"v-{k}" for k in FIELD_BY_OUTPUT_KEY}}))
    result = run("--check", "--file", str(file))
    assert result.exit_code == 0, result.output
    assert f"fsx_file_system_id: v-{OutputKey.FSX_FILE_SYSTEM_ID.value}" in result.stdout


def test_missing_credentials_is_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    result = run("--file", str(tmp_path / "outputs.json"))
    assert result.exit_code == 1
    assert result.stderr.startswith("outputs error: CloudFormation:")
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_deployed_configurations_fingerprint_reaches_outputs_json_and_survives_skyrl_hp_outputs(
    tmp_path, default_config, stub_aws
):
    from types import SimpleNamespace

    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    import app as cdk_app
    from skyrl_hyperpod.values.synthesized_manifests import config_fingerprint

    fingerprint = config_fingerprint(default_config)
    # The CDK app puts it on the network stack (a bare stack stands in for it here).
    network = cdk.Stack(cdk.App(), default_config.names.stack("network"))
    cdk_app.add_config_fingerprint_output(SimpleNamespace(network=network), default_config)
    Template.from_stack(network).has_output("ConfigFingerprint", {"Value": fingerprint})
    # `skyrl-hp outputs` writes outputs.json again from CloudFormation: the fingerprint stays, and the charts'
    # reader (and --check) return it.
    _, listed = deploy(default_config)
    listed[default_config.names.stack("network")] = {"ConfigFingerprint": fingerprint}
    file = tmp_path / "outputs.json"
    result = run("--file", str(file), stub_aws=stub_aws, stacks=listed)
    assert result.exit_code == 0, result.output
    assert load_stack_outputs(file, default_config).config_fingerprint == fingerprint
    check = run("--check", "--file", str(file))
    assert f"config_fingerprint: {fingerprint}" in check.stdout.splitlines()
