"""`skyrl-hp verify`, `skyrl-hp ray submit` and `skyrl-hp dashboard`: the Ray head's port 8265 through a
port-forward with the cluster's token, or the HyperPod Ray endpoint when its operator is on."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import click
import yaml

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.ops import cluster_workloads, ray_api
from skyrl_hyperpod.ops import verify as verify_module
from skyrl_hyperpod.ops.kube import Cluster
from skyrl_hyperpod.ops.portforward import LocalForward
from skyrl_hyperpod.ops.preflight import CheckResult
from skyrl_hyperpod.runtime import fail
from skyrl_hyperpod.synthesized_manifests import RAYJOBS_CHART

from .cluster import (
    _pick_experiments,
    cluster_errors,
    connect,
    dist_option,
    experiment_option,
    port_connector,
    refuse_other_configuration,
)
from .common import (
    EXIT_BAD_INPUT,
    EXIT_FINDINGS,
    config_option,
    echo,
    flush_header,
    json_option,
    load_project_config,
    load_project_config_with_source,
    print_json,
    profile_option,
    region_option,
    report_checks,
)

# The scheme of the HyperPod Ray endpoint (PyPI toolkit-for-ray-on-sagemaker-ai), as the reference run submits.
SAGEMAKER_RAY_SCHEME = "sagemaker_ray://"


def head_forward(ctx: click.Context, cluster: Cluster, config: ProjectConfig) -> tuple[LocalForward, str | None]:
    """A local port to the training head's dashboard/job API, and the cluster's token."""
    namespace, name = config.workloads.namespace, config.training.cluster.raycluster_name
    head = ray_api.head_pod(cluster, namespace, name)
    token = ray_api.cluster_token(cluster, namespace, name)
    return LocalForward(port_connector(ctx, cluster, namespace, head, ray_api.DASHBOARD_PORT)), token


# --- verify ----------------------------------------------------------------------------------------------------


@click.command()
@config_option
@region_option
@profile_option
@json_option
@click.pass_context
def verify(
    ctx: click.Context, config_path: Path | None, region: str | None, profile: str | None, as_json: bool
) -> None:
    """Post-deploy checks, one line each: nodes per group Ready and Schedulable, the network-policy agent, the
    KubeRay operator, the FSx claim, NCCL on EFA (a worker's log), Ray's object store per worker. Exit 1 on a FAIL."""
    config = load_project_config(config_path, region=region)
    with cluster_errors():
        cluster = connect(ctx, config, region, profile)
        results = verify_module.cluster_checks(cluster, config)
        results += _object_store_check(ctx, cluster, config)
    report_checks(results, as_json)


def _object_store_check(ctx: click.Context, cluster: Cluster, config: ProjectConfig) -> list[CheckResult]:
    name = "Ray object store"
    if config.training.jobs.self_contained_jobs:
        return [CheckResult("SKIP", name, "self-contained RayJobs: no long-lived RayCluster to ask")]
    try:
        forward, token = head_forward(ctx, cluster, config)
    except Exception as error:
        return [CheckResult("SKIP", name, str(error))]
    with forward:
        try:
            stores = ray_api.node_object_stores(forward.url, token)
        except ray_api.RayApiError as error:
            return [CheckResult("FAIL", name, str(error))]
    return verify_module.check_object_stores(stores, config)


# --- ray submit ------------------------------------------------------------------------------------------------


@click.group("ray")
def ray_group() -> None:
    """Ray's own job API on the training RayCluster."""


def _rayjob_of(dist: Path, job_name: str) -> dict[str, Any]:
    for job in cluster_workloads.load_chart(dist, RAYJOBS_CHART):
        if job["metadata"]["name"] == job_name:
            return dict(job)
    raise cluster_workloads.WorkloadError(
        [f"manifest error: {dist} has no RayJob {job_name}: synthesize again (make synth-k8s)"]
    )


@ray_group.command("submit")
@config_option
@region_option
@profile_option
@dist_option
@experiment_option(required=True)
@click.option("--submission-id", default=None, help="Ray submission id (default: Ray picks one).")
@json_option
@click.pass_context
def ray_submit(
    ctx: click.Context,
    config_path: Path | None,
    region: str | None,
    profile: str | None,
    dist: Path,
    experiment: str,
    submission_id: str | None,
    as_json: bool,
) -> None:
    """Submit an experiment's entrypoint with Ray's job API instead of the RayJob object (as the reference run).

    With the HyperPod Ray endpoint operator on, through `ray job submit --address sagemaker_ray://<cluster>/<namespace>`
    (needs `ray` and toolkit-for-ray-on-sagemaker-ai installed); otherwise through a port-forward to the head
    with the cluster's token."""
    config, source = load_project_config_with_source(config_path, region=region)
    if config.training.jobs.self_contained_jobs:
        fail(
            ["ray submit: training.jobs.self_contained_jobs is true: there is no long-lived RayCluster to submit to"],
            EXIT_BAD_INPUT,
        )
    refuse_other_configuration(dist, [RAYJOBS_CHART], config, source)
    [run] = _pick_experiments(config, experiment)
    namespace, name = config.workloads.namespace, config.training.cluster.raycluster_name
    with cluster_errors():
        rayjob = _rayjob_of(dist, run.job_name)
    spec = rayjob.get("spec") or {}
    entrypoint = str(spec["entrypoint"])
    runtime_env = yaml.safe_load(spec.get("runtimeEnvYAML") or "") or None
    if config.ray_endpoint_operator.enabled:
        address = f"{SAGEMAKER_RAY_SCHEME}{name}/{namespace}"
        ray = shutil.which("ray")
        if ray is None:
            fail(
                [
                    f"ray submit: the `ray` command is not installed: pip install 'ray[default]' toolkit-for-ray-on-sagemaker-ai (address {address})"
                ],
                EXIT_BAD_INPUT,
            )
        command = [ray, "job", "submit", "--address", address]
        if runtime_env:
            import json

            command += ["--runtime-env-json", json.dumps(runtime_env)]
        if submission_id:
            command += ["--submission-id", submission_id]
        flush_header()
        sys.exit(subprocess.call([*command, "--", *entrypoint.split()]))
    with cluster_errors():
        cluster = connect(ctx, config, region, profile)
        forward, token = head_forward(ctx, cluster, config)
    with forward:
        try:
            submitted = ray_api.submit_job(forward.url, token, entrypoint, runtime_env, submission_id)
        except ray_api.RayApiError as error:
            fail([f"ray submit: {error}"], EXIT_FINDINGS)
    if as_json:
        print_json({"submission_id": submitted, "raycluster": name, "experiment": experiment})
        return
    echo(f"submitted {submitted} to RayCluster {name} ({experiment}); follow it with: skyrl-hp dashboard")


# --- dashboard -------------------------------------------------------------------------------------------------


@click.command()
@config_option
@region_option
@profile_option
@click.option("--port", type=click.IntRange(min=0, max=65535), default=ray_api.DASHBOARD_PORT, show_default=True,
              help="Local port (0: any free port).")  # fmt: skip
@click.option("--print-token", is_flag=True, help="Print the cluster's token (what the dashboard asks for) and exit.")
@click.pass_context
def dashboard(
    ctx: click.Context, config_path: Path | None, region: str | None, profile: str | None, port: int, print_token: bool
) -> None:
    """Forward a local port to the training RayCluster's dashboard and print its URL and how to sign in."""
    config = load_project_config(config_path, region=region)
    namespace, name = config.workloads.namespace, config.training.cluster.raycluster_name
    with cluster_errors():
        cluster = connect(ctx, config, region, profile)
        if print_token:
            token = ray_api.cluster_token(cluster, namespace, name)
            if token is None:
                fail([f"dashboard: RayCluster {name} has no token Secret (token authentication is off)"], EXIT_FINDINGS)
            click.echo(token)
            return
        head = ray_api.head_pod(cluster, namespace, name)
    try:
        forward = LocalForward(port_connector(ctx, cluster, namespace, head, ray_api.DASHBOARD_PORT), port)
    except OSError as error:
        fail([f"dashboard: cannot listen on 127.0.0.1:{port}: {error.strerror}; pass --port 0"], EXIT_BAD_INPUT)
    with forward:
        echo(f"Ray dashboard of {name}: {forward.url}  (Ctrl-C stops the port-forward)")
        echo("it asks for the cluster's token once (kept in a cookie): skyrl-hp dashboard --print-token")
        echo(
            f"Ray's job CLI: RAY_AUTH_MODE=token RAY_AUTH_TOKEN=$(skyrl-hp dashboard --print-token) ray job list --address {forward.url}"
        )
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            return


COMMANDS = [verify, ray_group, dashboard]
