"""`skyrl-hp train timeline`: a run's start from Kubernetes events and the driver log, read from the cluster (the fake
API server of tests/fake_kube.py) or from saved files. The fixtures hold events in the shapes the API serves them
(the scheduler's `eventTime`, the kubelet's `firstTimestamp`) and driver-log lines in the formats their writers use
(docker/train_job.py's `train_job: ...`, Ray's process prefix, SkyRL's loguru lines), with Kubernetes' timestamps."""

from __future__ import annotations

import json
import types
from datetime import UTC, datetime

import pytest
import yaml
from click.testing import CliRunner
from conftest import REPO_ROOT
from deployed_cluster import NAMESPACE
from fake_kube import FakeKube, pod

from skyrl_hp_job.attempts import attempt_identity, take_generation
from skyrl_hp_job.progress import ProgressCallback
from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.cli.common import CliState
from skyrl_hyperpod.ops import start_timeline as tl
from skyrl_hyperpod.plumbing.errors import InputError

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "start_timeline"
EVENTS = FIXTURES / "events.json"
LOG = FIXTURES / "driver.log"
RAYJOB = "skyrl-visgym-maze-grpo"
RAY_CLUSTER = "skyrl-visgym-maze-grpo-abcde"

pytestmark = pytest.mark.usefixtures("fake_aws_env", "isolated")


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    monkeypatch.delenv("SKYRL_HP_CONFIG", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "skyrl-hp.yaml").write_text(yaml.safe_dump({}))


def run(kube: FakeKube | None, *args: str):
    return CliRunner().invoke(cli, list(args), obj=CliState(aws=None, kube=kube.api_client() if kube else None))


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def recorded() -> tl.Timeline:
    events = json.loads(EVENTS.read_text())["items"]
    return tl.build(events, LOG.read_text().splitlines(), ray_cluster=RAY_CLUSTER, origin=at("2026-12-04T10:00:00"))


def test_every_milestone_from_the_recorded_events_and_log():
    marks = recorded().marks
    assert {name: marks[name].at for name in tl.MILESTONES} == {
        tl.POD_SCHEDULED: at("2026-12-04T10:00:02.118442"),  # the head's, the scheduler's eventTime
        tl.IMAGE_PULLED: at("2026-12-04T10:04:56"),  # the last pod to have the image
        tl.WORKERS_UP: at("2026-12-04T10:04:58"),  # the last worker started
        tl.MODEL_DOWNLOADED: at("2026-12-04T10:11:02.917730"),  # train_job's next step after the download
        tl.DATASETS_PREPARED: at("2026-12-04T10:11:43.702118"),
        tl.SKYRL_STARTED: at("2026-12-04T10:11:43.702118"),
        tl.ENGINES_READY: at("2026-12-04T10:16:10.402337"),
        tl.MODELS_READY: at("2026-12-04T10:18:51.020011"),
        tl.FIRST_STEP: at("2026-12-04T10:29:22.675120"),  # step 1, not step 0's evaluation
    }
    assert recorded().first_step_seconds == pytest.approx(29 * 60 + 22.675120)


def test_another_clusters_pods_are_not_this_runs():
    events = json.loads(EVENTS.read_text())["items"]
    scheduled = tl.event_marks(events, None)[tl.POD_SCHEDULED]  # every Ray pod: the other run's head is earlier
    assert "other-run-head" in scheduled.detail
    assert "other-run" not in tl.event_marks(events, RAY_CLUSTER)[tl.POD_SCHEDULED].detail


def test_prepared_inputs_are_marked_as_found():
    lines = [
        "2026-12-04T11:00:00Z train_job: checkpoint /m and datasets /d already prepared",
        "2026-12-04T11:00:01.5Z train_job: starting SkyRL from /opt/skyrl: python -m x",
    ]
    marks = tl.log_marks(lines)
    assert marks[tl.MODEL_DOWNLOADED].at == marks[tl.DATASETS_PREPARED].at == at("2026-12-04T11:00:00")
    assert "already" in marks[tl.MODEL_DOWNLOADED].detail
    assert marks[tl.SKYRL_STARTED].at == at("2026-12-04T11:00:01.5")
    assert tl.FIRST_STEP not in marks


ROUTER_UP = (
    "(skyrl_entrypoint pid=2871) 2026-12-04 11:02:00.000 | INFO     | skyrl.backends.skyrl_train.inference_servers.setup:"
    "build_new_inference_client:254 - HTTP Inference: proxy_url=http://10.0.0.1:8080, "
    "server_urls=['http://10.0.0.1:8000'], colocated={colocated}"
)
SLEPT = (
    "(skyrl_entrypoint pid=2871) 2026-12-04 11:02:03.000 | INFO     | skyrl.train.entrypoints.main_base:"
    "_get_new_inference_client:246 - HTTP Inference: Colocated mode - slept inference engines after startup"
)


def test_engines_are_ready_when_the_router_is_up_colocated_or_not():
    separate = tl.log_marks([f"2026-12-04T11:02:00Z {ROUTER_UP.format(colocated=False)}"])
    assert separate[tl.ENGINES_READY].at == at("2026-12-04T11:02:00")
    colocated = tl.log_marks(
        [f"2026-12-04T11:02:00Z {ROUTER_UP.format(colocated=True)}", f"2026-12-04T11:02:03Z {SLEPT}"]
    )
    assert colocated[tl.ENGINES_READY].at == at("2026-12-04T11:02:00")  # up, then slept: up is the milestone
    assert tl.log_marks([f"2026-12-04T11:02:03Z {SLEPT}"])[tl.ENGINES_READY].at == at("2026-12-04T11:02:03")


def test_the_attempts_first_step_is_read_from_train_jobs_own_line(tmp_path, capsys):
    """With trainer.logger=mlflow SkyRL prints no `Step N:` line: the first step is the line train_job's progress
    callback says once, from the trainer's process (Ray's prefix before it)."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    environ = {"RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps({"metadata": {"job_submission_id": "maze-grpo-bcdfg"}})}
    callback = ProgressCallback(take_generation(ckpt, attempt_identity(environ)))
    for step in (3, 4):  # a resumed attempt: its first step is the run's step 3
        callback.on_step_end(None, types.SimpleNamespace(global_step=step), None)
    said = [line for line in capsys.readouterr().err.splitlines() if "first step" in line]
    assert len(said) == 1  # once per attempt, not per step
    lines = [f"2026-12-04T11:05:00Z (skyrl_entrypoint pid=2871) {said[0]}"]
    mark = tl.log_marks(lines)[tl.FIRST_STEP]
    assert mark.at == at("2026-12-04T11:05:00") and "global step 3" in mark.detail


def test_a_log_without_timestamps_is_refused():
    with pytest.raises(InputError, match="no Kubernetes timestamps"):
        tl.log_marks(["train_job: downloading a/b to /m"])


def test_timeline_from_the_cluster_reads_events_rayjob_and_the_timestamped_log(kube):
    base = f"/api/v1/namespaces/{NAMESPACE}"
    kube.put(
        f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayjobs/{RAYJOB}",
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": {"name": RAYJOB, "namespace": NAMESPACE, "creationTimestamp": "2026-12-04T10:00:00Z"},
            "status": {"rayClusterName": RAY_CLUSTER, "jobStatus": "RUNNING"},
        },
    )
    for index, event in enumerate(json.loads(EVENTS.read_text())["items"]):
        kube.put(f"{base}/events/e{index}", event)
    submitter = f"{RAYJOB}-x7k2p"
    kube.put(f"{base}/pods/{submitter}", pod(submitter, NAMESPACE, {"job-name": RAYJOB}))
    kube.logs[f"{NAMESPACE}/{submitter}"] = LOG.read_text()
    result = run(kube, "train", "timeline")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"RayJob {RAYJOB} (maze-grpo): time to first step 0:29:23 (t = 0: RayJob created")
    assert lines[1].split()[:3] == ["+0:00:02", "pod", "scheduled"]
    assert lines[-1].split()[:3] == ["+0:29:23", "first", "step"]
    log_request = next(r for r in kube.requests if r.path.endswith("/log"))
    assert log_request.query["timestamps"] == ["true"]


def test_timeline_from_saved_files_as_json(tmp_path):
    result = run(None, "train", "timeline", "--log", str(LOG), "--events", str(EVENTS), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    names = [milestone["name"] for milestone in data["milestones"]]
    assert names == list(tl.MILESTONES)
    # No RayJob read: t = 0 is the first milestone, here the other run's pod in the saved namespace events.
    assert data["origin"] == "2026-12-04T09:00:00+00:00"


def test_saved_events_without_a_log_and_bad_events_are_one_line(tmp_path):
    result = run(None, "train", "timeline", "--events", str(EVENTS))
    assert result.exit_code == 2 and result.stderr.strip().startswith("--events: give the saved driver log too")
    bad = tmp_path / "events.json"
    bad.write_text("[1, 2]")
    result = run(None, "train", "timeline", "--log", str(LOG), "--events", str(bad))
    assert result.exit_code == 2 and "has no list of events under items" in result.stderr
    assert "Traceback" not in result.output


def test_a_saved_log_without_timestamps_is_one_line(tmp_path):
    log = tmp_path / "plain.log"
    log.write_text("train_job: downloading a/b to /m\n")
    result = run(None, "train", "timeline", "--log", str(log))
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "timeline: the log has no Kubernetes timestamps: read it from the cluster, or save it with "
        "skyrl-hp train logs --timestamps"
    )
