"""Serving: who holds the GPU nodes the RayService needs and making room for it (`serve up`), its readiness, the
pod and port behind its Serve Service, and one OpenAI-style request in VisGym's format (`serve query`).

The request is the message VisGym's SkyRL environment builds (SkyRL examples/train/visgym/utils.py,
`make_image_message`): one user message whose content is the task text and the maze image as a
`data:image/png;base64,...` URL; the model answers with one action tuple such as ('move', 0).
"""

from __future__ import annotations

import base64
import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.plumbing.errors import ProjectError
from skyrl_hyperpod.plumbing.upstream import GPU_RESOURCE

from .cluster_workloads import ORIGIN_KIND_LABEL, ORIGIN_NAME_LABEL, raycluster_path, rayjob_path, rayservice_path
from .kube import Cluster, KubeError

# A RayJob in one of these deployment states does not create its cluster again once it is deleted; in any
# other it does (rayjob_controller.go: `getOrCreateRayClusterInstance` in New, Initializing and Running, a new
# cluster after Retrying). Suspending deletes the cluster itself.
SETTLED_DEPLOYMENT_STATES = ("Complete", "Failed", "ValidationFailed", "Suspending", "Suspended")
ACTIVE_JOB_STATES = ("PENDING", "RUNNING")
REQUEST_TIMEOUT_SECONDS = 300

# The task as VisGym's maze_2d environment states it (gymnasium/envs/maze_2d/maze_2d.py, get_prompt, image
# mode) and SkyRL's VisGym environment asks for the answer (examples/train/visgym/env_sft.py), in this
# project's words; `serve query --prompt-file` sends VisGym's own text instead.
DEFAULT_PROMPT = (
    "You are navigating a maze shown in the image: walls are gray, paths are white, you are the blue circle and "
    "the goal is the red square. Actions: ('move', d) moves one cell, with d = 0 right, 1 up, 2 left, 3 down; "
    "('stop', 'stop') ends the episode. You succeed if you stop on the red square. Answer with exactly one "
    "action as a Python tuple, for example ('move', 0), without backticks or other formatting."
)


@dataclass(frozen=True)
class GpuHolder:
    name: str
    gpu_workers: int
    active_jobs: tuple[str, ...]
    # The unfinished RayJob that created this cluster and would create it again: deleted in its place.
    recreated_by: str | None = None


def _gpu_workers(spec: dict[str, Any]) -> int:
    count = 0
    for group in spec.get("workerGroupSpecs") or []:
        containers = ((group.get("template") or {}).get("spec") or {}).get("containers") or []
        if any(GPU_RESOURCE in ((c.get("resources") or {}).get("limits") or {}) for c in containers):
            count += int(group.get("replicas") or 0)
    return count


def gpu_holders(cluster: Cluster, namespace: str) -> list[GpuHolder]:
    """RayClusters not created by a RayService that run GPU workers, with the RayJobs still active on them."""
    clusters = cluster.list_items(f"/apis/ray.io/v1/namespaces/{namespace}/rayclusters")
    jobs = cluster.list_items(f"/apis/ray.io/v1/namespaces/{namespace}/rayjobs")
    holders = []
    for raycluster in clusters:
        metadata = raycluster.get("metadata") or {}
        labels = metadata.get("labels") or {}
        if labels.get(ORIGIN_KIND_LABEL) == "RayService":
            continue
        workers = _gpu_workers(raycluster.get("spec") or {})
        if not workers:
            continue
        name = metadata["name"]
        active = tuple(
            job["metadata"]["name"]
            for job in jobs
            if (job.get("status") or {}).get("jobStatus") in ACTIVE_JOB_STATES
            and name
            in (
                ((job.get("spec") or {}).get("clusterSelector") or {}).get("ray.io/cluster"),
                (job.get("status") or {}).get("rayClusterName"),
            )
        )
        creator = labels.get(ORIGIN_NAME_LABEL) if labels.get(ORIGIN_KIND_LABEL) == "RayJob" else None
        unfinished = any(
            job["metadata"]["name"] == creator
            and (job.get("status") or {}).get("jobDeploymentStatus") not in SETTLED_DEPLOYMENT_STATES
            for job in jobs
        )
        holders.append(GpuHolder(name, workers, active, creator if unfinished else None))
    return holders


def room_question(config: ProjectConfig, holders: list[GpuHolder]) -> str | None:
    """What to ask before deleting GPU holders; None when the RayService fits beside them."""
    group = config.hyperpod.worker_group
    held = sum(h.gpu_workers for h in holders)
    needed = config.serving.worker_replicas
    if held + needed <= group.instance_count:
        return None
    names = ", ".join(f"{h.name} ({h.gpu_workers} GPU workers)" for h in holders)
    every = "every GPU node" if held >= group.instance_count else f"{held} of the GPU nodes"
    running = [job for h in holders for job in h.active_jobs]
    stop = f"; RayJob {', '.join(running)} is still running and stops with it" if running else ""
    creators = [h.recreated_by for h in holders if h.recreated_by]
    if creators:
        stop += (
            f"; RayJob {', '.join(creators)} would create its cluster again and is deleted instead (its driver log "
            "goes too: skyrl-hp train logs > run.log keeps it)"
        )
    return (
        f"{names} hold {every} ({held} of {group.instance_count} {group.instance_type}); the RayService needs "
        f"{needed} (serving.worker_replicas){stop}. Delete {'it' if len(holders) == 1 else 'them'} to make room? "
        "Checkpoints and adapters stay on the shared file system"
    )


def make_room(cluster: Cluster, namespace: str, holders: list[GpuHolder]) -> Iterator[GpuHolder]:
    """Delete the GPU holders, yielding each once deleted: a cluster an unfinished RayJob would create again goes
    through that RayJob (KubeRay made the RayJob its owner), any other RayCluster directly."""
    for holder in holders:
        if holder.recreated_by:
            cluster.delete_path(rayjob_path(namespace, holder.recreated_by))
        else:
            cluster.delete_path(raycluster_path(namespace, holder.name))
        yield holder


def rayservice_state(live: dict[str, Any]) -> tuple[bool, str]:
    """(ready, state) of a RayService as the cluster has it: Ready by its condition or its Serve status Running."""
    status = live.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    ready = conditions.get("Ready") == "True" or status.get("serviceStatus") == "Running"
    return ready, "Ready" if ready else str(status.get("serviceStatus") or "starting")


def rayservice_ready(cluster: Cluster, namespace: str, name: str) -> Callable[[], tuple[bool, str]]:
    """A wait_for check: done once the RayService is Ready."""

    def check() -> tuple[bool, str]:
        done, state = rayservice_state(cluster.get(rayservice_path(namespace, name)) or {})
        return done, f"RayService {name}: {state}"

    return check


def serve_pod_port(cluster: Cluster, config: ProjectConfig) -> tuple[str, int]:
    """A running pod behind the RayService's Serve Service and the port to reach it on (what `kubectl
    port-forward svc/...` picks): the Service's own selector and port, read from the cluster. KubeError when there
    is none yet."""
    namespace, name = config.workloads.namespace, config.serving.rayservice_name
    service_name = f"{name}-serve-svc"  # KubeRay's name for a RayService's Serve Service
    service = cluster.get(f"/api/v1/namespaces/{namespace}/services/{service_name}")
    if service is None:
        raise KubeError(f"RayService {name} has no Serve Service yet (skyrl-hp serve up --wait)")
    spec = service.get("spec") or {}
    selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items()))
    pods = [p for p in cluster.pods(namespace, selector) if (p.get("status") or {}).get("phase") == "Running"]
    if not pods:
        raise KubeError(f"no running pod behind Service {service_name}")
    port = spec["ports"][0]
    target = port.get("targetPort") if isinstance(port.get("targetPort"), int) else port["port"]
    return str(pods[0]["metadata"]["name"]), int(target)


def image_data_url(path: Path) -> str:
    data = path.read_bytes()
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        kind = "png"
    elif data.startswith(b"\xff\xd8\xff"):
        kind = "jpeg"
    else:
        raise ValueError(f"--image {path}: not a PNG or JPEG file")
    return f"data:image/{kind};base64,{base64.b64encode(data).decode()}"


def chat_request(model: str, prompt: str, image_url: str, *, max_tokens: int, temperature: float) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": prompt},
                    {"type": "image_url", "image_url": {"url": image_url}},
                ],
            }
        ],
        "max_tokens": max_tokens,
        "temperature": temperature,
    }


class ServeError(ProjectError):
    """A request the endpoint refused or could not answer, as one line."""


def send_chat(base_url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{base_url}/v1/chat/completions",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS) as response:
            return dict(json.loads(response.read().decode()))
    except urllib.error.HTTPError as error:
        detail = error.read().decode(errors="replace")
        with contextlib.suppress(ValueError, AttributeError):
            detail = json.loads(detail).get("error", {}).get("message") or detail
        hint = (
            f": no adapter {body['model'].split(':', 1)[1]!r} in the adapters prefix (skyrl-hp adapter publish)"
            if error.code == 404 and ":" in body["model"]
            else ""
        )
        raise ServeError(
            f"POST {base_url}/v1/chat/completions: HTTP {error.code}{hint}: {str(detail).strip()[:300]}"
        ) from None
    except (urllib.error.URLError, OSError) as error:
        raise ServeError(f"POST {base_url}/v1/chat/completions: {getattr(error, 'reason', error)}") from None


def answer_text(response: dict[str, Any]) -> str:
    choices = response.get("choices") or []
    if not choices:
        raise ServeError(f"the endpoint answered without choices: {json.dumps(response)[:300]}")
    return str((choices[0].get("message") or {}).get("content") or "")
