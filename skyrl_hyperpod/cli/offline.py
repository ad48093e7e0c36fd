"""Subcommands that need no AWS account: the training image's commands, manifest validation, the
offline copies of upstream files (fetch), the HyperPod chart check and the configuration reference.

Argument parsing and printing only; the work is done by the modules each command names.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from skyrl_hyperpod import image_commands
from skyrl_hyperpod.config.platform import HYPERPOD_CHART_PATH, VersionsConfig
from skyrl_hyperpod.config.reference import render as render_reference
from skyrl_hyperpod.errors import InputError, ProblemsError
from skyrl_hyperpod.helm_values import gpu_instance_types
from skyrl_hyperpod.ops.validate import validate_manifests
from skyrl_hyperpod.runtime import fail
from skyrl_hyperpod.upstream import KUBERAY_TAG
from skyrl_hyperpod.validation import crds as crds_module
from skyrl_hyperpod.validation import hyperpod_chart as chart_module

from .common import (
    EXIT_BAD_INPUT,
    EXIT_FINDINGS,
    config_option,
    echo,
    json_option,
    load_project_config,
    load_project_config_with_source,
    print_json,
    resolve_region,
)


def print_findings(problems: list[str], skipped: list[str], as_json: bool = False) -> None:
    """SKIPPED lines on stderr, one problem a line on stdout (or both as JSON); exit 1 when there is any problem."""
    if as_json:
        print_json({"problems": problems, "skipped": skipped})
    else:
        for line in skipped:
            echo(line, err=True)
        for line in problems:
            echo(line)
    if problems:
        sys.exit(EXIT_FINDINGS)


# --- image ---------------------------------------------------------------------------------------------------


@click.group()
def image() -> None:
    """The training image's tag and build commands, computed from the configuration."""


@image.command()
@config_option
@json_option
def tag(config_path: Path | None, as_json: bool) -> None:
    """Print the training image tag (what the charts run and the build pushes)."""
    image_tag = load_project_config(config_path).training_image.tag
    if as_json:
        print_json({"tag": image_tag})
    else:
        echo(image_tag)


@image.command("build-args")
@config_option
def build_args(config_path: Path | None) -> None:
    """Print the --build-arg flags, one per line (and, on stderr, how to set the base image digest)."""
    image_config = load_project_config(config_path).training_image
    flags = image_commands.build_arg_flags(image_config)
    steps = image_commands.base_digest_steps(image_config)
    echo("\n# ".join([f"# set ${image_commands.DIGEST_VARIABLE} first:", *steps]), err=True)
    echo("\n".join(image_commands.shell_join(flags[i : i + 2]) for i in range(0, len(flags), 2)))


@image.command("buildx-command")
@config_option
@click.option("--repository-uri", default=None, help="ECR repository URI (account.dkr.ecr.region.amazonaws.com/name).")
@click.option("--outputs-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="File written by `cdk deploy --outputs-file`.")  # fmt: skip
def buildx_command(config_path: Path | None, repository_uri: str | None, outputs_file: Path | None) -> None:
    """Print the docker buildx build + push commands."""
    if repository_uri and outputs_file:
        fail(["image error: pass --repository-uri or --outputs-file, not both"], EXIT_BAD_INPUT)
    if outputs_file is not None and not outputs_file.is_file():
        fail(
            [
                f"image error: --outputs-file {outputs_file} does not exist: write it with `skyrl-hp outputs --file "
                f"{outputs_file}` (or cdk deploy --outputs-file {outputs_file}), or pass --repository-uri"
            ],
            EXIT_BAD_INPUT,
        )
    config = load_project_config(config_path)
    if repository_uri:
        uri, placeholder = repository_uri, False
    else:
        try:
            uri, placeholder = image_commands.repository_uri_from(config, outputs_file)
        except InputError as error:
            fail(error.problems, EXIT_BAD_INPUT)
    if placeholder:
        echo(f"# placeholder repository {uri}: pass --outputs-file or --repository-uri", err=True)
    echo(image_commands.buildx_command(config.training_image, uri))


@image.command("start-build-command")
@config_option
@click.option("--region", default=None, help="AWS region (default: env.region, else AWS_REGION).")
def start_build_command(config_path: Path | None, region: str | None) -> None:
    """Print the commands that run the in-cloud build (CodeBuild) and follow its log."""
    config = load_project_config(config_path, region=region)
    echo(image_commands.start_build_command(config, resolve_region(region, config)))


# --- validate ------------------------------------------------------------------------------------------------


@click.command()
@click.argument("directory", type=click.Path(path_type=Path), default=Path("dist"))
@config_option
@click.option("--crds-dir", type=click.Path(path_type=Path), default=None,
              help=f"KubeRay {KUBERAY_TAG} CRDs (default: ${crds_module.CRDS_DIR_ENV_VAR}).")  # fmt: skip
@click.option("--deployable", is_flag=True, help="Also fail on placeholder stack outputs.")
@json_option
def validate(directory: Path, config_path: Path | None, crds_dir: Path | None, deployable: bool, as_json: bool) -> None:
    """Validate the synthesized manifests in DIRECTORY (default dist/): one line per problem, exit 1 if any.

    Each problem names its file. Skipped checks are printed as SKIPPED lines on stderr. Manifests synthesized from
    another configuration than this command's are refused (exit 2), as is a CDK cloud assembly (cdk.out)."""
    config, source = load_project_config_with_source(config_path)
    # A cloud assembly, manifests of another configuration, manifests or KubeRay CRDs that cannot be read
    # (InputError), or no schemas for the configured Kubernetes version (ConfigError).
    try:
        result = validate_manifests(directory, config=config, crds_dir=crds_dir, deployable=deployable, source=source)
    except ProblemsError as error:
        fail(error.problems, EXIT_BAD_INPUT)
    print_findings(result.problems, result.skipped, as_json)
    echo(f"{result.documents} manifests in {directory} are valid{' and deployable' if deployable else ''}", err=True)


# --- fetch ---------------------------------------------------------------------------------------------------


@click.group()
def fetch() -> None:
    """Download and verify the upstream files the offline checks read (never committed to the repository)."""


@fetch.command("crds")
@click.option("--dest", type=click.Path(file_okay=False, path_type=Path), default=None,
              help=f"Directory to write the CRDs to (default: ${crds_module.CRDS_DIR_ENV_VAR}, else "
                   f"{crds_module.DEFAULT_CRDS_DIR.name} in the default location).")  # fmt: skip
@click.option("--if-missing", is_flag=True, help="Do nothing when DEST already holds every CRD file.")
def fetch_crds_command(dest: Path | None, if_missing: bool) -> None:
    """Download the pinned KubeRay CRDs and verify their sha256 sums; a mismatch is refused."""
    from skyrl_hyperpod.validation import fetch_crds

    target = dest or Path(os.environ.get(crds_module.CRDS_DIR_ENV_VAR) or crds_module.DEFAULT_CRDS_DIR)
    if if_missing and all((target / kind.file_name).is_file() for kind in crds_module.KUBERAY_KINDS.values()):
        return
    try:
        written = fetch_crds.fetch_crds(target)
    except ValueError as exc:
        fail(str(exc).splitlines(), EXIT_FINDINGS)
    except OSError as exc:
        fail([f"fetch_crds: cannot write to {target}: {exc}"], EXIT_FINDINGS)
    for path in written:
        echo(f"verified {path}")
    echo(f"export {crds_module.CRDS_DIR_ENV_VAR}={target.resolve()}")


@fetch.command("hyperpod-chart")
@click.option("--dest", type=click.Path(file_okay=False, path_type=Path), default=None,
              help=f"Directory of chart copies, one folder per commit (default: ${chart_module.CHARTS_DIR_ENV_VAR}, "
                   "else the default location).")  # fmt: skip
@click.option("--commit", default=VersionsConfig().hyperpod_cli_commit, show_default="versions.hyperpod_cli_commit",
              help="aws/sagemaker-hyperpod-cli commit.")  # fmt: skip
@click.option("--if-missing", is_flag=True, help="Only verify when DEST already holds a copy of the commit.")
def fetch_hyperpod_chart_command(dest: Path | None, commit: str, if_missing: bool) -> None:
    """Download the HyperPod dependencies chart at a commit and verify every file's sha256."""
    from skyrl_hyperpod.validation.fetch_hyperpod_chart import ensure_chart

    target = dest or Path(os.environ.get(chart_module.CHARTS_DIR_ENV_VAR) or chart_module.DEFAULT_CHARTS_DIR)
    try:
        outcome, directory = ensure_chart(commit, target, if_missing=if_missing)
    except InputError as exc:
        fail(exc.problems, EXIT_FINDINGS)
    except ValueError as exc:
        fail(str(exc).splitlines(), EXIT_FINDINGS)
    except OSError as exc:
        fail([f"fetch_hyperpod_chart: cannot write to {target}: {exc}"], EXIT_FINDINGS)
    if outcome == "fetched":
        echo(f"verified {directory / HYPERPOD_CHART_PATH}")
        echo(f"export {chart_module.CHARTS_DIR_ENV_VAR}={target.resolve()}")


# --- chart-check ---------------------------------------------------------------------------------------------


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
        except chart_module.installer_module().InstallError as exc:
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


# --- config --------------------------------------------------------------------------------------------------


@click.group("config")
def config_group() -> None:
    """The configuration's own documentation."""


@config_group.command("reference")
def config_reference() -> None:
    """Print the configuration reference (docs/configuration.md) generated from the typed configuration."""
    echo(render_reference(), nl=False)


COMMANDS = [image, validate, fetch, chart_check, config_group]
