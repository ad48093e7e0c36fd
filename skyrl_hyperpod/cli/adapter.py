"""`skyrl-hp adapter publish`: the Job that copies one experiment's LoRA adapter at one step to the S3 prefix the
RayService loads adapters from (built by skyrl_hyperpod/values/publish_job.py, created and followed by
skyrl_hyperpod/ops/adapter_publish.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.config.serving import publication
from skyrl_hyperpod.config.workloads import OUTPUTS_FILE_ENV_VAR
from skyrl_hyperpod.ops import adapter_publish as publish_module
from skyrl_hyperpod.ops.kube import managed_labels
from skyrl_hyperpod.plumbing.errors import InputError
from skyrl_hyperpod.plumbing.runtime import fail
from skyrl_hyperpod.values.publish_job import publish_job
from skyrl_hyperpod.values.stack_outputs import StackOutputs, load_stack_outputs
from skyrl_hyperpod.values.synthesized_manifests import PUBLISH_CHART, config_fingerprint, source_name

from .common import (
    EXIT_BAD_INPUT,
    EXIT_FINDINGS,
    cluster_errors,
    config_option,
    connect,
    dist_option,
    echo,
    experiment_option,
    json_option,
    load_project_config_with_source,
    pick_experiments,
    print_json,
    profile_option,
    refuse_other_configuration,
    region_option,
    wait_timeout_option,
    wait_until,
)


def deployed_outputs(config: ProjectConfig) -> StackOutputs:
    path = Path(os.environ.get(OUTPUTS_FILE_ENV_VAR) or config.workloads.outputs_file)
    try:
        return load_stack_outputs(path, config)
    except InputError as error:
        fail([f"{error.problems[0]}; or write it with: skyrl-hp outputs --file {path}"], EXIT_BAD_INPUT)


@click.group()
def adapter() -> None:
    """Publish trained LoRA adapters to the S3 prefix the RayService loads them from."""


@adapter.command("publish")
@config_option
@region_option
@profile_option
@dist_option
@experiment_option(required=True)
@click.option(
    "--step", type=click.IntRange(min=1), default=None, help="global_step_<N> to publish (default: the run's last)."
)
@click.option("--name", "adapter_name", default=None, help="Adapter name in requests (default: the experiment's name).")
@click.option("--wait", is_flag=True, help="Wait for the copy to finish and print the published files.")
@wait_timeout_option
@json_option
@click.pass_context
def adapter_publish(
    ctx: click.Context,
    config_path: Path | None,
    region: str | None,
    profile: str | None,
    dist: Path,
    experiment: str,
    step: int | None,
    adapter_name: str | None,
    wait: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Create the Job that copies one experiment's adapter at one step to s3://<bucket>/<adapters>/<name>/.

    A step the run never exports is refused; each step and name is its own Job (Jobs are immutable). The Job is
    built from the configuration; a DIST synthesized from another configuration (what train start applied) is
    refused."""
    config, source = load_project_config_with_source(config_path, region=region)
    refuse_other_configuration(dist, [PUBLISH_CHART], config, source, required=False)
    [run] = pick_experiments(config, experiment)
    try:
        pub = publication(run, step, adapter_name)
    except ValueError as error:
        option = "--name" if str(error).startswith("adapter name") else "--step"
        fail([f"{option}: {error}"], EXIT_BAD_INPUT)
    outputs = deployed_outputs(config)
    if outputs.config_fingerprint and outputs.config_fingerprint != config_fingerprint(config):
        echo(
            f"note: the platform was deployed from configuration fingerprint {outputs.config_fingerprint} (stack "
            f"outputs), this command reads {source_name(source.path)} (fingerprint {config_fingerprint(config)})",
            err=True,
        )
    job = publish_job(config, outputs, pub, managed_labels(config.name_prefix))
    with cluster_errors():
        cluster = connect(ctx, config, region, profile)
        state = publish_module.create_unless_present(cluster, job)
        if state == "Failed":
            fail(
                [f"Job {pub.job_name} failed before (Jobs cannot be changed): delete it, then publish again"],
                EXIT_FINDINGS,
            )
        if state is None:
            echo(f"created Job {pub.job_name}: {experiment} step {pub.step} -> adapter {pub.adapter_name}")
        else:
            echo(f"Job {pub.job_name} already exists ({state}): nothing to do")
        if wait:
            wait_until(ctx, publish_module.job_done(cluster, job), timeout=timeout, what=f"Job {pub.job_name}")
            for line in publish_module.job_log(cluster, job):
                echo(line)
            if publish_module.current_state(cluster, job) == "Failed":
                sys.exit(EXIT_FINDINGS)
    model = f"{config.serving.model_id}:{pub.adapter_name}"
    if as_json:
        print_json(
            {
                "job": pub.job_name,
                "experiment": experiment,
                "step": pub.step,
                "adapter": pub.adapter_name,
                "model": model,
            }
        )
        return
    echo(f"query it: skyrl-hp serve query --adapter {pub.adapter_name} --image maze.png   (model {model})")
