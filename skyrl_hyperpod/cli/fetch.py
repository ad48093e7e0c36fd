"""`skyrl-hp fetch crds | karpenter-crds | hyperpod-chart | visgym`: download and verify the upstream files the offline
checks and the drill read (the pinned KubeRay CRDs, Karpenter's NodePool CRD, the HyperPod dependencies chart, VisGym and SkyRL's VisGym example;
skyrl_hyperpod/validation/)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import click

from skyrl_hyperpod.config.versions import VersionsConfig
from skyrl_hyperpod.plumbing.errors import InputError
from skyrl_hyperpod.plumbing.runtime import fail
from skyrl_hyperpod.plumbing.upstream import HYPERPOD_CHART_PATH
from skyrl_hyperpod.validation import crds as crds_module
from skyrl_hyperpod.validation import hyperpod_chart as chart_module
from skyrl_hyperpod.validation import karpenter as karpenter_module

from .common import EXIT_FINDINGS, echo


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
    write_verified(fetch_crds.fetch_crds, target, crds_module.CRDS_DIR_ENV_VAR)


@fetch.command("karpenter-crds")
@click.option("--dest", type=click.Path(file_okay=False, path_type=Path), default=None,
              help=f"Directory to write the CRD to (default: ${karpenter_module.CRDS_DIR_ENV_VAR}, else "
                   f"{karpenter_module.DEFAULT_CRDS_DIR.name} in the default location).")  # fmt: skip
@click.option("--if-missing", is_flag=True, help="Do nothing when DEST already holds the CRD file.")
def fetch_karpenter_crds_command(dest: Path | None, if_missing: bool) -> None:
    """Download Karpenter's NodePool CRD at the pinned release and verify its sha256; a mismatch is refused."""
    from skyrl_hyperpod.validation import fetch_crds

    target = dest or karpenter_module.resolve_crds_dir()
    if if_missing and karpenter_module.missing_crd_reason(target) is None:
        return
    write_verified(fetch_crds.fetch_karpenter_crds, target, karpenter_module.CRDS_DIR_ENV_VAR)


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


@fetch.command("visgym")
@click.option("--dest", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory of upstream copies, one folder per source and commit (default: "
                   "$UPSTREAM_SOURCES_DIR, else the default location).")  # fmt: skip
@click.option("--if-missing", is_flag=True, help="Only verify the copies DEST already holds.")
def fetch_visgym_command(dest: Path | None, if_missing: bool) -> None:
    """Download VisGym's environments and SkyRL's VisGym example at the commits `make drill` runs, and verify every
    file's sha256."""
    from skyrl_hyperpod.validation import fetch_visgym

    target = fetch_visgym.resolve_sources_dir(dest)
    for copy in fetch_visgym.COPIES:
        try:
            outcome, directory = fetch_visgym.ensure(copy, target, if_missing=if_missing)
        except InputError as exc:
            fail(exc.problems, EXIT_FINDINGS)
        except ValueError as exc:
            fail(str(exc).splitlines(), EXIT_FINDINGS)
        except OSError as exc:
            fail([f"fetch_visgym: cannot write to {target}: {exc}"], EXIT_FINDINGS)
        if outcome == "fetched":
            echo(f"verified {directory} ({copy.repository} at {copy.commit})")
    echo(f"export {fetch_visgym.SOURCES_DIR_ENV_VAR}={target.resolve()}")


def write_verified(download: Callable[[Path], list[Path]], target: Path, env_var: str) -> None:
    """Run a verifying download into `target`; a mismatch or an unwritable target is one line, not a traceback."""
    try:
        written = download(target)
    except ValueError as exc:
        fail(str(exc).splitlines(), EXIT_FINDINGS)
    except OSError as exc:
        fail([f"fetch_crds: cannot write to {target}: {exc}"], EXIT_FINDINGS)
    for path in written:
        echo(f"verified {path}")
    echo(f"export {env_var}={target.resolve()}")
