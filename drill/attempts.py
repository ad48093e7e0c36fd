"""A hung attempt and two overlapping ones, on real training (cpu_training.py) through the RayJob's own train_job.py:
its stall watchdog and its attempt generations (docker/train_job.py), on SkyRL's own checkpoints.

The first RayJob's run goes through three attempts, each a new submission of the same entrypoint, as KubeRay's
retry submits it (resume.py says how KubeRay v1.7.0 retries); together they train its TRAINED_STEPS steps:

1. It trains step 1, then the rollout of step 2 never returns (the hang stand-in, site/drill_site/fault_standins.py
   `hang_at_step`: the trainer awaits a vLLM engine that stopped answering). This attempt runs with
   `--stall-timeout-step STEP_BOUND_SECONDS` instead of the manifest's bound (a CPU step is not a GPU step); the
   watchdog must end it with its one line and exit code 124 within the bound. The hang comes right after the
   attempt's first step, so no step of normal length has to fit within the bound on a loaded machine.
2. The retry must resume after the newest complete checkpoint (step 1's). It trains step 2 and, at the step's end,
   before SkyRL saves its checkpoint, the process running SkyRL's training loop stops itself (SIGSTOP,
   `freeze_at_step`) and the drill stops the job's driver too: a stale attempt, as a node that lost its kubelet
   keeps it.
3. The stale attempt's vLLM engine is ended (`release_engines`: two attempts do not fit in the machine's memory; its
   FSDP ranks, which would write the checkpoint, stay). A newer attempt starts beside it on a node of its own
   (OVERLAP_NODE: the frozen one still holds its GPUs, and KubeRay's retry would run on a new RayCluster), takes the
   next generation, trains step 2 from the same
   checkpoint, saves it and exports it. Then the stale attempt is resumed (SIGCONT): it must end with the fencing
   line and leave every file of the run as attempt 3 wrote it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cpu_training import (
    FROZEN,
    HUNG,
    TRAIN_TIMEOUT_SECONDS,
    TRAINED_STEPS,
    launch_training,
    logged_steps,
    train_summary,
    with_job_args,
)
from .resume import LATEST_STEP_FILE, driver_pid, latest_step, overrides_of
from .training_cluster import JobRun, Outcome, Submission

if TYPE_CHECKING:
    from .session import Drill

HANG_STEP = TRAINED_STEPS
# The hanging attempt's --stall-timeout-step: above what follows step 1's end before the hang (SkyRL's checkpoint,
# export and weight sync of step 1: under a minute on two cores, a few on a loaded machine), which the watchdog must
# not cut short; far below the manifest's bound for a GPU step.
STEP_BOUND_SECONDS = 240
# How long after the bound the drill waits before it says the watchdog missed the hang (the watchdog polls a tenth
# of its bound, at most once a minute: train_job.py MAX_POLL_SECONDS).
HANG_GRACE_SECONDS = 120
# The stale attempt, resumed, ends at once: the fence is checked before the first write it would make.
STALE_END_SECONDS = 300
# How long a SIGSTOPped process may take to show as stopped on a loaded machine
STOP_SETTLE_SECONDS = 10
NODE_TIMEOUT_SECONDS = 300
WATCHDOG_LINE = "train_job: error: stalled:"
STALL_EXIT = "exit code 124"
# SkyRL's vLLM server actor (skyrl/backends/skyrl_train/inference_servers/vllm_server_actor.py), as Ray names it
ENGINE_ACTOR = "VLLMServerActor"
_GENERATION = re.compile(r"attempt generation (\d+) \(")


@dataclass(frozen=True)
class Hang:
    """What the drill saw of the hanging attempt."""

    run: JobRun
    hung_at: float | None  # when the rollout stopped answering (wall clock)
    ended_at: float | None  # when Ray says the job ended
    stopped_by_drill: bool


def generation_of(logs: str) -> int | None:
    match = _GENERATION.search(logs)
    return int(match.group(1)) if match else None


def read_event(drill: Drill, name: str) -> dict[str, Any] | None:
    try:
        event: dict[str, Any] = json.loads((drill.run_dir / name).read_text(encoding="utf-8"))
        return event
    except (OSError, ValueError):
        return None


def wait_out_hang(drill: Drill, submission: Submission, bound: float) -> Hang:
    """The hanging attempt to its end; the drill stops it itself when the watchdog has not within the bound and the
    grace after the hang began."""
    deadline = time.monotonic() + TRAIN_TIMEOUT_SECONDS
    stopped = False
    while submission.process.poll() is None and time.monotonic() < deadline:
        hung = read_event(drill, HUNG)
        if hung is not None and time.time() - float(hung["at"]) > bound + HANG_GRACE_SECONDS:
            drill.training.stop_job(submission.job_id)
            stopped = True
            break
        time.sleep(2)
    run = submission.wait(60)
    hung = read_event(drill, HUNG)
    end_ms = drill.training.job_info(submission.job_id).get("end_time")
    return Hang(run, float(hung["at"]) if hung else None, end_ms / 1000 if end_ms else None, stopped)


def hang_verdict(name: str, hang: Hang, bound: float, frozen: dict[str, Any] | None) -> Outcome:
    """The watchdog ended the hung attempt within its bound, with its line and exit code; the retry resumed at the
    hung step (its first step, `frozen["first_step"]`)."""
    run = hang.run
    if hang.hung_at is None:
        return Outcome(
            False, f"drill: {name}: the hang stand-in never ran (the attempt ended first: {run.first_error})"
        )
    waited = (hang.ended_at or time.time()) - hang.hung_at
    if hang.stopped_by_drill or WATCHDOG_LINE not in run.logs:
        return Outcome(
            False,
            f"drill: {name}: a hang in step {HANG_STEP}'s rollout was not ended by the watchdog: job {run.status} "
            f"after {waited:.0f} s{', stopped by the drill' if hang.stopped_by_drill else ''} (bound {bound:g} s)",
        )
    problems = []
    if run.status != "FAILED" or STALL_EXIT not in run.message:
        problems.append(f"job {run.status} ({run.message[:160]}), expected FAILED with {STALL_EXIT}")
    if waited > bound + HANG_GRACE_SECONDS:
        problems.append(f"ended {waited:.0f} s after the hang, beyond the bound {bound:g} s")
    resumed = frozen.get("first_step") if frozen else None
    if resumed != HANG_STEP:
        problems.append(f"the retry's first step was {resumed}, not {HANG_STEP}")
    line = f"drill: {name}: hang ended by the watchdog after {waited:.0f} s, resumed at step {resumed}"
    watchdog = next(line for line in run.logs.splitlines() if WATCHDOG_LINE in line)
    said = watchdog[watchdog.index(WATCHDOG_LINE) :].split("; ending attempt", 1)[0]
    detail = f" (job {run.status} with {STALL_EXIT}: {said!r})"
    return Outcome(not problems, line + ("; but " + "; ".join(problems) if problems else detail))


def fingerprint(run_dir: Path, attempts_dir: str) -> dict[str, str]:
    """Every file of the run (checkpoints, step file, exports, LoRA syncs) by content, but the attempts' records (in
    the job package's `attempts_dir`)."""
    prints = {}
    for path in sorted(run_dir.rglob("*")):
        if path.is_file() and attempts_dir not in path.parts:
            prints[str(path.relative_to(run_dir))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return prints


def overlap_verdict(
    name: str, stale: JobRun, newer: JobRun, before: dict[str, str], after: dict[str, str], ckpt: Path
) -> Outcome:
    """The stale attempt, resumed after the newer one saved, ended with the fencing line and changed no file."""
    stale_generation, newer_generation = generation_of(stale.logs), generation_of(newer.logs)
    problems = []
    if newer.status != "SUCCEEDED":
        problems.append(f"attempt {newer_generation} ended {newer.status}: {newer.first_error}")
    if latest_step(ckpt) != HANG_STEP:
        problems.append(f"{LATEST_STEP_FILE} says {latest_step(ckpt)}, not {HANG_STEP}")
    fence = f"attempt generation {stale_generation} (" if stale_generation else "attempt generation"
    fenced = [
        line
        for line in stale.logs.splitlines()
        if fence in line and f"is superseded by generation {newer_generation}" in line
    ]
    if stale.status != "FAILED" or not fenced:
        problems.append(f"the stale attempt {stale_generation} ended {stale.status} without the fencing line")
    changed = sorted(path for path in set(before) | set(after) if before.get(path) != after.get(path))
    if changed:
        problems.append(f"the stale attempt changed {', '.join(changed[:5])}")
    if problems:
        return Outcome(False, f"drill: {name}: a stale attempt was not fenced: " + "; ".join(problems))
    # Its own words without the attempts' descriptions (submission ids, hosts, pids: in the job's log).
    said = re.sub(r" \([^()]*\)", "", fenced[-1][fenced[-1].index("attempt generation") :])
    return Outcome(
        True,
        f"drill: {name}: stale attempt fenced, checkpoint of attempt {newer_generation} intact (attempt "
        f"{stale_generation} frozen at step {HANG_STEP}'s end before its checkpoint, resumed after attempt "
        f"{newer_generation} saved global_step_{HANG_STEP}: {said!r}; {len(after)} files of the run unchanged)",
    )


def process_state(pid: int) -> str:
    """The kernel's one-letter state of a process (T: stopped), '?' when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


def wait_stopped(pid: int, timeout: float = STOP_SETTLE_SECONDS) -> str:
    """A process's state once the kernel has stopped it ('T'), is gone ('?'), or after timeout.

    kill(SIGSTOP) only queues the signal: a process read in /proc right after it can still show 'R'.
    """
    deadline = time.monotonic() + timeout
    while (state := process_state(pid)) not in ("T", "?") and time.monotonic() < deadline:
        time.sleep(0.05)
    return state


def wait_for_event(drill: Drill, name: str, submission: Submission, timeout: float) -> dict[str, Any] | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and submission.process.poll() is None:
        if (event := read_event(drill, name)) is not None:
            return event
        time.sleep(2)
    return read_event(drill, name)


# A check of the run's attempts once they ended (mlflow_tracking.py reads the run back from MLflow).
RunCheck = Callable[["Drill", tuple[JobRun, ...]], list[Outcome]]


def checks(*each: RunCheck) -> RunCheck:
    """One check running `each` in turn, every outcome kept."""
    return lambda drill, runs: [outcome for check in each for outcome in check(drill, runs)]


def train_hang_and_overlap(
    drill: Drill, manifest: dict[str, Any], edited: dict[str, Any], check: RunCheck | None = None
) -> list[Outcome]:
    """The first RayJob's run through the hang and the overlap (the module's docstring); `check` then judges the
    attempts whose steps make the run."""
    name = manifest["metadata"]["name"]
    job = edited  # trainer.max_training_steps is TRAINED_STEPS: the run ends with the newer attempt's step
    hanging = with_job_args(job, {"--stall-timeout-step": str(STEP_BOUND_SECONDS)})
    hang = wait_out_hang(drill, launch_training(drill, hanging, {"hang_at_step": HANG_STEP}), STEP_BOUND_SECONDS)

    retry = launch_training(drill, job, {"freeze_at_step": HANG_STEP})
    frozen = wait_for_event(drill, FROZEN, retry, TRAIN_TIMEOUT_SECONDS)
    hang_line = hang_verdict(name, hang, STEP_BOUND_SECONDS, frozen)
    driver = driver_pid(drill, retry.job_id) if frozen else None
    if frozen is None or driver is None:
        stale = retry.wait(60)
        why = "its driver pid was not reported" if frozen else f"it never reached step {HANG_STEP}'s end"
        return [
            train_summary(drill, manifest, hanging, hang.run, (stale,)),
            hang_line,
            Outcome(False, f"drill: {name}: overlap: the retry was not frozen: {why}: {stale.first_error}"),
            *(check(drill, (hang.run, stale)) if check else []),
        ]
    trainer = int(frozen["pid"])
    os.kill(driver, signal.SIGSTOP)
    states = {pid: wait_stopped(pid) for pid in (trainer, driver)}
    try:
        released = release_engines(drill, retry.job_id)
        node = drill.training.add_overlap_node(overlap_gpus(edited), NODE_TIMEOUT_SECONDS)
        print(f"drill: {name}: attempt frozen (trainer pid {trainer} and driver pid {driver}: states "
              f"{'/'.join(states.values())}); {released}; {node} added for the newer attempt", flush=True)  # fmt: skip
        newer = launch_training(drill, job).wait(TRAIN_TIMEOUT_SECONDS)
        run_dir = drill.training.paths.path(overrides_of(job)["trainer.export_path"])
        attempts_dir = drill.training.train_job.attempts.ATTEMPTS_DIR
        before = fingerprint(run_dir, attempts_dir)
    finally:
        for pid in (trainer, driver):
            os.kill(pid, signal.SIGCONT)
    stale = retry.wait(STALE_END_SECONDS)
    after = fingerprint(run_dir, attempts_dir)
    ckpt = drill.training.paths.path(overrides_of(job)["trainer.ckpt_path"])
    verdict = overlap_verdict(name, stale, newer, before, after, ckpt)
    if set(states.values()) != {"T"}:
        verdict = Outcome(False, f"{verdict.line}; but the stale attempt was not stopped (states {states})")
    steps = [step["step"] for step in logged_steps(newer.logs)]
    if steps != [HANG_STEP]:
        verdict = Outcome(False, f"{verdict.line}; but the newer attempt trained steps {steps}, not [{HANG_STEP}]")
    checked = check(drill, (hang.run, newer)) if check else []
    return [train_summary(drill, manifest, hanging, hang.run, (newer,)), hang_line, verdict, *checked]


def release_engines(drill: Drill, job_id: str) -> str:
    """Ends the stale attempt's vLLM engines (each server actor's process group: the actor, vLLM's engine core and
    its worker) and says so: a stand-in for hardware. Two attempts' engines and FSDP ranks do not fit in the
    machine's memory together (Ray's memory monitor then kills a task of the newer attempt); on the cluster each
    attempt has nodes of its own. The stale attempt does not use its engines before the fence: it is frozen at its
    step's end, and SkyRL's save_checkpoints, where the fence is checked, comes before the step's weight sync."""
    ended = []
    for actor in drill.training.job_actors(job_id, ENGINE_ACTOR):
        pid = int(actor["pid"])
        try:
            if os.getpgid(pid) != pid:  # a Ray worker leads its process group; anything else is not ours to end
                continue
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        ended.append(pid)
    deadline = time.monotonic() + STOP_SETTLE_SECONDS
    while any(process_state(pid) not in ("?", "Z") for pid in ended) and time.monotonic() < deadline:
        time.sleep(0.2)
    if not ended:
        return f"no {ENGINE_ACTOR} of the stale attempt found to end"
    return (
        f"its vLLM engine ended ({ENGINE_ACTOR} pid {', '.join(map(str, ended))} and its processes) [stand-in for "
        "hardware]: two attempts do not fit in this machine's memory; on the cluster each has its own nodes; "
        "unproven here: nothing the fence depends on (the stale attempt is fenced before it would use them)"
    )


def overlap_gpus(rayjob: dict[str, Any]) -> int:
    """Room for a whole attempt: its FSDP ranks and its inference engines, one logical GPU each."""
    overrides = overrides_of(rayjob)
    ranks = int(overrides["trainer.placement.policy_num_nodes"]) * int(
        overrides["trainer.placement.policy_num_gpus_per_node"]
    )
    return ranks + int(overrides["generator.inference_engine.num_engines"])
