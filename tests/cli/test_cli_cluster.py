"""`skyrl-hp kubeconfig` and `skyrl-hp train ...`: AWS through botocore's Stubber, the cluster through the
official kubernetes client against a fake API server on 127.0.0.1 (tests/fake_kube.py)."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from conftest import REPO_ROOT, TEST_ACCOUNT, TEST_REGION
from deployed_cluster import NAMESPACE, RAYCLUSTER, SHARED_CLUSTER, write_dist
from fake_kube import FakeKube, pod

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.cli.common import AwsClients, CliState
from skyrl_hyperpod.config import load_config, validate_config
from skyrl_hyperpod.ops.cluster_workloads import Clock
from skyrl_hyperpod.ops.kube import TOKEN_PREFIX, Cluster, ClusterEndpoint, KubeError, api_client_for, eks_token
from skyrl_hyperpod.ops.metrics import PASS_AT_1, REWARD
from skyrl_hyperpod.values.stack_outputs import StackOutputs

pytestmark = pytest.mark.usefixtures("fake_aws_env", "isolated")

LOG_FIXTURE = REPO_ROOT / "tests" / "fixtures" / "skyrl_visgym_console.log"
RAYJOB = "skyrl-visgym-maze-grpo"


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    monkeypatch.delenv("SKYRL_HP_CONFIG", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    # The configuration every command of this module reads (./skyrl-hp.yaml).
    (tmp_path / "skyrl-hp.yaml").write_text(yaml.safe_dump(SHARED_CLUSTER))


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    return write_dist(tmp_path_factory.mktemp("deployed") / "dist", validate_config(SHARED_CLUSTER))


def run(kube: FakeKube | None, *args: str, aws: AwsClients | None = None, input: str | None = None,
        poll_seconds: float = 0, clock: FakeClock | None = None):  # fmt: skip
    state = CliState(aws=aws, kube=kube.api_client() if kube else None, poll_seconds=poll_seconds)
    state.clock = clock.as_clock() if clock else None
    return CliRunner().invoke(cli, list(args), obj=state, input=input)


class FakeClock:
    """Time that passes only when a wait sleeps: the waits' heartbeats and timeouts without real time."""

    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        assert seconds > 0, "a wait with a fake clock must sleep, or it never ends"
        self.now += seconds

    def as_clock(self) -> Clock:
        return Clock(now=lambda: self.now, sleep=self.sleep)


def ray_pods(kube: FakeKube, workers: int, *, ready: bool = True) -> None:
    base = f"/api/v1/namespaces/{NAMESPACE}/pods"
    labels = {"ray.io/cluster": RAYCLUSTER}
    kube.put(f"{base}/{RAYCLUSTER}-head", pod(f"{RAYCLUSTER}-head", NAMESPACE, {**labels, "ray.io/node-type": "head"}))
    for index in range(workers):
        name = f"{RAYCLUSTER}-gpu-worker-{index}"
        kube.put(f"{base}/{name}", pod(name, NAMESPACE, {**labels, "ray.io/node-type": "worker"}, ready=ready))


# --- train start ---------------------------------------------------------------------------------------------


def test_train_start_applies_platform_then_raycluster_then_rayjobs_server_side(kube, dist):
    result = run(kube, "train", "start", "--dist", str(dist))
    assert result.exit_code == 0, result.output
    applied = kube.applied()
    namespace_at = applied.index(f"/api/v1/namespaces/{NAMESPACE}")
    raycluster_at = applied.index(f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayclusters/{RAYCLUSTER}")
    rayjob_at = applied.index(f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayjobs/{RAYJOB}")
    assert namespace_at == 0 < raycluster_at < rayjob_at == len(applied) - 1
    # Server-side apply of exactly what was synthesized.
    patch = next(r for r in kube.requests if r.method == "PATCH" and r.path.endswith(f"/rayjobs/{RAYJOB}"))
    assert patch.headers["content-type"] == "application/apply-patch+yaml"
    assert patch.query == {"fieldManager": ["skyrl-hp"], "force": ["true"]}
    synthesized = next(yaml.safe_load_all((dist / "03-rayjobs.k8s.yaml").read_text()))
    assert patch.body == synthesized
    assert patch.headers["authorization"] == "Bearer test-token"
    assert "submitted 1 RayJob(s)" in result.stdout


def test_train_start_wait_submits_the_jobs_only_once_head_and_workers_are_ready(kube, dist):
    def operator(path: str, obj: dict) -> None:
        if path.endswith(f"/rayclusters/{RAYCLUSTER}"):
            ray_pods(kube, 3)  # KubeRay creates the head and one worker per GPU node
        if path.endswith(f"/rayjobs/{RAYJOB}"):  # and submits the job to the cluster it selects
            obj["status"] = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "rayClusterName": RAYCLUSTER}

    kube.on_apply = operator
    result = run(kube, "train", "start", "--dist", str(dist), "--wait")
    assert result.exit_code == 0, result.output
    paths = [r.path for r in kube.requests]
    pods_listed = paths.index(f"/api/v1/namespaces/{NAMESPACE}/pods")
    assert paths.index(f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayjobs/{RAYJOB}") > pods_listed
    assert f"RayCluster {RAYCLUSTER}: head Ready, 3/3 workers Ready" in result.stdout


def test_train_start_wait_gives_up_with_the_last_state(kube, dist):
    kube.on_apply = lambda path, obj: ray_pods(kube, 3, ready=False) if path.endswith(RAYCLUSTER) else None
    result = run(kube, "train", "start", "--dist", str(dist), "--wait", "--timeout", "1")
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()[-1:]
    assert line.startswith(f"timeout: RayCluster {RAYCLUSTER} not Ready after 1 s; last state: ")
    assert "0/3 workers Ready" in line
    assert not any(path.endswith(f"/rayjobs/{RAYJOB}") for path in kube.applied())  # nothing submitted


def test_train_start_refuses_placeholder_manifests(kube, tmp_path):
    config = load_config(None)
    placeholder = write_dist(tmp_path / "dist", config, StackOutputs.placeholder(config))
    result = run(kube, "train", "start", "--dist", str(placeholder))
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert "still carries placeholder stack outputs" in line and "skyrl-hp outputs" in line
    assert kube.requests == []


def test_train_start_without_manifests_says_to_synthesize(kube, tmp_path):
    result = run(kube, "train", "start", "--dist", str(tmp_path / "nowhere"))
    assert result.exit_code == 1
    assert "make synth-k8s" in result.stderr


def test_train_start_unknown_experiment_is_bad_input(kube, dist):
    result = run(kube, "train", "start", "--dist", str(dist), "--experiment", "nope")
    assert result.exit_code == 2
    assert result.stderr.strip() == "--experiment 'nope': not an experiment of this configuration (maze-grpo)"


def test_an_unreachable_cluster_is_one_line(dist):
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = "http://127.0.0.1:9"  # discard port: nothing listens
    configuration.retries = 0
    state = CliState(kube=client.ApiClient(configuration), poll_seconds=0)
    result = CliRunner().invoke(cli, ["train", "status"], obj=state)
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("cluster error: cannot reach the Kubernetes API at http://127.0.0.1:9")


# --- train status / logs ---------------------------------------------------------------------------------------


def test_train_status_reports_cluster_and_job(kube):
    kube.put(f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayclusters/{RAYCLUSTER}", {"status": {"state": "ready"}})
    ray_pods(kube, 3)
    kube.put(
        f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayjobs/{RAYJOB}",
        {"status": {"jobStatus": "RUNNING", "jobDeploymentStatus": "Running", "startTime": "2026-11-20T10:00:00Z"}},
    )
    result = run(kube, "train", "status")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"RayCluster {RAYCLUSTER}: ready, head Ready, 3/3 workers Ready",
        f"RayJob {RAYJOB} (maze-grpo): RUNNING, deployment Running, started 2026-11-20T10:00:00Z",
    ]
    data = json.loads(run(kube, "train", "status", "--json").stdout)
    assert data["jobs"][0]["job_status"] == "RUNNING" and data["raycluster"]["workers_ready"] == 3


def test_a_failed_job_makes_status_exit_1(kube):
    kube.put(
        f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayjobs/{RAYJOB}",
        {"status": {"jobStatus": "FAILED", "jobDeploymentStatus": "Failed", "message": "driver exited with 1"}},
    )
    result = run(kube, "train", "status")
    assert result.exit_code == 1
    assert f"RayJob {RAYJOB} (maze-grpo): FAILED, deployment Failed: driver exited with 1" in result.stdout
    assert f"RayCluster {RAYCLUSTER}: not applied" in result.stdout


@pytest.mark.parametrize("cluster_kept", [True, False])
def test_a_stopped_self_contained_job_says_its_cluster_stays_while_it_does(kube, tmp_path, cluster_kept):
    (tmp_path / "skyrl-hp.yaml").unlink()  # the default configuration: self-contained RayJobs
    own = f"{RAYJOB}-x7k2p"
    if cluster_kept:
        kube.put(f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayclusters/{own}", {"metadata": {"name": own}})
    kube.put(
        f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayjobs/{RAYJOB}",
        {"status": {"jobStatus": "STOPPED", "jobDeploymentStatus": "Complete", "rayClusterName": own}},
    )
    result = run(kube, "train", "status")
    assert result.exit_code == 1
    note = " (no deletion rule covers STOPPED: its cluster holds the GPU nodes until skyrl-hp train stop)"
    assert result.stdout.splitlines() == [
        f"RayJob {RAYJOB} (maze-grpo): STOPPED, deployment Complete" + (note if cluster_kept else "")
    ]


# --- train stop ----------------------------------------------------------------------------------------------

RAYJOB_PATH = f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayjobs/{RAYJOB}"
RAYCLUSTERS = f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayclusters"
RESUMES = "skyrl-hp train start --experiment maze-grpo resumes from the newest complete one"


def running_rayjob(kube: FakeKube, *, ray_cluster: str, selected: bool) -> None:
    """A running RayJob on `ray_cluster`: the shared one it selected, or one it created."""
    spec = {"clusterSelector": {"ray.io/cluster": ray_cluster}} if selected else {}
    status = {"jobStatus": "RUNNING", "jobDeploymentStatus": "Running", "rayClusterName": ray_cluster}
    kube.put(RAYJOB_PATH, {"metadata": {"name": RAYJOB}, "spec": spec, "status": status})


def test_train_stop_asks_then_deletes_the_rayjob_and_keeps_the_shared_raycluster(kube):
    kube.put(f"{RAYCLUSTERS}/{RAYCLUSTER}", {"metadata": {"name": RAYCLUSTER}, "status": {"state": "ready"}})
    running_rayjob(kube, ray_cluster=RAYCLUSTER, selected=True)
    result = run(kube, "train", "stop", input="y\n")
    assert result.exit_code == 0, result.output
    assert (
        f"Delete RayJob {RAYJOB} (RUNNING)? A job that has not finished loses the steps since its last checkpoint. "
        "The driver log goes too (keep it: skyrl-hp train logs > run.log)."
    ) in result.stderr
    [delete] = [r for r in kube.requests if r.method == "DELETE"]
    # KubeRay's finalizer stops the Ray job; the shared cluster is not the job's to delete.
    assert (delete.path, delete.body) == (RAYJOB_PATH, {"propagationPolicy": "Background"})
    assert f"{RAYCLUSTERS}/{RAYCLUSTER}" in kube.objects
    ckpt_path = validate_config(SHARED_CLUSTER).derived.run("maze-grpo").ckpt_path
    assert result.stdout.splitlines() == [
        f"deleted RayJob {RAYJOB} (was RUNNING); RayCluster {RAYCLUSTER} stays (the next train start submits to it)",
        f"maze-grpo: checkpoints stay in {ckpt_path}; once RayJob {RAYJOB} is gone (train stop --wait waits for "
        f"that), {RESUMES}",
    ]


def test_train_stop_changes_nothing_unless_the_answer_is_yes(kube):
    running_rayjob(kube, ray_cluster=RAYCLUSTER, selected=True)
    result = run(kube, "train", "stop", input="n\n")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == "train stop: nothing changed"
    assert kube.deleted() == [] and RAYJOB_PATH in kube.objects


def test_train_stop_without_a_rayjob_has_nothing_to_stop(kube):
    result = run(kube, "train", "stop", "--yes")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["no RayJob of maze-grpo on the cluster: nothing to stop"]
    assert kube.deleted() == []


@pytest.fixture
def self_contained_job(kube, tmp_path) -> str:
    """The default, self-contained RayJob, running on the RayCluster KubeRay created for it (labelled with its
    creator, owned by it) and that cluster's head pod; returns the cluster's name. The experiment does not
    resume (trainer.resume_mode: none)."""
    config = {"training": {"experiments": [{"name": "maze-grpo", "overrides": {"trainer.resume_mode": "none"}}]}}
    (tmp_path / "skyrl-hp.yaml").write_text(yaml.safe_dump(config))
    own = f"{RAYJOB}-x7k2p"
    labels = {"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": RAYJOB}
    kube.put(f"{RAYCLUSTERS}/{own}", {"metadata": {"name": own, "labels": labels}})
    head = f"{own}-head"
    kube.put(f"/api/v1/namespaces/{NAMESPACE}/pods/{head}", pod(head, NAMESPACE, {"ray.io/cluster": own}))
    running_rayjob(kube, ray_cluster=own, selected=False)
    return own


def test_train_stop_wait_returns_once_the_jobs_cluster_and_its_pods_are_gone(kube, self_contained_job):
    own = self_contained_job
    reads_of_the_cluster = 0

    def garbage_collector(request) -> None:
        # The cluster the RayJob owned, and its head pod, go between the first and the second poll.
        nonlocal reads_of_the_cluster
        if request.method == "GET" and request.path == f"{RAYCLUSTERS}/{own}":
            reads_of_the_cluster += 1
            if reads_of_the_cluster == 2:
                kube.objects.pop(f"{RAYCLUSTERS}/{own}")
                kube.objects.pop(f"/api/v1/namespaces/{NAMESPACE}/pods/{own}-head")

    kube.on_request = garbage_collector
    result = run(kube, "train", "stop", "--yes", "--wait")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"deleted RayJob {RAYJOB} (was RUNNING); its RayCluster {own} goes with it",
        f"still there: {own}, 1 pod(s) of {own}",
        "the RayJobs and their clusters are gone",
        f"maze-grpo: checkpoints stay in {load_config(None).derived.run('maze-grpo').ckpt_path}; "
        "skyrl-hp train start --experiment maze-grpo starts over (trainer.resume_mode: none)",
    ]
    assert kube.deleted() == [RAYJOB_PATH]  # the cluster is KubeRay's to delete, not the command's


def test_train_stop_wait_gives_up_with_what_is_left(kube, self_contained_job):
    result = run(kube, "train", "stop", "--yes", "--wait", "--timeout", "1", poll_seconds=0.1)
    assert result.exit_code == 1
    own = self_contained_job
    assert result.stderr.splitlines()[-1] == (
        f"timeout: RayJobs and their clusters not gone after 1 s; last state: still there: {own}, 1 pod(s) of {own}"
    )


def test_train_start_refuses_a_rayjob_that_is_being_deleted(kube, dist):
    kube.put(RAYJOB_PATH, {"metadata": {"name": RAYJOB, "deletionTimestamp": "2026-11-20T10:00:00Z"}})
    result = run(kube, "train", "start", "--dist", str(dist))
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        f"train start: RayJob {RAYJOB} is being deleted: start again once it is gone (skyrl-hp train stop --wait)"
    )
    assert RAYJOB_PATH not in kube.applied()


def submitter(kube: FakeKube, log: str, rayjob: str = RAYJOB) -> None:
    name = f"{rayjob}-x7k2p"
    kube.put(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}", pod(name, NAMESPACE, {"job-name": rayjob}))
    kube.logs[f"{NAMESPACE}/{name}"] = log


def test_train_logs_prints_the_submitter_pods_log(kube):
    submitter(kube, "line one\nline two\n")
    result = run(kube, "train", "logs", "--follow")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["line one", "line two"]
    log_request = next(r for r in kube.requests if r.path.endswith("/log"))
    assert log_request.query["follow"] == ["true"]


def test_train_logs_before_the_job_started_says_so(kube):
    result = run(kube, "train", "logs")
    assert result.exit_code == 1
    assert f"RayJob {RAYJOB} has no submitter pod yet" in result.stderr


# --- train metrics ---------------------------------------------------------------------------------------------


def test_metrics_from_a_saved_log_table_and_plot(kube, tmp_path):
    plot = tmp_path / "pass.png"
    result = run(None, "train", "metrics", "--log", str(LOG_FIXTURE), "--plot", str(plot))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["step", "eval", "pass@1", "reward", "step", "time"]
    first = lines[1].split()
    assert first[:2] == ["0", "43.75%"] and first[2] == "-"  # the eval before training: no reward yet
    step_160 = next(line.split() for line in lines if line.split()[:1] == ["160"])
    assert step_160[1] == "96.88%"
    assert "eval pass@1 43.75% at step 0 -> 96.88% at step 160 (reference run: 43.75% -> 96.875% at step 160)" in lines
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 10_000
    # Two panels side by side (PNG's IHDR: width and height, big-endian, at bytes 16-24).
    width, height = int.from_bytes(plot.read_bytes()[16:20], "big"), int.from_bytes(plot.read_bytes()[20:24], "big")
    assert width > 2.5 * height


def test_the_metrics_plot_shows_the_reward_beside_eval_pass_at_1_with_the_reference_run_marked():
    import matplotlib.pyplot as plt

    from skyrl_hyperpod.ops import metrics as metrics_module

    steps = metrics_module.parse_log(LOG_FIXTURE.read_text().splitlines())
    figure = metrics_module.figure({"maze-grpo": steps}, "maze-grpo")
    try:
        left, right = figure.axes
        assert (left.get_ylabel(), right.get_ylabel()) == ("eval/all/pass_at_1", "reward/avg_raw_reward")
        [reward] = [line for line in right.get_lines() if line.get_label() == "reward (this run)"]
        assert list(reward.get_ydata()) == [s.reward for s in steps if s.reward is not None]
        for axes in (left, right):
            marks = [line for line in axes.get_lines() if line.get_label() == "reference run's step 160"]
            assert [list(line.get_xdata()) for line in marks] == [[160, 160]]
        assert {line.get_label() for line in left.get_lines()} >= {
            "reference start 43.75%",
            "reference step 160 96.875%",
        }
    finally:
        plt.close(figure)


def test_metrics_json_from_the_cluster_log(kube, tmp_path):
    submitter(kube, LOG_FIXTURE.read_text())
    result = run(kube, "train", "metrics", "--json", "--plot", str(tmp_path / "p.png"))
    assert result.exit_code == 0, result.output
    steps = json.loads(result.stdout)["steps"]
    assert len(steps) == 161
    evals = [s for s in steps if s["eval_pass_at_1"] is not None]
    assert [s["step"] for s in evals] == list(range(0, 161, 10))
    # Step 40's block is interrupted by another process's line (a worker saving its checkpoint): still read.
    assert steps[40]["eval_pass_at_1"] == pytest.approx(41 / 64, abs=5e-5)  # ConsoleLogger prints 4 decimals
    assert steps[1]["reward"] == pytest.approx(0.4127) and steps[1]["step_seconds"] == pytest.approx(411.7941)


def test_metrics_of_a_log_without_metrics_is_one_line(tmp_path):
    log = tmp_path / "early.log"
    log.write_text("(skyrl_entrypoint pid=1) INFO downloading the model\n")
    result = run(None, "train", "metrics", "--log", str(log))
    assert result.exit_code == 1
    assert result.stderr.strip().startswith("metrics: no SkyRL metrics in the log")


# --- kubeconfig ------------------------------------------------------------------------------------------------

EKS_ARN = f"arn:aws:eks:{TEST_REGION}:{TEST_ACCOUNT}:cluster/skyrl-hp-eks"
CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()


def stub_cluster_lookups(stub_aws) -> AwsClients:
    sagemaker, sm_stub = stub_aws("sagemaker")
    sm_stub.add_response(
        "describe_cluster",
        {
            "ClusterArn": f"arn:aws:sagemaker:{TEST_REGION}:{TEST_ACCOUNT}:cluster/abc123",
            "ClusterName": "skyrl-hp-hyperpod",
            "ClusterStatus": "InService",
            "InstanceGroups": [],
            "Orchestrator": {"Eks": {"ClusterArn": EKS_ARN}},
        },
        {"ClusterName": "skyrl-hp-hyperpod"},
    )
    sm_stub.activate()
    eks, eks_stub = stub_aws("eks")
    eks_stub.add_response(
        "describe_cluster",
        {
            "cluster": {
                "name": "skyrl-hp-eks",
                "arn": EKS_ARN,
                "endpoint": "https://ABCDEF.gr7.us-west-2.eks.amazonaws.com",
                "certificateAuthority": {"data": CA},
                "resourcesVpcConfig": {"endpointPublicAccess": False, "endpointPrivateAccess": True},
            }
        },
        {"name": "skyrl-hp-eks"},
    )
    eks_stub.activate()
    return AwsClients(overrides={"sagemaker": sagemaker, "eks": eks})


def test_kubeconfig_writes_the_context_as_hyp_set_cluster_context(stub_aws, tmp_path):
    target = tmp_path / "kube" / "config"
    target.parent.mkdir()
    target.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "other",
                                      "contexts": [{"name": "other", "context": {"cluster": "other"}}],
                                      "clusters": [{"name": "other", "cluster": {"server": "https://other"}}]}))  # fmt: skip
    aws = stub_cluster_lookups(stub_aws)
    result = run(None, "kubeconfig", "--region", TEST_REGION, "--kubeconfig", str(target), aws=aws)
    assert result.exit_code == 0, result.output
    data = yaml.safe_load(target.read_text())
    assert data["current-context"] == EKS_ARN
    assert {c["name"] for c in data["contexts"]} == {"other", EKS_ARN}  # other entries kept
    context = next(c for c in data["contexts"] if c["name"] == EKS_ARN)["context"]
    assert context == {"cluster": EKS_ARN, "user": EKS_ARN, "namespace": NAMESPACE}
    cluster = next(c for c in data["clusters"] if c["name"] == EKS_ARN)["cluster"]
    assert cluster == {"server": "https://ABCDEF.gr7.us-west-2.eks.amazonaws.com", "certificate-authority-data": CA}
    user = next(u for u in data["users"] if u["name"] == EKS_ARN)["user"]["exec"]
    assert user["command"] == "aws"
    assert user["args"] == [
        "--region",
        TEST_REGION,
        "eks",
        "get-token",
        "--cluster-name",
        "skyrl-hp-eks",
        "--output",
        "json",
    ]
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert "API endpoint is private" in result.stderr


def test_kubeconfig_for_a_missing_cluster_is_one_line(stub_aws, tmp_path):
    sagemaker, stubber = stub_aws("sagemaker")
    stubber.add_client_error("describe_cluster", "ResourceNotFound", "Cluster skyrl-hp-hyperpod not found")
    stubber.activate()
    result = run(None, "kubeconfig", "--region", TEST_REGION, "--kubeconfig", str(tmp_path / "c"),
                 aws=AwsClients(overrides={"sagemaker": sagemaker}))  # fmt: skip
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("kubeconfig error: HyperPod cluster skyrl-hp-hyperpod in us-west-2: ")
    assert "ResourceNotFound" in line


def test_eks_token_is_a_presigned_get_caller_identity_for_the_cluster():
    from skyrl_hyperpod.cli.common import new_session

    token = eks_token(new_session(None, TEST_REGION), "skyrl-hp-eks", TEST_REGION)
    assert token.startswith(TOKEN_PREFIX)
    encoded = token[len(TOKEN_PREFIX) :]
    url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    assert url.startswith(f"https://sts.{TEST_REGION}.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15")
    assert "X-Amz-Expires=60" in url
    assert "X-Amz-SignedHeaders=host%3Bx-k8s-aws-id" in url


def test_a_token_as_old_as_the_refresh_interval_is_signed_again_before_the_next_request(kube):
    """`train start --wait` and the other waits outlast the 15 minutes the API server accepts a token for."""
    endpoint = ClusterEndpoint(name="skyrl-hp-eks", arn=EKS_ARN, endpoint=kube.host, certificate_authority=CA,
                               public_access=True, public_access_cidrs=())  # fmt: skip
    signed = iter(f"{TOKEN_PREFIX}{number}" for number in range(1, 10))
    fresh = Cluster(api_client_for(endpoint, lambda: next(signed)))
    fresh.get(RAYJOB_PATH)
    fresh.get(RAYJOB_PATH)
    aged = Cluster(api_client_for(endpoint, lambda: next(signed), refresh_after=0))
    aged.get(RAYJOB_PATH)
    assert [request.headers["authorization"] for request in kube.requests] == [
        f"Bearer {TOKEN_PREFIX}1",
        f"Bearer {TOKEN_PREFIX}1",
        f"Bearer {TOKEN_PREFIX}3",  # the second token, signed when the client was made, was already too old
    ]


def test_a_token_that_cannot_be_signed_again_is_one_kube_error(kube):
    from botocore.exceptions import NoCredentialsError

    def expired_credentials() -> str:
        raise NoCredentialsError()

    endpoint = ClusterEndpoint(name="skyrl-hp-eks", arn=EKS_ARN, endpoint=kube.host, certificate_authority=CA,
                               public_access=True, public_access_cidrs=())  # fmt: skip
    first = iter([f"{TOKEN_PREFIX}1"])
    aged = Cluster(api_client_for(endpoint, lambda: next(first, None) or expired_credentials(), refresh_after=0))
    with pytest.raises(KubeError, match=r"^cannot sign a new EKS token \(the old one expires\): Unable to locate"):
        aged.get(RAYJOB_PATH)
    assert kube.requests == []


def test_a_log_stream_that_breaks_is_one_kube_error():
    """The connection drops after part of the log (the pod's node went away): KubeError, not urllib3's error."""
    import socket
    import threading

    from kubernetes import client

    listener = socket.create_server(("127.0.0.1", 0))

    def answer_with_a_cut_log() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\nstep 1\n")

    threading.Thread(target=answer_with_a_cut_log, daemon=True).start()
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{listener.getsockname()[1]}"
    with listener, pytest.raises(KubeError, match=r"^GET /api/v1/namespaces/skyrl/pods/p/log: the log stream broke: "):
        list(Cluster(client.ApiClient(configuration)).logs(NAMESPACE, "p"))


def test_the_cluster_is_reached_with_the_eks_endpoint_and_a_token_from_the_aws_credentials(stub_aws, kube):
    """The real connection path: eks:DescribeCluster gives the endpoint (here the fake API server) and the CA,
    the bearer token is `aws eks get-token`'s, signed with the caller's credentials."""
    eks, stubber = stub_aws("eks")
    stubber.add_response(
        "describe_cluster",
        {
            "cluster": {
                "name": "skyrl-hp-eks",
                "arn": EKS_ARN,
                "endpoint": kube.host,
                "certificateAuthority": {"data": CA},
                "resourcesVpcConfig": {"endpointPublicAccess": True},
            }
        },  # fmt: skip
        {"name": "skyrl-hp-eks"},
    )
    stubber.activate()
    state = CliState(aws=AwsClients(overrides={"eks": eks}), poll_seconds=0)
    result = CliRunner().invoke(cli, ["train", "status", "--region", TEST_REGION], obj=state)
    assert result.exit_code == 0, result.output
    authorization = kube.requests[0].headers["authorization"]
    assert authorization.startswith(f"Bearer {TOKEN_PREFIX}")


def test_train_start_applies_self_contained_rayjobs_without_a_raycluster(kube, tmp_path):
    (tmp_path / "skyrl-hp.yaml").unlink()  # the default configuration: each RayJob brings its own cluster
    own_dist = write_dist(tmp_path / "own-dist", load_config(None))
    assert not (own_dist / "02-raycluster.k8s.yaml").exists()
    result = run(kube, "train", "start", "--dist", str(own_dist))
    assert result.exit_code == 0, result.output
    applied = kube.applied()
    assert not any("/rayclusters/" in path for path in applied)
    assert applied[-1] == f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayjobs/{RAYJOB}"


# --- every --wait: the RayJob's own cluster, a heartbeat -----------------------------------------------------


def test_train_start_wait_in_self_contained_mode_returns_once_the_jobs_cluster_is_up_and_the_job_runs(kube, tmp_path):
    (tmp_path / "skyrl-hp.yaml").unlink()  # the default configuration: each RayJob brings its own cluster
    own_dist = write_dist(tmp_path / "own-dist", load_config(None))
    own = f"{RAYJOB}-x7k2p"
    polls = 0

    def kuberay(request) -> None:
        # KubeRay creates the job's cluster, its pods become Ready, then the submitter runs the Ray job.
        nonlocal polls
        if request.method != "GET" or request.path != RAYJOB_PATH or RAYJOB_PATH not in kube.objects:
            return
        polls += 1
        job = kube.objects[RAYJOB_PATH]
        if polls == 1:
            job["status"] = {"jobDeploymentStatus": "Initializing", "rayClusterName": own}
        elif polls == 2:
            labels = {"ray.io/cluster": own}
            base = f"/api/v1/namespaces/{NAMESPACE}/pods"
            kube.put(f"{base}/{own}-head", pod(f"{own}-head", NAMESPACE, {**labels, "ray.io/node-type": "head"}))
            for index in range(3):
                name = f"{own}-gpu-worker-{index}"
                kube.put(f"{base}/{name}", pod(name, NAMESPACE, {**labels, "ray.io/node-type": "worker"}))
        else:
            job["status"] = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "rayClusterName": own}

    kube.on_request = kuberay
    result = run(kube, "train", "start", "--dist", str(own_dist), "--wait")
    assert result.exit_code == 0, result.output
    assert polls == 3  # it asked until the job ran, and no further
    lines = result.stdout.splitlines()
    assert f"RayJob {RAYJOB}: deployment Initializing, job -; RayCluster {own}: head Ready, 3/3 workers Ready" in lines
    assert (
        f"RayJob {RAYJOB}: deployment Running, job RUNNING; RayCluster {own}: head Ready, 3/3 workers Ready"
    ) in lines
    assert lines[-1].startswith("submitted 1 RayJob(s)")


def test_train_start_wait_ends_at_a_rayjob_that_failed(kube, tmp_path):
    (tmp_path / "skyrl-hp.yaml").unlink()
    own_dist = write_dist(tmp_path / "own-dist", load_config(None))

    def kuberay(path: str, obj: dict) -> None:
        if path == RAYJOB_PATH:
            obj["status"] = {"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "message": "backoff limit reached"}

    kube.on_apply = kuberay
    result = run(kube, "train", "start", "--dist", str(own_dist), "--wait")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        f"train start: RayJob {RAYJOB}: deployment Failed, job FAILED (backoff limit reached): the job ended without "
        "running; its driver log: skyrl-hp train logs (skyrl-hp train status shows every RayJob)"
    )


def test_every_wait_prints_the_elapsed_time_and_the_state_at_least_every_30_seconds(kube, self_contained_job):
    clock = FakeClock()
    result = run(kube, "train", "stop", "--yes", "--wait", "--timeout", "100", poll_seconds=10, clock=clock)
    assert result.exit_code == 1
    own = self_contained_job
    state = f"still there: {own}, 1 pod(s) of {own}"
    assert [line for line in result.stdout.splitlines() if state in line] == [
        state,
        f"still waiting after 30 s (timeout 1 min 40 s): {state}",
        f"still waiting after 1 min 00 s (timeout 1 min 40 s): {state}",
        f"still waiting after 1 min 30 s (timeout 1 min 40 s): {state}",
    ]
    assert (
        result.stderr.splitlines()[-1]
        == f"timeout: RayJobs and their clusters not gone after 100 s; last state: {state}"
    )
    assert clock.now == 100


def test_a_poll_interval_longer_than_the_heartbeat_still_beats_every_30_seconds(kube, self_contained_job):
    clock = FakeClock()
    result = run(kube, "train", "stop", "--yes", "--wait", "--timeout", "65", poll_seconds=600, clock=clock)
    assert result.exit_code == 1
    assert [line.split(" (timeout")[0] for line in result.stdout.splitlines() if line.startswith("still waiting")] == [
        "still waiting after 30 s",
        "still waiting after 1 min 00 s",
    ]


# --- a sweep: one RayJob at a time ------------------------------------------------------------------------------

SWEEP = {"training": {"experiments": [{"name": "lr-a"}, {"name": "lr-b"}]}}


@pytest.fixture
def sweep(tmp_path) -> tuple[Path, list[str]]:
    """The default (self-contained) configuration with two experiments: its dist/ and the RayJob names in order."""
    (tmp_path / "skyrl-hp.yaml").write_text(yaml.safe_dump(SWEEP))
    config = validate_config(SWEEP)
    return write_dist(tmp_path / "sweep-dist", config), [run.job_name for run in config.derived.runs]


def rayjob_at(name: str) -> str:
    return f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayjobs/{name}"


def own_cluster(kube: FakeKube, rayjob: str) -> str:
    """The RayCluster KubeRay creates for a self-contained RayJob, labelled with its creator."""
    name = f"{rayjob}-x7k2p"
    labels = {"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": rayjob}
    kube.put(
        f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayclusters/{name}",
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name, "namespace": NAMESPACE,
                                                                       "labels": labels}},
    )  # fmt: skip
    return name


def test_train_start_on_a_sweep_starts_nothing_until_told_one_or_all(kube, sweep):
    dist, _ = sweep
    result = run(kube, "train", "start", "--dist", str(dist))
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert "2 experiments (lr-a, lr-b) and they run one at a time" in line
    assert "--experiment lr-a" in line and "--all" in line
    assert kube.requests == []


def test_train_start_all_applies_the_next_rayjob_only_once_the_previous_succeeded_and_its_cluster_is_gone(kube, sweep):
    dist, (first, second) = sweep
    seen_when_second_applied: list[dict] = []
    polls = 0

    def kuberay(request) -> None:
        # The first job runs for a few polls, succeeds, and KubeRay deletes its cluster a poll later.
        nonlocal polls
        job = kube.objects.get(rayjob_at(first))
        if request.method != "GET" or request.path != rayjob_at(first) or job is None:
            return
        polls += 1
        if polls == 1:
            job["status"] = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}
            own_cluster(kube, first)
        elif polls == 3:
            job["status"] = {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}
        elif polls == 5:
            kube.objects = {p: o for p, o in kube.objects.items() if "/rayclusters/" not in p}

    def record(path: str, obj: dict) -> None:
        if path == rayjob_at(second):
            clusters = [p for p in kube.objects if "/rayclusters/" in p]
            seen_when_second_applied.append({"first": kube.objects[rayjob_at(first)]["status"], "clusters": clusters})

    kube.on_request, kube.on_apply = kuberay, record
    result = run(kube, "train", "start", "--dist", str(dist), "--all")
    assert result.exit_code == 0, result.output
    jobs_applied = [path for path in kube.applied() if "/rayjobs/" in path]
    assert jobs_applied == [rayjob_at(first), rayjob_at(second)]
    assert seen_when_second_applied == [
        {"first": {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}, "clusters": []}
    ]
    assert f"RayJob {first}: job RUNNING; its RayCluster {first}-x7k2p still holds the nodes" in result.stdout
    assert "submitted 2 RayJob(s)" in result.stdout


def test_train_start_all_stops_the_sweep_at_a_failed_rayjob(kube, sweep):
    dist, (first, second) = sweep

    def kuberay(path: str, obj: dict) -> None:
        if path == rayjob_at(first):
            obj["status"] = {"jobDeploymentStatus": "Failed", "jobStatus": "FAILED"}

    kube.on_apply = kuberay
    result = run(kube, "train", "start", "--dist", str(dist), "--all")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1].startswith(
        f"train start: RayJob {first} ended FAILED: the experiments after it are not started"
    )
    assert rayjob_at(second) not in kube.applied()


def test_train_start_all_again_skips_what_succeeded(kube, sweep):
    dist, (first, second) = sweep
    kube.put(rayjob_at(first), {"metadata": {"name": first}, "status": {"jobStatus": "SUCCEEDED"}})
    result = run(kube, "train", "start", "--dist", str(dist), "--all")
    assert result.exit_code == 0, result.output
    assert [path for path in kube.applied() if "/rayjobs/" in path] == [rayjob_at(second)]
    assert f"lr-a: RayJob {first} already SUCCEEDED, not started again" in result.stdout


def test_train_start_all_again_waits_for_the_later_experiment_still_running(kube, sweep):
    dist, (first, second) = sweep
    kube.put(rayjob_at(first), {"metadata": {"name": first}, "status": {"jobStatus": "SUCCEEDED"}})
    running = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}
    kube.put(rayjob_at(second), {"metadata": {"name": second}, "status": running})
    result = run(kube, "train", "start", "--dist", str(dist), "--all")
    assert result.exit_code == 0, result.output
    assert [path for path in kube.applied() if "/rayjobs/" in path] == []
    assert f"lr-b: RayJob {second} is already on the cluster" in result.stdout


@pytest.mark.parametrize("status", ["RUNNING", "SUCCEEDED"])
def test_train_start_refuses_an_experiment_while_another_holds_the_nodes(kube, sweep, status):
    # RUNNING: its job has not ended; SUCCEEDED: KubeRay has not deleted its cluster yet.
    dist, (first, second) = sweep
    kube.put(rayjob_at(first), {"metadata": {"name": first}, "status": {"jobStatus": status}})
    own_cluster(kube, first)
    result = run(kube, "train", "start", "--dist", str(dist), "--experiment", "lr-b")
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"train start: RayJob {first} ({status}) has not ended and experiments run one at a time")
    assert line.endswith("skyrl-hp train stop --experiment lr-a)")
    assert kube.applied() == []


def test_train_start_all_does_not_go_with_experiment(kube, sweep):
    dist, _ = sweep
    result = run(kube, "train", "start", "--dist", str(dist), "--all", "--experiment", "lr-a")
    assert result.exit_code == 2
    assert result.stderr.strip() == "--all starts every experiment (lr-a, lr-b); it does not go with --experiment"


def test_train_logs_on_a_sweep_asks_for_one_experiment_as_its_help_says(kube, sweep):
    help_text = " ".join(run(None, "train", "logs", "--help").stdout.split())
    assert "default: the only experiment (a configuration with several: name one)" in help_text
    assert "every experiment" not in help_text
    result = run(kube, "train", "logs")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "--experiment: this configuration has 2 experiments (lr-a, lr-b); name one (--experiment lr-a)"
    )
    assert kube.requests == []


def test_train_metrics_on_a_sweep_asks_for_experiments_or_all_as_its_help_says(kube, sweep):
    help_text = " ".join(run(None, "train", "metrics", "--help").stdout.split())
    assert (
        "repeat it for several; default: the only experiment (a configuration with several: name them, or --all)"
        in help_text
    )
    result = run(kube, "train", "metrics")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "--experiment: this configuration has 2 experiments (lr-a, lr-b); name one or several "
        "(--experiment lr-a --experiment lr-b) or pass --all"
    )
    assert kube.requests == []


def console_log(steps: dict[int, dict[str, float]]) -> str:
    """A driver log as SkyRL's ConsoleLogger writes it inside the skyrl_entrypoint task (skyrl/train/utils/tracking.py:
    `Step N: ` then pprint of the metrics, floats as '%.4f' strings)."""
    prefix = "(skyrl_entrypoint pid=7) "
    lines = []
    for step, values in steps.items():
        lines.append(f"{prefix}2026-12-01 14:23:09.998 | INFO     | skyrl.train.utils.tracking:log:189 - Step {step}: ")
        lines.append(prefix + repr({key: f"{value:.4f}" for key, value in values.items()}))
    return "\n".join(lines) + "\n"


def test_train_metrics_all_of_a_sweep_side_by_side_from_each_driver_log(kube, sweep, tmp_path):
    _, (first, second) = sweep
    submitter(kube, LOG_FIXTURE.read_text(), first)
    submitter(kube, console_log({0: {PASS_AT_1: 0.3125}, 1: {REWARD: 0.25}, 10: {PASS_AT_1: 0.5, REWARD: 0.5}}), second)
    plot = tmp_path / "sweep.png"
    result = run(kube, "train", "metrics", "--all", "--plot", str(plot))
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines()]
    assert rows[0] == ["step", "lr-a", "pass@1", "lr-a", "reward", "lr-b", "pass@1", "lr-b", "reward"]
    by_step = {row[0]: row[1:] for row in rows[1:] if row[0].isdigit()}
    assert by_step["0"] == ["43.75%", "-", "31.25%", "-"]
    assert by_step["1"] == ["-", "0.4127", "-", "0.2500"]
    assert by_step["2"][2:] == ["-", "-"]
    assert by_step["10"][2:] == ["50.00%", "0.5000"]
    assert len(by_step) == 161
    assert rows[-3][:1] == ["lr-a:"] and " ".join(rows[-3]).endswith("at step 160)")
    assert " ".join(rows[-2]).startswith("lr-b: eval pass@1 31.25% at step 0 -> 50.00% at step 10")
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Each experiment's own submitter pod's log.
    logs = [r.path for r in kube.requests if r.path.endswith("/log")]
    assert logs == [f"/api/v1/namespaces/{NAMESPACE}/pods/{first}-x7k2p/log",
                    f"/api/v1/namespaces/{NAMESPACE}/pods/{second}-x7k2p/log"]  # fmt: skip


def test_train_metrics_names_the_experiment_whose_log_has_no_metrics(kube, sweep, tmp_path):
    _, (first, second) = sweep
    submitter(kube, LOG_FIXTURE.read_text(), first)
    submitter(kube, "(skyrl_entrypoint pid=7) INFO downloading the model\n", second)
    result = run(
        kube, "train", "metrics", "--experiment", "lr-a", "--experiment", "lr-b", "--plot", str(tmp_path / "p.png")
    )
    assert result.exit_code == 1
    assert result.stderr.strip().startswith("metrics: lr-b: no SkyRL metrics in the log")
    assert not (tmp_path / "p.png").exists()
