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
from skyrl_hyperpod.errors import ProblemsError
from skyrl_hyperpod.synthesized_manifests import chart_file, read_manifest_documents

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


def wait_for(
    check: Callable[[], tuple[bool, str]],
    *,
    timeout: float,
    interval: float,
    echo: Callable[[str], None],
    what: str,
) -> None:
    """Poll `check` (done, progress line) until done; print the progress line when it changes."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        done, line = check()
        if line != last:
            echo(line)
            last = line
        if done:
            return
        if time.monotonic() >= deadline:
            raise WorkloadError([f"timeout: {what} after {timeout:.0f} s; last state: {line}"])
        time.sleep(interval)


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
