"""`skyrl-hp ray submit`: an experiment's entrypoint through Ray's own job API on the training RayCluster: the
HyperPod Ray endpoint (`ray job submit --address sagemaker_ray://...`) when its operator is on, else a
port-forward to the head's port 8265 with the cluster's token (skyrl_hyperpod/ops/ray_api.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import yaml

from skyrl_hyperpod.ops import cluster_workloads, ray_api
from skyrl_hyperpod.plumbing.runtime import fail
from skyrl_hyperpod.values.synthesized_manifests import RAYJOBS_CHART

from .common import (
    EXIT_BAD_INPUT,
    EXIT_FINDINGS,
    cluster_errors,
    config_option,
    connect,
    dist_option,
    echo,
    experiment_option,
    flush_header,
    head_forward,
    json_option,
    load_project_config_with_source,
    pick_experiments,
    print_json,
    profile_option,
    refuse_other_configuration,
    region_option,
)

# The scheme of the HyperPod Ray endpoint (PyPI toolkit-for-ray-on-sagemaker-ai), as the reference run submits.
SAGEMAKER_RAY_SCHEME = "sagemaker_ray://"


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
            [
                "ray submit: training.jobs.self_contained_jobs is true (the default): there is no long-lived RayCluster "
                "to submit to; set training.jobs.self_contained_jobs: false in the configuration, synthesize and "
                "train start again (it applies the shared RayCluster), or start the RayJob: skyrl-hp train start"
            ],
            EXIT_BAD_INPUT,
        )
    refuse_other_configuration(dist, [RAYJOBS_CHART], config, source)
    [run] = pick_experiments(config, experiment)
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
