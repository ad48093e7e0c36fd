"""`skyrl-hp train start | status | stop | logs | metrics | timeline`: start training from the synthesized manifests,
follow it, stop it, read its metrics and where its start spent its time (skyrl_hyperpod/ops/cluster_workloads.py,
train_stop.py, metrics.py, start_timeline.py)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.config.tracking import MLFLOW_ARN, MLFLOW_TRACKING_URI_ENV
from skyrl_hyperpod.config.workloads import OUTPUTS_FILE_ENV_VAR
from skyrl_hyperpod.ops import cluster_workloads, start_timeline
from skyrl_hyperpod.ops import metrics as metrics_module
from skyrl_hyperpod.ops import train_stop as train_stop_module
from skyrl_hyperpod.ops.kube import Cluster
from skyrl_hyperpod.plumbing.errors import InputError
from skyrl_hyperpod.plumbing.runtime import fail
from skyrl_hyperpod.values.stack_outputs import load_stack_outputs
from skyrl_hyperpod.values.synthesized_manifests import PLATFORM_CHART, RAYCLUSTER_CHART, RAYJOBS_CHART

from .common import (
    EXIT_BAD_INPUT,
    EXIT_FINDINGS,
    all_experiments_option,
    cluster_errors,
    config_option,
    connect,
    dist_option,
    echo,
    experiment_option,
    flush_header,
    json_option,
    load_project_config,
    load_project_config_with_source,
    pick_experiments,
    print_json,
    profile_option,
    refuse_all_with_experiment,
    refuse_other_configuration,
    region_option,
    wait_timeout_option,
    wait_until,
)


@click.group()
def train() -> None:
    """Start training, follow it, and read its metrics."""


@train.command("start")
@config_option
@region_option
@profile_option
@dist_option
@experiment_option(without="the only experiment (a configuration with several: name one, or --all)")
@all_experiments_option(
    "With several experiments: start them one at a time in their configured order, each once the previous "
    "RayJob SUCCEEDED and its Ray cluster is gone (the command waits, so keep it running; one that fails stops the "
    "sweep). Started again, it skips the ones that SUCCEEDED and waits for one still running."
)
@click.option(
    "--wait",
    is_flag=True,
    help="Wait until the (last) started RayJob's Ray cluster is up and its job RUNNING; with the shared "
    "RayCluster, first its head and every worker Ready before submitting.",
)
@wait_timeout_option
@click.pass_context
def train_start(
    ctx: click.Context,
    config_path: Path | None,
    region: str | None,
    profile: str | None,
    dist: Path,
    experiment: str | None,
    all_experiments: bool,
    wait: bool,
    timeout: float,
) -> None:
    """Apply the namespace objects, the RayCluster and an experiment's RayJob, in that order (from DIST).
    Experiments run one at a time: each takes every GPU node, and RayJobs started together can each hold part of
    the nodes and wait on each other. So a RayJob is not applied while another experiment's RayJob has not ended;
    with several experiments name one (--experiment) or start them in turn (--all)."""
    config, source = load_project_config_with_source(config_path, region=region)
    runs = pick_experiments(config, experiment)
    names = ", ".join(run.experiment.name for run in runs)
    if all_experiments:
        refuse_all_with_experiment(config, experiment, "starts every experiment")
    if len(runs) > 1 and not all_experiments:
        fail(
            [
                f"train start: this configuration has {len(runs)} experiments ({names}) and they run one at a time "
                f"(each takes every GPU node): name one (--experiment {runs[0].experiment.name}) or pass --all to "
                "start each once the previous one ended"
            ],
            EXIT_BAD_INPUT,
        )
    self_contained = config.training.jobs.self_contained_jobs
    charts = [PLATFORM_CHART, *([] if self_contained else [RAYCLUSTER_CHART]), RAYJOBS_CHART]
    refuse_other_configuration(dist, charts, config, source)
    namespace = config.workloads.namespace
    jobs_config = config.training.jobs
    # KubeRay ends a job at its deadline and deletes its cluster job_ttl_seconds_after_finished later.
    run_timeout = float(jobs_config.job_active_deadline_seconds + jobs_config.job_ttl_seconds_after_finished)
    with cluster_errors():
        platform = cluster_workloads.load_chart(dist, PLATFORM_CHART)
        raycluster = [] if self_contained else cluster_workloads.load_chart(dist, RAYCLUSTER_CHART)
        wanted = {run.job_name for run in runs}
        jobs = {
            job["metadata"]["name"]: job
            for job in cluster_workloads.load_chart(dist, RAYJOBS_CHART)
            if job["metadata"]["name"] in wanted
        }
        missing = wanted - set(jobs)
        if missing:
            fail(
                [
                    f"manifest error: {dist} has no RayJob {', '.join(sorted(missing))}: synthesize again (make synth-k8s)"
                ],
                EXIT_BAD_INPUT,
            )
        cluster = connect(ctx, config, region, profile)
        # Refused before anything is applied; checked again before each RayJob. --all's loop itself skips what
        # SUCCEEDED and waits for a sweep experiment still running, so only a single start is refused here.
        if not all_experiments:
            _refuse_busy_nodes(cluster, config, runs[0].job_name)
        flush_header()
        cluster_workloads.apply_all(cluster, platform, echo)
        cluster_workloads.apply_all(cluster, raycluster, echo)
        if wait and not self_contained:
            name, replicas = config.training.cluster.raycluster_name, config.derived.worker_layout.replicas

            def ready() -> tuple[bool, str]:
                counts = cluster_workloads.ray_pod_counts(cluster, namespace, name, replicas)
                return counts.complete, counts.line(name)

            wait_until(ctx, ready, timeout=timeout, what=f"RayCluster {name} not Ready")
        started = []
        for index, run in enumerate(runs):
            live = next(iter(cluster_workloads.live_rayjobs(cluster, namespace, [run.job_name])), None)
            if live is not None and live.job_status == "SUCCEEDED" and all_experiments:
                echo(f"{run.experiment.name}: RayJob {run.job_name} already SUCCEEDED, not started again")
            elif live is not None and live.unfinished and all_experiments:
                echo(f"{run.experiment.name}: RayJob {run.job_name} is already on the cluster ({live.state})")
            else:
                _start_one(cluster, config, run.job_name, jobs[run.job_name])
                started.append(run.job_name)
            if index < len(runs) - 1:
                echo(f"{run.experiment.name}: waiting for RayJob {run.job_name} to end before the next experiment")
                ended = cluster_workloads.rayjob_ended(cluster, namespace, run.job_name)
                wait_until(ctx, ended, timeout=run_timeout, what=f"RayJob {run.job_name} not ended")
        if wait and started:
            running = cluster_workloads.rayjobs_running(
                cluster, namespace, started[-1:], config.derived.worker_layout.replicas
            )
            wait_until(ctx, running, timeout=timeout, what=f"RayJob {started[-1]} not running")
    echo(f"submitted {len(started)} RayJob(s); follow with: skyrl-hp train status, skyrl-hp train logs --follow")


def _start_one(cluster: Cluster, config: ProjectConfig, job_name: str, job: dict[str, Any]) -> None:
    """Apply one RayJob, unless another experiment's RayJob still holds the nodes or this one is being deleted."""
    _refuse_busy_nodes(cluster, config, job_name)
    # Applied now, a RayJob that train stop is deleting would be accepted and then vanish with the old one.
    if cluster_workloads.being_deleted(cluster, config.workloads.namespace, job_name):
        fail(
            [
                f"train start: RayJob {job_name} is being deleted: start again once it is gone "
                "(skyrl-hp train stop --wait)"
            ],
            EXIT_FINDINGS,
        )
    cluster_workloads.apply_all(cluster, [job], echo)


def _refuse_busy_nodes(cluster: Cluster, config: ProjectConfig, job_name: str) -> None:
    """Exit 1 while another experiment's RayJob has not ended or its own Ray cluster is still there."""
    namespace = config.workloads.namespace
    others = {run.job_name: run.experiment.name for run in config.derived.runs if run.job_name != job_name}
    busy = cluster_workloads.unfinished_rayjobs(cluster, namespace, list(others))
    if busy:
        fail(
            [
                f"train start: RayJob {', '.join(f'{b.name} ({b.state})' for b in busy)} has not ended and experiments "
                f"run one at a time (each takes every GPU node): start {job_name} once it has (skyrl-hp train "
                f"status), or stop it first (skyrl-hp train stop --experiment {others[busy[0].name]})"
            ],
            EXIT_FINDINGS,
        )


@train.command("status")
@config_option
@region_option
@profile_option
@json_option
@click.pass_context
def train_status(
    ctx: click.Context, config_path: Path | None, region: str | None, profile: str | None, as_json: bool
) -> None:
    """The training RayCluster's pods and each experiment's RayJob state. Exit 1 when a RayJob failed."""
    config = load_project_config(config_path, region=region)
    with cluster_errors():
        status = cluster_workloads.training_status(connect(ctx, config, region, profile), config)
    if as_json:
        print_json(status)
    else:
        for line in cluster_workloads.render_training_status(status):
            echo(line)
    if any(job["job_status"] in cluster_workloads.FAILED_JOB_STATES for job in status["jobs"]):
        sys.exit(EXIT_FINDINGS)


@train.command("stop")
@config_option
@region_option
@profile_option
@experiment_option()
@click.option("--yes", is_flag=True, help="Delete the RayJobs without asking.")
@click.option("--wait", is_flag=True,
              help="Wait until the RayJobs, the Ray clusters they created and those clusters' pods are gone.")  # fmt: skip
@wait_timeout_option
@click.pass_context
def train_stop(
    ctx: click.Context,
    config_path: Path | None,
    region: str | None,
    profile: str | None,
    experiment: str | None,
    yes: bool,
    wait: bool,
    timeout: float,
) -> None:
    """Delete the experiments' RayJobs, after asking: KubeRay stops a Ray job that has not finished, and the Ray
    cluster a self-contained job created goes with it, which frees the GPU nodes (a shared RayCluster the job
    was submitted to stays). Checkpoints stay on the shared file system: `train start` resumes from the newest
    complete one. The driver log goes with the RayJob."""
    config = load_project_config(config_path, region=region)
    runs = pick_experiments(config, experiment)
    namespace = config.workloads.namespace
    with cluster_errors():
        cluster = connect(ctx, config, region, profile)
        jobs = cluster_workloads.live_rayjobs(cluster, namespace, [run.job_name for run in runs])
        flush_header()
        if not jobs:
            echo(f"no RayJob of {', '.join(run.experiment.name for run in runs)} on the cluster: nothing to stop")
            return
        question = f"Delete RayJob {', '.join(f'{job.name} ({job.state})' for job in jobs)}?"
        if any(job.unfinished for job in jobs):
            question += " A job that has not finished loses the steps since its last checkpoint."
        question += " The driver log goes too (keep it: skyrl-hp train logs > run.log)."
        if not (yes or click.confirm(question, default=False, err=True)):
            fail(["train stop: nothing changed"], EXIT_FINDINGS)
        for job, deleted in train_stop_module.delete_rayjobs(cluster, jobs):
            line = f"deleted RayJob {job.name} (was {job.state})" if deleted else f"RayJob {job.name} was already gone"
            if job.own_clusters:
                line += f"; its RayCluster {', '.join(job.own_clusters)} goes with it"
            if job.selected_cluster:
                line += f"; RayCluster {job.selected_cluster} stays (the next train start submits to it)"
            echo(line)
        if wait:
            gone = train_stop_module.rayjobs_gone(cluster, namespace, jobs)
            wait_until(ctx, gone, timeout=timeout, what="RayJobs and their clusters not gone")
    stopped = {job.name for job in jobs}
    for run in runs:
        if run.job_name in stopped:
            again = (
                "resumes from the newest complete one"
                if run.knobs.resume_mode == "latest"
                else "starts over (trainer.resume_mode: none)"
            )
            when = "" if wait else f"once RayJob {run.job_name} is gone (train stop --wait waits for that), "
            echo(
                f"{run.experiment.name}: checkpoints stay in {run.ckpt_path}; "
                f"{when}skyrl-hp train start --experiment {run.experiment.name} {again}"
            )


def _single_experiment(config: ProjectConfig, experiment: str | None) -> Any:
    runs = pick_experiments(config, experiment)
    if len(runs) > 1:
        fail(
            [
                f"--experiment: this configuration has {len(runs)} experiments ({', '.join(r.experiment.name for r in runs)}); "
                f"name one (--experiment {runs[0].experiment.name})"
            ],
            EXIT_BAD_INPUT,
        )
    return runs[0]


@train.command("logs")
@config_option
@region_option
@profile_option
@experiment_option(without="the only experiment (a configuration with several: name one)")
@click.option("--follow", "-f", is_flag=True, help="Keep streaming while the job runs.")
@click.option("--tail", type=click.IntRange(min=1), default=None, help="Only the last N lines.")
@click.option("--timestamps", is_flag=True,
              help="Begin each line with the time Kubernetes received it (what `train timeline --log` reads).")  # fmt: skip
@click.pass_context
def train_logs(
    ctx: click.Context,
    config_path: Path | None,
    region: str | None,
    profile: str | None,
    experiment: str | None,
    follow: bool,
    tail: int | None,
    timestamps: bool,
) -> None:
    """The Ray job's driver log (the RayJob's submitter pod), SkyRL's metrics included."""
    config = load_project_config(config_path, region=region)
    run = _single_experiment(config, experiment)
    namespace = config.workloads.namespace
    with cluster_errors():
        cluster = connect(ctx, config, region, profile)
        pod = cluster_workloads.submitter_pod(cluster, namespace, run.job_name)
        flush_header()
        try:
            for line in cluster.logs(namespace, pod, follow=follow, tail=tail, timestamps=timestamps):
                click.echo(line)
        except KeyboardInterrupt:
            return


def outputs_mlflow_app_arn(config: ProjectConfig) -> str:
    """The managed MLflow App's ARN from the outputs file the charts read (workloads.outputs_file or $SKYRL_HP_OUTPUTS)."""
    path = Path(os.environ.get(OUTPUTS_FILE_ENV_VAR) or config.workloads.outputs_file)
    try:
        arn = load_stack_outputs(path, config).mlflow_app_arn
    except InputError as error:
        fail(error.problems, EXIT_BAD_INPUT)
    if arn is None:
        fail([f"metrics: {path} has no MlflowAppArn output: deploy the storage stack with tracking.backend mlflow"],
             EXIT_BAD_INPUT)  # fmt: skip
    return arn


def mlflow_steps(config: ProjectConfig, run: Any, *, name_experiment: bool = False) -> list[metrics_module.StepMetrics]:
    """The run's metrics from the tracking server (tracking.tracking_uri; an App's ARN is signed by sagemaker-mlflow
    with the caller's AWS credentials). `name_experiment`: a failure's line starts with the experiment's name (one
    of several read side by side)."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    uri = config.tracking.tracking_uri or outputs_mlflow_app_arn(config)
    client = MlflowClient(tracking_uri=uri)
    who = f"{run.experiment.name}: " if name_experiment else ""
    try:
        with _process_tracking_uri(uri):
            run_id = metrics_module.find_mlflow_run(client, run.knobs.project_name, run.run_id)
            return metrics_module.read_mlflow(client, run_id)
    except metrics_module.MlflowRunNotFound as missing:
        fail([f"metrics: {who}{missing} (MLflow at {uri})"], EXIT_FINDINGS)
    except MlflowException as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        fail([f"metrics: {who}MLflow at {uri}: {first}"], EXIT_FINDINGS)


@contextlib.contextmanager
def _process_tracking_uri(uri: str) -> Iterator[None]:
    """sagemaker-mlflow's request header provider (sagemaker_mlflow/mlflow_sagemaker_request_header_provider.py)
    names the App in each request from the process's tracking URI (mlflow.get_tracking_uri), not the client's: set
    to `uri` while reading. It runs for every URI and cannot parse a server's URL, on which MLflow's registry logs a
    warning per request (mlflow/tracking/request_header/registry.py): quieted then, the error lines stay."""
    import mlflow

    registry = logging.getLogger("mlflow.tracking.request_header.registry")
    level, previous = registry.level, os.environ.get(MLFLOW_TRACKING_URI_ENV)
    mlflow.set_tracking_uri(uri)
    if not MLFLOW_ARN.fullmatch(uri):
        registry.setLevel(logging.ERROR)
    try:
        yield
    finally:
        registry.setLevel(level)
        mlflow.set_tracking_uri(previous)  # type: ignore[arg-type]  # None unsets it, as before


@train.command("metrics")
@config_option
@region_option
@profile_option
@experiment_option(without="the only experiment (a configuration with several: name them, or --all)", multiple=True)
@all_experiments_option("Every experiment of the configuration, side by side.")
@click.option("--log", "log_file", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Read one experiment's saved driver log instead of the cluster's (skyrl-hp train logs > FILE).")  # fmt: skip
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="PNG to write, eval pass@1 beside the reward, one line per experiment "
              "(default: pass_at_1-<experiment>[+<experiment>...].png).")  # fmt: skip
@json_option
@click.pass_context
def train_metrics(
    ctx: click.Context,
    config_path: Path | None,
    region: str | None,
    profile: str | None,
    experiment: tuple[str, ...],
    all_experiments: bool,
    log_file: Path | None,
    plot_file: Path | None,
    as_json: bool,
) -> None:
    """SkyRL's logged metrics (from MLflow with tracking.backend: mlflow, else the driver log) as a table (step, eval
    pass@1, reward, step time) and a PNG with two panels: eval pass@1 over the steps with the reference run's
    43.75 % and 96.875 % marked, beside the training reward of each step, both with the reference run's step 160
    marked. With several experiments (--experiment A --experiment B, or --all) one table puts each one's eval
    pass@1 and reward side by side, a summary line each, and the PNG has one line per experiment."""
    config = load_project_config(config_path, region=region)
    if all_experiments:
        refuse_all_with_experiment(config, experiment, "reads every experiment")
    runs = _metrics_experiments(config, experiment, all_experiments, several_allowed=log_file is None)
    several = len(runs) > 1
    by_name: dict[str, list[metrics_module.StepMetrics]] = {}
    if log_file is not None:
        by_name[runs[0].experiment.name] = _steps_or_fail(
            metrics_module.parse_log(log_file.read_text(encoding="utf-8", errors="replace").splitlines()),
            runs[0],
            several=several,
            from_mlflow=False,
        )
    elif config.tracking.mlflow:
        for run in runs:
            by_name[run.experiment.name] = _steps_or_fail(
                mlflow_steps(config, run, name_experiment=several), run, several=several, from_mlflow=True
            )
    else:
        namespace = config.workloads.namespace
        with cluster_errors():
            cluster = connect(ctx, config, region, profile)
            for run in runs:
                pod = cluster_workloads.submitter_pod(cluster, namespace, run.job_name)
                steps = metrics_module.parse_log(list(cluster.logs(namespace, pod)))
                by_name[run.experiment.name] = _steps_or_fail(steps, run, several=several, from_mlflow=False)
    target = plot_file or Path(f"pass_at_1-{'+'.join(by_name)}.png")
    title = f"{runs[0].experiment.name} ({config.name_prefix})" if not several else config.name_prefix
    metrics_module.plot(by_name, target, title)
    if as_json:
        if not several:
            [(name, steps)] = by_name.items()
            print_json({"experiment": name, "plot": str(target), "steps": metrics_module.as_json(steps)})
        else:
            print_json(
                {
                    "plot": str(target),
                    "experiments": [
                        {"experiment": name, "steps": metrics_module.as_json(steps)} for name, steps in by_name.items()
                    ],
                }
            )
        return
    if not several:
        [steps] = by_name.values()
        echo(metrics_module.render_table(steps))
        echo(metrics_module.summary(steps))
    else:
        echo(metrics_module.render_side_by_side(by_name))
        for name, steps in by_name.items():
            echo(f"{name}: {metrics_module.summary(steps)}")
    echo(f"plot: {target}")


def _metrics_experiments(
    config: ProjectConfig, experiment: tuple[str, ...], all_experiments: bool, *, several_allowed: bool
) -> list[Any]:
    """The runs `train metrics` reads: the named ones, every one with --all, the only one without either."""
    runs = pick_experiments(config, experiment)
    names = ", ".join(run.experiment.name for run in runs)
    if len(runs) > 1 and not several_allowed:
        fail(
            [
                f"--log: a saved driver log is one experiment's, not {len(runs)} ({names}): name one "
                f"(--experiment {runs[0].experiment.name}), or drop --log to read each from the cluster"
            ],
            EXIT_BAD_INPUT,
        )
    if len(runs) > 1 and not experiment and not all_experiments:
        fail(
            [
                f"--experiment: this configuration has {len(runs)} experiments ({names}); name one or several "
                f"(--experiment {runs[0].experiment.name} --experiment {runs[1].experiment.name}) or pass --all"
            ],
            EXIT_BAD_INPUT,
        )
    return runs


def _steps_or_fail(
    steps: list[metrics_module.StepMetrics], run: Any, *, several: bool, from_mlflow: bool
) -> list[metrics_module.StepMetrics]:
    """`steps`, or exit 1 with one line saying whose run has no metrics yet."""
    if steps:
        return steps
    who = f"{run.experiment.name}: " if several else ""
    if from_mlflow:
        fail([f"metrics: {who}the MLflow run of {run.job_name} has no SkyRL metrics yet"], EXIT_FINDINGS)
    fail(
        [
            f"metrics: {who}no SkyRL metrics in the log (SkyRL logs them with trainer.logger=console once training "
            "starts; skyrl-hp train logs shows where it is)"
        ],
        EXIT_FINDINGS,
    )


def _read_events(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        fail([f"--events: {path} is not JSON ({error}): save it with kubectl get events -o json"], EXIT_BAD_INPUT)
    items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        fail([f"--events: {path} has no list of events under items: save it with kubectl get events -o json"],
             EXIT_BAD_INPUT)  # fmt: skip
    return items


@train.command("timeline")
@config_option
@region_option
@profile_option
@experiment_option()
@click.option("--log", "log_file", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Read a saved driver log instead of the cluster's (skyrl-hp train logs --timestamps > FILE).")  # fmt: skip
@click.option("--events", "events_file", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="With --log: the namespace's events saved with kubectl get events -o json.")  # fmt: skip
@json_option
@click.pass_context
def train_timeline(
    ctx: click.Context,
    config_path: Path | None,
    region: str | None,
    profile: str | None,
    experiment: str | None,
    log_file: Path | None,
    events_file: Path | None,
    as_json: bool,
) -> None:
    """Where a run's start went, from the RayJob's creation to its first training step: pod scheduled, image
    pulled, Ray workers up (Kubernetes events), model downloaded, datasets prepared, SkyRL started, vLLM engines
    ready, models ready, first step (the driver log). Events older than the API server keeps (an hour by
    default) show as not recorded."""
    config = load_project_config(config_path, region=region)
    run = _single_experiment(config, experiment)
    if events_file is not None and log_file is None:
        fail(["--events: give the saved driver log too (--log), or neither to read both from the cluster"],
             EXIT_BAD_INPUT)  # fmt: skip
    try:
        if log_file is not None:
            events = _read_events(events_file) if events_file is not None else []
            lines: list[str] = log_file.read_text(encoding="utf-8", errors="replace").splitlines()
            timeline = start_timeline.build(events, lines, ray_cluster=None, origin=None)
        else:
            namespace = config.workloads.namespace
            with cluster_errors():
                cluster = connect(ctx, config, region, profile)
                rayjob = cluster_workloads.ensure_exists(
                    cluster, cluster_workloads.rayjob_path(namespace, run.job_name), f"RayJob {run.job_name}"
                )
                created = (rayjob.get("metadata") or {}).get("creationTimestamp")
                ray_cluster = str((rayjob.get("status") or {}).get("rayClusterName") or "") or None
                events = cluster.list_items(f"/api/v1/namespaces/{namespace}/events")
                pod = cluster_workloads.submitter_pod(cluster, namespace, run.job_name)
                lines = list(cluster.logs(namespace, pod, timestamps=True))
            timeline = start_timeline.build(
                events,
                lines,
                ray_cluster=ray_cluster,
                origin=start_timeline.parse_time(created) if isinstance(created, str) else None,
            )
    except InputError as error:
        fail([f"timeline: {problem}" for problem in error.problems], EXIT_BAD_INPUT)
    if as_json:
        print_json({"experiment": run.experiment.name, "rayjob": run.job_name} | start_timeline.as_json(timeline))
        return
    for line in start_timeline.render(timeline, f"RayJob {run.job_name} ({run.experiment.name})"):
        echo(line)
