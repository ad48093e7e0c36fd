"""Ray's own HTTP APIs on the head's port 8265, reached through a port-forward, with the cluster's token.

KubeRay keeps a RayCluster's token in a Secret labelled `ray.io/cluster=<name>` under `auth_token`; Ray's
dashboard accepts it as `Authorization: Bearer <token>` (ray/_private/authentication/authentication_constants.py).
Jobs are submitted through Ray's Jobs REST API (`POST /api/jobs/`, https://docs.ray.io/en/latest/cluster/
running-applications/job-submission/rest.html), so no Ray installation is needed here; the node summary
(`GET /nodes?view=summary`, ray/dashboard/modules/node/node_head.py) carries each node's object store.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from skyrl_hyperpod.plumbing.errors import ProjectError
from skyrl_hyperpod.plumbing.upstream import RAY_DASHBOARD_PORT

from .kube import Cluster, KubeError

DASHBOARD_PORT = RAY_DASHBOARD_PORT
TOKEN_KEY = "auth_token"
REQUEST_TIMEOUT_SECONDS = 60


class RayApiError(ProjectError):
    """A Ray API call that failed, as one line."""


def head_pod(cluster: Cluster, namespace: str, raycluster: str) -> str:
    pods = cluster.pods(namespace, f"ray.io/cluster={raycluster},ray.io/node-type=head")
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    if not running:
        raise KubeError(f"RayCluster {raycluster} has no running head pod (skyrl-hp train status)")
    return str(running[0]["metadata"]["name"])


def cluster_token(cluster: Cluster, namespace: str, raycluster: str) -> str | None:
    """The RayCluster's auth token, or None when the cluster has no token Secret (token auth off)."""
    secrets = cluster.list_items(f"/api/v1/namespaces/{namespace}/secrets", f"ray.io/cluster={raycluster}")
    for secret in secrets:
        value = (secret.get("data") or {}).get(TOKEN_KEY)
        if value:
            return base64.b64decode(value).decode()
    return None


def _request(method: str, url: str, token: str | None, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS) as response:
            text = response.read().decode()
    except urllib.error.HTTPError as error:
        detail = error.read().decode(errors="replace").strip().splitlines()
        hint = ": the cluster's token was refused" if error.code in (401, 403) else ""
        raise RayApiError(f"{method} {url}: HTTP {error.code}{hint}: {detail[0] if detail else error.reason}") from None
    except (urllib.error.URLError, OSError) as error:
        raise RayApiError(f"{method} {url}: {getattr(error, 'reason', error)}") from None
    return json.loads(text) if text else None


def submit_job(base_url: str, token: str | None, entrypoint: str, runtime_env: dict[str, Any] | None,
               submission_id: str | None = None) -> str:  # fmt: skip
    """Submit through the Jobs REST API; the submission id."""
    body: dict[str, Any] = {"entrypoint": entrypoint}
    if runtime_env:
        body["runtime_env"] = runtime_env
    if submission_id:
        body["submission_id"] = submission_id
    answer = _request("POST", f"{base_url}/api/jobs/", token, body) or {}
    return str(answer.get("submission_id") or answer.get("job_id"))


@dataclass(frozen=True)
class NodeStore:
    node_ip: str
    is_head: bool
    object_store_bytes: int


def node_object_stores(base_url: str, token: str | None) -> list[NodeStore]:
    """Each alive node's object store capacity, as `ray status` shows it."""
    answer = _request("GET", f"{base_url}/nodes?view=summary", token) or {}
    nodes = []
    for node in (answer.get("data") or {}).get("summary") or []:
        # The dashboard camel-cases what it serves: raylet.resourcesTotal.objectStoreMemory (bytes) is the
        # store's capacity, raylet.objectStore{Used,Available}Memory its use (checked against Ray 2.58).
        raylet = node.get("raylet") or {}
        if raylet.get("state", "ALIVE") != "ALIVE":
            continue
        total = (raylet.get("resourcesTotal") or {}).get("objectStoreMemory")
        if total is None:
            total = int(raylet.get("objectStoreUsedMemory", 0)) + int(raylet.get("objectStoreAvailableMemory", 0))
        nodes.append(
            NodeStore(
                node_ip=str(raylet.get("nodeManagerAddress") or node.get("ip") or "?"),
                is_head=bool(raylet.get("isHeadNode")),
                object_store_bytes=int(total),
            )
        )
    return nodes
