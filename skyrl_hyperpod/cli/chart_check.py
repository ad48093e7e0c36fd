"""`skyrl-hp chart-check`: check the values this project gives the HyperPod charts against the chart at the
pinned commit, and optionally render it with Helm (skyrl_hyperpod/validation/hyperpod_chart.py); offline."""

from __future__ import annotations

from pathlib import Path

import click

from skyrl_hyperpod.plumbing.errors import InputError
from skyrl_hyperpod.plumbing.runtime import fail
from skyrl_hyperpod.validation import hyperpod_chart as chart_module
from skyrl_hyperpod.values.helm_values import gpu_instance_types

from .common import (
    EXIT_BAD_INPUT,
    EXIT_FINDINGS,
    config_option,
    echo,
    json_option,
    load_project_config,
    print_findings,
)


@click.command("chart-check")
@config_option
@click.option("--charts-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help=f"Chart copies by commit (default: ${chart_module.CHARTS_DIR_ENV_VAR}).")  # fmt: skip
@click.option("--render", "render_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also assemble the chart with the installer's code, render it with Helm and write the "
                   "manifests here (absent, empty, or an earlier render).")  # fmt: skip
@click.option("--archives", "archives_dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
              default=None, help="With --render: the remote sub-chart archives (as `helm pull` names them), "
                                 "verified against the pins; without it, offline stand-ins.")  # fmt: skip
@json_option
def chart_check(
    config_path: Path | None,
    charts_dir: Path | None,
    render_dir: Path | None,
    archives_dir: Path | None,
    as_json: bool,
) -> None:
    """Check the values this project gives the HyperPod charts against the chart at the pinned commit."""
    config = load_project_config(config_path)
    if archives_dir is not None and render_dir is None:
        fail(["chart check: --archives is only read with --render OUT"], EXIT_BAD_INPUT)
    try:
        report = chart_module.check_charts(config, charts_dir=charts_dir)
    except InputError as exc:
        fail(exc.problems, EXIT_BAD_INPUT)
    problems, skipped = list(report.problems), list(report.skipped)
    if render_dir is not None:
        try:
            render = chart_module.render_chart(config, render_dir, charts_dir=charts_dir, archives_dir=archives_dir)
        except InputError as exc:
            fail(exc.problems, EXIT_BAD_INPUT)
        except chart_module.chart_assembly_module().InstallError as exc:
            # Helm's own message (the installer keeps the end of its output).
            fail([f"chart check: {line}" for line in str(exc).splitlines() if line.strip()], EXIT_FINDINGS)
        problems += render.problems
        click.echo(render.assembly, err=True)
        if render.stand_ins:
            click.echo(
                f"stand-ins (no download offline; they show what Helm enables and the values it passes, not the "
                f"charts' content): {', '.join(render.stand_ins)}",
                err=True,
            )
        click.echo(
            f"rendered {render.documents} documents from {len([s for s in render.rendered if s])} sub-charts to "
            f"{render_dir} in {render.seconds:.1f}s; disabled, rendering nothing: {', '.join(render.disabled) or '-'}",
            err=True,
        )
    print_findings(problems, skipped, as_json)
    echo(
        f"chart values for commit {config.versions.hyperpod_cli_commit} are valid "
        f"(GPU types: {', '.join(gpu_instance_types(config))})",
        err=True,
    )
