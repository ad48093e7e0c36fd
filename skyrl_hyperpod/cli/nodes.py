"""`skyrl-hp nodes` (list with health) and `skyrl-hp nodes reboot|replace NODE` (after a typed confirmation)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from skyrl_hyperpod.ops import nodes as nodes_module
from skyrl_hyperpod.ops.status import ClusterNotFound
from skyrl_hyperpod.plumbing.runtime import fail

from .common import (
    EXIT_BAD_INPUT,
    EXIT_FINDINGS,
    aws_errors,
    clients_from_context,
    config_option,
    load_project_config,
    profile_option,
    region_option,
    resolve_region,
)


def _sagemaker(
    ctx: click.Context, config_path: Path | None, region: str | None, profile: str | None
) -> tuple[Any, str]:
    config = load_project_config(config_path)
    clients = clients_from_context(ctx, profile, region or config.env.region)
    chosen = resolve_region(region, config, clients.session.region_name)
    if not chosen:
        fail(
            ["nodes error: no region: set env.region in the config, pass --region or export AWS_REGION"], EXIT_BAD_INPUT
        )
    return clients("sagemaker", chosen), config.names.hyperpod_cluster


@click.group(invoke_without_command=True)
@config_option
@region_option
@profile_option
@click.pass_context
def nodes(ctx: click.Context, config_path: Path | None, region: str | None, profile: str | None) -> None:
    """The HyperPod cluster's nodes and their health (read-only); `reboot` / `replace` act on one node."""
    if ctx.invoked_subcommand is not None:
        ctx.meta["nodes_options"] = (config_path, region, profile)
        return
    sagemaker, cluster = _sagemaker(ctx, config_path, region, profile)
    try:
        with aws_errors("nodes error: SageMaker"):
            found = nodes_module.list_nodes(cluster, sagemaker)
    except ClusterNotFound:
        fail([f"nodes: HyperPod cluster {cluster} does not exist (not deployed yet, or deleted)"], EXIT_FINDINGS)
    click.echo("\n".join(nodes_module.render(cluster, found)))
    if any(not node.healthy for node in found):
        sys.exit(EXIT_FINDINGS)


def _action_command(action: nodes_module.Action) -> click.Command:
    @click.command(name=action, help=f"{action.capitalize()} one node: {nodes_module.ACTION_EFFECT[action]}.")
    @click.argument("node_id", metavar="NODE")
    @click.pass_context
    def command(ctx: click.Context, node_id: str) -> None:
        config_path, region, profile = ctx.meta.get("nodes_options", (None, None, None))
        sagemaker, cluster = _sagemaker(ctx, config_path, region, profile)
        try:
            with aws_errors(f"nodes {action} error: SageMaker"):
                node = nodes_module.describe_node(cluster, node_id, sagemaker)
        except nodes_module.NodeNotFound:
            fail(
                [f"nodes {action}: NODE = {node_id!r}: no such node in cluster {cluster} (skyrl-hp nodes lists them)"],
                EXIT_BAD_INPUT,
            )
        click.echo(
            f"{node.node_id}: group {node.group}, {node.instance_type}, {node.status}, host {node.hostname or '-'}"
        )
        click.echo(
            f"{action} {nodes_module.ACTION_EFFECT[action]}; the RayJob on it fails and, with retries left, resumes."
        )
        typed = click.prompt(f"Type the node id to {action} it", default="", show_default=False)
        if typed.strip() != node.node_id:
            fail(
                [f"nodes {action}: confirmation {typed.strip()!r} does not match {node.node_id!r}: nothing done"],
                EXIT_FINDINGS,
            )
        with aws_errors(f"nodes {action} error: SageMaker"):
            refusal = nodes_module.act(cluster, node.node_id, action, sagemaker)
        if refusal:
            fail([f"nodes {action}: {node.node_id}: {refusal}"], EXIT_FINDINGS)
        click.echo(f"{action} of {node.node_id} requested: follow it with skyrl-hp nodes")

    return command


nodes.add_command(_action_command("reboot"))
nodes.add_command(_action_command("replace"))
