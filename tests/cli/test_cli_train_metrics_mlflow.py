"""`skyrl-hp train metrics` with tracking.backend: mlflow, end to end: SkyRL's own MLflow logger (its Tracking class)
writes two experiments' runs into a real MLflow store, the configuration's tracking_uri points at it (MLflow's REST
API over that store, tests/mlflow_rest.py) and the command reads them back through MLflow's client."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest
import yaml
from click.testing import CliRunner
from conftest import REPO_ROOT
from mlflow_rest import API, MlflowRest
from skyrl_tracking import tracking

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.cli.common import CliState
from skyrl_hyperpod.config import validate_config
from skyrl_hyperpod.ops import metrics

LOG_FIXTURE = REPO_ROOT / "tests" / "fixtures" / "skyrl_visgym_console.log"
# lr-b's run: an eval before training and two training steps, values of its own.
LR_B = {0: {metrics.PASS_AT_1: 0.25}, 1: {metrics.REWARD: 0.125, metrics.STEP_TIME: 300.5},
        2: {metrics.REWARD: 0.375, metrics.PASS_AT_1: 0.5, metrics.STEP_TIME: 290.25}}  # fmt: skip
APP_ARN = "arn:aws:sagemaker:us-west-2:111111111111:mlflow-app/app-abc123"
PNG = b"\x89PNG\r\n\x1a\n"


def configuration(uri: str) -> dict:
    # lr-c is configured but never logged: its run is missing.
    return {
        "tracking": {"backend": "mlflow", "tracking_uri": uri},
        "training": {"experiments": [{"name": "lr-a"}, {"name": "lr-b"}, {"name": "lr-c"}]},
    }


@pytest.fixture
def logged(tmp_path, monkeypatch) -> dict[str, list[metrics.StepMetrics]]:
    """lr-a's and lr-b's runs logged as SkyRL's trainer logs them (Tracking(project_name, run_name,
    backend="mlflow").log(metrics, step)), into the MLflow experiment and under the run names of the
    configuration's RayJobs; returns the steps logged per experiment."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # mlflow-skinny's own store (no SQL store without mlflow)
    store = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)  # where SkyRL's adapter logs (skyrl/train/utils/tracking.py)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    # mlflow.set_experiment exports the experiment's id: set here, monkeypatch takes it away after the test.
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", "")
    config = validate_config(configuration("http://127.0.0.1:1"))
    runs = {run.experiment.name: run for run in config.derived.runs}
    written = {
        "lr-a": metrics.parse_log(LOG_FIXTURE.read_text().splitlines()),
        "lr-b": [metrics.StepMetrics(step, values) for step, values in LR_B.items()],
    }
    try:
        for name, steps in written.items():
            tracker = tracking.Tracking(runs[name].knobs.project_name, runs[name].run_id, backend="mlflow")
            for step in steps:
                tracker.log(step.values, step=step.step)
            tracker.finish()
            # Tracking.__del__ ends the active run: dropped only when the next tracker replaces it, it would end
            # the next experiment's run, whose steps would then go to a run MLflow starts without a name.
            del tracker
    finally:
        while mlflow.active_run() is not None:
            mlflow.end_run()
        mlflow.set_tracking_uri(None)  # type: ignore[arg-type]  # SkyRL's adapter sets it process-wide: it must not leak into the next test
        monkeypatch.delenv("MLFLOW_EXPERIMENT_ID")
    return written


@pytest.fixture
def server(tmp_path, logged, monkeypatch):
    rest = MlflowRest(str(tmp_path / "mlruns")).start()
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # the command reads tracking.tracking_uri, nothing else
    monkeypatch.delenv("SKYRL_HP_CONFIG", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (work / "skyrl-hp.yaml").write_text(yaml.safe_dump(configuration(rest.url)))
    yield rest
    rest.stop()


def run(*args: str):
    return CliRunner().invoke(cli, ["train", "metrics", *args], obj=CliState())


def table(stdout: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines()]


def test_one_experiment_from_mlflow_prints_the_table_a_saved_log_gives(server, logged, tmp_path):
    plot = tmp_path / "a.png"
    result = run("--experiment", "lr-a", "--plot", str(plot))
    assert result.exit_code == 0, result.output
    # The same table and summary, byte for byte, as the same run's driver log read with --log.
    from_log = run("--experiment", "lr-a", "--log", str(LOG_FIXTURE), "--plot", str(tmp_path / "log.png"))
    assert from_log.exit_code == 0, from_log.output
    assert result.stdout.splitlines()[:-1] == from_log.stdout.splitlines()[:-1]
    assert result.stdout.splitlines()[-1] == f"plot: {plot}"
    rows = table(result.stdout)
    assert rows[0] == ["step", "eval", "pass@1", "reward", "step", "time"]
    assert rows[1][:3] == ["0", "43.75%", "-"]
    assert rows[2] == ["1", "-", "0.4127", "411.8", "s"]
    assert len(rows[1:-2]) == len(logged["lr-a"])
    assert "eval pass@1 43.75% at step 0 -> 96.88% at step 160" in result.stdout
    assert plot.read_bytes()[:8] == PNG
    # Read through the configured URI: the experiment by name, its run by name, each metric's history.
    assert f"{API}/experiments/get-by-name" in server.paths
    assert f"{API}/runs/search" in server.paths
    assert server.paths.count(f"{API}/metrics/get-history") == 3


def test_two_experiments_side_by_side_table_summaries_and_one_plot(server, logged, tmp_path):
    plot = tmp_path / "both.png"
    result = run("--experiment", "lr-a", "--experiment", "lr-b", "--plot", str(plot))
    assert result.exit_code == 0, result.output
    rows = table(result.stdout)
    assert rows[0] == ["step", "lr-a", "pass@1", "lr-a", "reward", "lr-b", "pass@1", "lr-b", "reward"]
    by_step = {row[0]: row[1:] for row in rows[1:] if row[0].isdigit()}
    a = {s.step: s for s in logged["lr-a"]}
    assert by_step["0"] == [f"{a[0].pass_at_1:.2%}", "-", "25.00%", "-"]
    assert by_step["1"] == ["-", f"{a[1].reward:.4f}", "-", "0.1250"]
    assert by_step["2"] == ["-", f"{a[2].reward:.4f}", "50.00%", "0.3750"]
    assert by_step["3"] == ["-", f"{a[3].reward:.4f}", "-", "-"]  # lr-b logged no step 3
    assert len(by_step) == len(logged["lr-a"])
    lines = result.stdout.splitlines()
    assert lines[-3].startswith("lr-a: eval pass@1 43.75% at step 0 -> 96.88% at step 160")
    assert lines[-2].startswith("lr-b: eval pass@1 25.00% at step 0 -> 50.00% at step 2")
    assert lines[-1] == f"plot: {plot}"
    assert plot.read_bytes()[:8] == PNG and plot.stat().st_size > 10_000


def test_two_experiments_as_json_per_experiment_steps(server, logged, tmp_path):
    plot = tmp_path / "both.png"
    result = run("--experiment", "lr-b", "--experiment", "lr-a", "--json", "--plot", str(plot))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["plot"] == str(plot) and plot.read_bytes()[:8] == PNG
    assert [e["experiment"] for e in data["experiments"]] == ["lr-b", "lr-a"]  # the order asked for
    assert data["experiments"][0]["steps"] == [
        {"step": step, "eval_pass_at_1": values.get(metrics.PASS_AT_1), "reward": values.get(metrics.REWARD),
         "step_seconds": values.get(metrics.STEP_TIME)}
        for step, values in LR_B.items()
    ]  # fmt: skip
    lr_a = data["experiments"][1]["steps"]
    assert [s["step"] for s in lr_a] == [s.step for s in logged["lr-a"]]
    assert [s["reward"] for s in lr_a] == [s.reward for s in logged["lr-a"]]


def test_one_experiment_as_json_keeps_its_shape(server, logged, tmp_path):
    result = run("--experiment", "lr-b", "--json", "--plot", str(tmp_path / "b.png"))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {"experiment", "plot", "steps"} and data["experiment"] == "lr-b"
    assert [s["reward"] for s in data["steps"]] == [values.get(metrics.REWARD) for values in LR_B.values()]


def test_a_missing_run_among_several_is_one_line_naming_it(server, tmp_path):
    plot = tmp_path / "all.png"
    result = run("--all", "--plot", str(plot))
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"metrics: lr-c: no MLflow run 'lr-c' in experiment 'visgym-maze' yet (MLflow at {server.url})"
    )
    assert result.stdout == "" and not plot.exists()


def test_a_missing_run_alone_keeps_its_line(server):
    result = run("--experiment", "lr-c")
    assert result.exit_code == 1
    assert (
        result.stderr.strip()
        == f"metrics: no MLflow run 'lr-c' in experiment 'visgym-maze' yet (MLflow at {server.url})"
    )


def test_several_experiments_without_naming_them_or_with_a_log_are_refused_in_one_line(server):
    result = run()
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "--experiment: this configuration has 3 experiments (lr-a, lr-b, lr-c); name one or several "
        "(--experiment lr-a --experiment lr-b) or pass --all"
    )
    result = run("--experiment", "lr-a", "--experiment", "lr-b", "--log", str(LOG_FIXTURE))
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("--log: a saved driver log is one experiment's, not 2 (lr-a, lr-b): name one")
    result = run("--all", "--experiment", "lr-a")
    assert result.exit_code == 2
    assert result.stderr.strip() == "--all reads every experiment (lr-a, lr-b, lr-c); it does not go with --experiment"
    assert server.paths == []


def test_the_plot_of_two_experiments_has_one_line_each_on_both_panels(logged):
    import matplotlib.pyplot as plt

    figure = metrics.figure(logged, "sweep")
    try:
        left, right = figure.axes
        for name, steps in logged.items():
            [evals] = [line for line in left.get_lines() if line.get_label() == name]
            assert list(evals.get_ydata()) == [s.pass_at_1 for s in steps if s.pass_at_1 is not None]
            [rewards] = [line for line in right.get_lines() if line.get_label() == name]
            assert list(rewards.get_ydata()) == [s.reward for s in steps if s.reward is not None]
            assert rewards.get_color() == evals.get_color()  # one colour per experiment
        assert len({line.get_color() for line in right.get_lines() if line.get_label() in logged}) == 2
        for axes in (left, right):
            marks = [line for line in axes.get_lines() if line.get_label() == "reference run's step 160"]
            assert [list(line.get_xdata()) for line in marks] == [[160, 160]]
    finally:
        plt.close(figure)


def test_the_managed_apps_arn_reaches_the_app_signed_and_named(server, logged, monkeypatch, fake_aws_env, tmp_path):
    """With the App's ARN (no tracking_uri: the outputs file's MlflowAppArn) MLflow's client goes through
    sagemaker-mlflow: SigV4-signed requests naming the App in a header, which the plugin takes from the process's
    tracking URI. Its endpoint override (SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT) sends them to the local store."""
    config = configuration(APP_ARN)
    Path("skyrl-hp.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT", server.url)
    result = run("--experiment", "lr-b", "--json", "--plot", str(tmp_path / "b.png"))
    assert result.exit_code == 0, result.output
    assert [s["reward"] for s in json.loads(result.stdout)["steps"]] == [v.get(metrics.REWARD) for v in LR_B.values()]
    assert server.requests
    for _, headers in server.requests:
        assert headers.get("x-sm-mlflow-app-arn") == APP_ARN
        assert headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=testing/")
        assert "/us-west-2/sagemaker/aws4_request" in headers["authorization"]
