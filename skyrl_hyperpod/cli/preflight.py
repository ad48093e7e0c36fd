"""`skyrl-hp preflight`: the read-only checks before a deploy (skyrl_hyperpod/ops/preflight.py)."""

from __future__ import annotations

from pathlib import Path

import click

from skyrl_hyperpod.ops import preflight as preflight_module
from skyrl_hyperpod.ops.local_tools import check_local_tools

from .common import (
    clients_from_context,
    config_option,
    json_option,
    load_project_config,
    profile_option,
    region_option,
    report_checks,
    resolve_region,
)


@click.command()
@config_option
@region_option
@profile_option
@click.option(
    "--qualifier",
    default=preflight_module.DEFAULT_BOOTSTRAP_QUALIFIER,
    show_default=True,
    help="CDK bootstrap qualifier.",
)
@json_option
@click.pass_context
def preflight(
    ctx: click.Context,
    config_path: Path | None,
    region: str | None,
    profile: str | None,
    qualifier: str,
    as_json: bool,
) -> None:
    """Read-only checks before a deploy: the AWS CLI (version 2) and kubectl on this machine, then what the configuration alone shows, also without credentials (region,
    HyperPod there, the AZ id's region, a route to the API endpoint, the example's placeholders), then through AWS
    (credentials, cluster access, AZ offerings, quotas, CDK bootstrap, stacks with this configuration's names that are not
    this deployment's, name collisions)."""
    config = load_project_config(config_path, region=region)
    clients = clients_from_context(ctx, profile, region or config.env.region)
    chosen = resolve_region(region, config, clients.session.region_name)
    # The tools the run book has you run (AWS CLI v2, kubectl), then the configuration and the account.
    results = [
        *check_local_tools(config.eks.kubernetes_version),
        *preflight_module.run_preflight(config, clients, chosen, qualifier),
    ]
    report_checks(results, as_json)
