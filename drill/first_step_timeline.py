"""The first RayJob's time to its first step, read by `skyrl-hp train timeline` from the attempt's own log.

The first attempt of the first RayJob's CPU run starts from nothing (a fresh run directory; the preparation, SkyRL,
its vLLM engine and FSDP workers, then step 1). Its submitter's output is kept with the time each line was read
(log_stamps.py, as `kubectl logs --timestamps` shows a pod's log), and the drill runs the command a user runs on a
saved log, `skyrl-hp train timeline --log FILE --json`, on it: every milestone the driver log records must be found,
in the order a start goes through them. What needs a cluster's events (pod scheduled, image pulled, Ray workers up)
is not recorded here; tests/ops read those from recorded events.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from skyrl_hyperpod.ops import start_timeline
from skyrl_hyperpod.plumbing.locations import CHECKOUT_ROOT

from .training_cluster import JobRun, Outcome

if TYPE_CHECKING:
    from .session import Drill

# The milestones a driver log records, in the order a start reaches them (ops/start_timeline.py reads each one).
LOG_MILESTONES = (
    start_timeline.MODEL_DOWNLOADED,
    start_timeline.DATASETS_PREPARED,
    start_timeline.SKYRL_STARTED,
    start_timeline.ENGINES_READY,
    start_timeline.MODELS_READY,
    start_timeline.FIRST_STEP,
)
EVENT_MILESTONES = tuple(name for name in start_timeline.MILESTONES if name not in LOG_MILESTONES)
TIMELINE_TIMEOUT_SECONDS = 120


def run_timeline(log_file: str) -> tuple[dict[str, Any] | None, str]:
    """`skyrl-hp train timeline --log FILE --json` with the drill's configuration: its JSON, or its error line."""
    result = subprocess.run(
        [sys.executable, "-m", "skyrl_hyperpod.cli", "train", "timeline", "--log", log_file, "--json"],
        cwd=CHECKOUT_ROOT, capture_output=True, text=True, timeout=TIMELINE_TIMEOUT_SECONDS, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        said = (result.stderr.strip().splitlines() or [f"exit code {result.returncode}"])[-1]
        return None, said
    return json.loads(result.stdout), ""


def problems_of(timeline: dict[str, Any]) -> list[str]:
    """Each driver-log milestone missing or out of order."""
    at = {mark["name"]: mark["seconds"] for mark in timeline["milestones"]}
    problems = [f"{name}: not found in the log" for name in LOG_MILESTONES if at.get(name) is None]
    found = [name for name in LOG_MILESTONES if at.get(name) is not None]
    problems += [
        f"{later} (+{at[later]:.1f} s) before {earlier} (+{at[earlier]:.1f} s)"
        for earlier, later in zip(found, found[1:], strict=False)
        if at[later] < at[earlier]
    ]
    return problems


def check(drill: Drill, runs: tuple[JobRun, ...]) -> list[Outcome]:
    """The timeline of `runs[0]`, the run's first attempt."""
    first = runs[0]
    name = first.rayjob
    log_file = drill.run_dir / f"{first.job_id}.timestamps.log"
    log_file.write_text(first.stamped_logs, encoding="utf-8")
    timeline, said = run_timeline(str(log_file))
    if timeline is None:
        return [Outcome(False, f"drill: {name}: skyrl-hp train timeline failed on the attempt's log: {said}")]
    if problems := problems_of(timeline):
        return [Outcome(False, f"drill: {name}: train timeline of attempt 1: {'; '.join(problems)}")]
    marks = {mark["name"]: mark for mark in timeline["milestones"]}
    first_step = start_timeline.parse_time(marks[start_timeline.FIRST_STEP]["at"])
    since_launch = (
        f" ({start_timeline.clock((first_step - first.launched_at).total_seconds())[1:]} after the submitter started)"
        if first.launched_at
        else ""
    )
    steps = ", ".join(
        f"{milestone} {start_timeline.clock(marks[milestone]['seconds'])}" for milestone in LOG_MILESTONES
    )
    return [
        Outcome(
            True,
            f"drill: {name}: time to first step {start_timeline.clock(timeline['first_step_seconds'])[1:]} from the "
            f"first milestone{since_launch}, read by skyrl-hp train timeline from attempt 1's own log timestamps "
            f"({steps}); {', '.join(EVENT_MILESTONES)}: Kubernetes events, none here",
        )
    ]
