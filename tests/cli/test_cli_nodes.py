"""`skyrl-hp nodes`: list with health, and reboot / replace after a typed confirmation, against a stubbed
SageMaker (botocore's Stubber checks each request and each answer against the SageMaker service model)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from click.testing import CliRunner
from conftest import TEST_REGION as REGION
from conftest import add_modeled_error

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.cli.common import AwsClients

pytestmark = pytest.mark.usefixtures("fake_aws_env")
LAUNCHED = datetime(2026, 1, 1, tzinfo=UTC)
WORKER = "i-0000000000000000a"


def summary(group, node_id: str, status: str = "Running", message: str | None = None) -> dict:
    state = {"Status": status} | ({"Message": message} if message else {})
    return {"InstanceGroupName": group.name, "InstanceId": node_id, "InstanceType": group.instance_type,
            "LaunchTime": LAUNCHED, "InstanceStatus": state, "PrivateDnsHostname": f"ip-{node_id[-4:]}.internal"}  # fmt: skip


def invoke(client, *args: str, input: str | None = None):
    return CliRunner().invoke(
        cli, ["nodes", "--region", REGION, *args], obj=AwsClients(overrides={"sagemaker": client}), input=input
    )


def test_nodes_lists_every_node_with_its_health_across_pages(stub_aws, default_config):
    client, stubber = stub_aws("sagemaker", REGION)
    name = default_config.names.hyperpod_cluster
    head, workers = default_config.hyperpod.head_group, default_config.hyperpod.worker_group
    first = [summary(head, "i-00000000000000001"), summary(workers, WORKER)]
    second = [summary(workers, "i-0000000000000000b", "Failure", "Deep health check failed:\n GPU 1 XID 79")]
    stubber.add_response("list_cluster_nodes", {"ClusterNodeSummaries": first, "NextToken": "t"}, {"ClusterName": name})
    stubber.add_response(
        "list_cluster_nodes", {"ClusterNodeSummaries": second}, {"ClusterName": name, "NextToken": "t"}
    )
    stubber.activate()
    result = invoke(client)
    stubber.assert_no_pending_responses()
    assert result.exit_code == 1, result.output  # a node is not Running
    lines = result.stdout.splitlines()
    assert lines[0] == f"cluster {name}: 3 node(s)"
    failing = next(line for line in lines if line.startswith("i-0000000000000000b"))
    assert failing.split()[1:4] == [workers.name, workers.instance_type, "Failure"]
    assert failing.endswith("Deep health check failed: GPU 1 XID 79")
    assert lines[-1] == "1 node(s) not Running"


def expect_describe(stubber, name: str, group, node_id: str = WORKER, status: str = "Running") -> None:
    details = {"InstanceGroupName": group.name, "InstanceId": node_id, "InstanceType": group.instance_type,
               "LaunchTime": LAUNCHED, "InstanceStatus": {"Status": status}}  # fmt: skip
    stubber.add_response("describe_cluster_node", {"NodeDetails": details}, {"ClusterName": name, "NodeId": node_id})


@pytest.mark.parametrize(
    ("action", "operation"), [("reboot", "batch_reboot_cluster_nodes"), ("replace", "batch_replace_cluster_nodes")]
)
def test_an_action_runs_after_the_node_id_is_typed(stub_aws, default_config, action, operation):
    client, stubber = stub_aws("sagemaker", REGION)
    name = default_config.names.hyperpod_cluster
    expect_describe(stubber, name, default_config.hyperpod.worker_group)
    stubber.add_response(operation, {"Successful": [WORKER]}, {"ClusterName": name, "NodeIds": [WORKER]})
    stubber.activate()
    result = invoke(client, action, WORKER, input=f"{WORKER}\n")
    stubber.assert_no_pending_responses()
    assert result.exit_code == 0, result.output
    assert f"{action} of {WORKER} requested" in result.stdout


@pytest.mark.parametrize("typed", ["", "yes", "i-0000000000000000b"])
def test_a_wrong_confirmation_does_nothing(stub_aws, default_config, typed):
    client, stubber = stub_aws("sagemaker", REGION)
    expect_describe(stubber, default_config.names.hyperpod_cluster, default_config.hyperpod.worker_group)
    stubber.activate()  # no batch call is stubbed: making one would fail the test
    result = invoke(client, "replace", WORKER, input=f"{typed}\n")
    stubber.assert_no_pending_responses()
    assert result.exit_code == 1
    assert result.stderr.strip().endswith(f"does not match {WORKER!r}: nothing done")


def test_an_unknown_node_is_one_line(stub_aws, default_config):
    client, stubber = stub_aws("sagemaker", REGION)
    name = default_config.names.hyperpod_cluster
    add_modeled_error(
        client, stubber, "describe_cluster_node", "ResourceNotFound", 404, {"ClusterName": name, "NodeId": "i-nope"}
    )
    stubber.activate()
    result = invoke(client, "reboot", "i-nope")
    assert result.exit_code == 2
    assert (
        result.stderr.strip()
        == f"nodes reboot: NODE = 'i-nope': no such node in cluster {name} (skyrl-hp nodes lists them)"
    )


def test_a_refused_action_reports_sagemakers_reason(stub_aws, default_config):
    client, stubber = stub_aws("sagemaker", REGION)
    name = default_config.names.hyperpod_cluster
    expect_describe(stubber, name, default_config.hyperpod.head_group)
    failed = {"NodeId": WORKER, "ErrorCode": "InvalidNodeStatus", "Message": "node is being replaced"}
    stubber.add_response("batch_reboot_cluster_nodes", {"Failed": [failed]}, {"ClusterName": name, "NodeIds": [WORKER]})
    stubber.activate()
    result = invoke(client, "reboot", WORKER, input=f"{WORKER}\n")
    assert result.exit_code == 1
    assert result.stderr.strip() == f"nodes reboot: {WORKER}: InvalidNodeStatus: node is being replaced"
