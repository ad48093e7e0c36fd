"""`skyrl-hp config reference`: the configuration's own documentation (docs/configuration.md), generated from
the typed configuration (skyrl_hyperpod/config/reference.py); offline."""

from __future__ import annotations

import click

from skyrl_hyperpod.config.reference import render as render_reference

from .common import echo


@click.group("config")
def config_group() -> None:
    """The configuration's own documentation."""


@config_group.command("reference")
def config_reference() -> None:
    """Print the configuration reference (docs/configuration.md) generated from the typed configuration."""
    echo(render_reference(), nl=False)
