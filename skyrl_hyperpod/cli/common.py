"""What the subcommands share, and only that: the configuration (one --config, $SKYRL_HP_CONFIG, ./skyrl-hp.yaml),
the first line naming configuration, region and cluster, one-line errors, exit codes, region resolution, boto3
clients; the option decorators (--config, --region, --profile, --json, --dist, --timeout, --experiment); the
printing of checks and findings; and, for the commands that act on the running cluster, the connection to it
(`connect`), --wait's polling, port-forwards, the refusal of manifests of another configuration and the
experiment picker.

The cluster is reached through the official `kubernetes` client (skyrl_hyperpod/ops/kube.py), AWS through
boto3; nothing shells out to kubectl. Tests hand the commands an ApiClient pointed at a local fake API
server through the CLI state (CliState.kube).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from skyrl_hyperpod.config import CONFIG_ENV_VAR, ConfigError, ProjectConfig
from skyrl_hyperpod.config.loader import DEFAULT_CONFIG_FILE, ConfigSource, load_config_with_source
from skyrl_hyperpod.ops import cluster_workloads, ray_api
from skyrl_hyperpod.ops.kube import Cluster, KubeError, api_client_for, describe_eks_cluster, eks_token
from skyrl_hyperpod.ops.portforward import LocalForward, pod_connector
from skyrl_hyperpod.plumbing.errors import one_line
from skyrl_hyperpod.plumbing.runtime import fail
from skyrl_hyperpod.values.synthesized_manifests import chart_file, outputs_note, stamp_problems

# Exit codes: 0 = fine, 1 = the check found a problem, 2 = bad input (config, files, options). A Python traceback
# exits 1 too, so a verdict that a machine acts on has a code of its own: `review --fail-on-stateful-replacement`
# exits EXIT_STATEFUL_CHANGE, which nothing else exits with (the review gate's override applies to it alone).
EXIT_FINDINGS = 1
EXIT_BAD_INPUT = 2
EXIT_STATEFUL_CHANGE = 3


CONFIG_HELP = (
    f"Project configuration YAML (default: ${CONFIG_ENV_VAR}, else ./{DEFAULT_CONFIG_FILE} when it exists, "
    "else the built-in defaults)."
)


def config_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--config FILE` after a sub-command too (hidden): `skyrl-hp --config FILE CMD` is the documented place,
    and both mean the same everywhere."""
    return click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        hidden=True,
        help=CONFIG_HELP,
    )(command)


def json_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout instead of text.")(command)


def print_json(data: Any) -> None:
    echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def report_checks(results: Sequence[Any], as_json: bool) -> None:
    """Print check results (preflight, verify: each with `status` and `line()`) as lines or JSON; exit 1 on a FAIL."""
    failed = sum(1 for result in results if result.status == "FAIL")
    if as_json:
        print_json({"checks": [dataclasses.asdict(result) for result in results], "failed": failed})
    else:
        for result in results:
            echo(result.line())
        echo(f"{failed} check(s) failed" if failed else "all checks passed")
    if failed:
        sys.exit(EXIT_FINDINGS)


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


class CliState:
    """What the group hands every command (click's context object): the group-level --config, the AWS client
    factory and the Kubernetes client factory. Tests pass one with stubbed clients."""

    def __init__(
        self,
        aws: AwsClients | None = None,
        kube: Any = None,
        config_path: Path | None = None,
        poll_seconds: float | None = None,
    ):
        self.aws = aws or AwsClients()
        self.kube = kube  # None: the EKS cluster's client (`connect`); tests: an ApiClient of a fake server
        self.poll_seconds = poll_seconds  # None: the commands' own interval
        self.clock: Any = None  # what --wait reads the time with and sleeps with (ops Clock); None: real time
        # (namespace, pod, port) -> a connected socket; None: the Kubernetes port-forward (ops/portforward.py)
        self.connector: Any = None
        self.config_path = config_path
        self.announced = False
        self.pending_header: str | None = None


def cli_state(ctx: click.Context | None = None) -> CliState:
    ctx = ctx or click.get_current_context()
    root = ctx.find_root()
    if not isinstance(root.obj, CliState):
        root.obj = CliState(aws=root.obj if isinstance(root.obj, AwsClients) else None)
    return root.obj


def load_project_config(config_path: Path | None, *, region: str | None = None, announce: bool = True) -> ProjectConfig:
    """The typed configuration, or one line per problem on stderr and exit 2. The first line on stderr names
    the configuration file, the region and the cluster the command acts on."""
    return load_project_config_with_source(config_path, region=region, announce=announce)[0]


def load_project_config_with_source(
    config_path: Path | None, *, region: str | None = None, announce: bool = True
) -> tuple[ProjectConfig, ConfigSource]:
    state = cli_state()
    if config_path is not None and state.config_path is not None and config_path != state.config_path:
        fail(
            [f"config error: two configurations given: --config {state.config_path} and --config {config_path}"],
            EXIT_BAD_INPUT,
        )
    try:
        config, source = load_config_with_source(config_path or state.config_path)
    except ConfigError as error:
        fail(error.problems, EXIT_BAD_INPUT)
    if announce and not state.announced:
        state.announced = True
        state.pending_header = header_line(config, source, resolve_region(region, config))
    return config, source


def flush_header() -> None:
    """Print the pending first line (configuration, region, cluster) on stderr, once. `echo` calls it before
    any output; a command that fails before printing anything prints only its one error line."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return
    state = cli_state(ctx)
    if state.pending_header is not None:
        click.echo(state.pending_header, err=True)
        state.pending_header = None


def echo(message: Any = None, *, err: bool = False, nl: bool = True) -> None:
    """click.echo, after the command's first line."""
    flush_header()
    click.echo(message, err=err, nl=nl)


def header_line(config: ProjectConfig, source: ConfigSource, region: str | None) -> str:
    return (
        f"skyrl-hp: config {source.describe()} | region {region or 'not set'} | "
        f"cluster {config.names.eks_cluster} (HyperPod {config.names.hyperpod_cluster})"
    )


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
    base = cli_state(ctx).aws
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


# --- the running cluster ---------------------------------------------------------------------------------------

DEFAULT_DIST = Path("dist")
DEFAULT_WAIT_SECONDS = 1800.0
# The longest wait any command takes: 30 days (a bound, so `inf` is refused like any other non-number).
MAX_WAIT_SECONDS = 30 * 86_400.0


class FiniteFloatRange(click.FloatRange):
    """click's FloatRange, refusing inf and nan: click compares them with the bounds, and nan passes every
    comparison, so `--timeout nan` would be taken."""

    name = "finite float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


POLL_SECONDS = 10.0


def dist_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--dist",
        "dist",
        type=click.Path(file_okay=False, path_type=Path),
        default=DEFAULT_DIST,
        show_default=True,
        help="Directory of the synthesized manifests (make synth-k8s).",
    )(command)


def wait_timeout_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--timeout",
        type=FiniteFloatRange(min=1, max=MAX_WAIT_SECONDS),
        default=DEFAULT_WAIT_SECONDS,
        show_default=True,
        help="Seconds --wait waits.",
    )(command)


def experiment_option(
    required: bool = False, without: str = "every experiment", multiple: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--experiment; `without` says what the command does without it; `multiple`: repeatable (a tuple of names)."""
    return click.option(
        "--experiment",
        default=None,
        required=required,
        multiple=multiple,
        help="Experiment name (training.experiments[].name)"
        + ("; repeat it for several" if multiple else "")
        + ("." if required else f"; default: {without}."),
    )


def all_experiments_option(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--all (the parameter `all_experiments`): every experiment of the configuration, in its configured order."""
    return click.option("--all", "all_experiments", is_flag=True, help=help)


def refuse_all_with_experiment(config: ProjectConfig, experiment: str | Sequence[str] | None, what: str) -> None:
    """Exit 2 when --all comes with --experiment; `what` says what --all does ('starts every experiment')."""
    if experiment not in (None, ()):
        every = ", ".join(run.experiment.name for run in config.derived.runs)
        fail([f"--all {what} ({every}); it does not go with --experiment"], EXIT_BAD_INPUT)


def cluster_region(ctx: click.Context, region: str | None, config: ProjectConfig, profile: str | None) -> str:
    """The region of a command that acts on the cluster: as resolve_region, else exit 2 with one line."""
    clients = clients_from_context(ctx, profile, region or config.env.region)
    chosen = resolve_region(region, config, clients.session.region_name)
    if not chosen:
        fail(
            ["cluster error: no region: set env.region in the config, pass --region or export AWS_REGION"],
            EXIT_BAD_INPUT,
        )
    return chosen


def connect(ctx: click.Context, config: ProjectConfig, region: str | None, profile: str | None) -> Cluster:
    """The project's EKS cluster: endpoint and CA from eks:DescribeCluster, a token as `aws eks get-token` makes."""
    state = cli_state(ctx)
    if state.kube is not None:
        return Cluster(state.kube)
    chosen = cluster_region(ctx, region, config, profile)
    clients = clients_from_context(ctx, profile, chosen)
    name = config.names.eks_cluster
    with aws_errors(f"cluster error: EKS cluster {name} in {chosen}"):
        endpoint = describe_eks_cluster(clients("eks", chosen), name)
        api_client = api_client_for(endpoint, lambda: eks_token(clients.session, name, chosen))
    return Cluster(api_client)


def poll_interval(ctx: click.Context) -> float:
    chosen = cli_state(ctx).poll_seconds
    return POLL_SECONDS if chosen is None else chosen


def wait_until(ctx: click.Context, check: Callable[[], tuple[bool, str]], *, timeout: float, what: str) -> None:
    """Every --wait: poll `check`, print its state when it changes and at least every 30 s with the elapsed time,
    give up after --timeout seconds naming the last state."""
    cluster_workloads.wait_for(
        check, timeout=timeout, interval=poll_interval(ctx), echo=echo, what=what, clock=cli_state(ctx).clock
    )


def port_connector(ctx: click.Context, cluster: Cluster, namespace: str, pod: str, port: int) -> Any:
    """Opens one stream to pod:port per call: the Kubernetes port-forward, or what a test put in the CLI state."""
    override = cli_state(ctx).connector
    if override is not None:
        return lambda: override(namespace, pod, port)
    return pod_connector(cluster, namespace, pod, port)


def head_forward(ctx: click.Context, cluster: Cluster, config: ProjectConfig) -> tuple[LocalForward, str | None]:
    """A local port to the training head's dashboard/job API, and the cluster's token."""
    namespace, name = config.workloads.namespace, config.training.cluster.raycluster_name
    head = ray_api.head_pod(cluster, namespace, name)
    token = ray_api.cluster_token(cluster, namespace, name)
    return LocalForward(port_connector(ctx, cluster, namespace, head, ray_api.DASHBOARD_PORT)), token


@contextmanager
def cluster_errors() -> Iterator[None]:
    """A failed cluster call or a refused manifest: one line on stderr, exit 1."""
    try:
        yield
    except KubeError as error:
        fail([f"cluster error: {error}"], EXIT_FINDINGS)
    except cluster_workloads.WorkloadError as error:
        fail(error.problems, EXIT_FINDINGS)


def refuse_other_configuration(
    dist: Path, chart_ids: list[str], config: ProjectConfig, source: ConfigSource, *, required: bool = True
) -> None:
    """Offline, before any AWS call: exit 2 with one line when a chart file in `dist` was synthesized from another
    configuration than the command's (or, when `required`, does not say which). A chart file that does not exist
    is left to the command (it says to synthesize). A note when the platform was deployed from another one."""
    files = [dist / chart_file(chart_id) for chart_id in chart_ids]
    files = [file for file in files if file.is_file()]
    problems = stamp_problems(files, config, source, prefix="manifest error", required=required)
    if problems:
        fail(problems, EXIT_BAD_INPUT)
    note = outputs_note(files)
    if note:
        echo(note, err=True)


def pick_experiments(config: ProjectConfig, experiment: str | Sequence[str] | None) -> list[Any]:
    """The runs of --experiment, one name or several (every run without it), in the order named; exit 2 naming the
    experiments when a name is none of them."""
    runs = list(config.derived.runs)
    if experiment is None or experiment == ():
        return runs
    wanted = [experiment] if isinstance(experiment, str) else list(dict.fromkeys(experiment))
    by_name = {run.experiment.name: run for run in runs}
    for name in wanted:
        if name not in by_name:
            fail(
                [f"--experiment {name!r}: not an experiment of this configuration ({', '.join(by_name)})"],
                EXIT_BAD_INPUT,
            )
    return [by_name[name] for name in wanted]
