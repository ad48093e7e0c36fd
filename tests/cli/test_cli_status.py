"""`skyrl-hp status`: live node counts per instance group against the configuration, from a stubbed SageMaker
(botocore's Stubber checks each request and each answer against the SageMaker service model)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from click.testing import CliRunner
from conftest import TEST_ACCOUNT as ACCOUNT
from conftest import TEST_REGION as REGION
from conftest import add_modeled_error
from fake_kube import FakeKube, pod

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.cli.common import AwsClients, CliState
from skyrl_hyperpod.config import validate_config
from skyrl_hyperpod.ops.kube import Cluster

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
    result = CliRunner().invoke(
        cli, ["status", "--region", REGION, "--no-jobs"], obj=AwsClients(overrides={"sagemaker": client})
    )
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
    assert lines[-2] == "every group runs its configured node count"


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
    assert result.stdout.splitlines()[-2] == "2 problem(s)"


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
    result = CliRunner().invoke(
        cli, ["status", "--region", REGION, "--no-jobs"], obj=AwsClients(overrides={"sagemaker": client})
    )
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
    result = CliRunner().invoke(
        cli, ["status", "--region", REGION, "--no-jobs"], obj=AwsClients(overrides={"sagemaker": client})
    )
    assert result.exit_code == 1
    assert result.stderr.strip() == "status error: SageMaker: AccessDeniedException: not allowed"


# --- RayJobs through the Kubernetes API: the official kubernetes client against tests/fake_kube.py ----------

KUBE_NAMESPACE = "skyrl"
SKYRL_LOG = [
    "Resuming from global_step: 16",
    "(TrainerActor pid=12) 2026-01-01 | INFO | Successfully saved checkpoint for global_step_20 to: /shared/runs/x/ckpt/global_step_20",
    "(TrainerActor pid=12) 2026-01-01 | INFO | Successfully saved checkpoint for global_step_24 to: /shared/runs/x/ckpt/global_step_24",
    "step 25 ...",
]


def rayjob(name: str, status: dict, backoff: int | None = 2) -> dict:
    spec = {"entrypoint": "x"} | ({"backoffLimit": backoff} if backoff is not None else {})
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": KUBE_NAMESPACE},
        "spec": spec,
        "status": status,
    }


def submitter(kube: FakeKube, job: str, suffix: str, created: str, log: str) -> None:
    """A pod of the RayJob's submitter Job (the Job controller labels it with the Job's name) and its log."""
    name = f"{job}-{suffix}"
    kube.put(f"/api/v1/namespaces/{KUBE_NAMESPACE}/pods/{name}", pod(name, KUBE_NAMESPACE, {"job-name": job}))
    kube.objects[f"/api/v1/namespaces/{KUBE_NAMESPACE}/pods/{name}"]["metadata"]["creationTimestamp"] = created
    kube.logs[f"{KUBE_NAMESPACE}/{name}"] = log


@pytest.fixture
def kube(default_config):
    job = default_config.derived.runs[0].job_name
    fake = FakeKube().start()
    fake.put(
        f"/apis/ray.io/v1/namespaces/{KUBE_NAMESPACE}/rayjobs/{job}",
        rayjob(job, {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "failed": 1}),
    )
    # The newest submitter pod is the current attempt; the older one's log names a later step.
    submitter(fake, job, "old", "2026-01-01T00:00:00Z", "Successfully saved checkpoint for global_step_99\n")
    submitter(fake, job, "new", "2026-01-01T05:00:00Z", "\n".join(SKYRL_LOG) + "\n")
    yield fake
    fake.stop()


def test_status_reads_retries_and_the_newest_checkpoint_of_each_rayjob(kube, default_config):
    from skyrl_hyperpod.ops import status as status_module

    (job,) = status_module.fetch_job_statuses(default_config, Cluster(kube.api_client()))
    assert (job.deployment_status, job.failed_attempts, job.backoff_limit) == ("Running", 1, 2)
    assert job.retries == "1 of 2"
    # The newest submitter pod is the current attempt; its log names the newest complete checkpoint.
    assert job.checkpoint_step == 24
    assert job.problems() == []
    assert kube.requests[-1].path.endswith(f"/pods/{job.name}-new/log")


def test_a_failed_rayjob_is_a_finding_and_an_absent_one_is_reported(default_config):
    from skyrl_hyperpod.ops import status as status_module

    config = validate_config({"training": {"experiments": [{"name": "a"}, {"name": "b"}]}})
    first, second = (run.job_name for run in config.derived.runs)
    server = FakeKube().start()
    server.put(
        f"/apis/ray.io/v1/namespaces/{KUBE_NAMESPACE}/rayjobs/{first}",
        rayjob(first, {"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "failed": 3}),
    )
    try:
        jobs = status_module.fetch_job_statuses(config, Cluster(server.api_client()))
    finally:
        server.stop()
    assert [(j.name, j.deployment_status) for j in jobs] == [(first, "Failed"), (second, "not applied")]
    assert jobs[0].retries == "2 of 2"  # three failed attempts: the first and two retries
    assert jobs[0].problems() == [f"RayJob {first}: Failed after 3 failed attempt(s)"]
    lines = status_module.render_jobs(jobs)
    assert lines[-1] == f"FAIL RayJob {first}: Failed after 3 failed attempt(s)"
    assert "no submitter pod" in lines[1]


def test_status_command_prints_the_rayjobs(stub_aws, default_config, kube):
    head, workers = default_config.hyperpod.head_group, default_config.hyperpod.worker_group
    nodes = [node(head, 0)] + [node(workers, 100 + i) for i in range(workers.instance_count)]
    result = run_status_with(
        stub_aws, default_config, nodes, [live_group(head), live_group(workers)], [], kube=kube.api_client()
    )
    assert result.exit_code == 0, result.output
    job_line = next(
        line for line in result.stdout.splitlines() if line.startswith(default_config.derived.runs[0].job_name)
    )
    assert job_line.split() == [
        default_config.derived.runs[0].job_name,
        "Running",
        "RUNNING",
        "1",
        "of",
        "2",
        "global_step_24",
    ]


def test_status_without_kubernetes_access_says_so_in_one_line(stub_aws, default_config):
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = "http://127.0.0.1:9"  # discard port: nothing listens
    configuration.retries = 0
    head, workers = default_config.hyperpod.head_group, default_config.hyperpod.worker_group
    nodes = [node(head, 0)] + [node(workers, 100 + i) for i in range(workers.instance_count)]
    result = run_status_with(
        stub_aws, default_config, nodes, [live_group(head), live_group(workers)], [],
        kube=client.ApiClient(configuration),
    )  # fmt: skip
    assert result.exit_code == 1
    # The node report is printed first: it stands whatever the Kubernetes part does.
    assert result.stdout.splitlines()[-1] == "every group runs its configured node count"
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("status error: Kubernetes: cannot reach the Kubernetes API at http://127.0.0.1:9")
    assert line.endswith("(pass --no-jobs to skip the RayJobs)")
    assert "Traceback" not in result.output


def test_status_reaches_the_rayjobs_through_the_eks_cluster_of_the_configuration(stub_aws, default_config):
    """No kubeconfig: the EKS cluster the configuration names, as every cluster command finds it."""
    eks, stubber = stub_aws("eks", REGION)
    add_modeled_error(eks, stubber, "describe_cluster", "ResourceNotFoundException", 404,
                      {"name": default_config.names.eks_cluster})  # fmt: skip
    stubber.activate()
    head, workers = default_config.hyperpod.head_group, default_config.hyperpod.worker_group
    nodes = [node(head, 0)] + [node(workers, 100 + i) for i in range(workers.instance_count)]
    result = run_status_with(stub_aws, default_config, nodes, [live_group(head), live_group(workers)], [], eks=eks)
    assert result.exit_code == 1
    stubber.assert_no_pending_responses()
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"cluster error: EKS cluster {default_config.names.eks_cluster} in {REGION}: ")
    assert "ResourceNotFoundException" in line


def run_status_with(stub_aws, config, nodes, groups, extra_args, kube=None, eks=None):
    """`status` against stubbed SageMaker answers and, with `kube`, that Kubernetes ApiClient (else the EKS
    cluster `eks` describes)."""
    client, stubber = stub_aws("sagemaker", REGION)
    name = config.names.hyperpod_cluster
    described = {"ClusterArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/abcdefghijkl", "ClusterName": name,
                 "ClusterStatus": "InService", "InstanceGroups": groups,
                 "VpcConfig": {"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1"]}}  # fmt: skip
    stubber.add_response("describe_cluster", described, {"ClusterName": name})
    stubber.add_response("list_cluster_nodes", {"ClusterNodeSummaries": nodes}, {"ClusterName": name})
    stubber.activate()
    overrides = {"sagemaker": client} | ({"eks": eks} if eks else {})
    state = CliState(aws=AwsClients(overrides=overrides), kube=kube)
    return CliRunner().invoke(cli, ["status", "--region", REGION, *extra_args], obj=state)


def test_an_autoscaled_group_at_zero_is_no_problem():
    from skyrl_hyperpod.ops.status import GroupStatus

    idle = GroupStatus(name="gpu-workers", instance_type="ml.g7e.12xlarge", configured=3, target=0, autoscaled=True)
    assert idle.problems() == [] and idle.configured_text == "0-3"
    fixed = GroupStatus(name="gpu-workers", instance_type="ml.g7e.12xlarge", configured=3, target=0)
    assert fixed.problems()[0] == (
        "group gpu-workers: live target 0 differs from the config's 3 (a deploy is pending, or the cluster was "
        "changed outside CloudFormation)"
    )
    failing = GroupStatus(
        name="gpu-workers", instance_type="ml.g7e.12xlarge", configured=3, target=1, autoscaled=True,
        failure_messages=(CAPACITY,),
    )  # fmt: skip
    assert failing.problems() == [f"group gpu-workers: node failure: {CAPACITY}"]
