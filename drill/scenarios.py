"""The drill's scenarios. Each one runs on a cluster the drill starts for it and returns one line per check.

To add one: write a function taking the `Drill` and returning a list of `Outcome`s, and register it in
SCENARIOS with the cluster it needs ("training": the RayCluster of dist/02 with the RayJobs' stand-in state;
"serving": the RayService's cluster). `Drill.training` submits a RayJob manifest as KubeRay's submitter does and
returns its `JobRun` (status, logs, the GPU-boundary report); scenarios may submit edited copies of the
manifests' RayJobs.
"""

from __future__ import annotations

import copy
import functools
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import yaml

from . import (
    attempts,
    cpu_training,
    first_step_timeline,
    kuberay,
    mlflow_tracking,
    resume,
    serve_llm,
    serving_cluster,
    synth,
)
from .layout import Entrypoint
from .training_cluster import JOB_TIMEOUT_SECONDS, TRAINER_START, Outcome, boundary_summary

if TYPE_CHECKING:
    from .session import Drill

MERGE_ERROR = "Failed to merge the Job's runtime env"
# The run book's EFA example (docs/runbook.md): one variable SkyRL passes on itself (it goes on the entrypoint), one it does not (runtimeEnvYAML).
JOB_ENV_OVERLAY = {"training": {"jobs": {"runtime_env_vars": {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}}}}


@dataclass(frozen=True)
class Scenario:
    name: str
    cluster: Literal["training", "cpu-training", "serving", "publish-and-serve"]
    run: Callable[[Drill], list[Outcome]]
    description: str
    # Run by `make drill`; the others only when named (`--scenario`): each costs one more SkyRL start, and the
    # resume ones work on the directory resume-after-driver-loss leaves (name it first).
    default: bool = True


def token_auth(drill: Drill) -> list[Outcome]:
    """An unauthenticated submission is refused (401), a wrong token too (403); the cluster's token is accepted."""
    url = f"{drill.training.cluster.dashboard_url}/api/jobs/"
    body = {"entrypoint": "python -c 'print(1)'"}
    missing, _ = kuberay.request("POST", url, body=body)
    wrong, _ = kuberay.request("POST", url, body=body, token=kuberay.random_token())
    accepted, _ = kuberay.request("GET", url, token=drill.training.token)
    ok = (missing, wrong, accepted) == (401, 403, 200)
    line = (
        f"drill: token auth: submission without a token -> HTTP {missing}, with a wrong token -> HTTP {wrong}, "
        f"with the cluster's token -> HTTP {accepted}"
    )
    return [Outcome(ok, line + ("" if ok else " (expected 401, 403, 200)"))]


def rayjobs(drill: Drill) -> list[Outcome]:
    """Every RayJob of the manifests, submitted as KubeRay's submitter does, up to the GPU boundary."""
    return [boundary_summary(drill.training.submit(rayjob, timeout=JOB_TIMEOUT_SECONDS)) for rayjob in drill.rayjobs]


def old_runtime_env_placement(rayjob: dict[str, Any]) -> dict[str, Any]:
    """The RayJob as the charts wrote it before the fix: every job variable in runtimeEnvYAML."""
    edited = copy.deepcopy(rayjob)
    spec = edited["spec"]
    entrypoint = Entrypoint.parse(spec["entrypoint"])
    env = dict(yaml.safe_load(spec.get("runtimeEnvYAML") or "{}") or {}).get("env_vars") or {}
    spec["runtimeEnvYAML"] = yaml.safe_dump({"env_vars": {**entrypoint.env, **env}})
    spec["entrypoint"] = shlex.join(["python", entrypoint.script, *entrypoint.args])
    return edited


def mutation_old_runtime_env(drill: Drill) -> list[Outcome]:
    """The drill must catch the old placement: the same RayJob with its variables in runtimeEnvYAML stops at
    SkyRL's `ray.init` with Ray's merge error."""
    rayjob = old_runtime_env_placement(drill.rayjobs[0])
    name = rayjob["metadata"]["name"]
    if not Entrypoint.parse(drill.rayjobs[0]["spec"]["entrypoint"]).env:
        return [Outcome(False, f"drill: mutation: {name} sets no variable on its entrypoint; nothing to move")]
    run = drill.training.submit(rayjob, timeout=JOB_TIMEOUT_SECONDS)
    ok = run.stop is None and MERGE_ERROR in run.logs
    verdict = "fails with Ray's merge error, as it must" if ok else "was not stopped by Ray's merge error"
    return [Outcome(ok, f"drill: mutation (job variables in runtimeEnvYAML): {name} {verdict}: {run.first_error}")]


def job_env_vars(drill: Drill) -> list[Outcome]:
    """training.jobs.runtime_env_vars with a name SkyRL passes on (NCCL_DEBUG) and one it does not
    (NCCL_DEBUG_SUBSYS): the job starts SkyRL's trainer, and every variable reaches the trainer's process."""
    config = synth.with_overlay(drill.config, JOB_ENV_OVERLAY)
    rayjob = synth.rayjobs(config)[0]
    name = rayjob["metadata"]["name"]
    on_entrypoint = sorted(Entrypoint.parse(rayjob["spec"]["entrypoint"]).env)
    in_runtime_env = sorted((yaml.safe_load(rayjob["spec"].get("runtimeEnvYAML") or "{}") or {}).get("env_vars") or {})
    run = drill.training.submit(rayjob, timeout=JOB_TIMEOUT_SECONDS, stop_at=TRAINER_START)
    where = f"entrypoint {', '.join(on_entrypoint) or '-'}; runtimeEnvYAML {', '.join(in_runtime_env) or '-'}"
    if run.stop is None:
        return [Outcome(False, f"drill: job variables ({where}): {name} never started the trainer: {run.first_error}")]
    if problems := run.env_problems():
        return [Outcome(False, f"drill: job variables ({where}): {name}: " + "; ".join(problems))]
    split = "NCCL_DEBUG" in on_entrypoint and "NCCL_DEBUG_SUBSYS" in in_runtime_env
    verdict = "every one reached SkyRL's trainer process" + ("" if split else ", but they were not split as configured")
    return [Outcome(split, f"drill: job variables ({where}): {name}: {verdict}")]


# What the checkpoint stand-in loses for the mutation: the processor's configuration (image processor and all).
PROCESSOR_FILE = "processor_config.json"


def mutation_checkpoint_without_processor(drill: Drill) -> list[Outcome]:
    """The drill must catch a checkpoint that is no vision-language checkpoint: the same RayJob on a copy of the SFT
    checkpoint's stand-in without its processor stops in train_job.py's checkpoint check, in one line, before SkyRL
    starts (on the cluster: before any GPU work; vLLM would otherwise meet it at the first rollout)."""
    rayjob = drill.rayjobs[0]
    name = rayjob["metadata"]["name"]
    options = drill.training.train_job.options.parse_args(Entrypoint.parse(rayjob["spec"]["entrypoint"]).args)
    broken_dir = f"{options.model_dir}-without-processor"
    edited = cpu_training.with_job_args(rayjob, {"--model-dir": broken_dir})
    mapped = drill.training.paths.path(broken_dir)
    model = drill.training.prepare(drill.training.paths.text(rayjob["spec"]["entrypoint"]))
    shutil.rmtree(mapped, ignore_errors=True)
    shutil.copytree(model["model_dir"], mapped)
    (mapped / PROCESSOR_FILE).unlink()
    run = drill.training.submit(edited, timeout=JOB_TIMEOUT_SECONDS)
    # Distinct lines: Ray's job log repeats the driver's last output in the job's failure message.
    said = sorted({line for line in run.logs.splitlines() if line.startswith("train_job: error: checkpoint ")})
    ok = run.status == "FAILED" and run.stop is None and len(said) == 1 and "processor" in said[0]
    verdict = (
        f"stops in train_job.py's checkpoint check before SkyRL starts, as it must: {said[0].removeprefix('train_job: error: ')[:300]}"
        if ok
        else f"was not stopped by the checkpoint check (status {run.status}, trainer {'started' if run.stop else 'not started'}: {run.first_error})"
    )
    return [Outcome(ok, f"drill: mutation (checkpoint without {PROCESSOR_FILE}): {name} {verdict}")]


def rayservice(drill: Drill) -> list[Outcome]:
    """The RayService's serveConfigV2 on real Ray Serve at the serving image's Ray version, deployed as KubeRay
    deploys it, up to the application's build, which needs vLLM."""
    serving = drill.serving
    name = serving.rayservice["metadata"]["name"]
    anonymous, status, body = serving.deploy()
    if anonymous != 401 or status != 200:
        return [Outcome(False, f"drill: {name}: PUT serveConfigV2 without a token -> HTTP {anonymous}, with the "
                               f"cluster's token -> HTTP {status}: {' '.join(body.split())[:300]}")]  # fmt: skip
    details = serving.wait_for_applications(serving_cluster.DEPLOY_TIMEOUT_SECONDS)
    applications = details.get("applications") or {}
    lines = []
    for app_name, app in sorted(applications.items()):
        message = " ".join((app.get("message") or "").split())
        reached = app.get("status") == "DEPLOY_FAILED" and serving_cluster.ENGINE_IMPORT_ERROR in message
        ray_version = details.get("ray_version") or drill.config.serving_image.ray_version
        what = (
            f"Ray Serve {ray_version} took serveConfigV2 (PUT without a token -> HTTP 401, with the cluster's token "
            f"-> HTTP 200), started its controller and proxy, and built application {app_name!r} up to "
            f"`{serving_cluster.BUILD_IMPORT}`, which needs the serving image's vLLM"
        )
        if reached:
            lines.append(Outcome(True, f"drill: {name}: reached the GPU boundary ({what})"))
        else:
            lines.append(
                Outcome(False, f"drill: {name}: application {app_name!r} is {app.get('status')}: {message[:300]}")
            )
    return lines or [
        Outcome(
            False, f"drill: {name}: Serve reported no application within {serving_cluster.DEPLOY_TIMEOUT_SECONDS} s"
        )
    ]


def train_on_cpu(drill: Drill) -> list[Outcome]:
    """Every RayJob of the manifests trains real GRPO steps on CPU (cpu_training.py); the first one's run goes on
    through a hang ended by the watchdog and resumed, and a stale attempt fenced (attempts.py), logging to a real
    MLflow server through SkyRL's logger, read back as `train metrics` reads it (mlflow_tracking.py)."""
    try:
        if drill.env.mlflow_env is None:
            raise RuntimeError("no MLflow server environment (--mlflow-env; make drill-mlflow-env builds it)")
        server = mlflow_tracking.start_server(drill.env.mlflow_env, drill.run_dir)
    except RuntimeError as error:
        untracked = functools.partial(attempts.train_hang_and_overlap, check=first_step_timeline.check)
        outcomes = cpu_training.train_on_cpu(drill, untracked)
        return [*outcomes, Outcome(False, f"drill: MLflow: {error}: the first RayJob trained without tracking")]
    try:
        tracked = mlflow_tracking.tracked_rayjob(drill.config, drill.rayjobs[0], server.uri)
        print(f"drill: MLflow: PyPI's mlflow server on {server.uri} (SQLite store in the run directory); "
              f"{tracked.name} synthesized with tracking.backend mlflow, tracking_uri {server.uri}", flush=True)  # fmt: skip
        read_back = functools.partial(mlflow_tracking.read_back, tracked=tracked)
        first_run = functools.partial(
            attempts.train_hang_and_overlap, check=attempts.checks(first_step_timeline.check, read_back)
        )
        return cpu_training.train_on_cpu(drill, first_run, first_rayjob=tracked.rayjob)
    finally:
        server.stop()


def publish_and_serve(drill: Drill) -> list[Outcome]:
    """The adapter the first RayJob's run exported last (train-on-cpu) goes through the publish Job's own command to
    S3 (moto's server) and is served by the RayService's own serveConfigV2 on Ray Serve LLM with vLLM's CPU build;
    `skyrl-hp serve query`'s client asks it and the base model the same question (serve_llm.py)."""
    export_dir, model_dir, _ = serve_llm.run_paths(drill.manifests, drill.run_dir)
    if drill.env.serve_llm_env is None or not any(export_dir.glob("global_step_*/policy/adapter_config.json")):
        why = (
            "no serving environment (--serve-env)"
            if drill.env.serve_llm_env is None
            else f"no adapter under {export_dir}"
        )
        return [Outcome(False, f"drill: publish and serve: {why}; train-on-cpu exports the adapter")]
    return serve_llm.publish_and_serve(
        export_dir, model_dir, drill.manifests, drill.run_dir, drill.env.serve_llm_env, drill.env.train_python
    )


SCENARIOS: dict[str, Scenario] = {
    scenario.name: scenario
    for scenario in (
        Scenario("token-auth", "training", token_auth, token_auth.__doc__ or ""),
        Scenario("rayjobs", "training", rayjobs, rayjobs.__doc__ or ""),
        Scenario("job-env-vars", "training", job_env_vars, job_env_vars.__doc__ or ""),
        Scenario(
            "mutation-old-runtime-env", "training", mutation_old_runtime_env, mutation_old_runtime_env.__doc__ or ""
        ),
        Scenario(
            "mutation-checkpoint-without-processor",
            "training",
            mutation_checkpoint_without_processor,
            mutation_checkpoint_without_processor.__doc__ or "",
        ),
        # After the others on the training cluster: it replaces that cluster with a new one, as KubeRay's retry does.
        Scenario(
            "resume-after-driver-loss",
            "training",
            resume.resume_after_driver_loss,
            resume.resume_after_driver_loss.__doc__ or "",
        ),
        Scenario(
            "step-file-names-half-written",
            "training",
            resume.step_file_naming_a_half_written_checkpoint,
            resume.step_file_naming_a_half_written_checkpoint.__doc__ or "",
        ),
        Scenario(
            "mutation-resume-none",
            "training",
            resume.mutation_resume_none,
            resume.mutation_resume_none.__doc__ or "",
            default=False,
        ),
        # On a cluster of its own: the manifest's nodes plus one for the vLLM engine (not colocated on CPU).
        Scenario("train-on-cpu", "cpu-training", train_on_cpu, train_on_cpu.__doc__ or ""),
        # Named only: one more SkyRL start with vLLM and FSDP (minutes); make test checks its verdict.
        Scenario(
            "mutation-trimmed-schedule",
            "cpu-training",
            cpu_training.mutation_trimmed_schedule,
            cpu_training.mutation_trimmed_schedule.__doc__ or "",
            default=False,
        ),
        # Named only: publish-and-serve runs the same serveConfigV2 further, to answers.
        Scenario("rayservice", "serving", rayservice, rayservice.__doc__ or "", default=False),
        Scenario("publish-and-serve", "publish-and-serve", publish_and_serve, publish_and_serve.__doc__ or ""),
    )
}
