"""The stack-outputs file the charts read (written by `cdk deploy --outputs-file`)."""

from __future__ import annotations

import json

import pytest

from skyrl_hyperpod.ops.fetch_outputs import describe
from skyrl_hyperpod.plumbing.errors import InputError
from skyrl_hyperpod.values.stack_outputs import (
    FIELD_BY_OUTPUT_KEY,
    OperatorOutputKey,
    OutputKey,
    StackOutputs,
    load_stack_outputs,
)


def deployed_file(tmp_path, config, drop: str | None = None):
    values = {key: f"value-of-{key}" for key in FIELD_BY_OUTPUT_KEY if key != drop}
    # Outputs are spread over several stacks; other apps' stacks in the same file are ignored.
    half = len(values) // 2
    keys = sorted(values)
    content = {
        config.names.stack("storage"): {k: values[k] for k in keys[:half]},
        config.names.stack("eks"): {k: values[k] for k in keys[half:]},
        "someone-elses-stack": {OutputKey.REGION.value: "eu-north-1"},
    }
    file = tmp_path / "outputs.json"
    file.write_text(json.dumps(content))
    return file


def test_reads_values_from_this_projects_stacks_only(tmp_path, default_config):
    outputs = load_stack_outputs(deployed_file(tmp_path, default_config), default_config)
    assert outputs.region == f"value-of-{OutputKey.REGION.value}"
    assert outputs.fsx_file_system_id == f"value-of-{OutputKey.FSX_FILE_SYSTEM_ID.value}"
    assert not outputs.is_placeholder


def test_observability_outputs_are_read_when_that_stack_emits_them(tmp_path, default_config):
    file = deployed_file(tmp_path, default_config)
    without = load_stack_outputs(file, default_config)
    assert (without.prometheus_workspace_id, without.grafana_workspace_url) == (None, None)
    assert not any(line.startswith(("prometheus_", "grafana_")) for line in describe(without))

    content = json.loads(file.read_text())
    content[default_config.names.stack("observability")] = {
        OperatorOutputKey.PROMETHEUS_WORKSPACE_ID.value: "ws-1",
        OperatorOutputKey.PROMETHEUS_QUERY_ENDPOINT.value: "https://aps/workspaces/ws-1/api/v1/query",
        OperatorOutputKey.GRAFANA_WORKSPACE_URL.value: "https://g-1.grafana",
    }
    # Another app's Grafana is not this project's.
    content["someone-elses-stack"][OperatorOutputKey.GRAFANA_WORKSPACE_URL.value] = "https://g-other.grafana"
    file.write_text(json.dumps(content))
    outputs = load_stack_outputs(file, default_config)
    assert outputs.prometheus_workspace_id == "ws-1"
    assert outputs.prometheus_query_endpoint == "https://aps/workspaces/ws-1/api/v1/query"
    assert outputs.grafana_workspace_url == "https://g-1.grafana"
    assert "grafana_workspace_url: https://g-1.grafana" in describe(outputs)


def test_a_missing_output_is_named(tmp_path, default_config):
    file = deployed_file(tmp_path, default_config, drop=OutputKey.FSX_MOUNT_NAME.value)
    with pytest.raises(InputError) as caught:
        load_stack_outputs(file, default_config)
    assert caught.value.problems == [
        f"outputs error: {file} lacks output FsxMountName of a {default_config.name_prefix}-* stack"
    ]


@pytest.mark.parametrize(("content", "message"), [("{not json", "is not valid JSON"), ("[1, 2]", "must map stack")])
def test_malformed_files_are_one_line_errors(tmp_path, default_config, content, message):
    file = tmp_path / "outputs.json"
    file.write_text(content)
    with pytest.raises(InputError, match=message):
        load_stack_outputs(file, default_config)


def test_missing_file_tells_how_to_create_it(tmp_path, default_config):
    with pytest.raises(InputError, match="--outputs-file"):
        load_stack_outputs(tmp_path / "outputs.json", default_config)


def test_placeholders_are_marked_and_obviously_fake(default_config):
    outputs = StackOutputs.placeholder(default_config)
    assert outputs.is_placeholder
    assert "placeholder" in outputs.fsx_file_system_id
    assert "111111111111" in outputs.ecr_repository_uri
    assert outputs.eks_cluster_name == default_config.names.eks_cluster
