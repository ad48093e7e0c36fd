"""`skyrl-hp train timeline`: how a training run's start spent its time, from Kubernetes events and the job's log.

Each milestone is read where it is recorded:
- the Ray cluster's pods, from the namespace's Kubernetes events (the kubelet's `Scheduled`, `Pulled`, `Started`;
  https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/event-v1/). KubeRay names a cluster's pods
  `<cluster>-head-<suffix>` and `<cluster>-<group>-worker-<suffix>` (ray-operator/controllers/ray/utils/util.go,
  `PodGenerateName`). The API server keeps events for an hour by default (kube-apiserver `--event-ttl`), so an
  older start shows those milestones as not recorded.
- the preparation, from the job script's own lines (docker/skyrl_hp_job) (`train_job: ...`) in the driver log, and the attempt's
  first step, which train_job's progress callback reports from the trainer's process whatever `trainer.logger` is
  (SkyRL prints its `Step N:` line only with the console logger).
- SkyRL's, from the lines it logs at the release the image pins: `HTTP Inference: proxy_url=...` once every vLLM
  server is up and the router started (skyrl/backends/skyrl_train/inference_servers/setup.py, colocated or not),
  or `HTTP Inference: Colocated mode - slept inference engines after startup` (skyrl/train/entrypoints/main_base.py,
  right after it when colocated), then `init policy/ref/critic models done` (skyrl/train/trainer.py), and the first
  training step's `Step N:` metrics line (N >= 1; step 0 is the evaluation before training,
  skyrl_hyperpod/ops/metrics.py).

The log's times are the ones Kubernetes stamps on each line (`timestamps=true`, RFC 3339 in UTC), so a saved log is
read only if it was saved with them (`skyrl-hp train logs --timestamps > FILE`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from skyrl_hyperpod.plumbing.errors import InputError

from .metrics import split_ray_prefix

POD_SCHEDULED = "pod scheduled"
IMAGE_PULLED = "image pulled"
WORKERS_UP = "Ray workers up"
MODEL_DOWNLOADED = "model downloaded"
DATASETS_PREPARED = "datasets prepared"
SKYRL_STARTED = "SkyRL started"
ENGINES_READY = "vLLM engines ready"
MODELS_READY = "policy and reference models ready"
FIRST_STEP = "first step"
MILESTONES = (
    POD_SCHEDULED,
    IMAGE_PULLED,
    WORKERS_UP,
    MODEL_DOWNLOADED,
    DATASETS_PREPARED,
    SKYRL_STARTED,
    ENGINES_READY,
    MODELS_READY,
    FIRST_STEP,
)

# Kubernetes' `timestamps=true` prefix: RFC 3339 with up to nanoseconds, then one space.
_STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2}) ")
_TRAIN_JOB = "train_job: "
# docker/skyrl_hp_job/progress.py's FIRST_STEP_DONE, said once per attempt (tests/cli/test_cli_train_timeline.py reads
# the callback's own line).
_FIRST_STEP_DONE = "first step of this attempt done: global step "
_STEP = re.compile(r"(?:^|\s-\s)Step (\d+): ?$")
_ENGINES = ("HTTP Inference: proxy_url=", "slept inference engines after startup")
_MODELS = "init policy/ref/critic models done"


@dataclass(frozen=True)
class Mark:
    at: datetime
    detail: str


@dataclass(frozen=True)
class Timeline:
    origin: datetime | None  # the RayJob's creation (t = 0)
    marks: dict[str, Mark]

    @property
    def first_step_seconds(self) -> float | None:
        first = self.marks.get(FIRST_STEP)
        start = self.origin or self.earliest
        return None if first is None or start is None else (first.at - start).total_seconds()

    @property
    def earliest(self) -> datetime | None:
        return min((mark.at for mark in self.marks.values()), default=None)


def parse_time(text: str) -> datetime:
    """An RFC 3339 time as Kubernetes writes it (Z or an offset, up to nanoseconds) in UTC."""
    match = re.fullmatch(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})", text.strip())
    if not match:
        raise InputError([f"time {text!r} is not RFC 3339 (2026-01-31T12:00:00Z)"])
    return _stamp(match)


def _stamp(match: re.Match[str]) -> datetime:
    fraction = (match.group(2) or "0")[:6].ljust(6, "0")  # datetime holds microseconds
    zone = "+00:00" if match.group(3) == "Z" else match.group(3)
    return datetime.fromisoformat(f"{match.group(1)}.{fraction}{zone}").astimezone(UTC)


def _event_time(event: dict[str, Any]) -> datetime | None:
    """The scheduler writes `eventTime` (events.k8s.io), the kubelet `firstTimestamp`: the first occurrence."""
    for key in ("eventTime", "firstTimestamp", "lastTimestamp"):
        value = event.get(key)
        if isinstance(value, str) and value:
            return parse_time(value)
    return None


def _pod_role(name: str, ray_cluster: str | None) -> str | None:
    if ray_cluster is not None and not name.startswith(f"{ray_cluster}-"):
        return None
    if "-head-" in name:
        return "head"
    if "-worker-" in name:
        return "worker"
    return None


def event_marks(events: Iterable[dict[str, Any]], ray_cluster: str | None) -> dict[str, Mark]:
    """The head pod's scheduling, the last image pulled by any of the cluster's pods and the last worker started.
    `ray_cluster`: the RayJob's Ray cluster (status.rayClusterName); None takes every Ray pod in the events."""
    scheduled: list[Mark] = []
    pulled: list[Mark] = []
    started: list[Mark] = []
    for event in events:
        involved = event.get("involvedObject") or event.get("regarding") or {}
        if involved.get("kind") != "Pod":
            continue
        name = str(involved.get("name") or "")
        role = _pod_role(name, ray_cluster)
        at = _event_time(event)
        if role is None or at is None:
            continue
        reason = event.get("reason")
        if reason == "Scheduled" and role == "head":
            scheduled.append(Mark(at, f"head pod {name} (event Scheduled)"))
        elif reason == "Pulled":
            pulled.append(Mark(at, f"{name}: {event.get('message') or 'Pulled'}"))
        elif reason == "Started" and role == "worker":
            started.append(Mark(at, f"last worker pod {name} started (event Started)"))
    marks: dict[str, Mark] = {}
    if scheduled:
        marks[POD_SCHEDULED] = min(scheduled, key=lambda mark: mark.at)
    if pulled:
        marks[IMAGE_PULLED] = max(pulled, key=lambda mark: mark.at)
    if started:
        marks[WORKERS_UP] = max(started, key=lambda mark: mark.at)
    return marks


_FOUND = "already on the shared file system"


def _train_job_marks(said: str) -> list[tuple[str, str]]:
    """The milestones (name, detail) one of train_job's own lines marks."""
    if said.startswith("checkpoint ") and "already prepared" in said:
        datasets = [(DATASETS_PREPARED, _FOUND)] if " and datasets " in said else []
        return [(MODEL_DOWNLOADED, _FOUND), *datasets]
    if said.startswith("datasets ") and "already prepared" in said:
        return [(DATASETS_PREPARED, _FOUND)]
    if said.startswith(_FIRST_STEP_DONE):
        return [
            (FIRST_STEP, f"train_job: the attempt's first step (global step {said[len(_FIRST_STEP_DONE) :]}) ended")
        ]
    if said.startswith("starting SkyRL from "):
        return [
            (DATASETS_PREPARED, "generated (train_job starts SkyRL after them)"),
            (SKYRL_STARTED, "train_job started SkyRL"),
        ]
    return []


def log_marks(lines: Iterable[str]) -> dict[str, Mark]:
    """The preparation's and SkyRL's milestones in a driver log whose lines carry Kubernetes' timestamps."""
    marks: dict[str, Mark] = {}
    downloading = False
    stamped = 0

    def mark(name: str, at: datetime, detail: str) -> None:
        marks.setdefault(name, Mark(at, detail))

    for raw in lines:
        match = _STAMP.match(raw)
        if not match:
            continue
        stamped += 1
        at = _stamp(match)
        _, line = split_ray_prefix(raw[match.end() :])
        if line.startswith(_TRAIN_JOB):
            said = line[len(_TRAIN_JOB) :]
            if said.startswith("downloading "):
                downloading = True
                continue
            if downloading:
                mark(MODEL_DOWNLOADED, at, "the download ended (train_job's next step began)")
                downloading = False
            for name, detail in _train_job_marks(said):
                mark(name, at, detail)
        elif any(said in line for said in _ENGINES):
            mark(ENGINES_READY, at, "SkyRL: the inference engines are up (colocated: then slept)")
        elif _MODELS in line:
            mark(MODELS_READY, at, "SkyRL: policy and reference models initialized")
        else:
            step = _STEP.search(line)
            if step and int(step.group(1)) >= 1:
                mark(FIRST_STEP, at, f"SkyRL logged step {step.group(1)}'s metrics")
    if stamped == 0:
        raise InputError(
            [
                "the log has no Kubernetes timestamps: read it from the cluster, or save it with "
                "skyrl-hp train logs --timestamps"
            ]
        )
    return marks


def build(
    events: Iterable[dict[str, Any]], lines: Iterable[str], *, ray_cluster: str | None, origin: datetime | None
) -> Timeline:
    return Timeline(origin=origin, marks=event_marks(events, ray_cluster) | log_marks(lines))


def clock(seconds: float) -> str:
    whole = int(round(seconds))
    sign = "-" if whole < 0 else "+"
    hours, rest = divmod(abs(whole), 3600)
    return f"{sign}{hours}:{rest // 60:02d}:{rest % 60:02d}"


def render(timeline: Timeline, title: str) -> list[str]:
    start = timeline.origin or timeline.earliest
    total = timeline.first_step_seconds
    head = f"{title}: time to first step {clock(total)[1:]}" if total is not None else f"{title}: no first step yet"
    if start is not None:
        head += f" (t = 0: {'RayJob created' if timeline.origin else 'the first milestone'}, {start.isoformat()})"
    lines = [head]
    width = max(map(len, MILESTONES))
    for name in MILESTONES:
        mark = timeline.marks.get(name)
        if mark is None or start is None:
            lines.append(f"  {'-':>9}  {name:<{width}}  not recorded")
        else:
            lines.append(f"  {clock((mark.at - start).total_seconds()):>9}  {name:<{width}}  {mark.detail}")
    return lines


def as_json(timeline: Timeline) -> dict[str, Any]:
    start = timeline.origin or timeline.earliest
    return {
        "origin": start.isoformat() if start else None,
        "first_step_seconds": timeline.first_step_seconds,
        "milestones": [
            {
                "name": name,
                "at": mark.at.isoformat() if mark else None,
                "seconds": (mark.at - start).total_seconds() if mark and start else None,
                "detail": mark.detail if mark else None,
            }
            for name in MILESTONES
            for mark in [timeline.marks.get(name)]
        ],
    }
