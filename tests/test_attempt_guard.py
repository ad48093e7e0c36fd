"""docker/train_job.py's guard of a training attempt: the stall watchdog and the attempt fencing.

The watchdog and the fence run through train_job.py's own entry point in a subprocess, against a stand-in SkyRL
(a `skyrl.train.trainer.RayPPOTrainer` that fires SkyRL's callback events and writes its checkpoint files through a
module-level `io`, as skyrl/train/trainer.py does) and a stand-in `ray` whose `init` runs the job's
worker_process_setup_hook where a Ray worker would. The hook's trip through cloudpickle into a process that cannot
import train_job.py runs with Ray's own cloudpickle. No timed assertion: bounds are a fraction of a second against
trainers that hang for much longer, and the decisions themselves run on a fake clock.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import textwrap
import threading
import types
from pathlib import Path

import pytest
from fake_checkpoint import write_fake_vision_language
from pydantic import ValidationError
from train_job_stand_ins import argv_for

import skyrl_hp_job.attempts
from skyrl_hp_job.attempts import (
    ATTEMPTS_DIR,
    AttemptSuperseded,
    attempt_identity,
    claim_run_checkpoints,
    generations,
    superseded_by,
    take_generation,
)
from skyrl_hp_job.errors import PrepareError, UsageError
from skyrl_hp_job.monitor import STALL_EXIT_CODE, AttemptMonitor, Guard
from skyrl_hp_job.options import CKPT_PATH_KEY, RUN_NAME_KEY, parse_args
from skyrl_hp_job.prepare import _write_marker
from skyrl_hp_job.progress import write_progress
from skyrl_hp_job.resume import claim_checkpoint_dir
from skyrl_hp_job.trainer_guard import guard_trainer, route_guard_to_workers, worker_setup_hook
from skyrl_hp_job.watchdog import StallWatchdog
from skyrl_hyperpod.config import load_config
from skyrl_hyperpod.config.training import (
    STALL_FIRST_STEP_TIMES,
    STALL_FLOOR_SECONDS,
    STALL_STEP_TIMES,
    TrainingJobsConfig,
)

TRAIN_JOB = Path(__file__).resolve().parent.parent / "docker" / "train_job.py"

RUN = "maze-grpo"

# --- the stand-in SkyRL and Ray ---------------------------------------------------------------------------------

FAKE_RAY = """
def init(*args, runtime_env=None, **kwargs):
    # Where a Ray worker process runs the job's worker_process_setup_hook: before it runs the trainer's task.
    hook = (runtime_env or {}).get("worker_process_setup_hook")
    if hook is not None:
        hook()


class cloudpickle:
    @staticmethod
    def register_pickle_by_value(module):
        pass
"""

FAKE_TRAINER = '''
"""Stand-in for skyrl/train/trainer.py: the callback events of RayPPOTrainer.train and the file writes of
save_checkpoints, through the module's `io` (skyrl.backends.skyrl_train.utils.io.io in SkyRL)."""
import json, os, time, types


class _IO:
    @staticmethod
    def open_file(path, mode="rb"):
        return open(path, mode)


io = _IO()


class RayPPOTrainer:
    def __init__(self, ckpt_path, plan):
        self.ckpt_path, self.plan, self.global_step, self.callbacks = ckpt_path, plan, 0, []

    def add_callback(self, callback):
        self.callbacks.append(callback)

    def _fire(self, event):
        for callback in self.callbacks:
            getattr(callback, event)(self, types.SimpleNamespace(global_step=self.global_step), None)

    def save_checkpoints(self):
        folder = os.path.join(self.ckpt_path, f"global_step_{self.global_step}")
        os.makedirs(folder, exist_ok=True)
        if self.plan.get("supersede_during_save") == self.global_step:
            _newer_attempt(self.ckpt_path)
        with io.open_file(os.path.join(folder, "trainer_state.pt"), "wb") as handle:
            handle.write(b"state")
        with io.open_file(os.path.join(self.ckpt_path, "latest_ckpt_global_step.txt"), "w") as handle:
            handle.write(str(self.global_step))
        return folder

    def save_models(self):
        return None

    def train(self):
        self.global_step = self.plan.get("resume", 0)
        self._fire("on_train_start")
        self._fire("on_eval_start")
        for step in range(self.global_step + 1, self.plan["steps"] + 1):
            self.global_step = step
            self._fire("on_step_start")
            if step == self.plan.get("hang_at"):
                time.sleep(self.plan["hang_s"])  # a stuck collective, a hung FSx read...
            self._fire("on_step_end")
            if step == self.plan.get("supersede_after"):
                _newer_attempt(self.ckpt_path)
            if step % self.plan.get("ckpt_every", 10**9) == 0:
                self.save_checkpoints()
        self._fire("on_train_end")


def _newer_attempt(ckpt_path):
    """What a newer attempt's train_job.py leaves: the next generation's file."""
    attempts = os.path.join(ckpt_path, ".skyrl-hp-attempts")
    newest = max(int(n.split("-")[1]) for n in os.listdir(attempts) if n.startswith("generation-"))
    with open(os.path.join(attempts, f"generation-{newest + 1}"), "x") as handle:
        json.dump({"submission_id": "maze-grpo-newer", "host": "other-pod", "pid": 7, "taken_at": "later"}, handle)
'''

FAKE_ENTRYPOINT = '''
"""Stand-in for examples/train/visgym/entrypoint.py: ray.init, then the trainer (in SkyRL, in a Ray task)."""
import json, os, sys

if os.environ.get("FAKE_IMPORT_FIRST"):  # as in SkyRL's driver: main_base imports the trainer before ray.init
    import skyrl.train.trainer
import ray

ray.init(runtime_env={"env_vars": {}}, log_to_driver=True)
from skyrl.train.trainer import RayPPOTrainer

overrides = dict(item.split("=", 1) for item in sys.argv[1:] if "=" in item)
RayPPOTrainer(overrides["trainer.ckpt_path"], json.loads(os.environ["FAKE_PLAN"])).train()
'''


def write_fake_skyrl(root: Path) -> tuple[Path, Path]:
    """(the SkyRL checkout for --skyrl-dir, the directory to put first on PYTHONPATH)."""
    packages = root / "site"
    (packages / "ray").mkdir(parents=True)
    (packages / "ray" / "__init__.py").write_text(FAKE_RAY)
    (packages / "skyrl" / "train").mkdir(parents=True)
    (packages / "skyrl" / "__init__.py").write_text("")
    (packages / "skyrl" / "train" / "__init__.py").write_text("")
    (packages / "skyrl" / "train" / "trainer.py").write_text(FAKE_TRAINER)
    checkout = root / "SkyRL"
    scripts = checkout / "examples" / "train" / "visgym"
    scripts.mkdir(parents=True)
    (scripts / "entrypoint.py").write_text(FAKE_ENTRYPOINT)
    (scripts / "dataset.py").write_text("")
    write_fake_vision_language(packages, checkout)
    return checkout, packages


@pytest.fixture
def job(tmp_path):
    """A prepared /shared (markers as train_job.py writes them) and a runner of train_job.py as the RayJob runs it."""
    shared = tmp_path / "shared"
    checkout, packages = write_fake_skyrl(tmp_path)
    ckpt = shared / "runs" / RUN / "ckpt"
    argv = argv_for(shared, checkout)
    options = parse_args(argv)
    options.model_dir.mkdir(parents=True)
    _write_marker(options.model_dir, options.model_inputs)
    options.data_dir.mkdir(parents=True)
    options.train_data.write_text("rows")
    options.eval_data.write_text("rows")
    _write_marker(options.data_dir, options.dataset_inputs)

    def run(plan: dict, *bounds: str, submission: str = "maze-grpo-abcde", import_first: bool = False):
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(packages), os.environ.get("PYTHONPATH", "")]),
            "FAKE_PLAN": json.dumps(plan),
            "RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps({"metadata": {"job_submission_id": submission}}),
        }
        if import_first:
            env["FAKE_IMPORT_FIRST"] = "1"
        overrides = ["--", f"trainer.ckpt_path={ckpt}", f"trainer.run_name={RUN}"]
        return subprocess.run(
            [sys.executable, str(TRAIN_JOB), *argv, *bounds, *overrides],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    run.ckpt = ckpt
    return run


def last_line(result: subprocess.CompletedProcess) -> str:
    return result.stderr.strip().splitlines()[-1]


# --- the watchdog, end to end ---------------------------------------------------------------------------------
# The runs that wait out a real bound (seconds each, nearly all of this module's time) are long_running: the edit
# loop (`make test-fast`) leaves them to `make test`.


@pytest.mark.long_running
@pytest.mark.parametrize("import_first", [False, True], ids=["trainer-imported-after-init", "imported-before"])
def test_a_trainer_that_stops_stepping_ends_the_attempt_in_one_line(job, import_first):
    plan = {"steps": 6, "hang_at": 3, "hang_s": 60}
    # 2 s: long enough that the driver sees step 2 (written right after step 1) before the bound passes.
    result = job(plan, "--stall-timeout-first-step", "30", "--stall-timeout-step", "2", import_first=import_first)
    assert result.returncode == STALL_EXIT_CODE, result.stderr
    assert last_line(result) == (
        "train_job: error: stalled: no training step finished within 2 s after step 2 "
        "(training.jobs.stall_timeout_step_s); ending attempt generation 1: a self-contained RayJob retries it on a "
        "fresh cluster, which resumes from the newest checkpoint"
    )
    assert "Traceback" not in result.stderr


@pytest.mark.long_running
def test_a_trainer_that_never_finishes_its_first_step_ends_the_attempt(job):
    # 3 s: long enough for the stand-in trainer to report its start on a loaded machine.
    result = job({"steps": 20, "resume": 16, "hang_at": 17, "hang_s": 60}, "--stall-timeout-first-step", "3")
    assert result.returncode == STALL_EXIT_CODE, result.stderr
    assert last_line(result).startswith(
        "train_job: error: stalled: no training step finished within 3 s of SkyRL's start "
        "(the trainer started after global_step_16; training.jobs.stall_timeout_first_step_s)"
    )


def test_a_trainer_that_keeps_stepping_runs_to_the_end(job):
    result = job({"steps": 5, "ckpt_every": 2}, "--stall-timeout-first-step", "30", "--stall-timeout-step", "5")
    assert result.returncode == 0, result.stderr
    assert "stall watchdog: the first step within 30 s, each later one within 5 s" in result.stderr
    progress = json.loads((job.ckpt / ".skyrl-hp-attempts" / "progress-1.json").read_text())
    assert (progress["event"], progress["step"]) == ("train_end", 5)


@pytest.mark.long_running
def test_without_bounds_no_watchdog_ends_a_slow_trainer(job):
    # The same slow step with the watchdog off finishes: what ends the attempts above is the watchdog.
    result = job({"steps": 3, "hang_at": 2, "hang_s": 1.5})
    assert result.returncode == 0, result.stderr


# --- fencing, end to end --------------------------------------------------------------------------------------------


def test_a_superseded_attempt_stops_before_its_next_checkpoint(job):
    plan = {"steps": 6, "ckpt_every": 2, "supersede_after": 3}
    result = job(plan, "--stall-timeout-first-step", "600", "--stall-timeout-step", "600")
    assert result.returncode == 1, result.stderr
    line = last_line(result)
    assert line.startswith("train_job: error: attempt generation 1 (submission maze-grpo-abcde, host ")
    assert "is superseded by generation 2 (submission maze-grpo-newer, host other-pod pid 7, since later)" in line
    assert "stopped before writing checkpoint global_step_4" in line
    assert line.endswith("the newest attempt owns the run's checkpoints")
    ckpt = job.ckpt
    assert (ckpt / "latest_ckpt_global_step.txt").read_text() == "2"
    assert not (ckpt / "global_step_4").exists()  # stopped before the checkpoint was even started


def test_a_newer_attempt_during_a_save_stops_the_step_file_write(job):
    # The newer attempt takes its generation after the save began (the policy save takes minutes on the cluster):
    # the fence before trainer_state.pt and the step file still holds.
    plan = {"steps": 6, "ckpt_every": 2, "supersede_during_save": 4}
    result = job(plan, "--stall-timeout-first-step", "600", "--stall-timeout-step", "600")
    assert result.returncode == 1, result.stderr
    assert "is superseded by generation 2" in last_line(result)
    assert (job.ckpt / "latest_ckpt_global_step.txt").read_text() == "2"
    assert not (job.ckpt / "global_step_4" / "trainer_state.pt").exists()


def test_each_attempt_takes_the_next_generation_with_its_submission_id(job):
    assert job({"steps": 1}, submission="maze-grpo-aaaaa").returncode == 0
    second = job({"steps": 1}, submission="maze-grpo-bbbbb")
    assert second.returncode == 0, second.stderr
    attempts = job.ckpt / ".skyrl-hp-attempts"
    records = [json.loads((attempts / f"generation-{n}").read_text()) for n in (1, 2)]
    assert [record["submission_id"] for record in records] == ["maze-grpo-aaaaa", "maze-grpo-bbbbb"]
    assert [record["generation"] for record in records] == [1, 2]
    assert "attempt generation 2 (submission maze-grpo-bbbbb" in second.stderr


# --- fencing, unit ---------------------------------------------------------------------------------------------


class FakeIO:
    @staticmethod
    def open_file(path, mode="rb"):
        return open(path, mode)


def fake_trainer_module() -> types.ModuleType:
    """A module shaped like skyrl/train/trainer.py for guard_trainer: RayPPOTrainer and the module's io."""
    module = types.ModuleType("fake_trainer")
    exec(
        textwrap.dedent(
            """
            import os

            class RayPPOTrainer:
                def __init__(self, ckpt_path):
                    self.ckpt_path, self.global_step, self.callbacks = ckpt_path, 0, []

                def add_callback(self, callback):
                    self.callbacks.append(callback)

                def save_checkpoints(self):
                    folder = os.path.join(self.ckpt_path, f"global_step_{self.global_step}")
                    os.makedirs(folder, exist_ok=True)
                    with io.open_file(os.path.join(self.ckpt_path, "latest_ckpt_global_step.txt"), "w") as handle:
                        handle.write(str(self.global_step))

                def save_models(self):
                    return "exported"
            """
        ),
        module.__dict__,
    )
    module.io = FakeIO()  # type: ignore[attr-defined]
    return module


def attempt_in(ckpt: Path, submission: str) -> object:
    ckpt.mkdir(parents=True, exist_ok=True)
    environ = {"RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps({"metadata": {"job_submission_id": submission}})}
    return take_generation(ckpt, attempt_identity(environ))


def test_fencing_refuses_a_stale_generation_before_a_checkpoint_write(tmp_path, capsys):
    ckpt = tmp_path / "ckpt"
    older = attempt_in(ckpt, "maze-grpo-old")
    module = fake_trainer_module()
    guard_trainer(module, older)
    trainer = module.RayPPOTrainer(str(ckpt))
    trainer.global_step = 8
    trainer.save_checkpoints()  # the newest attempt writes
    newer = attempt_in(ckpt, "maze-grpo-new")
    assert newer.generation == older.generation + 1
    trainer.global_step = 16
    with pytest.raises(AttemptSuperseded) as refused:
        trainer.save_checkpoints()
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"attempt generation 1 (submission maze-grpo-old, host {os.uname().nodename}")
    assert "superseded by generation 2 (submission maze-grpo-new" in message
    assert "stopped before writing checkpoint global_step_16" in message
    assert not (ckpt / "global_step_16").exists()
    assert (ckpt / "latest_ckpt_global_step.txt").read_text() == "8"
    with pytest.raises(AttemptSuperseded):
        trainer.save_models()
    assert f"train_job: error: {message}" in capsys.readouterr().err


def test_the_step_file_write_itself_is_fenced(tmp_path):
    ckpt = tmp_path / "ckpt"
    older = attempt_in(ckpt, "maze-grpo-old")
    module = fake_trainer_module()
    guard_trainer(module, older)
    attempt_in(ckpt, "maze-grpo-new")
    with pytest.raises(AttemptSuperseded, match="before writing .*latest_ckpt_global_step.txt"):
        module.io.open_file(str(ckpt / "latest_ckpt_global_step.txt"), "w")
    with module.io.open_file(str(tmp_path / "elsewhere.txt"), "w") as handle:  # outside the run: not fenced
        handle.write("x")
    (ckpt / "latest_ckpt_global_step.txt").write_text("8")
    with module.io.open_file(str(ckpt / "latest_ckpt_global_step.txt"), "r") as handle:  # reads are not fenced
        assert handle.read() == "8"


def test_the_newest_attempt_keeps_writing(tmp_path):
    ckpt = tmp_path / "ckpt"
    attempt_in(ckpt, "maze-grpo-old")
    newest = attempt_in(ckpt, "maze-grpo-new")
    module = fake_trainer_module()
    guard_trainer(module, newest)
    trainer = module.RayPPOTrainer(str(ckpt))
    trainer.global_step = 24
    trainer.save_checkpoints()
    assert (ckpt / "latest_ckpt_global_step.txt").read_text() == "24"
    assert trainer.save_models() == "exported"
    assert [type(callback).__name__ for callback in trainer.callbacks] == ["ProgressCallback"]


def test_a_newer_attempt_never_waits_on_an_older_one(tmp_path):
    """The older attempt's process is gone but left what a lost node leaves: its generation file, a half-written
    record under a private name, and locks a lost Lustre client keeps until the servers evict it (here held by a
    live process on the attempts directory and every file in it). Taking the next generation waits on none."""
    ckpt = tmp_path / "ckpt"
    older = attempt_in(ckpt, "maze-grpo-old")
    attempts = ckpt / ".skyrl-hp-attempts"
    (attempts / ".generation-lost-node.4242.tmp").write_text('{"generation": 2')
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import fcntl, os, sys
                held = []
                for path in [sys.argv[1]] + [os.path.join(sys.argv[1], n) for n in os.listdir(sys.argv[1])]:
                    fd = os.open(path, os.O_RDONLY)
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    held.append(fd)
                print("held", flush=True)
                sys.stdin.read()
                """
            ),
            str(attempts),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(BlockingIOError), open(attempts / "generation-1") as probe:  # the locks are held
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        taken: list = []
        worker = threading.Thread(target=lambda: taken.append(attempt_in(ckpt, "maze-grpo-new")), daemon=True)
        worker.start()
        worker.join(120)  # a liveness guard, not a measurement: a take that waited would never finish
        assert taken, "taking a generation waited on the older attempt"
        assert taken[0].generation == 2
        assert superseded_by(older) is not None
        assert superseded_by(taken[0]) is None
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(60)


def test_two_attempts_racing_for_a_generation_get_different_ones(tmp_path, monkeypatch):
    ckpt = tmp_path / "ckpt"
    first = attempt_in(ckpt, "maze-grpo-a")
    real = generations
    listed = []

    def listing(directory):
        # The second attempt's first listing happened before the first attempt created generation-1.
        listed.append(directory)
        return [] if len(listed) == 1 else real(directory)

    monkeypatch.setattr(skyrl_hp_job.attempts, "generations", listing)
    second = attempt_in(ckpt, "maze-grpo-b")
    assert (first.generation, second.generation) == (1, 2)
    assert sorted(p.name for p in (ckpt / ".skyrl-hp-attempts").iterdir()) == ["generation-1", "generation-2"]


def test_the_job_takes_its_generation_before_it_repairs_the_step_file(tmp_path, monkeypatch):
    ckpt = tmp_path / "ckpt"
    order: list[str] = []
    monkeypatch.setattr(skyrl_hp_job.attempts, "take_generation", lambda *a: order.append("generation") or "attempt")
    monkeypatch.setattr(skyrl_hp_job.attempts, "resume_point", lambda *a: order.append("repair"))
    options = types.SimpleNamespace(overrides=((CKPT_PATH_KEY, str(ckpt)), (RUN_NAME_KEY, RUN)))
    assert claim_run_checkpoints(options) == "attempt"
    assert order == ["generation", "repair"]


def test_another_runs_directory_gets_no_generation(tmp_path):
    ckpt = tmp_path / "ckpt"
    claim_checkpoint_dir(ckpt, "other-run")
    options = types.SimpleNamespace(overrides=((CKPT_PATH_KEY, str(ckpt)), (RUN_NAME_KEY, RUN)))
    with pytest.raises(PrepareError, match="belongs to run 'other-run'"):
        claim_run_checkpoints(options)
    assert not (ckpt / ATTEMPTS_DIR).exists()  # the directory is untouched


def test_the_submission_id_comes_from_the_ray_job_config():
    environ = {"RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps({"runtime_env": {}, "metadata": {"job_submission_id": "j-1"}})}
    assert attempt_identity(environ)["submission_id"] == "j-1"
    assert attempt_identity({})["submission_id"] is None
    assert attempt_identity({"RAY_JOB_CONFIG_JSON_ENV_VAR": "not json"})["submission_id"] is None


# --- the watchdog's decisions, on a fake clock -------------------------------------------------------------------


def watchdog(first: float = 100, step: float = 10) -> object:
    return StallWatchdog(first_step_s=first, step_s=step, started=1000.0)


def test_the_first_step_has_its_own_bound():
    dog = watchdog()
    dog.observe("train_start", 0, 1050)
    assert dog.overdue(1100) is None
    assert dog.overdue(1100.5) == (
        "stalled: no training step finished within 100 s of SkyRL's start (the trainer started at step 1; "
        "training.jobs.stall_timeout_first_step_s)"
    )
    assert "the trainer never reported its start" in watchdog().overdue(1101)


def test_each_finished_step_restarts_the_later_bound():
    dog = watchdog()
    dog.observe("step_end", 1, 1090)
    assert dog.overdue(1100) is None  # 10 s after step 1; the first-step bound no longer applies
    dog.observe("step_end", 2, 1099)
    assert dog.overdue(1109) is None
    assert dog.overdue(1109.5) == (
        "stalled: no training step finished within 10 s after step 2 (training.jobs.stall_timeout_step_s)"
    )
    dog.observe("step_end", 2, 1109)  # the same step seen again is not progress
    assert dog.overdue(1109.5) is not None


def test_a_finished_run_or_a_zero_bound_never_stalls():
    dog = watchdog()
    dog.observe("train_end", 160, 1001)
    assert dog.overdue(10**9) is None
    assert watchdog(first=0).overdue(10**9) is None
    unbounded_later = watchdog(step=0)
    unbounded_later.observe("step_end", 1, 1001)
    assert unbounded_later.overdue(10**9) is None


def test_the_monitor_ends_the_driver_on_a_stall_or_a_newer_generation(tmp_path):
    ckpt = tmp_path / "ckpt"
    attempt = attempt_in(ckpt, "maze-grpo-a")
    now = [0.0]
    monitor = AttemptMonitor(Guard(attempt, 100, 10), clock=lambda: now[0], end=None)
    write_progress(attempt, "step_end", 5)
    monitor.refresh()
    now[0] = 50
    assert monitor.decide(50) is None
    assert monitor.decide(60) is None
    line, code = monitor.decide(60.5)
    assert code == STALL_EXIT_CODE and "after step 5" in line and "\n" not in line
    attempt_in(ckpt, "maze-grpo-b")
    monitor.refresh()
    line, code = monitor.decide(61)
    assert code == 1 and "is superseded by generation 2 (submission maze-grpo-b" in line


# --- the worker hook travels by value ------------------------------------------------------------------------------


def test_the_worker_hook_guards_the_trainer_in_a_process_that_cannot_import_the_job_package(tmp_path):
    ray = pytest.importorskip("ray")
    ckpt = tmp_path / "ckpt"
    attempt = attempt_in(ckpt, "maze-grpo-a")
    captured: dict = {}
    fake_ray = types.SimpleNamespace(cloudpickle=ray.cloudpickle, init=lambda **kwargs: captured.update(kwargs))
    route_guard_to_workers(fake_ray, worker_setup_hook(attempt))
    fake_ray.init(runtime_env={"env_vars": {"A": "1"}}, log_to_driver=True)
    assert captured["runtime_env"]["env_vars"] == {"A": "1"} and captured["log_to_driver"] is True
    payload = tmp_path / "hook.pkl"
    payload.write_bytes(ray.cloudpickle.dumps(captured["runtime_env"]["worker_process_setup_hook"]))
    _, packages = write_fake_skyrl(tmp_path / "fake")
    (packages / "ray" / "__init__.py").unlink()  # Ray's own cloudpickle unpickles the hook, as in a Ray worker
    (packages / "ray").rmdir()
    worker = textwrap.dedent(
        f"""
        import pickle, sys
        import importlib.util
        assert importlib.util.find_spec("skyrl_hp_job") is None  # as on a worker pod, which does not mount it
        hook = pickle.loads(open({str(payload)!r}, "rb").read())
        hook()
        import skyrl.train.trainer as trainer
        t = trainer.RayPPOTrainer({str(ckpt)!r}, {{"steps": 2, "ckpt_every": 1}})
        t.train()
        print(type(t.callbacks[0]).__name__, trainer.RayPPOTrainer._skyrl_hp_guarded)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(packages)}
    result = subprocess.run(
        [sys.executable, "-c", worker], env=env, capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ProgressCallback", "True"]
    assert (ckpt / "latest_ckpt_global_step.txt").read_text() == "2"
    progress = json.loads((ckpt / ".skyrl-hp-attempts" / "progress-1.json").read_text())
    assert (progress["event"], progress["step"]) == ("train_end", 2)


# --- the bounds, derived in the configuration -------------------------------------------------------------------


def test_the_default_bounds_follow_the_reference_step_time():
    jobs = load_config(None).training.jobs
    step = jobs.estimated_step_seconds
    assert step == 540  # a 24 h reference run of 160 steps
    assert jobs.effective_stall_timeout_step_s == STALL_STEP_TIMES * step == 1620
    assert jobs.effective_stall_timeout_first_step_s == jobs.placement_group_timeout_seconds + 4 * step == 9360
    assert STALL_FIRST_STEP_TIMES == 4


def test_a_fast_measured_step_keeps_the_floor():
    jobs = TrainingJobsConfig(estimated_step_seconds=60)
    assert jobs.effective_stall_timeout_step_s == STALL_FLOOR_SECONDS
    assert jobs.effective_stall_timeout_first_step_s == jobs.placement_group_timeout_seconds + STALL_FLOOR_SECONDS


def test_a_slower_step_or_a_longer_placement_wait_moves_the_bounds():
    jobs = TrainingJobsConfig(estimated_step_seconds=1000, placement_group_timeout_seconds=3600)
    assert (jobs.effective_stall_timeout_first_step_s, jobs.effective_stall_timeout_step_s) == (7600, 3000)


def test_explicit_bounds_win_and_zero_turns_the_watchdog_off():
    jobs = TrainingJobsConfig(stall_timeout_first_step_s=7300, stall_timeout_step_s=30)
    assert (jobs.effective_stall_timeout_first_step_s, jobs.effective_stall_timeout_step_s) == (7300, 30)
    off = TrainingJobsConfig(stall_timeout_first_step_s=0, stall_timeout_step_s=0)
    assert (off.effective_stall_timeout_first_step_s, off.effective_stall_timeout_step_s) == (0, 0)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"stall_timeout_first_step_s": 7200}, r"not longer than placement_group_timeout_seconds \(7200\)"),
        ({"stall_timeout_first_step_s": 172800}, r"not shorter than job_active_deadline_seconds \(172800\)"),
        ({"estimated_step_seconds": 50000}, "not shorter than job_active_deadline_seconds"),
    ],
)
def test_bounds_that_cannot_work_are_refused(fields, message):
    with pytest.raises(ValidationError, match=message):
        TrainingJobsConfig(**fields)


def test_the_command_line_takes_the_bounds(tmp_path):
    argv = [
        "--shared-dir", "/shared", "--model-repo", "a/b", "--model-subfolder", "m", "--model-dir", "/shared/m",
        "--data-dir", "/shared/d", "--env-id", "maze_2d/easy", "--train-rows", "8", "--eval-rows", "4",
        "--eval-seed", "42", "--skyrl-dir", "/skyrl", "--stall-timeout-first-step", "9360",
        "--stall-timeout-step", "1620",
    ]  # fmt: skip
    options = parse_args(argv)
    assert (options.stall_timeout_first_step, options.stall_timeout_step) == (9360, 1620)
    with pytest.raises(UsageError, match="--stall-timeout-step: -1 must be a finite number"):
        parse_args([*argv[:-1], "-1"])
