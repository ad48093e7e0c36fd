"""The drill's MLflow check (drill/mlflow_tracking.py) without a server: the first RayJob synthesized with tracking
on, and the read-back through `train metrics`' own MLflow function against the driver logs. `make drill` runs it
against PyPI's mlflow server with SkyRL's logger; these tests hold the verdict to what it must catch (a reward MLflow
did not get, a retry that started a second run, a run train metrics cannot find)."""

from __future__ import annotations

import json
import re
import types
from pathlib import Path
from typing import Any

import mlflow
import pytest
from requirement_pins import pins

from drill import mlflow_tracking, scenarios, synth
from drill.cpu_training import STEP_MARKER
from drill.layout import PathMap, load_job_package
from drill.resume import overrides_of
from drill.training_cluster import JobRun
from skyrl_hyperpod.values.job_files import JOB_PACKAGE

REPO_ROOT = Path(__file__).resolve().parent.parent
URI = "http://127.0.0.1:5123"
LINE = re.compile(r"^drill: (\S+): logged (\d+) steps to MLflow \(run (\w+)\), train metrics reads them back \(")


@pytest.fixture(scope="module")
def tracked(default_config) -> mlflow_tracking.Tracked:
    manifest = synth.rayjobs(default_config)[0]
    return mlflow_tracking.tracked_rayjob(default_config, manifest, URI)


def test_the_first_rayjob_is_synthesized_with_tracking_on_as_a_user_configures_it(default_config, tracked):
    manifest = synth.rayjobs(default_config)[0]
    assert tracked.name == manifest["metadata"]["name"]
    assert tracked.config.tracking.tracking_uri == URI and default_config.tracking.backend == "console"
    assert overrides_of(tracked.rayjob)["trainer.logger"] == "mlflow"
    assert overrides_of(manifest).get("trainer.logger") != "mlflow"
    assert f"MLFLOW_TRACKING_URI={URI}" in tracked.rayjob["spec"]["entrypoint"]
    # Only the tracking differs: the run's paths (checkpoints, exports the publish Job copies) stay the manifest's.
    for key in ("trainer.ckpt_path", "trainer.export_path", "trainer.run_name", "trainer.project_name"):
        assert overrides_of(tracked.rayjob)[key] == overrides_of(manifest)[key]


def test_a_manifest_the_tracked_configuration_does_not_write_is_refused(default_config):
    manifest = {"metadata": {"name": "not-a-rayjob-of-this-config"}}
    with pytest.raises(ValueError, match="synthesizes no RayJob not-a-rayjob-of-this-config"):
        mlflow_tracking.tracked_rayjob(default_config, manifest, URI)


def test_the_server_listens_on_loopback_with_its_store_in_the_run_directory(tmp_path):
    command = mlflow_tracking.server_command(Path("/env"), tmp_path, 5123)
    assert command[:2] == ["/env/bin/mlflow", "server"]
    assert command[command.index("--host") + 1] == "127.0.0.1"
    assert command[command.index("--port") + 1] == "5123"
    assert command[command.index("--backend-store-uri") + 1] == f"sqlite:///{tmp_path}/mlflow.db"
    assert command[command.index("--artifacts-destination") + 1].startswith(str(tmp_path))


class FakeMlflow:
    """What MlflowClient answers for one experiment: runs by name, metric histories by run."""

    def __init__(self, experiment: str | None, runs: dict[str, str], history: dict[str, dict[int, float]]) -> None:
        self.experiment, self.runs, self.history = experiment, runs, history

    def client(self, tracking_uri: str | None = None) -> FakeMlflow:
        assert tracking_uri == URI
        return self

    def get_experiment_by_name(self, name: str) -> Any:
        return types.SimpleNamespace(experiment_id="1") if name == self.experiment else None

    def search_runs(self, experiment_ids: list[str], filter_string: str = "", **_: Any) -> list[Any]:
        name = re.search(r"= '(.*)'", filter_string).group(1)  # type: ignore[union-attr]
        return [types.SimpleNamespace(info=types.SimpleNamespace(run_id=i)) for i, n in self.runs.items() if n == name]

    def get_metric_history(self, run_id: str, key: str) -> list[Any]:
        if key != "reward/avg_raw_reward":
            return []
        return [types.SimpleNamespace(step=s, value=v, timestamp=s) for s, v in self.history.get(run_id, {}).items()]


def attempt(*steps: tuple[int, float]) -> JobRun:
    logs = "".join(f"{STEP_MARKER} {json.dumps({'step': s, 'reward/avg_raw_reward': r})}\n" for s, r in steps)
    return JobRun("maze", "maze-1", "SUCCEEDED", "", logs, {}, None)


def drill_for(default_config, tracked, tmp_path: Path, kept: str | None) -> Any:
    paths = PathMap({default_config.workloads.shared_mount_path: tmp_path})
    job = load_job_package(REPO_ROOT / "docker" / JOB_PACKAGE)
    if kept is not None:
        record = (
            paths.path(overrides_of(tracked.rayjob)["trainer.ckpt_path"])
            / job.attempts.ATTEMPTS_DIR
            / job.tracking.MLFLOW_RUN_FILE
        )
        record.parent.mkdir(parents=True)
        record.write_text(json.dumps({"run_id": kept}), encoding="utf-8")
    return types.SimpleNamespace(training=types.SimpleNamespace(train_job=job, paths=paths))


def read_back(monkeypatch, default_config, tracked, tmp_path, fake: FakeMlflow, kept: str | None = "abc123"):
    monkeypatch.setattr(mlflow, "MlflowClient", fake.client)
    drill = drill_for(default_config, tracked, tmp_path, kept)
    # The hung attempt logged step 1; the stale one and the newer one both reached step 2: the newer one's counts.
    runs = (attempt((1, 0.25)), attempt((2, 0.5)), attempt((2, 0.75)))
    (outcome,) = mlflow_tracking.read_back(drill, runs, tracked=tracked)
    return outcome


def names(tracked) -> tuple[str, str]:
    overrides = overrides_of(tracked.rayjob)
    return overrides["trainer.project_name"], overrides["trainer.run_name"]


def test_the_run_read_back_through_train_metrics_matches_the_driver_log(monkeypatch, default_config, tracked, tmp_path):
    project, run_name = names(tracked)
    fake = FakeMlflow(project, {"abc123": run_name}, {"abc123": {1: 0.25, 2: 0.75}})
    outcome = read_back(monkeypatch, default_config, tracked, tmp_path, fake)
    assert outcome.ok, outcome.line
    assert LINE.match(outcome.line).groups() == (tracked.name, "2", "abc123")


def test_a_reward_mlflow_did_not_get_fails(monkeypatch, default_config, tracked, tmp_path):
    project, run_name = names(tracked)
    # The stale attempt's step 2 instead of the newer one's: what MLflow would hold if the fence let it log last.
    fake = FakeMlflow(project, {"abc123": run_name}, {"abc123": {1: 0.25, 2: 0.5}})
    outcome = read_back(monkeypatch, default_config, tracked, tmp_path, fake)
    assert not outcome.ok and "step 2: reward 0.5 in MLflow, 0.75 in the driver log" in outcome.line


def test_a_missing_step_fails(monkeypatch, default_config, tracked, tmp_path):
    project, run_name = names(tracked)
    fake = FakeMlflow(project, {"abc123": run_name}, {"abc123": {1: 0.25}})
    outcome = read_back(monkeypatch, default_config, tracked, tmp_path, fake)
    assert not outcome.ok and "MLflow holds steps [1], the driver log [1, 2]" in outcome.line


def test_a_retry_that_started_a_second_run_fails(monkeypatch, default_config, tracked, tmp_path):
    project, run_name = names(tracked)
    fake = FakeMlflow(project, {"abc123": run_name, "def456": run_name}, {"abc123": {1: 0.25, 2: 0.75}})
    outcome = read_back(monkeypatch, default_config, tracked, tmp_path, fake)
    assert not outcome.ok and "logged to 2 runs" in outcome.line


def test_a_run_train_metrics_cannot_find_fails_with_its_line(monkeypatch, default_config, tracked, tmp_path):
    fake = FakeMlflow(None, {}, {})
    outcome = read_back(monkeypatch, default_config, tracked, tmp_path, fake, kept=None)
    assert not outcome.ok
    assert "train metrics could not read the run from MLflow: metrics: no MLflow experiment" in outcome.line


def test_the_server_and_the_training_client_are_the_images_mlflow_release(default_config):
    release = default_config.training_image.mlflow_version
    server, server_constraints = pins("requirements-drill-mlflow.txt"), pins("constraints-drill-mlflow.txt")
    assert server == {"mlflow": release}
    assert server_constraints["mlflow"] == server_constraints["mlflow-skinny"] == release
    drill, drill_constraints = pins("requirements-drill.txt"), pins("constraints-drill.txt")
    assert drill["mlflow-skinny"] == drill_constraints["mlflow-skinny"] == release
    # mlflow-skinny's caps (its wheel's Requires-Dist: cachetools<8, importlib_metadata<10); pip refuses the env else.
    assert int(drill_constraints["cachetools"].split(".")[0]) < 8
    assert int(drill_constraints["importlib-metadata"].split(".")[0]) < 10
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    assert "cat requirements-drill-mlflow.txt constraints-drill-mlflow.txt" in makefile


def test_the_scenario_trains_the_tracked_job_and_stops_the_server(monkeypatch, tmp_path):
    stopped, seen = [], {}
    server = types.SimpleNamespace(uri=URI, stop=lambda: stopped.append(True))
    monkeypatch.setattr(mlflow_tracking, "start_server", lambda env, run_dir: server)
    tracked = mlflow_tracking.Tracked(config=None, rayjob={"metadata": {"name": "maze"}}, uri=URI)
    monkeypatch.setattr(mlflow_tracking, "tracked_rayjob", lambda config, manifest, uri: tracked)

    def train_on_cpu(drill, first_run, first_rayjob=None):
        seen.update(first_run=first_run, first_rayjob=first_rayjob)
        return []

    monkeypatch.setattr(scenarios.cpu_training, "train_on_cpu", train_on_cpu)
    checked = []
    monkeypatch.setattr(
        mlflow_tracking, "read_back", lambda drill, runs, *, tracked: checked.append(("MLflow", runs, tracked)) or []
    )
    monkeypatch.setattr(
        scenarios.first_step_timeline, "check", lambda drill, runs: checked.append(("timeline", runs, None)) or []
    )
    drill = types.SimpleNamespace(
        env=types.SimpleNamespace(mlflow_env=tmp_path), run_dir=tmp_path, config=None, rayjobs=[{}]
    )
    assert scenarios.train_on_cpu(drill) == []
    assert seen["first_rayjob"] is tracked.rayjob and stopped == [True]
    assert seen["first_run"].func is scenarios.attempts.train_hang_and_overlap
    runs = (attempt((1, 0.5)),)
    assert seen["first_run"].keywords["check"](drill, runs) == []
    # the attempts' start timeline and the MLflow read-back both judge the run's attempts
    assert checked == [("timeline", runs, None), ("MLflow", runs, tracked)]


def test_without_the_servers_environment_the_mlflow_line_fails(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(
        scenarios.cpu_training, "train_on_cpu", lambda drill, first_run, first_rayjob=None: seen.append(first_run) or []
    )
    drill = types.SimpleNamespace(env=types.SimpleNamespace(mlflow_env=None), run_dir=tmp_path)
    (outcome,) = scenarios.train_on_cpu(drill)
    assert not outcome.ok and "--mlflow-env; make drill-mlflow-env" in outcome.line
    assert seen[0].keywords["check"] is scenarios.first_step_timeline.check  # the start timeline is still read
