"""`skyrl-hp status`: live node counts per instance group against the configuration, from a stubbed SageMaker
(botocore's Stubber checks each request and each answer against the SageMaker service model)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from click.testing import CliRunner
from conftest import TEST_ACCOUNT as ACCOUNT
from conftest import TEST_REGION as REGION
from conftest import add_modeled_error

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.cli.common import AwsClients

pytestmark = pytest.mark.usefixtures("fake_aws_env")
LAUNCHED = datetime(2026, 1, 1, tzinfo=UTC)
CAPACITY = "We currently do not have sufficient capacity to launch new ml.g7e.12xlarge instances."


def node(group, index: int, status: str = "Running", message: str | None = None) -> dict:
    state = {"Status": status} | ({"Message": message} if message else {})
    return {"InstanceGroupName": group.name, "InstanceId": f"i-{index:017x}", "InstanceType": group.instance_type,
            "LaunchTime": LAUNCHED, "InstanceStatus": state}  # fmt: skip


def live_group(group, target: int | None = None) -> dict:
    count = group.instance_count if target is None else target
    return {"InstanceGroupName": group.name, "InstanceType": group.instance_type, "TargetCount": count,
            "CurrentCount": count, "Status": "InService"}  # fmt: skip


def run_status(stub_aws, config, *, groups, nodes, cluster_status="InService", pages=1, failure=None):
    client, stubber = stub_aws("sagemaker", REGION)
    name = config.names.hyperpod_cluster
    described = {
        "ClusterArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/abcdefghijkl", "ClusterName": name,
        "ClusterStatus": cluster_status, "InstanceGroups": groups,
        "VpcConfig": {"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1"]},
    } | ({"FailureMessage": failure} if failure else {})  # fmt: skip
    stubber.add_response("describe_cluster", described, {"ClusterName": name})
    size = -(-len(nodes) // pages) if nodes else 1
    chunks = [nodes[i : i + size] for i in range(0, len(nodes), size)] or [[]]
    for number, chunk in enumerate(chunks):
        token = {"NextToken": f"page-{number + 1}"} if number < len(chunks) - 1 else {}
        request = {"ClusterName": name} | ({"NextToken": f"page-{number}"} if number else {})
        stubber.add_response("list_cluster_nodes", {"ClusterNodeSummaries": chunk} | token, request)
    stubber.activate()
    result = CliRunner().invoke(cli, ["status", "--region", REGION], obj=AwsClients(overrides={"sagemaker": client}))
    stubber.assert_no_pending_responses()
    return result


def fail_lines(result) -> list[str]:
    return [line for line in result.stdout.splitlines() if line.startswith("FAIL ")]


def test_every_group_at_its_configured_count_passes(stub_aws, default_config):
    head, workers = default_config.hyperpod.head_group, default_config.hyperpod.worker_group
    nodes = [node(head, i) for i in range(head.instance_count)]
    nodes += [node(workers, 100 + i) for i in range(workers.instance_count)]
    # Two pages: every node is counted, not only the first page's.
    result = run_status(stub_aws, default_config, groups=[live_group(head), live_group(workers)], nodes=nodes, pages=2)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"cluster {default_config.names.hyperpod_cluster}: InService"
    worker_row = next(line.split() for line in lines if line.startswith(workers.name))
    assert worker_row == [workers.name, workers.instance_type, str(workers.instance_count), str(workers.instance_count),
                          str(workers.instance_count), "-"]  # fmt: skip
    assert fail_lines(result) == []
    assert lines[-1] == "every group runs its configured node count"


def test_a_group_short_of_nodes_fails_and_says_why(stub_aws, default_config):
    head, workers = default_config.hyperpod.head_group, default_config.hyperpod.worker_group
    nodes = [node(head, 0)] + [node(workers, 100 + i) for i in range(workers.instance_count - 1)]
    nodes += [node(workers, 200, "Failure", CAPACITY), node(workers, 201, "Failure", CAPACITY)]
    result = run_status(stub_aws, default_config, groups=[live_group(head), live_group(workers)], nodes=nodes)
    assert result.exit_code == 1
    running = workers.instance_count - 1
    assert fail_lines(result) == [
        f"FAIL group {workers.name}: {running} of {workers.instance_count} nodes running (2 Failure)",
        f"FAIL group {workers.name}: node failure: {CAPACITY}",  # repeated messages are shown once
    ]
    assert result.stdout.splitlines()[-1] == "2 problem(s)"


def test_zero_nodes_behind_a_green_deploy_fails(stub_aws, default_config):
    head, workers = default_config.hyperpod.head_group, default_config.hyperpod.worker_group
    pending = [node(head, 0, "Pending"), node(workers, 1, "Failure", "lifecycle script on_create.sh exited 1")]
    result = run_status(stub_aws, default_config, groups=[live_group(head), live_group(workers)], nodes=pending)
    assert result.exit_code == 1
    assert f"FAIL group {head.name}: 0 of {head.instance_count} nodes running (1 Pending)" in fail_lines(result)
    assert f"FAIL group {workers.name}: node failure: lifecycle script on_create.sh exited 1" in fail_lines(result)


def test_drift_missing_and_unknown_groups_and_cluster_state_are_reported(stub_aws, default_config):
    head, workers = default_config.hyperpod.head_group, default_config.hyperpod.worker_group
    stray = {"InstanceGroupName": "manual", "InstanceType": "ml.m5.xlarge", "TargetCount": 1, "CurrentCount": 1}
    groups = [live_group(head, target=head.instance_count + 1), stray]
    nodes = [node(head, i) for i in range(head.instance_count)]
    result = run_status(stub_aws, default_config, groups=groups, nodes=nodes, cluster_status="Updating")
    assert result.exit_code == 1
    assert fail_lines(result) == [
        f"FAIL cluster {default_config.names.hyperpod_cluster} is Updating, not InService",
        f"FAIL group {head.name}: live target {head.instance_count + 1} differs from the config's "
        f"{head.instance_count} (a deploy is pending, or the cluster was changed outside CloudFormation)",
        f"FAIL group {workers.name}: missing from the live cluster (config wants {workers.instance_count} nodes)",
        "FAIL group manual: in the live cluster but not in the config",
    ]


def test_a_cluster_that_does_not_exist_is_one_line(stub_aws, default_config):
    client, stubber = stub_aws("sagemaker", REGION)
    add_modeled_error(client, stubber, "describe_cluster", "ResourceNotFound", 400,
                      {"ClusterName": default_config.names.hyperpod_cluster})  # fmt: skip
    stubber.activate()
    result = CliRunner().invoke(cli, ["status", "--region", REGION], obj=AwsClients(overrides={"sagemaker": client}))
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        f"status: HyperPod cluster {default_config.names.hyperpod_cluster} does not exist in {REGION} "
        "(not deployed yet, or deleted)"
    ]
    assert "Traceback" not in result.output


def test_an_aws_error_is_one_line(stub_aws, default_config):
    client, stubber = stub_aws("sagemaker", REGION)
    stubber.add_client_error("describe_cluster", "AccessDeniedException", "not allowed", 400,
                             expected_params={"ClusterName": default_config.names.hyperpod_cluster})  # fmt: skip
    stubber.activate()
    result = CliRunner().invoke(cli, ["status", "--region", REGION], obj=AwsClients(overrides={"sagemaker": client}))
    assert result.exit_code == 1
    assert result.stderr.strip() == "status error: SageMaker: AccessDeniedException: not allowed"
