"""`skyrl-hp adapter publish` and `skyrl-hp serve up | query`."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.config.serving import publication
from skyrl_hyperpod.config.workloads import OUTPUTS_FILE_ENV_VAR
from skyrl_hyperpod.errors import InputError
from skyrl_hyperpod.ops import cluster_workloads
from skyrl_hyperpod.ops import serve as serve_module
from skyrl_hyperpod.ops.kube import Cluster, KubeError
from skyrl_hyperpod.ops.portforward import LocalForward
from skyrl_hyperpod.publish_job import publish_job
from skyrl_hyperpod.runtime import fail
from skyrl_hyperpod.stack_outputs import StackOutputs, load_stack_outputs
from skyrl_hyperpod.synthesized_manifests import PUBLISH_CHART, RAYSERVICE_CHART, config_fingerprint, source_name

from .cluster import (
    cluster_errors,
    connect,
    dist_option,
    experiment_option,
    port_connector,
    refuse_other_configuration,
    wait_timeout_option,
    wait_until,
)
from .common import (
    EXIT_BAD_INPUT,
    EXIT_FINDINGS,
    config_option,
    echo,
    flush_header,
    json_option,
    load_project_config,
    load_project_config_with_source,
    print_json,
    profile_option,
    region_option,
)

MANAGED_BY = {"app.kubernetes.io/managed-by": "skyrl-hp"}


def deployed_outputs(config: ProjectConfig) -> StackOutputs:
    path = Path(os.environ.get(OUTPUTS_FILE_ENV_VAR) or config.workloads.outputs_file)
    try:
        return load_stack_outputs(path, config)
    except InputError as error:
        fail([f"{error.problems[0]}; or write it with: skyrl-hp outputs --file {path}"], EXIT_BAD_INPUT)


# --- adapter ---------------------------------------------------------------------------------------------------


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
    names = [run.experiment.name for run in config.derived.runs]
    if experiment not in names:
        fail(
            [f"--experiment {experiment!r}: not an experiment of this configuration ({', '.join(names)})"],
            EXIT_BAD_INPUT,
        )
    try:
        pub = publication(config.derived.run(experiment), step, adapter_name)
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
    labels = {"app.kubernetes.io/part-of": config.name_prefix, **MANAGED_BY}
    job = publish_job(config, outputs, pub, labels)
    namespace = config.workloads.namespace
    with cluster_errors():
        cluster = connect(ctx, config, region, profile)
        live = cluster.get(job)
        if live is not None:
            state = _job_state(live)
            if state == "Failed":
                fail(
                    [f"Job {pub.job_name} failed before (Jobs cannot be changed): delete it, then publish again"],
                    EXIT_FINDINGS,
                )
            echo(f"Job {pub.job_name} already exists ({state}): nothing to do")
        else:
            cluster.apply(job)
            echo(f"created Job {pub.job_name}: {experiment} step {pub.step} -> adapter {pub.adapter_name}")
        if wait:

            def done() -> tuple[bool, str]:
                state = _job_state(cluster.get(job) or {})
                return state in ("Complete", "Failed"), f"Job {pub.job_name}: {state}"

            wait_until(ctx, done, timeout=timeout, what=f"Job {pub.job_name}")
            pods = cluster.pods(namespace, f"job-name={pub.job_name}")
            if pods:
                for line in cluster.logs(namespace, pods[-1]["metadata"]["name"], tail=50):
                    echo(line)
            if _job_state(cluster.get(job) or {}) == "Failed":
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


def _job_state(job: dict[str, Any]) -> str:
    status = job.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed"):
            return str(condition["type"])
    return "Running" if status.get("active") else "Pending"


# --- serve -----------------------------------------------------------------------------------------------------


@click.group()
def serve() -> None:
    """The Ray Serve LLM RayService: start it, and query an adapter."""


def _rayservice_ready(live: dict[str, Any]) -> tuple[bool, str]:
    status = live.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    ready = conditions.get("Ready") == "True" or status.get("serviceStatus") == "Running"
    return ready, "Ready" if ready else str(status.get("serviceStatus") or "starting")


@serve.command("up")
@config_option
@region_option
@profile_option
@dist_option
@click.option("--yes", is_flag=True, help="Delete the Ray clusters that hold the GPU nodes without asking.")
@click.option("--wait", is_flag=True, help="Wait until the RayService is Ready.")
@wait_timeout_option
@click.pass_context
def serve_up(
    ctx: click.Context,
    config_path: Path | None,
    region: str | None,
    profile: str | None,
    dist: Path,
    yes: bool,
    wait: bool,
    timeout: float,
) -> None:
    """Apply the RayService, after making room on the GPU nodes: the training RayCluster holds every one, so
    this asks before deleting it (checkpoints and adapters stay on the shared file system). The cluster of a
    self-contained RayJob that has not finished goes through its RayJob, which would otherwise create it again."""
    config, source = load_project_config_with_source(config_path, region=region)
    if not config.serving.enabled:
        fail(["serve: serving.enabled is false in this configuration: nothing to serve"], EXIT_BAD_INPUT)
    refuse_other_configuration(dist, [RAYSERVICE_CHART], config, source)
    namespace = config.workloads.namespace
    with cluster_errors():
        objects = cluster_workloads.load_chart(dist, RAYSERVICE_CHART)
        cluster = connect(ctx, config, region, profile)
        holders = serve_module.gpu_holders(cluster, namespace)
        question = serve_module.room_question(config, holders)
        flush_header()
        if question is not None:
            if not (yes or click.confirm(question, default=False, err=True)):
                fail(
                    ["serve: nothing changed; the RayService needs GPU nodes the Ray clusters above hold"],
                    EXIT_FINDINGS,
                )
            for holder in holders:
                if holder.recreated_by:
                    # Its RayCluster goes with it (KubeRay made the RayJob its owner).
                    cluster.delete_path(cluster_workloads.rayjob_path(namespace, holder.recreated_by))
                    echo(f"deleted RayJob {holder.recreated_by}; its RayCluster {holder.name} goes with it")
                    continue
                cluster.delete_path(cluster_workloads.raycluster_path(namespace, holder.name))
                echo(f"deleted RayCluster {holder.name}")
        cluster_workloads.apply_all(cluster, objects, echo)
        name = config.serving.rayservice_name
        if wait:

            def ready() -> tuple[bool, str]:
                live = cluster.get(cluster_workloads.rayservice_path(namespace, name)) or {}
                done, state = _rayservice_ready(live)
                return done, f"RayService {name}: {state}"

            wait_until(ctx, ready, timeout=timeout, what=f"RayService {name}")
    echo("query it: skyrl-hp serve query --adapter <name> --image maze.png")


def serve_endpoint(cluster: Cluster, config: ProjectConfig, ctx: click.Context) -> LocalForward:
    """A local port forwarded to a pod behind the RayService's Serve Service (what `kubectl port-forward svc/...`
    does): the Service's own selector and port, read from the cluster."""
    namespace, name = config.workloads.namespace, config.serving.rayservice_name
    service_name = f"{name}-serve-svc"  # KubeRay's name for a RayService's Serve Service
    service = cluster.get(f"/api/v1/namespaces/{namespace}/services/{service_name}")
    if service is None:
        raise KubeError(f"RayService {name} has no Serve Service yet (skyrl-hp serve up --wait)")
    spec = service.get("spec") or {}
    selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items()))
    pods = [p for p in cluster.pods(namespace, selector) if (p.get("status") or {}).get("phase") == "Running"]
    if not pods:
        raise KubeError(f"no running pod behind Service {service_name}")
    port = spec["ports"][0]
    target = port.get("targetPort") if isinstance(port.get("targetPort"), int) else port["port"]
    return LocalForward(port_connector(ctx, cluster, namespace, pods[0]["metadata"]["name"], int(target)))


@serve.command("query")
@config_option
@region_option
@profile_option
@click.option("--adapter", "adapter_name", default=None, help="Adapter name (default: the base model alone).")
@click.option("--image", "image_file", type=click.Path(dir_okay=False, exists=True, path_type=Path), required=True,
              help="The maze picture (PNG or JPEG).")  # fmt: skip
@click.option("--prompt", default=None, help="Task text (default: VisGym's maze task in this project's words).")
@click.option("--prompt-file", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Read the task text from a file (e.g. VisGym's own get_prompt()).")  # fmt: skip
@click.option("--url", default=None, help="Serve endpoint (default: a port-forward to the RayService).")
@click.option("--max-tokens", type=click.IntRange(min=1), default=256, show_default=True)
@click.option("--temperature", type=click.FloatRange(min=0), default=0.7, show_default=True)
@json_option
@click.pass_context
def serve_query(
    ctx: click.Context,
    config_path: Path | None,
    region: str | None,
    profile: str | None,
    adapter_name: str | None,
    image_file: Path,
    prompt: str | None,
    prompt_file: Path | None,
    url: str | None,
    max_tokens: int,
    temperature: float,
    as_json: bool,
) -> None:
    """Send one OpenAI-style chat request in VisGym's format (task text + maze image) and print the answer."""
    config = load_project_config(config_path, region=region)
    if prompt and prompt_file:
        fail(["serve query: pass --prompt or --prompt-file, not both"], EXIT_BAD_INPUT)
    text = prompt_file.read_text(encoding="utf-8") if prompt_file else (prompt or serve_module.DEFAULT_PROMPT)
    try:
        image_url = serve_module.image_data_url(image_file)
    except ValueError as error:
        fail([f"serve query: {error}"], EXIT_BAD_INPUT)
    model = f"{config.serving.model_id}:{adapter_name}" if adapter_name else config.serving.model_id
    body = serve_module.chat_request(model, text, image_url, max_tokens=max_tokens, temperature=temperature)
    forward: LocalForward | None = None
    try:
        if url is None:
            with cluster_errors():
                forward = serve_endpoint(connect(ctx, config, region, profile), config, ctx)
            url = forward.url
        response = serve_module.send_chat(url.rstrip("/"), body)
        answer = serve_module.answer_text(response)
    except serve_module.ServeError as error:
        fail([f"serve query: {error}"], EXIT_FINDINGS)
    finally:
        if forward is not None:
            forward.close()
    if as_json:
        print_json({"model": model, "answer": answer, "response": response})
        return
    echo(f"{model}: {answer}")


COMMANDS = [adapter, serve]
