"""`skyrl-hp adapter publish` on the cluster: create the Job that copies an adapter to S3 (skyrl_hyperpod/
publish_job.py builds it) unless it exists, a wait_for check for its end, its state and its log.

A Job cannot be changed once created: each step and adapter name is its own Job, and one that failed stays
failed until it is deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .cluster_workloads import JOB_NAME_LABEL
from .kube import Cluster

# batch/v1 Job conditions that end it.
DONE_STATES = ("Complete", "Failed")
# The log lines printed after --wait: the end of the copy's listing of the published files.
LOG_TAIL_LINES = 50


def job_state(job: dict[str, Any]) -> str:
    """Complete or Failed (its condition), else Running (an active pod) or Pending."""
    status = job.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in DONE_STATES:
            return str(condition["type"])
    return "Running" if status.get("active") else "Pending"


def current_state(cluster: Cluster, job: dict[str, Any]) -> str:
    """The state of the Job on the cluster (Pending when it is not there)."""
    return job_state(cluster.get(job) or {})


def create_unless_present(cluster: Cluster, job: dict[str, Any]) -> str | None:
    """Create the Job; None when this created it, else the state of the Job already there (left as it is)."""
    live = cluster.get(job)
    if live is not None:
        return job_state(live)
    cluster.apply(job)
    return None


def job_done(cluster: Cluster, job: dict[str, Any]) -> Callable[[], tuple[bool, str]]:
    """A wait_for check: done once the Job is Complete or Failed."""
    name = job["metadata"]["name"]

    def check() -> tuple[bool, str]:
        state = current_state(cluster, job)
        return state in DONE_STATES, f"Job {name}: {state}"

    return check


def job_log(cluster: Cluster, job: dict[str, Any], tail: int = LOG_TAIL_LINES) -> Iterator[str]:
    """The last `tail` lines of the log of the Job's last pod listed; nothing when it has no pod."""
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    pods = cluster.pods(namespace, f"{JOB_NAME_LABEL}={name}")
    if pods:
        yield from cluster.logs(namespace, pods[-1]["metadata"]["name"], tail=tail)
