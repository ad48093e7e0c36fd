"""`skyrl-hp validate`: validate the synthesized manifests offline, one line per problem
(skyrl_hyperpod/ops/validate.py)."""

from __future__ import annotations

from pathlib import Path

import click

from skyrl_hyperpod.ops.validate import validate_manifests
from skyrl_hyperpod.plumbing.errors import ProblemsError
from skyrl_hyperpod.plumbing.runtime import fail
from skyrl_hyperpod.plumbing.upstream import KUBERAY_TAG
from skyrl_hyperpod.validation import crds as crds_module

from .common import EXIT_BAD_INPUT, config_option, echo, json_option, load_project_config_with_source, print_findings


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
