"""`skyrl-hp review`: compare two synthesized outputs offline and print Markdown for a PR comment
(skyrl_hyperpod/ops/review/)."""

from __future__ import annotations

from pathlib import Path

import click

from skyrl_hyperpod.ops import review as review_module
from skyrl_hyperpod.plumbing.runtime import fail

from .common import EXIT_BAD_INPUT, EXIT_STATEFUL_CHANGE, config_option, echo, load_project_config


@click.command()
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("head", type=click.Path(path_type=Path))
@config_option
@click.option(
    "--fail-on-stateful-replacement",
    is_flag=True,
    help=f"Exit {EXIT_STATEFUL_CHANGE} when a stateful resource (FSx, S3 bucket, ECR repository, the HyperPod or EKS "
    "cluster, or anything retained) would be replaced or removed, directly or through another stack; the line on "
    "stderr ends with the acceptance key of that set of resources. Other exits: 0 none, 2 unreadable input, 1 a crash.",
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
                + f" (acceptance key {result.stateful_key})"
            ],
            EXIT_STATEFUL_CHANGE,
        )
