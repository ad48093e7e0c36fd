"""Experiment tracking with MLflow: one run per attempt chain (docker/train_job.py), the fence on SkyRL's tracker, and
`train metrics`' read-back (skyrl_hyperpod/ops/metrics.py), against MLflow's real client and SkyRL's real Tracking
class on a file store in a temporary directory (no server: the drill runs `mlflow server` itself)."""

from __future__ import annotations

import json
import sys
import textwrap
import types
from pathlib import Path

import mlflow
import pytest
from skyrl_tracking import tracking

from skyrl_hp_job.attempts import AttemptSuperseded, attempt_identity, take_generation
from skyrl_hp_job.errors import PrepareError
from skyrl_hp_job.options import parse_args
from skyrl_hp_job.tracking import start_mlflow_run
from skyrl_hp_job.trainer_guard import GuardOnImport, arm_trainer_guard, guard_trainer
from skyrl_hyperpod.ops import metrics

FIXTURE_LOG = Path(__file__).parent / "fixtures" / "skyrl_visgym_console.log"
PROJECT, RUN = "visgym-maze", "maze-grpo"


@pytest.fixture
def store(tmp_path, monkeypatch):
    # mlflow-skinny's own store (the SQL store needs the full `mlflow` package, which the drill's server runs).
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    mlflow.set_tracking_uri(uri)  # SkyRL's adapter sets it process-wide: a test's must not leak into the next
    yield mlflow.MlflowClient(tracking_uri=uri)
    while mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.set_tracking_uri(None)


def options(ckpt: Path, *tags: tuple[str, str]):
    return parse_args(
        [
            *(
                [
                    "--shared-dir",
                    "/s",
                    "--model-repo",
                    "a/b",
                    "--model-subfolder",
                    "m",
                    "--model-dir",
                    "/s/m",
                    "--data-dir",
                    "/s/d",
                ]
            ),
            *(
                [
                    "--env-id",
                    "maze_2d/easy",
                    "--train-rows",
                    "8",
                    "--eval-rows",
                    "4",
                    "--eval-seed",
                    "1",
                    "--skyrl-dir",
                    "/opt/skyrl",
                ]
            ),
            *(f"--mlflow-tag={key}={value}" for key, value in tags),
            "--",
            f"trainer.ckpt_path={ckpt}",
            f"trainer.run_name={RUN}",
            f"trainer.project_name={PROJECT}",
            "trainer.logger=mlflow",
        ]
    )


def attempt_in(ckpt: Path, submission: str):
    ckpt.mkdir(parents=True, exist_ok=True)
    environ = {"RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps({"metadata": {"job_submission_id": submission}})}
    return take_generation(ckpt, attempt_identity(environ))


def trainer_module() -> types.ModuleType:
    """skyrl/train/trainer.py's shape for guard_trainer, with RayPPOTrainer.flush_pending_metrics as SkyRL 0.4.0 has
    it: it logs the step in flight through the tracker and swallows any exception (BasePPOExp.run calls it when the
    training loop raised)."""
    module = types.ModuleType("fake_trainer")
    exec(
        textwrap.dedent(
            """
            class RayPPOTrainer:
                def __init__(self, tracker):
                    self.tracker, self.global_step, self.callbacks = tracker, 0, []
                    self.all_metrics, self.all_timings = {}, {}

                def add_callback(self, callback):
                    self.callbacks.append(callback)

                def save_checkpoints(self):
                    pass

                def save_models(self):
                    pass

                def flush_pending_metrics(self):
                    if not self.all_metrics:
                        return
                    try:
                        self.tracker.log(self.all_metrics, step=self.global_step, commit=True)
                    except Exception:
                        pass
                    self.all_metrics = {}
            """
        ),
        module.__dict__,
    )
    module.io = types.SimpleNamespace(open_file=open)  # type: ignore[attr-defined]
    return module


def history(client, run_id: str, key: str = metrics.REWARD) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def test_a_retry_resumes_the_run_kept_beside_the_checkpoints(tmp_path, store):
    ckpt = tmp_path / "ckpt"
    tags = (("skyrl_hp.rayjob", "skyrl-visgym-maze-grpo"), ("skyrl_hp.image_tag", "v1"))
    first = start_mlflow_run(options(ckpt, *tags), attempt_in(ckpt, "job-a"), store)
    kept = json.loads((ckpt / ".skyrl-hp-attempts" / "mlflow-run.json").read_text())
    assert kept == {"run_id": first}
    retry = start_mlflow_run(options(ckpt, *tags), attempt_in(ckpt, "job-b"), store)
    assert retry == first
    run = store.get_run(first)
    assert run.info.run_name == RUN
    assert store.get_experiment(run.info.experiment_id).name == PROJECT
    assert run.data.tags["skyrl_hp.rayjob"] == "skyrl-visgym-maze-grpo"
    assert run.data.tags["skyrl_hp.attempt_generation"] == "2"
    assert len(store.search_runs([run.info.experiment_id])) == 1


def test_a_deleted_kept_run_is_refused_in_one_line(tmp_path, store):
    ckpt = tmp_path / "ckpt"
    run_id = start_mlflow_run(options(ckpt), attempt_in(ckpt, "job-a"), store)
    store.delete_run(run_id)
    with pytest.raises(PrepareError) as refused:
        start_mlflow_run(options(ckpt), attempt_in(ckpt, "job-b"), store)
    assert "\n" not in str(refused.value)
    assert f"MLflow run {run_id}" in str(refused.value) and "is deleted" in str(refused.value)


def test_skyrls_logger_resumes_the_run_the_hook_names(tmp_path, store):
    """The worker hook puts MLFLOW_RUN_ID into the trainer's process; SkyRL's own _MlflowLoggingAdapter then logs
    into the kept run instead of starting a new one."""
    ckpt = tmp_path / "ckpt"
    attempt = attempt_in(ckpt, "job-a")
    run_id = start_mlflow_run(options(ckpt), attempt, store)
    arm_trainer_guard({"ckpt_dir": attempt.ckpt_dir, "generation": attempt.generation, "label": attempt.label}, run_id)
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, GuardOnImport)]
    tracker = tracking.Tracking(PROJECT, RUN, backend="mlflow")
    tracker.log({metrics.REWARD: 0.5}, step=3)
    tracker.finish()
    assert history(store, run_id) == [(3, 0.5)]
    assert len(store.search_runs([store.get_experiment_by_name(PROJECT).experiment_id])) == 1


def test_a_superseded_attempt_logs_nothing_to_the_shared_run(tmp_path, store, capsys, monkeypatch):
    """The stale attempt's trainer dies after a newer attempt took over: SkyRL flushes the step in flight and
    Tracking.__del__ ends the run. Fenced, neither reaches the run the newer attempt is logging to."""
    ckpt = tmp_path / "ckpt"
    older = attempt_in(ckpt, "job-old")
    run_id = start_mlflow_run(options(ckpt), older, store)
    module = trainer_module()
    guard_trainer(module, older)
    monkeypatch.setenv("MLFLOW_RUN_ID", run_id)  # what the worker hook sets in the trainer's process
    stale = module.RayPPOTrainer(tracking.Tracking(PROJECT, RUN, backend="mlflow"))
    assert mlflow.active_run().info.run_id == run_id
    stale.global_step = 1
    stale.tracker.log({metrics.REWARD: 0.25}, step=1)

    newer = attempt_in(ckpt, "job-new")
    assert start_mlflow_run(options(ckpt), newer, store) == run_id
    store.log_metric(run_id, metrics.REWARD, 0.5, step=2)  # the newer attempt's step 2, from its own process

    stale.global_step, stale.all_metrics = 2, {metrics.REWARD: 0.99}
    stale.flush_pending_metrics()
    with pytest.raises(AttemptSuperseded):
        stale.tracker.log({metrics.REWARD: 0.98}, step=3)
    stale.tracker.finish()
    assert history(store, run_id) == [(1, 0.25), (2, 0.5)]
    assert store.get_run(run_id).info.status == "RUNNING"
    assert "stopped before ending the tracking run" in capsys.readouterr().err


def test_train_metrics_reads_back_what_skyrls_logger_wrote(tmp_path, store):
    """The drill's check on recorded data: every step of a driver log logged through SkyRL's own MLflow logger, read
    back by `train metrics`' MLflow path, matches the log's steps and rewards."""
    logged = metrics.parse_log(FIXTURE_LOG.read_text().splitlines())
    tracker = tracking.Tracking(PROJECT, RUN, backend="mlflow")
    for step in logged:
        tracker.log(step.values, step=step.step)
    tracker.finish()
    run_id = metrics.find_mlflow_run(store, PROJECT, RUN)
    tracked = metrics.read_mlflow(store, run_id)
    assert metrics.tracked_matches_log(logged, tracked) is None
    assert [s.step for s in tracked] == [s.step for s in logged]
    assert [s.pass_at_1 for s in tracked] == [s.pass_at_1 for s in logged]
    off = [metrics.StepMetrics(s.step, dict(s.values)) for s in tracked]
    off[1].values[metrics.REWARD] += 0.01
    assert metrics.tracked_matches_log(logged, off) == (
        f"step {off[1].step}: {metrics.REWARD} {logged[1].reward} in the log, {off[1].reward} in MLflow"
    )
    assert "the log has" in (metrics.tracked_matches_log(logged, tracked[:-1]) or "")


def test_a_missing_run_is_one_line(store):
    with pytest.raises(metrics.MlflowRunNotFound, match="no MLflow experiment 'visgym-maze'"):
        metrics.find_mlflow_run(store, PROJECT, RUN)
    store.create_experiment(PROJECT)
    with pytest.raises(metrics.MlflowRunNotFound, match="no MLflow run 'maze-grpo' in experiment 'visgym-maze'"):
        metrics.find_mlflow_run(store, PROJECT, RUN)
