"""What every subcommand shares: the --config option, one-line errors, region resolution, boto3 clients."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from skyrl_hyperpod.config import CONFIG_ENV_VAR, ConfigError, ProjectConfig, load_config
from skyrl_hyperpod.errors import one_line
from skyrl_hyperpod.runtime import fail

# Exit codes: 0 = fine, 1 = the check/review found a problem, 2 = bad input (config, files, options).
EXIT_FINDINGS = 1
EXIT_BAD_INPUT = 2


def config_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--config FILE`; without it the configuration comes from $SKYRL_HP_CONFIG, else the defaults."""
    return click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help=f"Project configuration YAML (default: ${CONFIG_ENV_VAR}, else the built-in defaults).",
    )(command)


def region_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--region",
        default=None,
        help="AWS region (default: env.region from the config, else AWS_REGION / the AWS profile's region).",
    )(command)


def profile_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--profile", default=None, help="AWS named profile (default: the usual boto3 credential chain)."
    )(command)


def load_project_config(config_path: Path | None) -> ProjectConfig:
    """The typed configuration, or one line per problem on stderr and exit 2."""
    try:
        return load_config(config_path)
    except ConfigError as error:
        fail(error.problems, EXIT_BAD_INPUT)


def resolve_region(explicit: str | None, config: ProjectConfig, session_region: str | None = None) -> str | None:
    """--region, then the configuration's env.region, then the environment / profile region."""
    return (
        explicit
        or config.env.region
        or session_region
        or os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION")
        or None
    )


class AwsClients:
    """Creates (and caches) boto3 clients from one session.

    Tests pass an instance with `overrides` (botocore Stubber-wrapped clients) through click's context
    object; a service without an override gets a real client.
    """

    def __init__(self, session: Any = None, overrides: dict[str, Any] | None = None):
        self._session = session
        self._overrides = dict(overrides or {})
        self._cache: dict[tuple[str, str | None], Any] = {}

    def with_session(self, profile: str | None, region: str | None) -> AwsClients:
        return AwsClients(new_session(profile, region), self._overrides)

    @property
    def session(self) -> Any:
        if self._session is None:
            import boto3

            self._session = boto3.Session()
        return self._session

    def __call__(self, service: str, region: str | None = None) -> Any:
        if service in self._overrides:
            return self._overrides[service]
        key = (service, region)
        if key not in self._cache:
            self._cache[key] = (
                self.session.client(service, region_name=region) if region else self.session.client(service)
            )
        return self._cache[key]


def new_session(profile: str | None, region: str | None) -> Any:
    """A fresh boto3 session (fresh credential resolution)."""
    import boto3

    return boto3.Session(profile_name=profile, region_name=region)


def clients_from_context(ctx: click.Context, profile: str | None, region: str | None) -> AwsClients:
    base = ctx.obj if isinstance(ctx.obj, AwsClients) else AwsClients()
    try:
        return base.with_session(profile, region)
    except Exception as error:  # botocore.exceptions.ProfileNotFound and friends
        fail([f"aws error: {one_line(error)}"], EXIT_BAD_INPUT)
        raise


@contextmanager
def aws_errors(prefix: str, code: int = EXIT_FINDINGS) -> Iterator[None]:
    """Turn any botocore error inside the block into one line on stderr and a non-zero exit."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except (BotoCoreError, ClientError) as error:
        fail([f"{prefix}: {one_line(error)}"], code)
