"""`skyrl-hp image tag | build-args | buildx-command | start-build-command`: the training image's tag and build
commands, computed from the configuration (skyrl_hyperpod/values/image_commands.py); offline."""

from __future__ import annotations

from pathlib import Path

import click

from skyrl_hyperpod.plumbing.errors import InputError
from skyrl_hyperpod.plumbing.runtime import fail
from skyrl_hyperpod.values import image_commands

from .common import EXIT_BAD_INPUT, config_option, echo, json_option, load_project_config, print_json, resolve_region
from .image_lock import lock


@click.group()
def image() -> None:
    """The training image's tag and build commands, computed from the configuration; the upstream lock."""


image.add_command(lock)


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
