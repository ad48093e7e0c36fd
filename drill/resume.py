"""Retries that resume, on the drill's Ray: a RayJob whose driver dies mid-run is submitted again as KubeRay's
retry submits it, and SkyRL's own checkpoint discovery decides where training continues.

KubeRay v1.7.0 retries a self-contained RayJob (ray-operator/controllers/ray/rayjob_controller.go): a failed job
with `backoffLimit` left goes to `Retrying`, which deletes the job's RayCluster and submitter Job and clears
`status.jobId` and `status.rayClusterName`; `initRayJobStatusIfNeed` then names a new cluster
(`GenerateRayClusterName`) and a new submission id (`GenerateRayJobId`, unless `spec.jobId` fixes one), and the
new submitter runs the same entrypoint. The drill does the same: it kills the driver (SIGKILL, as a lost node ends
it), stops its Ray cluster, starts a new one from the same spec and submits the unchanged RayJob with a new id.
The checkpoints live on the shared volume (FSx on the cluster), which outlives both.

SkyRL's checkpoint layout and discovery (skyrl/train/trainer.py of the pinned release, `save_checkpoints`,
`load_checkpoints`, `train`): <trainer.ckpt_path>/global_step_<N>/ holds policy/ (the FSDP workers' state),
data.pt (the dataloader's) and trainer_state.pt, written in that order; latest_ckpt_global_step.txt is rewritten
with N last. With resume_mode=latest `train()` reads that file, checks the folders against it
(`validate_consistency_for_latest_checkpoint`: at most one ckpt_interval ahead), loads the trainer state, the
dataloader state and the models, then trains step N + 1. In the drill that code runs unchanged inside the RayJob's
entrypoint; the GPU parts (the FSDP workers, the vLLM engines) are stand-ins (`resume`:
site/drill_site/resume_standins.py).
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import signal
import time
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skyrl_hyperpod.plumbing.locations import DOCKER_DIR
from skyrl_hyperpod.values.job_files import JOB_PACKAGE

from . import kuberay
from .layout import Entrypoint, load_job_package
from .training_cluster import JOB_TIMEOUT_SECONDS, RESUME, STOP_MARKER, JobRun, Outcome, Submission, parse_stop

if TYPE_CHECKING:
    from .session import Drill

_JOB = load_job_package(DOCKER_DIR / JOB_PACKAGE)
# SkyRL's names (skyrl/train/trainer.py, skyrl/train/utils/trainer_utils.py GLOBAL_STEP_PREFIX), as the RayJob's
# entry script knows them, and the overrides it reads.
LATEST_STEP_FILE: str = _JOB.resume.LATEST_STEP_FILE
STEP_PREFIX: str = _JOB.resume.STEP_DIR_PREFIX
TRAINER_STATE_FILE: str = _JOB.resume.TRAINER_STATE_FILE
STATE_FILES = ("data.pt", TRAINER_STATE_FILE)
CKPT_PATH_KEY: str = _JOB.options.CKPT_PATH_KEY
RUN_NAME_KEY: str = _JOB.options.RUN_NAME_KEY
RESUME_MODE_KEY = "trainer.resume_mode"
# The stand-in FSDP workers' state file and the plan file the trainer reads (site/drill_site/resume_standins.py).
STANDIN_STATE = "standin-model-state.txt"
RESUME_PLAN = "resume-plan.json"
# Checkpoints the first attempt completes before it dies while writing the next one.
COMPLETE_SAVES = 2
# What `ray job logs --follow` prints before it repeats a failed job's last output (ray/dashboard/modules/job/cli.py).
RAY_STATUS_MESSAGE = "Status message: "
KILLED_JOB_SECONDS = 180


def overrides_of(rayjob: dict[str, Any]) -> dict[str, str]:
    """The SkyRL overrides (after `--`) of a RayJob's entrypoint."""
    args = Entrypoint.parse(rayjob["spec"]["entrypoint"]).args
    items = args[args.index("--") + 1 :] if "--" in args else []
    return dict(item.split("=", 1) for item in items)


def with_overrides(rayjob: dict[str, Any], overrides: dict[str, str], *, name: str | None = None) -> dict[str, Any]:
    """A copy of the RayJob with these SkyRL overrides set on its entrypoint (replaced where present)."""
    edited = copy.deepcopy(rayjob)
    spec = edited["spec"]
    entrypoint = Entrypoint.parse(spec["entrypoint"])
    split = entrypoint.args.index("--")
    head, items = entrypoint.args[: split + 1], entrypoint.args[split + 1 :]
    pending = dict(overrides)
    items = [
        f"{key}={pending.pop(key)}" if key in pending else item
        for item, key in ((i, i.split("=", 1)[0]) for i in items)
    ]
    items += [f"{key}={value}" for key, value in pending.items()]
    env = [f"{key}={value}" for key, value in entrypoint.env.items()]
    spec["entrypoint"] = shlex.join([*(["env", *env] if env else []), "python", entrypoint.script, *head, *items])
    if name is not None:
        edited["metadata"]["name"] = name
    return edited


def checkpoint_dir(drill: Drill, rayjob: dict[str, Any]) -> Path:
    """The experiment's trainer.ckpt_path, where it is on the drill machine."""
    return drill.training.paths.path(overrides_of(rayjob)[CKPT_PATH_KEY])


def latest_step(ckpt: Path) -> int | None:
    try:
        text = (ckpt / LATEST_STEP_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def layout_problems(ckpt: Path, saved: list[int], dying: int) -> list[str]:
    """What differs from SkyRL's layout after checkpoints `saved` and a driver lost while writing `dying`."""
    problems = []
    for step in saved:
        folder = ckpt / f"{STEP_PREFIX}{step}"
        missing = [name for name in STATE_FILES if not (folder / name).is_file()]
        missing += [] if (folder / "policy" / STANDIN_STATE).is_file() else [f"policy/{STANDIN_STATE}"]
        if missing:
            problems.append(f"{folder.name} lacks {', '.join(missing)}")
        elif not zipfile.is_zipfile(folder / TRAINER_STATE_FILE):
            problems.append(f"{folder.name}/{TRAINER_STATE_FILE} is not what torch.save writes")
    if latest_step(ckpt) != (saved[-1] if saved else None):
        problems.append(f"{LATEST_STEP_FILE} says {latest_step(ckpt)}, not {saved[-1] if saved else None}")
    half = ckpt / f"{STEP_PREFIX}{dying}"
    if not half.is_dir() or (half / TRAINER_STATE_FILE).exists():
        problems.append(f"{half.name} is {'complete' if half.is_dir() else 'missing'}, not half-written")
    return problems


def error_lines(logs: str) -> list[str]:
    """train_job.py's error lines in what the job printed (the submitter's log also repeats the job's last output
    in Ray's status message of a failed job: that copy is not counted)."""
    own = logs.split(RAY_STATUS_MESSAGE, 1)[0]
    return [line for line in own.splitlines() if line.startswith("train_job: error:")]


def write_plan(drill: Drill, plan: dict[str, Any] | None) -> None:
    path = drill.run_dir / RESUME_PLAN
    if plan is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(json.dumps(plan), encoding="utf-8")


def wait_for_report(submission: Submission, key: str, timeout: float) -> dict[str, Any] | None:
    """The trainer's report once it carries `key` (the job is still running then), or None if the job ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = submission.log_path.read_text(encoding="utf-8", errors="replace")
        for line in logs.splitlines():
            if STOP_MARKER not in line:
                continue
            try:
                report = json.loads(line.split(STOP_MARKER, 1)[1].strip())
            except ValueError:  # the line is still being written
                continue
            if key in report:
                return dict(report)
        if submission.process.poll() is not None:
            return None
        time.sleep(2)
    return None


def driver_pid(drill: Drill, job_id: str) -> int | None:
    """The job's driver process, as Ray's job API reports it (driver_info.pid)."""
    code, body = kuberay.request(
        "GET", f"{drill.training.cluster.dashboard_url}/api/jobs/{job_id}", token=drill.training.token
    )
    if code != 200:
        return None
    pid = (json.loads(body).get("driver_info") or {}).get("pid")
    return int(pid) if pid else None


def retry_verdict(run: JobRun, ckpt: Path, newest_complete: int, *, what: str) -> Outcome:
    """Whether the retry `run` continued where it must: SkyRL loaded global_step_<newest_complete> and trains the
    step after it."""
    report = run.stop if run.stop and run.stop.get("at") == RESUME else None
    if report is None:
        return Outcome(False, f"drill: {what}: {run.rayjob} never reached its first training step: {run.first_error}")
    expected_dir = str(ckpt / f"{STEP_PREFIX}{newest_complete}" / "policy")
    loaded = [item["dir"] for item in report.get("loaded", []) if item.get("model") == "policy"]
    seen = (
        f"resume_mode={report.get('resume_mode')}, loaded "
        f"{', '.join(Path(d).parent.name for d in loaded) or 'nothing'}, first step {report.get('first_step')}"
    )
    ok = report.get("first_step") == newest_complete + 1 and loaded == [expected_dir]
    if not ok:
        return Outcome(
            False,
            f"drill: {what}: {run.rayjob} ({run.job_id}) did not resume at step {newest_complete + 1} after "
            f"{STEP_PREFIX}{newest_complete}: {seen}",
        )
    return Outcome(
        True,
        f"drill: {what}: {run.rayjob} ({run.job_id}): SkyRL's train() with {seen} "
        f"(epoch {report.get('epoch')}); stand-ins: {report.get('standins')}",
    )


def resume_after_driver_loss(drill: Drill) -> list[Outcome]:
    """A RayJob's driver is killed while SkyRL writes a checkpoint; KubeRay's retry (a new cluster, a new
    submission of the same entrypoint) resumes at the step after the newest complete checkpoint, through SkyRL's
    own load_checkpoints; another run's directory is refused in one line."""
    rayjob = drill.rayjobs[0]
    name = rayjob["metadata"]["name"]
    ckpt = checkpoint_dir(drill, rayjob)
    outcomes = []

    # Attempt 1: a fresh run, which trains, checkpoints, and loses its driver in the middle of a checkpoint.
    write_plan(drill, {"complete_saves": COMPLETE_SAVES})
    submission = drill.training.launch(rayjob, stop_at=RESUME)
    report = wait_for_report(submission, "dying_in_save_of", JOB_TIMEOUT_SECONDS)
    write_plan(drill, None)
    pid = driver_pid(drill, submission.job_id) if report else None
    if pid is not None:
        os.kill(pid, signal.SIGKILL)
    first = submission.wait(KILLED_JOB_SECONDS)
    if report is None or pid is None:
        why = "its driver pid was not reported" if report else f"it never reached mid-run: {first.first_error}"
        return [Outcome(False, f"drill: resume: attempt 1 of {name} ({first.job_id}): {why}")]
    saved, dying = [int(s) for s in report["saved"]], int(report["dying_in_save_of"])
    problems = layout_problems(ckpt, saved, dying)
    started = report.get("first_step")
    ok = first.status == "FAILED" and started == 1 and not problems
    outcomes.append(
        Outcome(
            ok,
            f"drill: resume: attempt 1 of {name} ({first.job_id}) started at step {started}; SkyRL's "
            f"save_checkpoints wrote {', '.join(f'{STEP_PREFIX}{s}' for s in saved)} "
            f"({LATEST_STEP_FILE} {latest_step(ckpt)}); driver pid {pid} killed (SIGKILL) while it wrote "
            f"{STEP_PREFIX}{dying}: job {first.status}" + (f"; layout: {'; '.join(problems)}" if problems else ""),
        )
    )

    # KubeRay's retry: the failed attempt's cluster is deleted, a new one starts, the same entrypoint is submitted.
    drill.stop_training()
    began = time.monotonic()
    described = drill.start_training()
    retry = drill.training.submit(rayjob, timeout=JOB_TIMEOUT_SECONDS, stop_at=RESUME)
    verdict = retry_verdict(retry, ckpt, saved[-1], what=f"resume: retry on a new cluster ({described})")
    outcomes.append(verdict)
    claimed = "resumes after its newest complete checkpoint" in retry.logs
    outcomes.append(
        Outcome(
            claimed and retry.job_id != first.job_id and (ckpt / f"{STEP_PREFIX}{dying}").is_dir(),
            f"drill: resume: the half-written {STEP_PREFIX}{dying} (no trainer_state.pt; {LATEST_STEP_FILE} still "
            f"{saved[-1]}) was left alone and not chosen; new submission id {retry.job_id} "
            f"(cluster restart and retry {time.monotonic() - began:.0f} s)",
        )
    )

    # Another experiment configured onto this run's directory: refused before SkyRL starts, nothing touched.
    other = with_overrides(rayjob, {RUN_NAME_KEY: f"{overrides_of(rayjob)[RUN_NAME_KEY]}-other"}, name=f"{name}-other")
    before = sorted(path.name for path in ckpt.iterdir())
    refused = drill.training.submit(other, timeout=JOB_TIMEOUT_SECONDS, stop_at=RESUME)
    errors = error_lines(refused.logs)
    untouched = sorted(path.name for path in ckpt.iterdir()) == before and latest_step(ckpt) == saved[-1]
    ok = refused.status == "FAILED" and len(errors) == 1 and "belongs to run" in errors[0]
    ok = ok and parse_stop(refused.logs) is None and untouched
    outcomes.append(
        Outcome(
            ok,
            f"drill: resume: another run on this directory ({refused.job_id}): job {refused.status}, "
            f"{errors[0] if errors else 'no train_job error line'}; SkyRL "
            f"{'never started' if parse_stop(refused.logs) is None else 'started'}; the directory "
            f"{'is untouched' if untouched else 'changed'}",
        )
    )
    return outcomes


def step_file_naming_a_half_written_checkpoint(drill: Drill) -> list[Outcome]:
    """latest_ckpt_global_step.txt naming the half-written checkpoint the resume scenario left (a lost node's
    unflushed trainer_state.pt): SkyRL alone fails on it every retry (tests/test_resume.py); train_job.py points it
    back and SkyRL resumes after the newest complete checkpoint."""
    rayjob = drill.rayjobs[0]
    ckpt = checkpoint_dir(drill, rayjob)
    newest = latest_step(ckpt)
    steps = sorted(int(p.name.removeprefix(STEP_PREFIX)) for p in ckpt.glob(f"{STEP_PREFIX}*") if p.is_dir())
    half = [step for step in steps if not (ckpt / f"{STEP_PREFIX}{step}" / TRAINER_STATE_FILE).exists()]
    if newest is None or not half:
        return [
            Outcome(False, f"drill: resume: {ckpt} has no half-written checkpoint; run resume-after-driver-loss first")
        ]
    dying = half[-1]
    (ckpt / LATEST_STEP_FILE).write_text(str(dying), encoding="utf-8")
    again = drill.training.submit(rayjob, timeout=JOB_TIMEOUT_SECONDS, stop_at=RESUME)
    repaired = f"names {STEP_PREFIX}{dying}, which is not complete: set to {newest}" in again.logs
    verdict = retry_verdict(again, ckpt, newest, what=f"resume: {LATEST_STEP_FILE} naming the half-written {dying}")
    return [
        Outcome(
            verdict.ok and repaired,
            verdict.line + ("" if repaired else " (train_job.py did not point the step file back)"),
        )
    ]


def mutation_resume_none(drill: Drill) -> list[Outcome]:
    """The drill must catch a retry that does not resume: the same RayJob with trainer.resume_mode=none, on the
    directory the resume scenario left, starts at step 1 and the resume check fails."""
    rayjob = drill.rayjobs[0]
    ckpt = checkpoint_dir(drill, rayjob)
    newest = latest_step(ckpt)
    if newest is None:
        return [Outcome(False, f"drill: mutation (resume_mode=none): {ckpt} has no checkpoint; run resume first")]
    run = drill.training.submit(
        with_overrides(rayjob, {RESUME_MODE_KEY: "none"}), timeout=JOB_TIMEOUT_SECONDS, stop_at=RESUME
    )
    verdict = retry_verdict(run, ckpt, newest, what="mutation")
    caught = not verdict.ok and run.stop is not None
    what = "fails the resume check, as it must" if caught else "was not caught by the resume check"
    return [Outcome(caught, f"drill: mutation (resume_mode=none): {what}: {verdict.line.split(': ', 2)[-1]}")]
