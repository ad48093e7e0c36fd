"""`skyrl-hp status`: live HyperPod node counts per instance group against the configured targets (read-only).

With continuous provisioning a deploy succeeds before any node runs, and HyperPod keeps retrying nodes
that fail (a lifecycle script error, no capacity): this command shows how far each group is from its
configured count and why nodes failed. Calls: sagemaker:DescribeCluster, sagemaker:ListClusterNodes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from skyrl_hyperpod.config import ProjectConfig

# ClusterInstanceStatusDetails.Status values that count as a working node.
RUNNING = "Running"
FAILURE = "Failure"
# At most this many distinct failure messages per group (they repeat while HyperPod retries).
MAX_FAILURE_MESSAGES = 3


class ClusterNotFound(Exception):
    pass


@dataclass(frozen=True)
class GroupStatus:
    name: str
    instance_type: str
    configured: int
    target: int | None  # the live group's TargetCount; None: the cluster has no such group
    nodes: Counter = field(default_factory=Counter)  # node status -> count
    failure_messages: tuple[str, ...] = ()

    @property
    def running(self) -> int:
        return self.nodes[RUNNING]

    def problems(self) -> list[str]:
        if self.target is None:
            return [f"group {self.name}: missing from the live cluster (config wants {self.configured} nodes)"]
        found = []
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
    nodes: dict[str, list[dict]] = {}
    for page in sagemaker.get_paginator("list_cluster_nodes").paginate(ClusterName=name):
        for node in page["ClusterNodeSummaries"]:
            nodes.setdefault(node["InstanceGroupName"], []).append(node)
    live = {group["InstanceGroupName"]: group for group in cluster.get("InstanceGroups", [])}
    groups = []
    for configured in (config.hyperpod.head_group, config.hyperpod.worker_group):
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
            str(group.configured),
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
                "target": group.target,
                "running": group.running,
                "nodes": dict(group.nodes),
            }
            for group in status.groups
        ],
        "unexpected_groups": status.unexpected_groups,
        "problems": status.problems(),
    }
