"""`skyrl-hp outputs`: write (or --check) the stack outputs file the charts read, from CloudFormation
(skyrl_hyperpod/ops/fetch_outputs.py)."""

from __future__ import annotations

from pathlib import Path

import click

from skyrl_hyperpod.ops import fetch_outputs
from skyrl_hyperpod.plumbing.errors import InputError
from skyrl_hyperpod.plumbing.runtime import fail
from skyrl_hyperpod.values.stack_outputs import load_stack_outputs

from .common import (
    EXIT_BAD_INPUT,
    EXIT_FINDINGS,
    aws_errors,
    clients_from_context,
    config_option,
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
@click.option(
    "--file",
    "outputs_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=fetch_outputs.DEFAULT_OUTPUTS_FILE,
    show_default=True,
    help="Outputs file to write (or check).",
)
@click.option("--check", is_flag=True, help="Only validate an existing outputs file (offline) and print its values.")
@json_option
@click.pass_context
def outputs(
    ctx: click.Context,
    config_path: Path | None,
    region: str | None,
    profile: str | None,
    outputs_file: Path,
    check: bool,
    as_json: bool,
) -> None:
    """Write the stack outputs file the charts read (`cdk deploy --outputs-file` format), from CloudFormation."""
    config = load_project_config(config_path, region=region)
    if check:
        try:
            values = load_stack_outputs(outputs_file, config)
        except InputError as error:
            fail(error.problems, EXIT_BAD_INPUT)
        if as_json:
            print_json(values.model_dump())
        else:
            echo("\n".join(fetch_outputs.describe(values)))
        return
    clients = clients_from_context(ctx, profile, region or config.env.region)
    chosen = resolve_region(region, config, clients.session.region_name)
    if not chosen:
        fail(
            ["outputs error: no region: set env.region in the config, pass --region or export AWS_REGION"],
            EXIT_BAD_INPUT,
        )
    with aws_errors("outputs error: CloudFormation"):
        content, warnings = fetch_outputs.fetch_stack_outputs(clients("cloudformation", chosen), config)
    for warning in warnings:
        echo(warning, err=True)
    try:
        values = fetch_outputs.write_outputs_file(content, outputs_file, config)
    except fetch_outputs.OutputsError as error:
        fail(error.problems, EXIT_FINDINGS)
    count = sum(len(v) for v in content.values())
    if as_json:
        print_json({"file": str(outputs_file), "outputs": values.model_dump()})
        return
    echo(f"wrote {outputs_file}: {count} outputs from {len(content)} stack(s) in {values.region}")
