"""`skyrl-hp image lock [--check]`: resolve the movable upstream names the configuration pulls (images by tag,
SkyRL's release tag, the SFT checkpoint's repository) and record them in upstream-lock.yaml, or report where the
file no longer matches the upstreams (skyrl_hyperpod/ops/upstream_resolve.py). Needs registry access."""

from __future__ import annotations

from pathlib import Path

import click

from skyrl_hyperpod.config import ConfigError
from skyrl_hyperpod.config.loader import read_lock
from skyrl_hyperpod.config.upstream_lock import LOCK_FILE, merged, render_lock, write_lock
from skyrl_hyperpod.ops.upstream_resolve import drift, pins_to_lock, resolve_pins
from skyrl_hyperpod.plumbing.runtime import fail

from .common import EXIT_BAD_INPUT, EXIT_FINDINGS, config_option, echo, load_project_config


@click.command("lock")
@config_option
@click.option("--check", is_flag=True, help="Resolve again and report drift; write nothing (exit 1 on any).")
@click.option(
    "--lock-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=LOCK_FILE,
    show_default="upstream-lock.yaml of the checkout",
    help="The lock file to write or check.",
)
def lock(config_path: Path | None, check: bool, lock_file: Path) -> None:
    """Resolve each movable upstream name to its digest or commit and record it in the lock file (or --check it).

    A name that cannot be resolved keeps its earlier value, or null, and makes the command exit 1."""
    config = load_project_config(config_path)
    try:
        current = read_lock(lock_file)
    except ConfigError as error:
        fail(error.problems, EXIT_BAD_INPUT)
    resolved, problems = resolve_pins(pins_to_lock(config, current))
    if check:
        findings = drift(current, resolved)
        for line in [*problems, *findings]:
            echo(line)
        if problems or findings:
            raise SystemExit(EXIT_FINDINGS)
        echo(f"{lock_file.name}: {len(resolved)} entries match their upstreams")
        return
    updated = merged(current, resolved)
    if render_lock(updated) != (lock_file.read_text(encoding="utf-8") if lock_file.is_file() else None):
        write_lock(updated, lock_file)
    unresolved = sum(value is None for value in updated.entries().values())
    echo(f"{lock_file}: {len(updated.entries())} entries, {unresolved} unresolved")
    if problems:
        fail(problems, EXIT_FINDINGS)
