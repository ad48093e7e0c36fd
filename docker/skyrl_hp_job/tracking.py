"""The attempt chain's MLflow run (step 5 of the package docstring), and the fence on SkyRL's tracker."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .attempts import Attempt, check_fence, superseded_by, superseded_message
from .errors import PrepareError, log
from .files import staging_path, write_synced
from .options import PROJECT_NAME_KEY, RUN_NAME_KEY, Options

MLFLOW_RUN_ID_ENV = "MLFLOW_RUN_ID"
MLFLOW_RUN_FILE = "mlflow-run.json"


def mlflow_run_path(attempt: Attempt) -> Path:
    return attempt.attempts_dir / MLFLOW_RUN_FILE


def read_mlflow_run_id(path: Path) -> str | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    run_id = record.get("run_id") if isinstance(record, dict) else None
    return run_id if isinstance(run_id, str) and run_id else None


def keep_mlflow_run_id(path: Path, run_id: str) -> str:
    """Record `run_id` unless another attempt recorded one first (os.link fails on an existing name): the id kept."""
    staging = staging_path(path, "mlflow-run")
    write_synced(staging, json.dumps({"run_id": run_id}, sort_keys=True) + "\n")
    try:
        os.link(staging, path)
    except FileExistsError:
        kept = read_mlflow_run_id(path)
        return kept or run_id
    finally:
        staging.unlink(missing_ok=True)
    return run_id


def start_mlflow_run(options: Options, attempt: Attempt, client: Any) -> str:
    """The attempt chain's MLflow run id: the one kept beside the checkpoints when it still exists, else a new run
    in the experiment trainer.project_name, named trainer.run_name and tagged with --mlflow-tag. `client` is an
    mlflow.MlflowClient (it reads MLFLOW_TRACKING_URI; with an App's ARN, sagemaker-mlflow signs its requests)."""
    path = mlflow_run_path(attempt)
    tags = dict(options.mlflow_tags) | {"skyrl_hp.attempt_generation": str(attempt.generation)}
    kept = read_mlflow_run_id(path)
    if kept is not None:
        try:
            run = client.get_run(kept)
        except Exception as exc:  # MlflowException (RESOURCE_DOES_NOT_EXIST) or the server's refusal
            raise PrepareError(
                f"the MLflow run {kept} kept in {path} cannot be read ({str(exc).splitlines()[0] if str(exc) else exc}): "
                f"delete {path} to start a new run"
            ) from None
        if run.info.lifecycle_stage == "deleted":
            raise PrepareError(f"the MLflow run {kept} kept in {path} is deleted: restore it or delete {path}")
        for key, value in tags.items():
            client.set_tag(kept, key, value)
        log(f"MLflow: resuming run {kept} (kept in {path})")
        return kept
    experiment_name = options.override.get(PROJECT_NAME_KEY)
    run_name = options.override.get(RUN_NAME_KEY)
    if not experiment_name or not run_name:
        raise PrepareError(f"trainer.logger=mlflow needs {PROJECT_NAME_KEY} and {RUN_NAME_KEY} among the overrides")
    experiment = client.get_experiment_by_name(experiment_name)
    experiment_id = experiment.experiment_id if experiment is not None else client.create_experiment(experiment_name)
    created = client.create_run(experiment_id, run_name=run_name, tags=tags).info.run_id
    check_fence(attempt, "before keeping its MLflow run")
    kept = keep_mlflow_run_id(path, created)
    if kept != created:
        client.delete_run(created)  # another attempt of the run kept its own first: both log to that one
        log(f"MLflow: resuming run {kept} (kept in {path} by another attempt a moment ago)")
    else:
        log(f"MLflow: started run {kept} in experiment {experiment_name!r} (kept in {path})")
    return kept


def mlflow_client() -> Any:
    try:
        import mlflow
    except ImportError:
        raise PrepareError(
            "trainer.logger=mlflow, but mlflow is not importable in the training image (it pins mlflow-skinny)"
        ) from None
    return mlflow.MlflowClient()


def fence_tracker(tracker: Any, attempt: Attempt) -> None:
    """SkyRL's Tracking object with the fence checked before each log and before the run is ended: a superseded
    attempt logs nothing. Its main loop logs each step's metrics before the step's checkpoint, and on an exception
    BasePPOExp.run flushes the step in flight (trainer.flush_pending_metrics) and Tracking.__del__ ends the run
    (skyrl/train/entrypoints/main_base.py, skyrl/train/utils/tracking.py): unfenced, a stale attempt that dies would
    write its steps into the run after the newer attempt's, and mark the newer attempt's run finished. Instance
    attributes, so Tracking.__del__'s self.finish() sees the fenced one too."""
    original_log, original_finish = tracker.log, tracker.finish

    def log_metrics(data: Any, step: int, commit: bool = False) -> Any:
        check_fence(attempt, f"before logging step {step}'s metrics")
        return original_log(data, step=step, commit=commit)

    def finish() -> Any:
        newer = superseded_by(attempt)
        if newer is not None:
            log(superseded_message(attempt, newer, "before ending the tracking run"))
            return None
        return original_finish()

    tracker.log = log_metrics
    tracker.finish = finish
