"""`skyrl-hp dashboard`: forward a local port to the training RayCluster's dashboard (the head's port 8265) and
print its URL and how to sign in with the cluster's token."""

from __future__ import annotations

import threading
from pathlib import Path

import click

from skyrl_hyperpod.ops import ray_api
from skyrl_hyperpod.ops.portforward import LocalForward
from skyrl_hyperpod.plumbing.runtime import fail

from .common import (
    EXIT_BAD_INPUT,
    EXIT_FINDINGS,
    cluster_errors,
    config_option,
    connect,
    echo,
    load_project_config,
    port_connector,
    profile_option,
    region_option,
)


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
