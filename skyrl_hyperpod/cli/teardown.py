"""`skyrl-hp teardown`: tear the platform down without losing data; --plan prints the ordered steps
(skyrl_hyperpod/ops/teardown.py), --execute carries them out after a typed confirmation
(skyrl_hyperpod/ops/teardown_run.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from skyrl_hyperpod.ops import preflight as preflight_module
from skyrl_hyperpod.ops import teardown as teardown_module
from skyrl_hyperpod.plumbing.runtime import fail

from .common import (
    EXIT_BAD_INPUT,
    EXIT_FINDINGS,
    MAX_WAIT_SECONDS,
    FiniteFloatRange,
    aws_errors,
    clients_from_context,
    cluster_errors,
    config_option,
    connect,
    echo,
    flush_header,
    json_option,
    load_project_config_with_source,
    poll_interval,
    print_json,
    profile_option,
    region_option,
    resolve_region,
)


@click.command()
@config_option
@click.option("--plan", "plan_only", is_flag=True, help="Print the ordered teardown steps (runs nothing).")
@click.option(
    "--execute",
    is_flag=True,
    help="Carry the plan out for this deployment's stacks in the region (those that carry its ownership marker), "
    "after it lists them and you type the name prefix.",
)
@region_option
@profile_option
@click.option("--timeout", type=FiniteFloatRange(min=1, max=MAX_WAIT_SECONDS), default=7200.0, show_default=True,
              help="Seconds each wait (namespace, each round of stacks) may take.")  # fmt: skip
@json_option
@click.pass_context
def teardown(
    ctx: click.Context,
    config_path: Path | None,
    plan_only: bool,
    execute: bool,
    region: str | None,
    profile: str | None,
    timeout: float,
    as_json: bool,
) -> None:
    """Tear the platform down without losing data: --plan prints the steps (offline), --execute runs them."""
    if plan_only == execute:
        fail(
            ["teardown: pass --plan (print the steps) or --execute (run them, after a typed confirmation)"],
            EXIT_BAD_INPUT,
        )
    config, source = load_project_config_with_source(config_path, region=region)
    chosen = resolve_region(region, config)
    remaining = teardown_module.leftovers(config)
    if plan_only:
        steps = teardown_module.plan(config, str(source.path) if source.path else None, chosen)
        if as_json:
            print_json(
                {
                    "steps": [dataclasses.asdict(s) for s in steps],
                    "leftovers": [dataclasses.asdict(r) for r in remaining],
                }
            )
            return
        echo(teardown_module.render_plan(steps, remaining))
        return
    _teardown_execute(ctx, config, region, profile, timeout)
    echo("What remains, and how to remove it when you are sure:")
    for item in remaining:
        echo(f"- {item.what}: {item.removal}")


def _teardown_execute(ctx: click.Context, config: Any, region: str | None, profile: str | None, timeout: float) -> None:
    from skyrl_hyperpod.ops import teardown_run

    if config.studio.enabled:
        fail(
            [
                "teardown: studio.enabled: remove Studio's apps, spaces and user profiles first (skyrl-hp teardown --plan, "
                "steps 4 to 6), then set studio.enabled: false and run --execute"
            ],  # fmt: skip
            EXIT_BAD_INPUT,
        )
    clients = clients_from_context(ctx, profile, region or config.env.region)
    chosen = resolve_region(region, config, clients.session.region_name)
    if not chosen:
        fail(
            ["teardown error: no region: set env.region in the config, pass --region or export AWS_REGION"],
            EXIT_BAD_INPUT,
        )
    cloudformation = clients("cloudformation", chosen)
    with aws_errors("teardown error: CloudFormation"):
        found = preflight_module.project_stacks(cloudformation, config)
    flush_header()
    for line in _found_lines(found, config, chosen):
        echo(line, err=True)
    if not found.ours and found.unverified:
        fail(
            [f"teardown: no stack in {chosen} is shown to be this deployment's; those above are left alone and "
             "nothing was deleted"],
            EXIT_FINDINGS,
        )  # fmt: skip
    if not found.ours:
        echo(f"no stack of this deployment in {chosen}: nothing to delete")
        return
    prefix = config.name_prefix
    typed = click.prompt(
        f"Type the name prefix {prefix!r} to delete what is listed above", default="", show_default=False, err=True
    )
    if typed.strip() != prefix:
        fail([f"teardown: you typed {typed.strip()!r}, not {prefix!r}: nothing was deleted"], EXIT_FINDINGS)
    poll = poll_interval(ctx)
    stacks = found.ours
    studio = config.names.stack("studio")
    if studio in stacks:
        fail(
            [f"teardown: stack {studio} is still deployed: remove Studio's apps, spaces and user profiles and that stack "
             "first (skyrl-hp teardown --plan with studio.enabled: true); nothing was deleted"],
            EXIT_FINDINGS,
        )  # fmt: skip
    fsx_id = teardown_run.fsx_file_system_id(stacks, config)
    if fsx_id:
        echo(
            f"FSx file system {fsx_id}: its final backup: aws fsx describe-backups --filters Name=file-system-id,Values={fsx_id}"
        )
    fsx = clients("fsx", chosen)
    with aws_errors("teardown error: FSx"):
        replaced = teardown_run.replaced_file_systems(fsx, config, fsx_id)
    if replaced:
        fail(
            [f"teardown: FSx file system(s) {', '.join(replaced)} were replaced by an update and kept with their data: "
             "delete them first (skyrl-hp teardown --plan, 'Delete the FSx file systems that updates replaced'); "
             "nothing was deleted"],
            EXIT_FINDINGS,
        )  # fmt: skip
    try:
        if config.names.stack("eks") in stacks:
            with cluster_errors():
                teardown_run.delete_workloads(
                    connect(ctx, config, chosen, profile), config, echo, poll=poll, timeout=timeout
                )
        if fsx_id:
            with aws_errors("teardown error: FSx"):
                teardown_run.full_backup(fsx, fsx_id, echo, poll=poll, timeout=timeout)
        with aws_errors("teardown error: CloudFormation"):
            deleted = teardown_run.delete_stacks(cloudformation, config, found, echo, poll=poll, timeout=timeout)
    except teardown_run.TeardownError as error:
        fail(error.problems, EXIT_FINDINGS)
    echo(f"deleted {len(deleted)} stack(s) in {chosen}")


def _found_lines(found: preflight_module.ProjectStacks, config: Any, region: str) -> list[str]:
    """What the confirmation lists: the stacks shown to be this deployment's in the order they go, the workloads when
    their cluster's stack is among them, and the stacks with its names that are left alone, with the reason."""
    from skyrl_hyperpod.ops import teardown_run

    lines = []
    if found.ours:
        lines.append(f"In {region}, this deletes:")
        if config.names.stack("eks") in found.ours:
            lines.append(
                f"  - the workloads: namespace {config.workloads.namespace} of EKS cluster {config.names.eks_cluster}"
            )
        for number, names in enumerate(teardown_run.deletion_rounds(set(found.ours), config), start=1):
            for name in names:
                lines.append(f"  - stack {name} (round {number}; this deployment's: {found.evidence[name]})")
        if config.names.stack("storage") in found.ours:
            lines.append("  (the storage stack's FSx file system after a full and a final backup)")
    for name, why in sorted(found.unverified.items()):
        lines.append(
            f"Left alone: stack {name} has one of this configuration's names but is not this deployment's: {why}"
        )
    return lines
