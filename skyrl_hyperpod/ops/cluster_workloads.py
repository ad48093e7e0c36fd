"""The workloads on the cluster: apply the synthesized manifests in order, wait for the Ray pods, read
the KubeRay objects' status, find the pods whose logs matter. Used by `skyrl-hp train`, `serve`, `adapter`.

The manifests are the ones `cdk8s synth` wrote (dist/ by default), refused while they still carry
placeholder stack outputs: what runs is exactly what was synthesized and validated.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.plumbing.errors import ProblemsError
from skyrl_hyperpod.values.synthesized_manifests import chart_file, read_manifest_documents

from .kube import Cluster, KubeError, describe

RAY_API = "/apis/ray.io/v1"
# KubeRay's labels on the pods of a RayCluster, and on the RayClusters a RayJob or a RayService creates: the
# kind and the name of their creator (ray-operator/controllers/ray/utils/constant.go).
RAY_CLUSTER_LABEL = "ray.io/cluster"
RAY_NODE_TYPE_LABEL = "ray.io/node-type"
ORIGIN_KIND_LABEL = "ray.io/originated-from-crd"
ORIGIN_NAME_LABEL = "ray.io/originated-from-cr-name"
# The Kubernetes Job controller labels a Job's pods with the Job's name; KubeRay's K8sJobMode submitter
# Job is named after its RayJob.
JOB_NAME_LABEL = "job-name"
PLACEHOLDER_MARK = "placeholder"  # StackOutputs.placeholder marks every fake value with it


class WorkloadError(ProblemsError):
    """A manifest that cannot be applied, or a wait that ended badly: one line each."""


def load_chart(dist: Path, chart_id: str) -> list[dict[str, Any]]:
    """The objects of one synthesized chart, refused while they carry placeholder stack outputs."""
    file = dist / chart_file(chart_id)
    if not file.is_file():
        raise WorkloadError(
            [f"manifest error: {file} does not exist: synthesize first (make synth-k8s, with the same configuration)"]
        )
    try:
        documents = [d.content for d in read_manifest_documents(dist, prefix="manifest error") if d.file == file]
    except ProblemsError as error:
        raise WorkloadError(error.problems) from None
    if any(PLACEHOLDER_MARK in _text(doc).lower() for doc in documents):
        raise WorkloadError(
            [
                f"manifest error: {file} still carries placeholder stack outputs: write them (skyrl-hp outputs), then "
                "synthesize again (make synth-k8s)"
            ]
        )
    return documents


def _text(value: Any) -> str:
    import json

    return json.dumps(value)


def apply_all(cluster: Cluster, objects: list[dict[str, Any]], echo: Callable[[str], None]) -> None:
    for obj in objects:
        cluster.apply(obj)
        echo(f"applied {describe(obj)}")


# --- the training RayCluster -----------------------------------------------------------------------------------


def _ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    return status.get("phase") == "Running" and conditions.get("Ready") == "True"


@dataclass(frozen=True)
class PodCounts:
    head_ready: bool
    workers_ready: int
    workers_wanted: int
    pending: tuple[str, ...]  # pods not Ready, with their phase

    @property
    def complete(self) -> bool:
        return self.head_ready and self.workers_ready >= self.workers_wanted

    def line(self, name: str) -> str:
        head = "head Ready" if self.head_ready else "head not Ready"
        waiting = f"; waiting: {', '.join(self.pending)}" if self.pending else ""
        return f"RayCluster {name}: {head}, {self.workers_ready}/{self.workers_wanted} workers Ready{waiting}"


def ray_pod_counts(cluster: Cluster, namespace: str, name: str, workers_wanted: int) -> PodCounts:
    pods = cluster.pods(namespace, f"{RAY_CLUSTER_LABEL}={name}")
    heads = [p for p in pods if (p["metadata"].get("labels") or {}).get(RAY_NODE_TYPE_LABEL) == "head"]
    workers = [p for p in pods if (p["metadata"].get("labels") or {}).get(RAY_NODE_TYPE_LABEL) == "worker"]
    pending = tuple(
        f"{p['metadata']['name']} ({(p.get('status') or {}).get('phase', '?')})" for p in pods if not _ready(p)
    )
    return PodCounts(any(_ready(p) for p in heads), sum(1 for p in workers if _ready(p)), workers_wanted, pending)


# Every wait prints the elapsed time and the current state at least this often, so a long wait (nodes booting,
# images pulling) never looks hung.
HEARTBEAT_SECONDS = 30.0


@dataclass(frozen=True)
class Clock:
    """What a wait reads the time with and sleeps with: the real ones, or a test's fake clock."""

    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


def duration(seconds: float) -> str:
    """`45 s`, `2 min 05 s`, `1 h 02 min`: the elapsed time of a wait as a person reads it."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def wait_for(
    check: Callable[[], tuple[bool, str]],
    *,
    timeout: float,
    interval: float,
    echo: Callable[[str], None],
    what: str,
    clock: Clock | None = None,
) -> None:
    """Poll `check` (done, progress line) until done or `timeout` seconds have passed (WorkloadError naming the
    last state). The progress line is printed when it changes, and at least every HEARTBEAT_SECONDS with the
    elapsed time."""
    clock = clock or Clock()
    start = clock.now()
    deadline, last_beat = start + timeout, start
    last = ""
    while True:
        done, line = check()
        now = clock.now()
        if now - last_beat >= HEARTBEAT_SECONDS and not done:
            echo(f"still waiting after {duration(now - start)} (timeout {duration(timeout)}): {line}")
            last, last_beat = line, now
        elif line != last:
            echo(line)
            last = line
        if done:
            return
        if now >= deadline:
            raise WorkloadError([f"timeout: {what} after {timeout:.0f} s; last state: {line}"])
        # Never sleep past the next heartbeat or the deadline.
        clock.sleep(max(0.0, min(interval, last_beat + HEARTBEAT_SECONDS - now, deadline - now)))


# --- status ----------------------------------------------------------------------------------------------------


def rayjob_path(namespace: str, name: str) -> str:
    return f"{RAY_API}/namespaces/{namespace}/rayjobs/{name}"


def raycluster_path(namespace: str, name: str) -> str:
    return f"{RAY_API}/namespaces/{namespace}/rayclusters/{name}"


def rayservice_path(namespace: str, name: str) -> str:
    return f"{RAY_API}/namespaces/{namespace}/rayservices/{name}"


# KubeRay v1.7.0's deletionRules match jobStatus SUCCEEDED or FAILED (or deployment Failed) only, and a job
# stopped through Ray (`ray job stop`, the dashboard) ends STOPPED with deployment Complete: its cluster stays.
STOPPED_KEEPS_CLUSTER = "no deletion rule covers STOPPED: its cluster holds the GPU nodes until skyrl-hp train stop"


def training_status(cluster: Cluster, config: ProjectConfig) -> dict[str, Any]:
    """The training RayCluster (unless jobs are self-contained) and each experiment's RayJob."""
    namespace, training = config.workloads.namespace, config.training
    result: dict[str, Any] = {"namespace": namespace, "raycluster": None, "jobs": []}
    if not training.jobs.self_contained_jobs:
        name = training.cluster.raycluster_name
        live = cluster.get(raycluster_path(namespace, name))
        if live is not None:
            status = live.get("status") or {}
            counts = ray_pod_counts(cluster, namespace, name, config.derived.worker_layout.replicas)
            result["raycluster"] = {
                "name": name,
                "state": status.get("state") or "-",
                "head_ready": counts.head_ready,
                "workers_ready": counts.workers_ready,
                "workers_wanted": counts.workers_wanted,
            }
        else:
            result["raycluster"] = {"name": name, "state": "absent"}
    for run in config.derived.runs:
        live = cluster.get(rayjob_path(namespace, run.job_name))
        status = (live or {}).get("status") or {}
        kept_cluster: str = status.get("rayClusterName") or ""
        stopped_own_cluster = (
            status.get("jobStatus") == "STOPPED"
            and not ((live or {}).get("spec") or {}).get("clusterSelector")
            and kept_cluster != ""
            and cluster.get(raycluster_path(namespace, kept_cluster)) is not None
        )
        result["jobs"].append(
            {
                "experiment": run.experiment.name,
                "rayjob": run.job_name,
                "job_status": status.get("jobStatus") or ("-" if live else "absent"),
                "deployment_status": status.get("jobDeploymentStatus") or "-",
                "start_time": status.get("startTime"),
                "end_time": status.get("endTime"),
                "message": status.get("message"),
                "note": STOPPED_KEEPS_CLUSTER if stopped_own_cluster else None,
            }
        )
    return result


def render_training_status(status: dict[str, Any]) -> list[str]:
    lines = []
    rc = status["raycluster"]
    if rc is not None:
        if rc["state"] == "absent":
            lines.append(f"RayCluster {rc['name']}: not applied (skyrl-hp train start)")
        else:
            head = "head Ready" if rc["head_ready"] else "head not Ready"
            lines.append(
                f"RayCluster {rc['name']}: {rc['state']}, {head}, {rc['workers_ready']}/{rc['workers_wanted']} workers Ready"
            )
    for job in status["jobs"]:
        text = f"RayJob {job['rayjob']} ({job['experiment']}): {job['job_status']}"
        if job["job_status"] != "absent":
            text += f", deployment {job['deployment_status']}"
        if job["start_time"]:
            text += f", started {job['start_time']}"
        if job["end_time"]:
            text += f", ended {job['end_time']}"
        if job["message"]:
            text += f": {job['message']}"
        if job["note"]:
            text += f" ({job['note']})"
        lines.append(text)
    return lines


FAILED_JOB_STATES = ("FAILED", "STOPPED")
# Ray's terminal job states: KubeRay asks Ray to stop a job that is in none of them when its RayJob is deleted
# (ray-operator/apis/ray/v1/rayjob_types.go `IsJobTerminal`, rayjob_controller.go's deletion branch).
TERMINAL_JOB_STATES = ("SUCCEEDED", "FAILED", "STOPPED")


@dataclass(frozen=True)
class LiveRayJob:
    """A RayJob as the cluster has it: what `train stop` deletes and waits for."""

    name: str
    path: str
    job_status: str  # Ray's job status; "-" before KubeRay submitted the job
    own_clusters: tuple[str, ...]  # the RayClusters it created (they go with it: KubeRay makes it their owner)
    selected_cluster: str | None  # spec.clusterSelector's RayCluster, which is not the job's to delete

    @property
    def unfinished(self) -> bool:
        return self.job_status not in TERMINAL_JOB_STATES

    @property
    def state(self) -> str:
        return "not submitted yet" if self.job_status == "-" else self.job_status


# KubeRay's RayJob deployment states (ray-operator/apis/ray/v1/rayjob_types.go, JobDeploymentStatus): New (or
# none yet) and Initializing while its Ray cluster comes up, Running once the submitter runs the Ray job,
# Retrying between attempts, Complete or Failed at the end.
@dataclass(frozen=True)
class RayJobProgress:
    name: str
    deployment: str
    job_status: str  # Ray's job status; "-" before KubeRay submitted the job
    message: str
    pods: PodCounts | None  # of the Ray cluster it runs on, once KubeRay named it
    ray_cluster: str

    @property
    def running(self) -> bool:
        """Its cluster is up and the Ray job runs (or already succeeded)."""
        return (self.deployment, self.job_status) in (("Running", "RUNNING"), ("Complete", "SUCCEEDED"))

    @property
    def failed(self) -> bool:
        return self.deployment == "Failed" or (self.deployment == "Complete" and self.job_status != "SUCCEEDED")

    def line(self) -> str:
        text = f"RayJob {self.name}: deployment {self.deployment}, job {self.job_status}"
        if self.pods is not None:
            text += f"; {self.pods.line(self.ray_cluster)}"
        return text + (f" ({self.message})" if self.message and self.failed else "")


def rayjob_progress(cluster: Cluster, namespace: str, rayjob: str, workers_wanted: int) -> RayJobProgress:
    live = cluster.get(rayjob_path(namespace, rayjob)) or {}
    status = live.get("status") or {}
    ray_cluster = str(status.get("rayClusterName") or "")
    pods = ray_pod_counts(cluster, namespace, ray_cluster, workers_wanted) if ray_cluster else None
    return RayJobProgress(
        name=rayjob,
        deployment=str(status.get("jobDeploymentStatus") or ("New" if live else "not created")),
        job_status=str(status.get("jobStatus") or "-"),
        message=str(status.get("message") or ""),
        pods=pods,
        ray_cluster=ray_cluster,
    )


def rayjobs_running(
    cluster: Cluster, namespace: str, names: list[str], workers_wanted: int
) -> Callable[[], tuple[bool, str]]:
    """A wait_for check: done once a RayJob's Ray cluster is up and its Ray job runs; with several RayJobs (on the
    cluster from before), the first one running is enough and the rest are named as queued. A RayJob that failed
    ends the wait (WorkloadError)."""

    def check() -> tuple[bool, str]:
        progress = [rayjob_progress(cluster, namespace, name, workers_wanted) for name in names]
        failed = [p for p in progress if p.failed]
        if failed:
            raise WorkloadError(
                [
                    f"train start: {failed[0].line()}: the job ended without running; its driver log: "
                    "skyrl-hp train logs (skyrl-hp train status shows every RayJob)"
                ]
            )
        running = [p for p in progress if p.running]
        line = "; ".join(p.line() for p in progress)
        if running and len(running) < len(progress):
            queued = ", ".join(p.name for p in progress if not p.running)
            line = "; ".join(p.line() for p in running) + f"; queued for the GPU nodes: {queued}"
        return bool(running), line

    return check


def unfinished_rayjobs(cluster: Cluster, namespace: str, names: list[str]) -> list[LiveRayJob]:
    """The RayJobs of `names` on the cluster whose Ray job has not ended, or whose own cluster is still there (it
    holds the head node's training share and every GPU node until KubeRay deletes it)."""
    return [job for job in live_rayjobs(cluster, namespace, names) if job.unfinished or job.own_clusters]


def rayjob_ended(cluster: Cluster, namespace: str, rayjob: str) -> Callable[[], tuple[bool, str]]:
    """A wait_for check: done once the RayJob's Ray job SUCCEEDED and the cluster it created is gone, so the next
    experiment's pods can take the GPU nodes. A job that ended any other way ends the wait (WorkloadError): the
    next experiment would likely fail the same way, and its cost is better spent after a look."""

    def check() -> tuple[bool, str]:
        job = next(iter(live_rayjobs(cluster, namespace, [rayjob])), None)
        if job is None:
            raise WorkloadError(
                [f"train start: RayJob {rayjob} is gone before it ended (deleted: skyrl-hp train stop?)"]
            )
        deployment = ((cluster.get(job.path) or {}).get("status") or {}).get("jobDeploymentStatus")
        if job.job_status in FAILED_JOB_STATES or deployment == "Failed":
            ended = job.job_status if job.job_status in FAILED_JOB_STATES else "with deployment Failed"
            raise WorkloadError(
                [
                    f"train start: RayJob {rayjob} ended {ended}: the experiments after it are not started; "
                    f"its driver log: skyrl-hp train logs (skyrl-hp train status shows every RayJob)"
                ]
            )
        line = f"RayJob {rayjob}: job {job.state}"
        if job.own_clusters:
            line += f"; its RayCluster {', '.join(job.own_clusters)} still holds the nodes"
        return not job.unfinished and not job.own_clusters, line

    return check


def being_deleted(cluster: Cluster, namespace: str, rayjob: str) -> bool:
    """The RayJob exists and carries a deletionTimestamp (KubeRay's finalizer has not let it go yet)."""
    live = cluster.get(rayjob_path(namespace, rayjob)) or {}
    return bool((live.get("metadata") or {}).get("deletionTimestamp"))


def created_clusters(cluster: Cluster, namespace: str, rayjob: str) -> list[str]:
    """The RayClusters a RayJob created, by the labels KubeRay gives them (whatever its status names: a retry
    clears status.rayClusterName before the next cluster exists)."""
    selector = f"{ORIGIN_KIND_LABEL}=RayJob,{ORIGIN_NAME_LABEL}={rayjob}"
    return [
        item["metadata"]["name"]
        for item in cluster.list_items(f"{RAY_API}/namespaces/{namespace}/rayclusters", selector)
    ]


def live_rayjobs(cluster: Cluster, namespace: str, names: list[str]) -> list[LiveRayJob]:
    """The RayJobs of `names` that exist on the cluster, in that order."""
    found = []
    for name in names:
        path = rayjob_path(namespace, name)
        live = cluster.get(path)
        if live is None:
            continue
        status, spec = live.get("status") or {}, live.get("spec") or {}
        found.append(
            LiveRayJob(
                name=name,
                path=path,
                job_status=status.get("jobStatus") or "-",
                own_clusters=tuple(created_clusters(cluster, namespace, name)),
                selected_cluster=(spec.get("clusterSelector") or {}).get(RAY_CLUSTER_LABEL),
            )
        )
    return found


def submitter_pod(cluster: Cluster, namespace: str, rayjob: str) -> str:
    """The newest pod of the RayJob's submitter Job: its log is the Ray job's driver log."""
    pods = cluster.pods(namespace, f"{JOB_NAME_LABEL}={rayjob}")
    if not pods:
        raise WorkloadError(
            [
                f"logs: RayJob {rayjob} has no submitter pod yet (it is created once the RayCluster is ready; "
                "skyrl-hp train status)"
            ]
        )
    newest = max(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")
    return str(newest["metadata"]["name"])


def ensure_exists(cluster: Cluster, path: str, what: str) -> dict[str, Any]:
    live = cluster.get(path)
    if live is None:
        raise WorkloadError([f"{what} does not exist on the cluster"])
    return live


__all__ = ["KubeError", "WorkloadError"]
