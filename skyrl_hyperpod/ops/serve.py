"""Serving: who holds the GPU nodes the RayService needs and making room for it (`serve up`), its readiness, the
pod and port behind its Serve Service, and one OpenAI-style request in VisGym's format (`serve query`).

The request is the message VisGym's SkyRL environment builds (SkyRL examples/train/visgym/utils.py,
`make_image_message`): one user message whose content is the task text and the maze image as a
`data:image/png;base64,...` URL; the model answers with one action tuple such as ('move', 0). By default it is the
run's own query example: the first observation of its first eval maze (VisGym's task with SkyRL's format
instruction, and the maze frame VisGym drew), with the run's max_generate_length and temperature, which the training
job writes when it checks the checkpoint (docker/train_job.py) and the publish Job copies beside the adapter.
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
from skyrl_hyperpod.config.training_runs import QUERY_EXAMPLE_FILE
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
    """What to ask before deleting GPU holders; None when the RayService fits beside them, or when the GPU group is
    autoscaled (its workers wait for nodes Karpenter starts: `beside_training`)."""
    group = config.hyperpod.worker_group
    held = sum(h.gpu_workers for h in holders)
    needed = config.serving.worker_replicas
    if group.autoscaled or held + needed <= group.instance_count:
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
        f"{needed} (serving.worker_replicas){stop}. With hyperpod.worker_group.scaling fixed these nodes are all "
        "there is (scaling: on_demand serves beside training on nodes started for it). "
        f"Delete {'it' if len(holders) == 1 else 'them'} to make room? Checkpoints and adapters stay on the shared "
        "file system"
    )


def beside_training(config: ProjectConfig, holders: list[GpuHolder]) -> str | None:
    """With an autoscaled GPU group, what `serve up` does instead of deleting anything: the RayService's workers start
    from none and Karpenter adds nodes for them, up to the group's maximum. None on fixed nodes."""
    group = config.hyperpod.worker_group
    if not group.autoscaled:
        return None
    held = sum(h.gpu_workers for h in holders)
    free = max(group.instance_count - held, 0)
    line = (
        f"hyperpod.worker_group.scaling on_demand: the RayService runs beside {held} training GPU worker(s); its "
        f"workers start when Serve asks for replicas and Karpenter adds {group.instance_type} nodes for them "
        f"(up to {group.instance_count}, {free} free now)"
    )
    if free < config.serving.worker_replicas:
        line += f"; past that they wait until training frees a node ({config.serving.worker_replicas} wanted)"
    return line


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


class ServeError(ProjectError):
    """A request the endpoint refused or could not answer, as one line."""


def image_message(prompt: str, image_url: str) -> dict[str, Any]:
    """One user turn as SkyRL's VisGym environment builds it: the text, then the image."""
    return {
        "role": "user",
        "content": [{"type": "text", "text": prompt}, {"type": "image_url", "image_url": {"url": image_url}}],
    }


def chat_request(model: str, messages: list[dict[str, Any]], *, max_tokens: int, temperature: float) -> dict[str, Any]:
    return {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": temperature}


@dataclass(frozen=True)
class QueryExample:
    """A run's query example (docker/train_job.py `write_query_example`): the conversation and generation settings
    of its first eval episode's first turn."""

    env_id: str
    seed: int
    messages: list[dict[str, Any]]
    max_tokens: int | None
    temperature: float | None

    @property
    def prompt(self) -> str:
        """The text of its first turn."""
        content = self.messages[0]["content"] if self.messages else []
        return "".join(part.get("text", "") for part in content if part.get("type") == "text")


def parse_query_example(text: str, where: str) -> QueryExample:
    """The example in `text` (JSON), or a one-line ServeError naming `where`."""
    try:
        data = json.loads(text)
        messages = data["messages"]
        if not (isinstance(messages, list) and messages and isinstance(messages[0].get("content"), list)):
            raise ValueError("its messages are not one user turn of text and image parts")
        return QueryExample(
            env_id=str(data["env_id"]),
            seed=int(data["seed"]),
            messages=messages,
            max_tokens=int(data["max_tokens"]) if data.get("max_tokens") is not None else None,
            temperature=float(data["temperature"]) if data.get("temperature") is not None else None,
        )
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ServeError(f"{where} is not a query example train_job.py wrote: {error}") from None


def query_messages(example: QueryExample | None, prompt: str | None, image_url: str | None) -> list[dict[str, Any]]:
    """The example's first turn with `prompt` and `image_url` in place of its text and picture where given."""
    if example is None:
        if prompt is None or image_url is None:
            raise ValueError("without a query example, both the text and the picture are needed")
        return [image_message(prompt, image_url)]
    if prompt is None and image_url is None:
        return example.messages
    first = example.messages[0]
    picture = image_url or next(
        part["image_url"]["url"] for part in first["content"] if part.get("type") == "image_url"
    )
    return [image_message(prompt if prompt is not None else example.prompt, picture), *example.messages[1:]]


def query_example_uri(adapters_path: str, adapter: str) -> str:
    """Where the publish Job put an adapter's query example: its folder under dynamic_lora_loading_path."""
    return f"{adapters_path.rstrip('/')}/{adapter}/{QUERY_EXAMPLE_FILE}"


def read_s3_text(s3: Any, uri: str) -> str:
    """The object at s3://bucket/key as text, or a one-line ServeError."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    try:
        return str(s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode("utf-8"))
    except Exception as error:  # botocore's ClientError and transport errors; one line
        raise ServeError(f"cannot read {uri}: {error}") from None


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
