"""The first RayJob's real training logged to a real MLflow tracking server, and read back as `train metrics` reads it.

The server is PyPI's full `mlflow` (`mlflow server`, `make drill-mlflow-env`) with a SQLite backend store and its
artifacts under the run directory, on 127.0.0.1 and a free port. The first RayJob is synthesized from the drill's
configuration with `tracking: {backend: mlflow, tracking_uri: http://127.0.0.1:<port>}`, as a user with a
self-hosted server writes it: the charts put trainer.logger=mlflow, MLFLOW_TRACKING_URI and the run's tags on its
entrypoint, train_job.py starts (or resumes) the attempt chain's MLflow run, and SkyRL's own MLflow logger
(skyrl/train/utils/tracking.py) logs each step into it from the trainer's process. Afterwards the drill reads the
run with the function `skyrl-hp train metrics` uses for MLflow (skyrl_hyperpod/cli/train.py `mlflow_steps`) and
checks its training steps and rewards against the driver logs' step lines, and that the attempts wrote into the one
run train_job.py keeps beside the checkpoints.
"""

from __future__ import annotations

import contextlib
import io
import math
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.config.tracking import MLFLOW_BACKEND
from skyrl_hyperpod.ops import metrics as metrics_module

from . import synth
from .cpu_training import TRAINED_STEPS, trained_steps
from .publish import LOOPBACK
from .resume import overrides_of
from .training_cluster import JobRun, Outcome

if TYPE_CHECKING:
    from .session import Drill

SERVER_START_TIMEOUT_SECONDS = 180
# MLflow's liveness endpoint (mlflow/server/handlers.py, `/health` answers "OK").
HEALTH_PATH = "/health"
# The driver log's step line carries the metric as SkyRL handed it to its logger (a float, JSON round trip); MLflow
# stores a double: they agree to well within this.
REWARD_TOLERANCE = 1e-6


@dataclass
class MlflowServer:
    """`mlflow server` on 127.0.0.1, for as long as the first RayJob trains and the drill reads its run back."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def uri(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        port: int = probe.getsockname()[1]
        return port


def server_command(mlflow_env: Path, store: Path, port: int) -> list[str]:
    """`mlflow server` with a SQLite backend store and a local artifact store in `store`, one worker, on loopback
    (https://mlflow.org/docs/latest/self-hosting/architecture/tracking-server/)."""
    return [
        str(mlflow_env / "bin" / "mlflow"), "server",
        "--backend-store-uri", f"sqlite:///{store / 'mlflow.db'}",
        "--artifacts-destination", str(store / "artifacts"),
        "--host", LOOPBACK, "--port", str(port),
        "--workers", "1",
    ]  # fmt: skip


def start_server(mlflow_env: Path, run_dir: Path, timeout: float = SERVER_START_TIMEOUT_SECONDS) -> MlflowServer:
    """The server, once its health endpoint answers; RuntimeError naming its log when it exits or stays silent."""
    store = run_dir / "mlflow"
    store.mkdir(exist_ok=True)
    port = free_port()
    log = store / "server.log"
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(
            server_command(mlflow_env, store, port),
            stdout=out,
            stderr=subprocess.STDOUT,
            env={"PATH": f"{mlflow_env / 'bin'}:/usr/bin:/bin", "HOME": str(run_dir), "LANG": "C.UTF-8"},
        )
    server = MlflowServer(process, port, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the MLflow server exited ({process.returncode}; see {log})")
        try:
            with urllib.request.urlopen(server.uri + HEALTH_PATH, timeout=5) as response:
                if response.status == 200:
                    return server
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1)
    server.stop()
    raise RuntimeError(f"the MLflow server did not answer on {server.uri} within {timeout:g} s (see {log})")


def tracking_overlay(uri: str) -> dict[str, Any]:
    """The configuration a user with a self-hosted MLflow server writes."""
    return {"tracking": {"backend": MLFLOW_BACKEND, "tracking_uri": uri}}


@dataclass(frozen=True)
class Tracked:
    """The first RayJob as the configuration with tracking on synthesizes it, and that configuration."""

    config: ProjectConfig
    rayjob: dict[str, Any]
    uri: str

    @property
    def name(self) -> str:
        return str(self.rayjob["metadata"]["name"])


def tracked_rayjob(config: ProjectConfig, manifest: dict[str, Any], uri: str) -> Tracked:
    """`manifest` (the first RayJob of dist/) synthesized again with tracking on against `uri`; ValueError when the
    charts then write another job or no trainer.logger=mlflow."""
    tracked = synth.with_overlay(config, tracking_overlay(uri))
    name = manifest["metadata"]["name"]
    rayjob = next((job for job in synth.rayjobs(tracked) if job["metadata"]["name"] == name), None)
    if rayjob is None:
        raise ValueError(f"the configuration with tracking.backend {MLFLOW_BACKEND} synthesizes no RayJob {name}")
    logger = overrides_of(rayjob).get("trainer.logger")
    if logger != MLFLOW_BACKEND:
        raise ValueError(f"{name} with tracking.backend {MLFLOW_BACKEND} runs trainer.logger={logger}, not mlflow")
    return Tracked(tracked, rayjob, uri)


def train_metrics_steps(config: ProjectConfig, run: Any) -> tuple[list[metrics_module.StepMetrics], str]:
    """What `skyrl-hp train metrics` reads from MLflow for `run`, and the one line it would print on failure (it
    exits; the drill reports the line)."""
    from skyrl_hyperpod.cli.train import mlflow_steps

    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            return mlflow_steps(config, run), ""
    except SystemExit:
        return [], " ".join(said.getvalue().split()) or "train metrics exited without a line"


def compare(driver: dict[int, float], tracked: dict[int, float]) -> list[str]:
    """Each difference between the driver log's rewards per step and MLflow's."""
    problems = []
    if sorted(driver) != sorted(tracked):
        problems.append(f"MLflow holds steps {sorted(tracked) or 'none'}, the driver log {sorted(driver) or 'none'}")
    for step in sorted(set(driver) & set(tracked)):
        if not math.isclose(driver[step], tracked[step], rel_tol=0, abs_tol=REWARD_TOLERANCE):
            problems.append(f"step {step}: reward {tracked[step]!r} in MLflow, {driver[step]!r} in the driver log")
    return problems


def kept_run_id(drill: Drill, rayjob: dict[str, Any]) -> str | None:
    """The MLflow run id train_job.py keeps beside the checkpoints for the attempt chain."""
    job = drill.training.train_job
    ckpt = drill.training.paths.path(overrides_of(rayjob)["trainer.ckpt_path"])
    kept: str | None = job.tracking.read_mlflow_run_id(ckpt / job.attempts.ATTEMPTS_DIR / job.tracking.MLFLOW_RUN_FILE)
    return kept


def read_back(drill: Drill, runs: tuple[JobRun, ...], *, tracked: Tracked) -> list[Outcome]:
    """The run's training steps as `train metrics` reads them from MLflow against the driver logs of `runs` (the
    attempts of the first RayJob's run, later ones winning a step both logged, as in MLflow's history)."""
    from mlflow import MlflowClient

    name = tracked.name
    run = next((run for run in tracked.config.derived.runs if run.job_name == name), None)
    if run is None:
        return [Outcome(False, f"drill: {name}: MLflow: no experiment of the configuration runs this RayJob")]
    driver = {number: float(step[metrics_module.REWARD]) for number, step in trained_steps(runs).items()}
    read, said = train_metrics_steps(tracked.config, run)
    if said:
        return [Outcome(False, f"drill: {name}: train metrics could not read the run from MLflow: {said}")]
    logged = {step.step: step.reward for step in read if step.reward is not None}
    problems = compare(driver, logged)
    if len(logged) < TRAINED_STEPS:
        problems.append(f"{len(logged)} training steps in MLflow, expected {TRAINED_STEPS}")
    client = MlflowClient(tracking_uri=tracked.uri)
    run_id = metrics_module.find_mlflow_run(client, run.knobs.project_name, run.run_id)
    experiment = client.get_experiment_by_name(run.knobs.project_name)
    named = client.search_runs(
        [experiment.experiment_id] if experiment else [],
        filter_string=f"tags.`{metrics_module.MLFLOW_RUN_NAME_TAG}` = '{run.run_id}'",
    )
    kept = kept_run_id(drill, tracked.rayjob)
    if kept != run_id or len(named) != 1:
        problems.append(
            f"the attempts logged to {len(named)} runs named {run.run_id!r}; train_job.py kept {kept}, not one run"
        )
    head = f"drill: {name}: logged {len(logged)} steps to MLflow (run {run_id})"
    if problems:
        return [Outcome(False, f"{head}, but " + "; ".join(problems))]
    rewards = ", ".join(f"step {step} {logged[step]:.4f}" for step in sorted(logged))
    detail = (
        f"experiment {run.knobs.project_name!r}, run name {run.run_id!r}: the one run of the attempt chain, the id "
        f"train_job.py keeps in {drill.training.train_job.tracking.MLFLOW_RUN_FILE}; rewards as in the driver log: {rewards}; "
        f"MLflow server at {tracked.uri}"
    )
    return [Outcome(True, f"{head}, train metrics reads them back ({detail})")]
