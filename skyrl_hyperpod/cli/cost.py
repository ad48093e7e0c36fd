"""`skyrl-hp cost`: the hourly and monthly cost estimate of the configured platform (skyrl_hyperpod/ops/cost.py)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from skyrl_hyperpod.ops import cost as cost_module
from skyrl_hyperpod.ops import scaling_cost
from skyrl_hyperpod.plumbing.runtime import fail

from .common import (
    EXIT_BAD_INPUT,
    FiniteFloatRange,
    aws_errors,
    clients_from_context,
    config_option,
    echo,
    json_option,
    load_project_config,
    profile_option,
    region_option,
    resolve_region,
)


@click.command()
@config_option
@region_option
@click.option(
    "--prices",
    "prices_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Price file to use instead of the shipped skyrl_hyperpod/prices/<region>.yaml (same layout).",
)
@click.option(
    "--hours",
    "run_hours",
    type=FiniteFloatRange(min=0, min_open=True, max=cost_module.MAX_RUN_HOURS),
    default=cost_module.DEFAULT_RUN_HOURS,
    show_default=True,
    help="Length of one training run in hours.",
)
@json_option
@click.option(
    "--live", is_flag=True, help="Read HyperPod instance prices from the AWS Price List API (needs credentials)."
)
@profile_option
@click.pass_context
def cost(
    ctx: click.Context,
    config_path: Path | None,
    region: str | None,
    prices_file: Path | None,
    run_hours: float,
    as_json: bool,
    live: bool,
    profile: str | None,
) -> None:
    """Hourly and monthly cost estimate of the configured platform, per component, and the GPU group's two scaling
    modes side by side (idle day, one run, a sweep)."""
    config = load_project_config(config_path, region=region)
    chosen = resolve_region(region, config)
    if chosen is None and prices_file is None:
        chosen = cost_module.DEFAULT_PRICE_REGION
        echo(f"note: no region set (--region, env.region, AWS_REGION); using {chosen} prices", err=True)
    try:
        file, book = cost_module.price_book_for(chosen, prices_file)
        if live:
            clients = clients_from_context(ctx, profile, cost_module.PRICE_LIST_API_REGION)
            with aws_errors("cost error: AWS Price List API"):
                book, missing = cost_module.apply_live_prices(
                    config, book, clients("pricing", cost_module.PRICE_LIST_API_REGION)
                )
            for instance_type in missing:
                echo(
                    f"note: the Price List API has no HyperPod price for {instance_type} in {book.region}; "
                    "keeping the file's figure",
                    err=True,
                )
        result = cost_module.estimate(config, book, price_file=cost_module.display_path(file), run_hours=run_hours)
    except cost_module.PriceError as error:
        fail(error.problems, EXIT_BAD_INPUT)
    scaling = scaling_cost.scaling_comparison(config, book, result)
    if as_json:
        echo(json.dumps({**result.to_json(), "scaling": scaling.to_json()}, indent=2))
    else:
        echo("\n".join([cost_module.render_table(result), *scaling_cost.render_scaling(scaling)]))
