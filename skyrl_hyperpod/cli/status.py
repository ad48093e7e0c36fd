"""`skyrl-hp status`: live HyperPod node counts against the configured targets, and each RayJob's retries and
newest checkpoint (skyrl_hyperpod/ops/status.py)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import click

from skyrl_hyperpod.ops import status as status_module
from skyrl_hyperpod.ops.kube import KubeError
from skyrl_hyperpod.plumbing.runtime import fail

from .common import (
    EXIT_BAD_INPUT,
    EXIT_FINDINGS,
    aws_errors,
    clients_from_context,
    config_option,
    connect,
    echo,
    json_option,
    load_project_config,
    print_json,
    profile_option,
    region_option,
    resolve_region,
)


@click.command()
@config_option
@region_option
@profile_option
@click.option("--no-jobs", is_flag=True, help="Skip the RayJobs (no Kubernetes access needed).")
@json_option
@click.pass_context
def status(
    ctx: click.Context,
    config_path: Path | None,
    region: str | None,
    profile: str | None,
    no_jobs: bool,
    as_json: bool,
) -> None:
    """Live HyperPod node counts per instance group against the configured targets, and each RayJob's retries
    and newest checkpoint (read-only)."""
    config = load_project_config(config_path, region=region)
    clients = clients_from_context(ctx, profile, region or config.env.region)
    chosen = resolve_region(region, config, clients.session.region_name)
    if not chosen:
        fail(
            ["status error: no region: set env.region in the config, pass --region or export AWS_REGION"],
            EXIT_BAD_INPUT,
        )
    try:
        with aws_errors("status error: SageMaker"):
            report = status_module.fetch_status(config, clients("sagemaker", chosen))
    except status_module.ClusterNotFound as missing:
        fail(
            [f"status: HyperPod cluster {missing} does not exist in {chosen} (not deployed yet, or deleted)"],
            EXIT_FINDINGS,
        )
    if not as_json:  # the nodes first: they are worth reading when the Kubernetes part fails
        echo("\n".join(status_module.render(report)))
    jobs: list[status_module.RayJobStatus] = []
    if not no_jobs:
        try:
            jobs = status_module.fetch_job_statuses(config, connect(ctx, config, chosen, profile))
        except KubeError as error:  # API unreachable or forbidden: one line, not a traceback
            fail([f"status error: Kubernetes: {error} (pass --no-jobs to skip the RayJobs)"], EXIT_FINDINGS)
    job_problems = [problem for job in jobs for problem in job.problems()]
    if as_json:
        print_json({**status_module.as_dict(report), "rayjobs": [dataclasses.asdict(job) for job in jobs]})
    else:
        echo("RayJobs: not read (--no-jobs)" if no_jobs else "\n".join(status_module.render_jobs(jobs)))
    if report.problems() or job_problems:
        sys.exit(EXIT_FINDINGS)
