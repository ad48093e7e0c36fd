"""`skyrl-hp`: the project's one command line (operator commands around `cdk deploy`, and the offline ones)."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from skyrl_hyperpod.errors import InputError, ProblemsError
from skyrl_hyperpod.ops import cost as cost_module
from skyrl_hyperpod.ops import fetch_outputs
from skyrl_hyperpod.ops import preflight as preflight_module
from skyrl_hyperpod.ops import review as review_module
from skyrl_hyperpod.ops import status as status_module
from skyrl_hyperpod.ops import teardown as teardown_module
from skyrl_hyperpod.ops.kube import KubeError
from skyrl_hyperpod.runtime import fail
from skyrl_hyperpod.stack_outputs import load_stack_outputs

from .cluster import COMMANDS as cluster_commands
from .cluster import connect
from .common import (
    CONFIG_HELP,
    EXIT_BAD_INPUT,
    EXIT_FINDINGS,
    aws_errors,
    cli_state,
    clients_from_context,
    config_option,
    echo,
    flush_header,
    json_option,
    load_project_config,
    load_project_config_with_source,
    print_json,
    profile_option,
    region_option,
    report_checks,
    resolve_region,
)
from .nodes import nodes
from .offline import COMMANDS as offline_commands
from .operate import COMMANDS as operate_commands
from .secrets import secrets_group
from .serving import COMMANDS as serving_commands


class OneLineErrors(click.Group):
    """Click's usage errors (unknown option, missing argument, bad value) as one line naming the command and
    where its help is, exit 2, instead of the usage block; the project's own errors (ProblemsError: a bad
    configuration, a missing input file) as their lines, exit 2, instead of a traceback."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as error:
            command = error.ctx.command_path if error.ctx else "skyrl-hp"
            click.echo(f"{command}: {error.format_message()} (see {command} --help)", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except click.Abort:
            click.echo("aborted", err=True)
            sys.exit(EXIT_FINDINGS)
        except click.ClickException as error:
            error.show()
            sys.exit(error.exit_code)
        except ProblemsError as error:
            # What a command did not catch itself (e.g. a missing CRD directory): its lines, not a traceback.
            fail(error.problems, EXIT_BAD_INPUT)
        sys.exit(0)

    # `skyrl-hp --help` lists the commands in the order of the run book (docs/runbook.md), one heading per stage,
    # instead of click's alphabetical list: a newcomer reads it top to bottom. A command not placed here (a new
    # one) still shows, under "Other commands". Click's documented hooks: Group.list_commands / format_commands.
    RUNBOOK_SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
        ("Set up", ("cost", "preflight", "fetch", "chart-check", "config")),
        ("Deploy", ("review", "outputs", "kubeconfig", "verify", "image")),
        ("Train", ("validate", "secrets", "train", "ray")),
        ("Watch", ("status", "nodes", "dashboard")),
        ("Serve", ("adapter", "serve")),
        ("Tear down", ("teardown",)),
    )

    def sections(self, ctx: click.Context) -> list[tuple[str, list[str]]]:
        """(heading, command names) in run-book order; unplaced commands last, alphabetically."""
        known = {name for name, command in self.commands.items() if not command.hidden}
        placed = [(title, [name for name in names if name in known]) for title, names in self.RUNBOOK_SECTIONS]
        rest = sorted(known - {name for _, names in placed for name in names})
        return [(title, names) for title, names in [*placed, ("Other commands", rest)] if names]

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for _, names in self.sections(ctx) for name in names]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(title, [(name, self.commands[name]) for name in names]) for title, names in self.sections(ctx)]
        longest = max((len(name) for _, pairs in rows for name, _ in pairs), default=0)
        width = formatter.width - 6 - longest
        for title, pairs in rows:
            with formatter.section(title):  # names padded alike: one column across the sections
                formatter.write_dl(
                    [(name.ljust(longest), command.get_short_help_str(width)) for name, command in pairs]
                )


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option(
    "--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None, help=CONFIG_HELP
)
@click.pass_context
def cli(ctx: click.Context, config_path: Path | None) -> None:
    """Operator tooling for the SkyRL-on-HyperPod platform.

    Every command reads the one project configuration: `skyrl-hp --config FILE COMMAND`, else
    $SKYRL_HP_CONFIG, else ./skyrl-hp.yaml, else the built-in defaults (the CDK and cdk8s apps read it the
    same way), and first prints, on stderr, which configuration, region and cluster it acts on.
    Commands that print data take --json. Exit codes: 0 fine, 1 findings (failed check, risky change,
    refused action, cluster or AWS error), 2 bad input.
    """
    cli_state(ctx).config_path = config_path


@cli.command()
@config_option
@region_option
@click.option(
    "--prices",
    "prices_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Price file to use instead of the shipped skyrl_hyperpod/prices/<region>.yaml (same layout).",
)
@click.option(
    "--hours",
    "run_hours",
    type=click.FloatRange(min=0, min_open=True),
    default=cost_module.DEFAULT_RUN_HOURS,
    show_default=True,
    help="Length of one training run in hours.",
)
@json_option
@click.option(
    "--live", is_flag=True, help="Read HyperPod instance prices from the AWS Price List API (needs credentials)."
)
@profile_option
@click.pass_context
def cost(
    ctx: click.Context,
    config_path: Path | None,
    region: str | None,
    prices_file: Path | None,
    run_hours: float,
    as_json: bool,
    live: bool,
    profile: str | None,
) -> None:
    """Hourly and monthly cost estimate of the configured platform, per component."""
    config = load_project_config(config_path, region=region)
    chosen = resolve_region(region, config)
    if chosen is None and prices_file is None:
        chosen = cost_module.DEFAULT_PRICE_REGION
        echo(f"note: no region set (--region, env.region, AWS_REGION); using {chosen} prices", err=True)
    try:
        file, book = cost_module.price_book_for(chosen, prices_file)
        if live:
            clients = clients_from_context(ctx, profile, cost_module.PRICE_LIST_API_REGION)
            with aws_errors("cost error: AWS Price List API"):
                book, missing = cost_module.apply_live_prices(
                    config, book, clients("pricing", cost_module.PRICE_LIST_API_REGION)
                )
            for instance_type in missing:
                echo(
                    f"note: the Price List API has no HyperPod price for {instance_type} in {book.region}; "
                    "keeping the file's figure",
                    err=True,
                )
        result = cost_module.estimate(config, book, price_file=cost_module.display_path(file), run_hours=run_hours)
    except cost_module.PriceError as error:
        fail(error.problems, EXIT_BAD_INPUT)
    echo(cost_module.render_json(result) if as_json else cost_module.render_table(result))


@cli.command()
@config_option
@region_option
@profile_option
@click.option(
    "--qualifier",
    default=preflight_module.DEFAULT_BOOTSTRAP_QUALIFIER,
    show_default=True,
    help="CDK bootstrap qualifier.",
)
@json_option
@click.pass_context
def preflight(
    ctx: click.Context,
    config_path: Path | None,
    region: str | None,
    profile: str | None,
    qualifier: str,
    as_json: bool,
) -> None:
    """Read-only checks before a deploy: first what the configuration alone shows, also without credentials (region,
    HyperPod there, the AZ id's region, a route to the API endpoint, the example's placeholders), then through AWS
    (credentials, cluster access, AZ offerings, quotas, CDK bootstrap, name collisions)."""
    config = load_project_config(config_path, region=region)
    clients = clients_from_context(ctx, profile, region or config.env.region)
    chosen = resolve_region(region, config, clients.session.region_name)
    results = preflight_module.run_preflight(config, clients, chosen, qualifier)
    report_checks(results, as_json)


@cli.command()
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("head", type=click.Path(path_type=Path))
@config_option
@click.option(
    "--fail-on-stateful-replacement",
    is_flag=True,
    help="Exit 1 when a stateful resource (FSx, S3 bucket, ECR repository, the HyperPod or EKS cluster, or "
    "anything retained) would be replaced or removed, directly or through another stack.",
)
@click.option(
    "--schema-region",
    default=None,
    help=f"Region whose resource schemas to use (default: env.region, else {review_module.DEFAULT_SCHEMA_REGION}).",
)
@click.option(
    "--schema-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Extra CloudFormation resource schema JSON files that override cfn-lint's bundled ones.",
)
@click.option(
    "--service-spec",
    type=click.Path(dir_okay=False, path_type=Path),
    default=review_module.DEFAULT_SERVICE_SPEC,
    show_default="node_modules/aws-cdk/db.json.gz",
    help="CDK service spec database (the one `cdk diff` reads).",
)
@click.option(
    "--output",
    "output_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the Markdown to this file instead of stdout.",
)
def review(
    base: Path,
    head: Path,
    config_path: Path | None,
    fail_on_stateful_replacement: bool,
    schema_region: str | None,
    schema_dir: Path | None,
    service_spec: Path,
    output_file: Path | None,
) -> None:
    """Compare two synthesized outputs (cdk.out, dist/, cost.json) offline and print Markdown for a PR comment.

    BASE and HEAD are each a cloud assembly directory or a directory holding cdk.out/, dist/ and optionally
    cost.json (`skyrl-hp cost --json` of that side). Nothing is synthesized.
    """
    config = load_project_config(config_path)
    try:
        facts = review_module.ReplacementFacts(
            schema_region or config.env.region or review_module.DEFAULT_SCHEMA_REGION, schema_dir, service_spec
        )
        # GPUs per instance type when HEAD has no templates to read the HyperPod groups from.
        result = review_module.review(base, head, facts, config.derived.gpus_by_instance_type)
    except review_module.ReviewError as error:
        fail(error.problems, EXIT_BAD_INPUT)
    markdown = review_module.render_markdown(result)
    if output_file:
        output_file.write_text(markdown, encoding="utf-8")
    else:
        echo(markdown, nl=False)
    stateful = result.stateful_replacements
    if fail_on_stateful_replacement and stateful:
        fail(
            [
                f"review: {len(stateful)} stateful resource(s) replaced or removed: "
                + ", ".join(f"{c.stack}/{c.logical_id}" for c in stateful)
            ],
            EXIT_FINDINGS,
        )


@cli.command()
@config_option
@region_option
@profile_option
@click.option(
    "--file",
    "outputs_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=fetch_outputs.DEFAULT_OUTPUTS_FILE,
    show_default=True,
    help="Outputs file to write (or check).",
)
@click.option("--check", is_flag=True, help="Only validate an existing outputs file (offline) and print its values.")
@json_option
@click.pass_context
def outputs(
    ctx: click.Context,
    config_path: Path | None,
    region: str | None,
    profile: str | None,
    outputs_file: Path,
    check: bool,
    as_json: bool,
) -> None:
    """Write the stack outputs file the charts read (`cdk deploy --outputs-file` format), from CloudFormation."""
    config = load_project_config(config_path, region=region)
    if check:
        try:
            values = load_stack_outputs(outputs_file, config)
        except InputError as error:
            fail(error.problems, EXIT_BAD_INPUT)
        if as_json:
            print_json(values.model_dump())
        else:
            echo("\n".join(fetch_outputs.describe(values)))
        return
    clients = clients_from_context(ctx, profile, region or config.env.region)
    chosen = resolve_region(region, config, clients.session.region_name)
    if not chosen:
        fail(
            ["outputs error: no region: set env.region in the config, pass --region or export AWS_REGION"],
            EXIT_BAD_INPUT,
        )
    with aws_errors("outputs error: CloudFormation"):
        content, warnings = fetch_outputs.fetch_stack_outputs(clients("cloudformation", chosen), config)
    for warning in warnings:
        echo(warning, err=True)
    try:
        values = fetch_outputs.write_outputs_file(content, outputs_file, config)
    except fetch_outputs.OutputsError as error:
        fail(error.problems, EXIT_FINDINGS)
    count = sum(len(v) for v in content.values())
    if as_json:
        print_json({"file": str(outputs_file), "outputs": values.model_dump()})
        return
    echo(f"wrote {outputs_file}: {count} outputs from {len(content)} stack(s) in {values.region}")


@cli.command()
@config_option
@region_option
@profile_option
@click.option("--no-jobs", is_flag=True, help="Skip the RayJobs (no Kubernetes access needed).")
@json_option
@click.pass_context
def status(
    ctx: click.Context,
    config_path: Path | None,
    region: str | None,
    profile: str | None,
    no_jobs: bool,
    as_json: bool,
) -> None:
    """Live HyperPod node counts per instance group against the configured targets, and each RayJob's retries
    and newest checkpoint (read-only)."""
    config = load_project_config(config_path, region=region)
    clients = clients_from_context(ctx, profile, region or config.env.region)
    chosen = resolve_region(region, config, clients.session.region_name)
    if not chosen:
        fail(
            ["status error: no region: set env.region in the config, pass --region or export AWS_REGION"],
            EXIT_BAD_INPUT,
        )
    try:
        with aws_errors("status error: SageMaker"):
            report = status_module.fetch_status(config, clients("sagemaker", chosen))
    except status_module.ClusterNotFound as missing:
        fail(
            [f"status: HyperPod cluster {missing} does not exist in {chosen} (not deployed yet, or deleted)"],
            EXIT_FINDINGS,
        )
    if not as_json:  # the nodes first: they are worth reading when the Kubernetes part fails
        echo("\n".join(status_module.render(report)))
    jobs: list[status_module.RayJobStatus] = []
    if not no_jobs:
        try:
            jobs = status_module.fetch_job_statuses(config, connect(ctx, config, chosen, profile))
        except KubeError as error:  # API unreachable or forbidden: one line, not a traceback
            fail([f"status error: Kubernetes: {error} (pass --no-jobs to skip the RayJobs)"], EXIT_FINDINGS)
    job_problems = [problem for job in jobs for problem in job.problems()]
    if as_json:
        print_json({**status_module.as_dict(report), "rayjobs": [dataclasses.asdict(job) for job in jobs]})
    else:
        echo("RayJobs: not read (--no-jobs)" if no_jobs else "\n".join(status_module.render_jobs(jobs)))
    if report.problems() or job_problems:
        sys.exit(EXIT_FINDINGS)


@cli.command()
@config_option
@click.option("--plan", "plan_only", is_flag=True, help="Print the ordered teardown steps (runs nothing).")
@click.option(
    "--execute",
    is_flag=True,
    help="Carry the plan out for this configuration's stacks and region, after you type the name prefix.",
)
@region_option
@profile_option
@click.option("--timeout", type=click.FloatRange(min=1), default=7200.0, show_default=True,
              help="Seconds each wait (namespace, each round of stacks) may take.")  # fmt: skip
@json_option
@click.pass_context
def teardown(
    ctx: click.Context,
    config_path: Path | None,
    plan_only: bool,
    execute: bool,
    region: str | None,
    profile: str | None,
    timeout: float,
    as_json: bool,
) -> None:
    """Tear the platform down without losing data: --plan prints the steps (offline), --execute runs them."""
    if plan_only == execute:
        fail(
            ["teardown: pass --plan (print the steps) or --execute (run them, after a typed confirmation)"],
            EXIT_BAD_INPUT,
        )
    config, source = load_project_config_with_source(config_path, region=region)
    chosen = resolve_region(region, config)
    remaining = teardown_module.leftovers(config)
    if plan_only:
        steps = teardown_module.plan(config, str(source.path) if source.path else None, chosen)
        if as_json:
            print_json(
                {
                    "steps": [dataclasses.asdict(s) for s in steps],
                    "leftovers": [dataclasses.asdict(r) for r in remaining],
                }
            )
            return
        echo(teardown_module.render_plan(steps, remaining))
        return
    _teardown_execute(ctx, config, region, profile, timeout)
    echo("What remains, and how to remove it when you are sure:")
    for item in remaining:
        echo(f"- {item.what}: {item.removal}")


def _teardown_execute(ctx: click.Context, config: Any, region: str | None, profile: str | None, timeout: float) -> None:
    from skyrl_hyperpod.ops import teardown_run

    from .cluster import cluster_errors, connect, poll_interval

    if config.studio.enabled:
        fail(
            [
                "teardown: studio.enabled: remove Studio's apps, spaces and user profiles first (skyrl-hp teardown --plan, "
                "steps 4 to 6), then set studio.enabled: false and run --execute"
            ],  # fmt: skip
            EXIT_BAD_INPUT,
        )
    clients = clients_from_context(ctx, profile, region or config.env.region)
    chosen = resolve_region(region, config, clients.session.region_name)
    if not chosen:
        fail(
            ["teardown error: no region: set env.region in the config, pass --region or export AWS_REGION"],
            EXIT_BAD_INPUT,
        )
    flush_header()
    prefix = config.name_prefix
    typed = click.prompt(
        f"This deletes the workloads and the stacks {prefix}-{{{','.join(preflight_module.STACK_DEPENDENCIES)}}} "
        f"that exist in {chosen} (FSx keeps a final backup). "
        f"Type the name prefix {prefix!r} to go on",
        default="",
        show_default=False,
        err=True,
    )
    if typed.strip() != prefix:
        fail([f"teardown: you typed {typed.strip()!r}, not {prefix!r}: nothing was deleted"], EXIT_FINDINGS)
    cloudformation = clients("cloudformation", chosen)
    poll = poll_interval(ctx)
    with aws_errors("teardown error: CloudFormation"):
        stacks = preflight_module.deployed_project_stacks(cloudformation, config)
    studio = config.names.stack("studio")
    if studio in stacks:
        fail(
            [f"teardown: stack {studio} is still deployed: remove Studio's apps, spaces and user profiles and that stack "
             "first (skyrl-hp teardown --plan with studio.enabled: true); nothing was deleted"],
            EXIT_FINDINGS,
        )  # fmt: skip
    fsx_id = teardown_run.fsx_file_system_id(stacks, config)
    if fsx_id:
        echo(
            f"FSx file system {fsx_id}: its final backup: aws fsx describe-backups --filters Name=file-system-id,Values={fsx_id}"
        )
    fsx = clients("fsx", chosen)
    with aws_errors("teardown error: FSx"):
        replaced = teardown_run.replaced_file_systems(fsx, config, fsx_id)
    if replaced:
        fail(
            [f"teardown: FSx file system(s) {', '.join(replaced)} were replaced by an update and kept with their data: "
             "delete them first (skyrl-hp teardown --plan, 'Delete the FSx file systems that updates replaced'); "
             "nothing was deleted"],
            EXIT_FINDINGS,
        )  # fmt: skip
    try:
        with cluster_errors():
            teardown_run.delete_workloads(
                connect(ctx, config, chosen, profile), config, echo, poll=poll, timeout=timeout
            )
        if fsx_id:
            with aws_errors("teardown error: FSx"):
                teardown_run.full_backup(fsx, fsx_id, echo, poll=poll, timeout=timeout)
        with aws_errors("teardown error: CloudFormation"):
            deleted = teardown_run.delete_stacks(cloudformation, config, echo, poll=poll, timeout=timeout)
    except teardown_run.TeardownError as error:
        fail(error.problems, EXIT_FINDINGS)
    echo(f"deleted {len(deleted)} stack(s) in {chosen}")


for _command in [*cluster_commands, *serving_commands, *operate_commands, *offline_commands, nodes, secrets_group]:
    cli.add_command(_command)


def main() -> None:
    cli(prog_name="skyrl-hp")
