"""`skyrl-hp verify`: the post-deploy checks, one line each (skyrl_hyperpod/ops/verify.py), the Ray object store
per worker read through the head's job API (skyrl_hyperpod/ops/ray_api.py)."""

from __future__ import annotations

from pathlib import Path

import click

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.ops import ray_api
from skyrl_hyperpod.ops import verify as verify_module
from skyrl_hyperpod.ops.kube import Cluster
from skyrl_hyperpod.ops.preflight import CheckResult

from .common import (
    cluster_errors,
    config_option,
    connect,
    head_forward,
    json_option,
    load_project_config,
    profile_option,
    region_option,
    report_checks,
)


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
