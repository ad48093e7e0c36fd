"""The drill's hang and overlap checks (drill/attempts.py) and the site hooks that stage them, without
Ray. The drill runs them on real Ray and SkyRL (`make drill`); these tests hold the checks to what they must catch:
with the watchdog off the hang check fails, with the fence off the overlap check fails."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path
from typing import Any

import pytest
from drill_site_modules import site_module

from drill import attempts, cpu_training
from drill.attempts import HANG_STEP, Hang, fingerprint, hang_verdict, overlap_verdict
from drill.training_cluster import SITE_DIR, JobRun
from skyrl_hp_job.attempts import ATTEMPTS_DIR

REPO_ROOT = Path(__file__).resolve().parent.parent
BOUND = 240.0
WATCHDOG = (
    "train_job: error: stalled: no training step finished within 240 s after step 1 "
    "(training.jobs.stall_timeout_step_s); ending attempt generation 1: a self-contained RayJob retries it"
)


def load_site(monkeypatch, run_dir: Path, name: str):
    monkeypatch.setenv("HP_DRILL_DIR", str(run_dir))
    return site_module(name)


def run(status: str, logs: str, message: str = "") -> JobRun:
    return JobRun("maze", "maze-1", status, message, logs, {}, None)


def watchdog_hang(**changes: Any) -> Hang:
    hang = Hang(
        run=run("FAILED", f"train_job: attempt generation 1 (x) holds /ckpt\n{WATCHDOG}\n", "exit code 124"),
        hung_at=1000.0,
        ended_at=1000.0 + 260,
        stopped_by_drill=False,
    )
    return dataclasses.replace(hang, **changes)


# --- the hang -----------------------------------------------------------------------------------------------


def test_a_hang_ended_by_the_watchdog_and_resumed_at_the_hung_step_passes():
    outcome = hang_verdict("maze", watchdog_hang(), BOUND, {"first_step": HANG_STEP, "step": HANG_STEP})
    assert outcome.ok, outcome.line
    assert outcome.line.startswith(f"drill: maze: hang ended by the watchdog after 260 s, resumed at step {HANG_STEP}")


def test_mutation_watchdog_off_the_drill_stops_the_hung_attempt_and_the_check_fails():
    # Without the watchdog the attempt stays hung: the drill stops it after the bound and its grace.
    hang = watchdog_hang(run=run("STOPPED", "train_job: attempt generation 1 (x) holds /ckpt\n"), stopped_by_drill=True)
    outcome = hang_verdict("maze", hang, BOUND, {"first_step": HANG_STEP})
    assert not outcome.ok
    assert "was not ended by the watchdog" in outcome.line and "stopped by the drill" in outcome.line


@pytest.mark.parametrize(
    ("changes", "frozen", "problem"),
    [
        ({"ended_at": 1000.0 + BOUND + attempts.HANG_GRACE_SECONDS + 1}, {"first_step": HANG_STEP}, "beyond the bound"),
        ({}, {"first_step": 1}, "the retry's first step was 1"),  # the retry started over instead of resuming
        ({}, None, "the retry's first step was None"),
        (
            {"run": run("FAILED", WATCHDOG, "exit code 1")},
            {"first_step": HANG_STEP},
            "expected FAILED with exit code 124",
        ),
    ],
)
def test_a_hang_check_fails_on_a_late_end_a_retry_that_did_not_resume_or_the_wrong_exit(changes, frozen, problem):
    outcome = hang_verdict("maze", watchdog_hang(**changes), BOUND, frozen)
    assert not outcome.ok and problem in outcome.line


def test_a_hang_that_never_began_fails():
    outcome = hang_verdict("maze", watchdog_hang(hung_at=None), BOUND, None)
    assert not outcome.ok and "never ran" in outcome.line


def test_the_drill_stops_a_hung_attempt_the_watchdog_leaves(tmp_path, monkeypatch):
    (tmp_path / cpu_training.HUNG).write_text(json.dumps({"at": time.time() - BOUND - attempts.HANG_GRACE_SECONDS - 5}))
    stopped = []
    process = types.SimpleNamespace(poll=lambda: None if not stopped else 0)
    submission = types.SimpleNamespace(process=process, job_id="maze-1", wait=lambda timeout: run("STOPPED", ""))
    training = types.SimpleNamespace(stop_job=stopped.append, job_info=lambda job_id: {"end_time": 5_000})
    drill = types.SimpleNamespace(run_dir=tmp_path, training=training)
    hang = attempts.wait_out_hang(drill, submission, BOUND)
    assert stopped == ["maze-1"] and hang.stopped_by_drill and hang.ended_at == 5.0


# --- the overlap --------------------------------------------------------------------------------------------

FENCE = (
    "train_job: error: attempt generation 2 (submission maze-2) of /ckpt is superseded by generation 3 "
    "(submission maze-3): stopped before writing checkpoint global_step_2; the newest attempt owns the run's checkpoints"
)


def a_run_dir(tmp_path: Path) -> tuple[Path, Path]:
    run_dir = tmp_path / "run"
    ckpt = run_dir / "ckpt"
    (ckpt / f"global_step_{HANG_STEP}").mkdir(parents=True)
    (ckpt / f"global_step_{HANG_STEP}" / "trainer_state.pt").write_bytes(b"attempt 3")
    (ckpt / "latest_ckpt_global_step.txt").write_text(str(HANG_STEP))
    (ckpt / ATTEMPTS_DIR).mkdir()
    (ckpt / ATTEMPTS_DIR / "progress-2.json").write_text("{}")
    return run_dir, ckpt


def test_a_stale_attempt_fenced_with_the_run_intact_passes(tmp_path):
    run_dir, ckpt = a_run_dir(tmp_path)
    before = fingerprint(run_dir, ATTEMPTS_DIR)
    # The attempts' own records may change (the stale one's progress file): they are not the run's.
    (ckpt / ATTEMPTS_DIR / "progress-2.json").write_text('{"event": "step_end"}')
    stale = run("FAILED", f"train_job: attempt generation 2 (submission maze-2) holds /ckpt\n{FENCE}\n")
    newer = run("SUCCEEDED", "train_job: attempt generation 3 (submission maze-3) holds /ckpt\n")
    outcome = overlap_verdict("maze", stale, newer, before, fingerprint(run_dir, ATTEMPTS_DIR), ckpt)
    assert outcome.ok, outcome.line
    assert outcome.line.startswith("drill: maze: stale attempt fenced, checkpoint of attempt 3 intact")


def test_mutation_fencing_off_the_stale_attempt_writes_and_the_check_fails(tmp_path):
    run_dir, ckpt = a_run_dir(tmp_path)
    before = fingerprint(run_dir, ATTEMPTS_DIR)
    # Unfenced, the resumed attempt saves its own checkpoint of the step over the newer attempt's.
    (ckpt / f"global_step_{HANG_STEP}" / "trainer_state.pt").write_bytes(b"attempt 2")
    stale = run("SUCCEEDED", "train_job: attempt generation 2 (submission maze-2) holds /ckpt\n")
    newer = run("SUCCEEDED", "train_job: attempt generation 3 (submission maze-3) holds /ckpt\n")
    outcome = overlap_verdict("maze", stale, newer, before, fingerprint(run_dir, ATTEMPTS_DIR), ckpt)
    assert not outcome.ok
    assert "without the fencing line" in outcome.line
    assert f"ckpt/global_step_{HANG_STEP}/trainer_state.pt" in outcome.line


def test_the_overlap_check_fails_when_the_newer_attempt_did_not_save(tmp_path):
    run_dir, ckpt = a_run_dir(tmp_path)
    (ckpt / "latest_ckpt_global_step.txt").write_text(str(HANG_STEP - 1))
    stale = run("FAILED", f"train_job: attempt generation 2 (submission maze-2) holds /ckpt\n{FENCE}\n")
    newer = run("FAILED", "train_job: attempt generation 3 (submission maze-3) holds /ckpt\nValueError: boom\n")
    outcome = overlap_verdict("maze", stale, newer, {}, {}, ckpt)
    assert (
        not outcome.ok
        and "attempt 3 ended FAILED" in outcome.line
        and f"says {HANG_STEP - 1}, not {HANG_STEP}" in outcome.line
    )


# A live process that is not stopped: running, sleeping, or in a disk wait (a child still paging its interpreter in
# on a loaded machine reads 'D').
NOT_STOPPED = ("R", "S", "D")


def test_the_kernel_reports_a_stopped_process(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert attempts.process_state(child.pid) in NOT_STOPPED
        os.kill(child.pid, signal.SIGSTOP)
        assert attempts.wait_stopped(child.pid) == "T"
        os.kill(child.pid, signal.SIGCONT)
        assert attempts.wait_stopped(child.pid, timeout=0.2) in NOT_STOPPED
    finally:
        child.kill()
        child.wait()
    assert attempts.process_state(child.pid) == "?"


# --- the site hooks that stage them --------------------------------------------------------------------------


def test_the_site_and_the_drill_agree_on_the_plan_and_the_events(tmp_path, monkeypatch):
    stop_points = load_site(monkeypatch, tmp_path, "stop_points")
    faults = load_site(monkeypatch, tmp_path, "fault_standins")
    assert stop_points.TRAIN_PLAN == cpu_training.TRAIN_PLAN and stop_points.STEP_MARKER == cpu_training.STEP_MARKER
    assert (f"{faults.HUNG}.json", f"{faults.FROZEN}.json") == (cpu_training.HUNG, cpu_training.FROZEN)


def test_the_hang_stand_in_blocks_only_the_planned_steps_rollout(tmp_path, monkeypatch):
    faults = load_site(monkeypatch, tmp_path, "fault_standins")
    calls = []

    async def generate(batch):
        calls.append(batch)
        return "rollout"

    trainer = types.SimpleNamespace(global_step=2, generate=generate)
    faults.hang_in_generation(trainer, 3)
    assert asyncio.run(trainer.generate("step 2")) == "rollout"
    trainer.global_step = 3

    async def hung_rollout():
        await asyncio.wait_for(trainer.generate("step 3"), timeout=0.5)

    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(hung_rollout())
    assert calls == ["step 2"]
    event = json.loads((tmp_path / cpu_training.HUNG).read_text())
    assert event["step"] == 3 and event["pid"] == os.getpid()


def test_the_freeze_stops_the_training_process_at_the_planned_steps_end(tmp_path):
    # In a child process: the freeze stops the process that runs it. SkyRL's callback base class is a stand-in here.
    code = textwrap.dedent(
        f"""
        import sys, types
        callbacks = types.ModuleType("skyrl.train.utils.callbacks")
        callbacks.TrainingCallback = object
        for name in ("skyrl", "skyrl.train", "skyrl.train.utils"):
            sys.modules[name] = types.ModuleType(name)
        sys.modules["skyrl.train.utils.callbacks"] = callbacks
        sys.path.insert(0, {str(SITE_DIR)!r})
        from drill_site.fault_standins import freeze_callback
        freeze = freeze_callback(3)
        trainer = types.SimpleNamespace(global_step=2)
        freeze.on_step_start(trainer, None, None)
        freeze.on_step_end(trainer, None, None)
        trainer.global_step = 3
        freeze.on_step_end(trainer, None, None)
        print("resumed", flush=True)
        """
    )
    env = {**os.environ, "HP_DRILL_DIR": str(tmp_path)}
    env.pop("HP_DRILL_BOUNDARY", None)
    child = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        _, status = os.waitpid(child.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status)
        event = json.loads((tmp_path / cpu_training.FROZEN).read_text())
        assert event == {**event, "pid": child.pid, "step": 3, "first_step": 2}
        os.kill(child.pid, signal.SIGCONT)
        assert child.stdout.read().splitlines()[-1] == "resumed"
    finally:
        child.kill()
        child.wait()


def test_the_train_set_filter_runs_in_process_and_keeps_the_other_arguments(tmp_path, monkeypatch):
    dataset_filter = load_site(monkeypatch, tmp_path, "dataset_filter")

    class PromptDataset:
        def __init__(self, datasets, tokenizer, max_prompt_length, num_workers=8):
            self.args = (datasets, tokenizer, max_prompt_length, num_workers)

    filtered = dataset_filter.in_process_filter(PromptDataset)(["train.parquet"], "tok", 128, num_workers=8)
    assert filtered.args == (["train.parquet"], "tok", 128, 1)
    assert isinstance(filtered, PromptDataset)


def test_the_docs_state_the_drills_hang_bound():
    drill_doc = (REPO_ROOT / "docs" / "drill.md").read_text()
    assert f"--stall-timeout-step {attempts.STEP_BOUND_SECONDS:g}" in drill_doc
    assert f"at a {attempts.STEP_BOUND_SECONDS:g} s step bound" in (REPO_ROOT / "docs" / "failures.md").read_text()


# --- the stale attempt's engines ----------------------------------------------------------------------------------


def engine_group() -> tuple[subprocess.Popen[bytes], int]:
    """A process group like a Ray worker's: the leader (the actor) and a child of it (vLLM's engine core)."""
    leader = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time; "
         "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
         "print(child.pid, flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    assert leader.stdout is not None
    return leader, int(leader.stdout.readline())


def test_release_engines_ends_each_engine_actors_process_group_and_says_it_is_a_stand_in():
    leader, child = engine_group()
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # not a group leader
    asked: list[tuple[str, str]] = []

    def job_actors(job_id: str, class_name: str) -> list[dict[str, Any]]:
        asked.append((job_id, class_name))
        return [{"pid": leader.pid}, {"pid": bystander.pid}]

    drill = types.SimpleNamespace(training=types.SimpleNamespace(job_actors=job_actors))
    try:
        said = attempts.release_engines(drill, "maze-2")
        leader.wait(10)
        deadline = time.monotonic() + 10
        while attempts.process_state(child) not in ("?", "Z") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert asked == [("maze-2", "VLLMServerActor")]
        assert attempts.process_state(child) in ("?", "Z"), "the engine's child process outlived its actor"
        assert bystander.poll() is None, "a process that leads no group of its own was ended"
        assert f"pid {leader.pid}" in said and str(bystander.pid) not in said
        assert "[stand-in for hardware]" in said
    finally:
        for process in (leader, bystander):
            if process.poll() is None:
                process.kill()
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def test_release_engines_says_when_the_stale_attempt_has_no_engine():
    drill = types.SimpleNamespace(training=types.SimpleNamespace(job_actors=lambda job_id, class_name: []))
    assert attempts.release_engines(drill, "maze-2") == "no VLLMServerActor of the stale attempt found to end"
