"""`skyrl-hp status`: live HyperPod node counts per instance group against the configured targets (read-only).

With continuous provisioning a deploy succeeds before any node runs, and HyperPod keeps retrying nodes
that fail (a lifecycle script error, no capacity): this command shows how far each group is from its
configured count and why nodes failed. Calls: sagemaker:DescribeCluster, sagemaker:ListClusterNodes.

With access to the EKS cluster (reached as every cluster command reaches it: cli/common.py `connect`) it also
shows each experiment's RayJob: KubeRay's deployment status, how many attempts failed and were retried, and the
newest complete checkpoint its current attempt's driver log names (read-only: list rayjobs and pods, read one
pod log).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.plumbing.errors import ProjectError

from ..plumbing.json_types import JsonObject
from .cluster_workloads import RAY_API, WorkloadError, submitter_pod
from .kube import Cluster

# ClusterInstanceStatusDetails.Status values that count as a working node.
RUNNING = "Running"
FAILURE = "Failure"
# At most this many distinct failure messages per group (they repeat while HyperPod retries).
MAX_FAILURE_MESSAGES = 3


class ClusterNotFound(ProjectError):
    pass


@dataclass(frozen=True)
class GroupStatus:
    name: str
    instance_type: str
    configured: int
    target: int | None  # the live group's TargetCount; None: the cluster has no such group
    nodes: Counter[str] = field(default_factory=Counter)  # node status -> count
    failure_messages: tuple[str, ...] = ()
    # scaling on_demand: `configured` is the most nodes Karpenter starts, and the live target follows the pods.
    autoscaled: bool = False

    @property
    def configured_text(self) -> str:
        return f"0-{self.configured}" if self.autoscaled else str(self.configured)

    @property
    def running(self) -> int:
        return self.nodes[RUNNING]

    def problems(self) -> list[str]:
        if self.target is None:
            return [f"group {self.name}: missing from the live cluster (config wants {self.configured} nodes)"]
        found = []
        if self.autoscaled:
            if self.running > self.configured:
                found.append(
                    f"group {self.name}: {self.running} nodes running, more than the NodePool's {self.configured}"
                )
            return found + [f"group {self.name}: node failure: {message}" for message in self.failure_messages]
        if self.target != self.configured:
            found.append(
                f"group {self.name}: live target {self.target} differs from the config's {self.configured} "
                "(a deploy is pending, or the cluster was changed outside CloudFormation)"
            )
        if self.running < self.configured:
            waiting = ", ".join(
                f"{count} {status}" for status, count in sorted(self.nodes.items()) if status != RUNNING
            )
            why = f" ({waiting})" if waiting else ""
            found.append(f"group {self.name}: {self.running} of {self.configured} nodes running{why}")
        found += [f"group {self.name}: node failure: {message}" for message in self.failure_messages]
        return found


@dataclass(frozen=True)
class ClusterStatus:
    name: str
    status: str
    failure_message: str | None
    groups: list[GroupStatus]
    unexpected_groups: list[str]

    def problems(self) -> list[str]:
        found = []
        if self.status != "InService":
            reason = f": {self.failure_message}" if self.failure_message else ""
            found.append(f"cluster {self.name} is {self.status}, not InService{reason}")
        for group in self.groups:
            found += group.problems()
        found += [f"group {name}: in the live cluster but not in the config" for name in self.unexpected_groups]
        return found


def fetch_status(config: ProjectConfig, sagemaker: Any) -> ClusterStatus:
    name = config.names.hyperpod_cluster
    try:
        cluster = sagemaker.describe_cluster(ClusterName=name)
    except sagemaker.exceptions.ResourceNotFound:
        raise ClusterNotFound(name) from None
    nodes: dict[str, list[JsonObject]] = {}
    for page in sagemaker.get_paginator("list_cluster_nodes").paginate(ClusterName=name):
        for node in page["ClusterNodeSummaries"]:
            nodes.setdefault(node["InstanceGroupName"], []).append(node)
    live = {group["InstanceGroupName"]: group for group in cluster.get("InstanceGroups", [])}
    groups = []
    for configured in config.hyperpod.instance_groups.values():
        group_nodes = nodes.get(configured.name, [])
        messages = [
            node["InstanceStatus"].get("Message", "").strip() or "no message"
            for node in group_nodes
            if node["InstanceStatus"]["Status"] == FAILURE
        ]
        groups.append(
            GroupStatus(
                name=configured.name,
                instance_type=configured.instance_type,
                configured=configured.instance_count,
                autoscaled=configured.autoscaled,
                target=live[configured.name].get("TargetCount") if configured.name in live else None,
                nodes=Counter(node["InstanceStatus"]["Status"] for node in group_nodes),
                failure_messages=tuple(dict.fromkeys(messages))[:MAX_FAILURE_MESSAGES],
            )
        )
    configured_names = {group.name for group in groups}
    return ClusterStatus(
        name=name,
        status=cluster["ClusterStatus"],
        failure_message=cluster.get("FailureMessage"),
        groups=groups,
        unexpected_groups=sorted(set(live) - configured_names),
    )


def render(status: ClusterStatus) -> list[str]:
    lines = [f"cluster {status.name}: {status.status}"]
    header = ("group", "instance type", "config", "target", "running", "other nodes")
    rows = [
        (
            group.name,
            group.instance_type,
            group.configured_text,
            "-" if group.target is None else str(group.target),
            str(group.running),
            ", ".join(f"{count} {state}" for state, count in sorted(group.nodes.items()) if state != RUNNING) or "-",
        )
        for group in status.groups
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    problems = status.problems()
    lines += [f"FAIL {problem}" for problem in problems]
    lines.append(f"{len(problems)} problem(s)" if problems else "every group runs its configured node count")
    return lines


# --- RayJobs: retries and the newest checkpoint (Kubernetes API, read-only) ----------------------------------

# SkyRL's log lines (skyrl/train/trainer.py): save_checkpoints logs this after latest_ckpt_global_step.txt is
# written, so it names a complete checkpoint; load_checkpoints logs the step a retry resumes from.
SAVED_CHECKPOINT = re.compile(r"Successfully saved checkpoint for global_step_(\d+)")
RESUMED_CHECKPOINT = re.compile(r"Resuming from global_step: (\d+)")


@dataclass(frozen=True)
class RayJobStatus:
    name: str
    deployment_status: str  # KubeRay's jobDeploymentStatus; "not applied" when the RayJob does not exist
    job_status: str
    failed_attempts: int
    backoff_limit: int | None
    checkpoint_step: int | None  # newest complete checkpoint the submitter's log names
    checkpoint_note: str = ""

    @property
    def retries(self) -> str:
        limit = "no retries (shared cluster)" if self.backoff_limit is None else f"of {self.backoff_limit}"
        # status.failed counts every failed attempt, the last one too.
        retried = max(0, self.failed_attempts - (1 if self.deployment_status == "Failed" else 0))
        return f"{retried} {limit}"

    def problems(self) -> list[str]:
        if self.deployment_status in ("Failed", "ValidationFailed"):
            return [f"RayJob {self.name}: {self.deployment_status} after {self.failed_attempts} failed attempt(s)"]
        return []


def checkpoint_from_log(lines: Iterable[str]) -> int | None:
    newest = None
    for line in lines:
        for pattern in (SAVED_CHECKPOINT, RESUMED_CHECKPOINT):
            for match in pattern.finditer(line):
                newest = max(newest or 0, int(match.group(1)))
    return newest


def _submitter_checkpoint(cluster: Cluster, namespace: str, job_name: str) -> tuple[int | None, str]:
    try:
        pod = submitter_pod(cluster, namespace, job_name)
    except WorkloadError:
        return None, "no submitter pod (its log holds the driver's output)"
    step = checkpoint_from_log(cluster.logs(namespace, pod))
    return step, "" if step is not None else "none in the current attempt's log yet"


def fetch_job_statuses(config: ProjectConfig, cluster: Cluster) -> list[RayJobStatus]:
    """Each configured experiment's RayJob: KubeRay's status (failed attempts, backoffLimit) and the newest
    complete checkpoint its current attempt's driver log names."""
    namespace = config.workloads.namespace
    listed = cluster.list_items(f"{RAY_API}/namespaces/{namespace}/rayjobs")
    by_name = {item["metadata"]["name"]: item for item in listed}
    statuses = []
    for run in config.derived.runs:
        item = by_name.get(run.job_name)
        if item is None:
            statuses.append(RayJobStatus(run.job_name, "not applied", "-", 0, None, None))
            continue
        status, spec = item.get("status") or {}, item.get("spec") or {}
        step, note = _submitter_checkpoint(cluster, namespace, run.job_name)
        statuses.append(
            RayJobStatus(
                name=run.job_name,
                deployment_status=status.get("jobDeploymentStatus") or "New",
                job_status=status.get("jobStatus") or "-",
                failed_attempts=int(status.get("failed") or 0),
                backoff_limit=spec.get("backoffLimit"),
                checkpoint_step=step,
                checkpoint_note=note,
            )
        )
    return statuses


def render_jobs(jobs: list[RayJobStatus]) -> list[str]:
    header = ("rayjob", "deployment", "job", "retries", "newest checkpoint")
    rows = [
        (
            job.name,
            job.deployment_status,
            job.job_status,
            job.retries if job.deployment_status != "not applied" else "-",
            f"global_step_{job.checkpoint_step}" if job.checkpoint_step is not None else (job.checkpoint_note or "-"),
        )
        for job in jobs
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (header, *rows)
    ]
    return lines + [f"FAIL {problem}" for job in jobs for problem in job.problems()]


def as_dict(status: ClusterStatus) -> dict[str, Any]:
    """`skyrl-hp status --json`."""
    return {
        "cluster": status.name,
        "status": status.status,
        "failure_message": status.failure_message,
        "groups": [
            {
                "name": group.name,
                "instance_type": group.instance_type,
                "configured": group.configured,
                "scaling": "on_demand" if group.autoscaled else "fixed",
                "target": group.target,
                "running": group.running,
                "nodes": dict(group.nodes),
            }
            for group in status.groups
        ],
        "unexpected_groups": status.unexpected_groups,
        "problems": status.problems(),
    }
