"""`skyrl-hp nodes`: the HyperPod cluster's nodes with their health, and rebooting or replacing one.

Calls: sagemaker:ListClusterNodes (the list), sagemaker:DescribeClusterNode (the node an action names: it must
belong to this cluster), sagemaker:BatchRebootClusterNodes / BatchReplaceClusterNodes (the action, one node).
HyperPod's own health checks replace or reboot a failing GPU node by themselves (docs/failures.md); these
are for what they do not catch, such as a CPU-only head node, which HyperPod does not replace.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from skyrl_hyperpod.plumbing.errors import ProjectError

from ..plumbing.json_types import JsonObject
from .status import ClusterNotFound

RUNNING = "Running"
Action = Literal["reboot", "replace"]
ACTION_OPERATION = {"reboot": "batch_reboot_cluster_nodes", "replace": "batch_replace_cluster_nodes"}
ACTION_EFFECT = {
    "reboot": "restarts the instance; its pods are rescheduled and local disks keep their data",
    "replace": "terminates the instance and provisions a new one; its local disks (/opt/sagemaker, NVMe) are lost",
}


class NodeNotFound(ProjectError):
    pass


@dataclass(frozen=True)
class Node:
    node_id: str
    group: str
    instance_type: str
    status: str
    message: str
    hostname: str
    launched: datetime | None

    @property
    def healthy(self) -> bool:
        return self.status == RUNNING


def _node(summary: JsonObject) -> Node:
    state = summary.get("InstanceStatus", {})
    return Node(
        node_id=summary["InstanceId"],
        group=summary["InstanceGroupName"],
        instance_type=summary["InstanceType"],
        status=state.get("Status", "?"),
        message=" ".join(str(state.get("Message", "")).split()),
        hostname=summary.get("PrivateDnsHostname", ""),
        launched=summary.get("LaunchTime"),
    )


def list_nodes(cluster_name: str, sagemaker: Any) -> list[Node]:
    nodes: list[Node] = []
    try:
        for page in sagemaker.get_paginator("list_cluster_nodes").paginate(ClusterName=cluster_name):
            nodes += [_node(summary) for summary in page["ClusterNodeSummaries"]]
    except sagemaker.exceptions.ResourceNotFound:
        raise ClusterNotFound(cluster_name) from None
    return sorted(nodes, key=lambda node: (node.group, node.node_id))


def describe_node(cluster_name: str, node_id: str, sagemaker: Any) -> Node:
    try:
        details = sagemaker.describe_cluster_node(ClusterName=cluster_name, NodeId=node_id)["NodeDetails"]
    except sagemaker.exceptions.ResourceNotFound:
        raise NodeNotFound(node_id) from None
    return _node(details)


def act(cluster_name: str, node_id: str, action: Action, sagemaker: Any) -> str | None:
    """Run `action` on one node; None when SageMaker accepted it, else its one-line refusal."""
    answer = getattr(sagemaker, ACTION_OPERATION[action])(ClusterName=cluster_name, NodeIds=[node_id])
    for failed in answer.get("Failed", []):
        if failed.get("NodeId") == node_id:
            return f"{failed.get('ErrorCode', 'error')}: {' '.join(str(failed.get('Message', '')).split())}"
    if node_id not in answer.get("Successful", []):
        return "SageMaker did not report the node as accepted"
    return None


def render(cluster_name: str, nodes: list[Node]) -> list[str]:
    header = ("node", "group", "instance type", "health", "hostname", "launched", "message")
    rows = [
        (
            node.node_id,
            node.group,
            node.instance_type,
            node.status,
            node.hostname or "-",
            node.launched.strftime("%Y-%m-%d %H:%M") if node.launched else "-",
            node.message or "-",
        )
        for node in nodes
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = [f"cluster {cluster_name}: {len(nodes)} node(s)"]
    for row in (header, *rows):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    unhealthy = [node for node in nodes if not node.healthy]
    lines.append(f"{len(unhealthy)} node(s) not Running" if unhealthy else "every node is Running")
    return lines
