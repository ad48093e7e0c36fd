"""`skyrl-hp secrets set NAME KEY`: one key of a Kubernetes Secret for the training job's credentials.

The value is read from standard input or from an environment variable, never from the command line, where the
shell's history and every process listing (`ps`, /proc/PID/cmdline) would keep it. Nothing prints it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from skyrl_hyperpod.ops import secrets as secrets_module
from skyrl_hyperpod.plumbing.runtime import fail

from .common import (
    EXIT_BAD_INPUT,
    EXIT_FINDINGS,
    cluster_errors,
    config_option,
    connect,
    echo,
    load_project_config,
    profile_option,
    region_option,
)


def _strip_newline(value: bytes) -> bytes:
    """`echo "$TOKEN" |` and a file's last line end with one newline that is not part of the value."""
    for ending in (b"\r\n", b"\n"):
        if value.endswith(ending):
            return value[: -len(ending)]
    return value


def read_value(from_env: str | None) -> bytes:
    if from_env is not None:
        if from_env not in os.environ:
            fail([f"--from-env {from_env}: the environment variable {from_env} is not set"], EXIT_BAD_INPUT)
        return os.environ[from_env].encode("utf-8", "surrogateescape")
    if sys.stdin.isatty():
        return str(click.prompt("value (not echoed)", hide_input=True, err=True)).encode("utf-8")
    # A few bytes beyond the limit are enough to know the value is too large.
    return _strip_newline(sys.stdin.buffer.read(secrets_module.MAX_SECRET_BYTES + 3))


@click.group("secrets")
def secrets_group() -> None:
    """Kubernetes Secrets holding the training job's credentials (training.jobs.secret_env)."""


@secrets_group.command("set")
@click.argument("name")
@click.argument("key")
@click.option(
    "--from-env",
    "from_env",
    metavar="VAR",
    default=None,
    help="Read the value from environment variable VAR instead of standard input.",
)
@config_option
@region_option
@profile_option
@click.pass_context
def set_command(
    ctx: click.Context,
    name: str,
    key: str,
    from_env: str | None,
    config_path: Path | None,
    region: str | None,
    profile: str | None,
) -> None:
    """Create or update key KEY of Secret NAME in the workload namespace.

    The value comes from standard input (typed without echo on a terminal, else everything piped in, without its
    final newline) or from --from-env VAR, never from the command line. The Secret's other keys stay; a Secret
    that skyrl-hp did not create is refused. Name it in the configuration, e.g. training.jobs.secret_env:
    {WANDB_API_KEY: {secret: NAME, key: KEY}}: the training head and workers read it when their containers start
    (a running pod keeps the value it started with)."""
    config = load_project_config(config_path, region=region)
    checks = (secrets_module.name_problem(name), secrets_module.key_problem(key))
    for problem in (*checks, secrets_module.reserved_problem(config, name)):
        if problem:
            fail([f"secrets error: {problem}"], EXIT_BAD_INPUT)
    value = read_value(from_env)
    if not value:
        fail(["secrets error: the value is empty (pipe it on standard input or use --from-env VAR)"], EXIT_BAD_INPUT)
    with cluster_errors():
        cluster = connect(ctx, config, region, profile)
        try:
            written = secrets_module.set_key(cluster, config, name, key, value)
        except secrets_module.SecretError as error:
            fail([f"secrets error: {error}"], EXIT_FINDINGS)
    if written.created_namespace:
        echo(f"created namespace {written.namespace} (train start applies the rest of 01-platform)")
    verb = "created Secret" if written.created_secret else "updated Secret"
    echo(
        f"{verb} {written.namespace}/{written.name}: key {written.key} set ({written.value_bytes} bytes); "
        f"keys: {', '.join(written.keys)}"
    )
    readers = secrets_module.references(config, name, key)
    if readers:
        echo(f"training.jobs.secret_env reads it as {', '.join(readers)}")
        if not written.created_secret:
            echo("note: Ray pods already running keep the value they started with", err=True)
    else:
        echo(
            f"note: no training.jobs.secret_env entry reads it yet: add {{ENV_NAME: {{secret: {name}, key: {key}}}}}",
            err=True,
        )


@secrets_group.command("check")
@config_option
@region_option
@profile_option
@click.pass_context
def check_command(ctx: click.Context, config_path: Path | None, region: str | None, profile: str | None) -> None:
    """Check that every Secret key training.jobs.secret_env names exists in the workload namespace (exit 1 if not).

    A Ray pod whose Secret or key is missing does not start until it exists. Prints names and keys only."""
    config = load_project_config(config_path, region=region)
    refs = config.training.jobs.secret_env_refs
    if not refs:
        echo("training.jobs.secret_env names no Secret: nothing to check")
        return
    with cluster_errors():
        missing = dict(secrets_module.missing_references(connect(ctx, config, region, profile), config))
    for env, name, key in refs:
        if env in missing:
            echo(f"FAIL {env}: {missing[env]} (skyrl-hp secrets set {name} {key})")
        else:
            echo(f"ok   {env}: Secret {name}, key {key}")
    if missing:
        fail(
            [f"secrets error: {len(missing)} of {len(refs)} secret key(s) missing: the Ray pods would not start"],
            EXIT_FINDINGS,
        )
