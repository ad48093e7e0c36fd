"""`skyrl-hp serve up | query`: the Ray Serve LLM RayService: make room on the GPU nodes and apply it, then send
one OpenAI-style request in VisGym's format through a port-forward to its Serve Service (skyrl_hyperpod/ops/
serve.py)."""

from __future__ import annotations

from pathlib import Path

import click

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.config.training import MAX_SAMPLING_TEMPERATURE
from skyrl_hyperpod.ops import cluster_workloads
from skyrl_hyperpod.ops import serve as serve_module
from skyrl_hyperpod.ops.kube import Cluster
from skyrl_hyperpod.ops.portforward import LocalForward
from skyrl_hyperpod.plumbing.runtime import fail
from skyrl_hyperpod.values.publish_job import lora_loading_path
from skyrl_hyperpod.values.synthesized_manifests import RAYSERVICE_CHART

from .adapter import deployed_outputs
from .common import (
    EXIT_BAD_INPUT,
    EXIT_FINDINGS,
    FiniteFloatRange,
    clients_from_context,
    cluster_errors,
    config_option,
    connect,
    dist_option,
    echo,
    flush_header,
    json_option,
    load_project_config,
    load_project_config_with_source,
    port_connector,
    print_json,
    profile_option,
    refuse_other_configuration,
    region_option,
    wait_timeout_option,
    wait_until,
)


@click.group()
def serve() -> None:
    """The Ray Serve LLM RayService: start it, and query an adapter."""


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
    """Apply the RayService. On fixed GPU nodes, after making room: the training RayCluster holds every one, so
    this asks before deleting it (checkpoints and adapters stay on the shared file system). The cluster of a
    self-contained RayJob that has not finished goes through its RayJob, which would otherwise create it again.
    With hyperpod.worker_group.scaling on_demand nothing is deleted: the serving workers get nodes of their own."""
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
        if note := serve_module.beside_training(config, holders):
            echo(note)
        if question is not None:
            if not (yes or click.confirm(question, default=False, err=True)):
                fail(
                    ["serve: nothing changed; the RayService needs GPU nodes the Ray clusters above hold"],
                    EXIT_FINDINGS,
                )
            for holder in serve_module.make_room(cluster, namespace, holders):
                if holder.recreated_by:
                    echo(f"deleted RayJob {holder.recreated_by}; its RayCluster {holder.name} goes with it")
                else:
                    echo(f"deleted RayCluster {holder.name}")
        cluster_workloads.apply_all(cluster, objects, echo)
        name = config.serving.rayservice_name
        if wait:
            ready = serve_module.rayservice_ready(cluster, namespace, name)
            wait_until(ctx, ready, timeout=timeout, what=f"RayService {name}")
    echo("query it: skyrl-hp serve query --adapter <name> --image maze.png")


def serve_endpoint(cluster: Cluster, config: ProjectConfig, ctx: click.Context) -> LocalForward:
    """A local port forwarded to a pod behind the RayService's Serve Service (what `kubectl port-forward svc/...`
    does)."""
    pod, port = serve_module.serve_pod_port(cluster, config)
    return LocalForward(port_connector(ctx, cluster, config.workloads.namespace, pod, port))


@serve.command("query")
@config_option
@region_option
@profile_option
@click.option("--adapter", "adapter_name", default=None, help="Adapter name (default: the base model alone).")
@click.option("--example-from", "example_adapter", default=None,
              help="The published adapter whose query example to send (default: --adapter's).")  # fmt: skip
@click.option("--example-file", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="A query example on disk instead (a run's query-example.json).")  # fmt: skip
@click.option("--image", "image_file", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="A maze picture (PNG or JPEG) instead of the example's.")  # fmt: skip
@click.option("--prompt", default=None, help="Task text instead of the example's.")
@click.option("--prompt-file", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Read the task text from a file instead.")  # fmt: skip
@click.option("--url", default=None, help="Serve endpoint (default: a port-forward to the RayService).")
@click.option("--max-tokens", type=click.IntRange(min=1), default=None,
              help="Default: the example's, the run's generator.sampling_params.max_generate_length.")  # fmt: skip
@click.option("--temperature", type=FiniteFloatRange(min=0, max=MAX_SAMPLING_TEMPERATURE), default=None,
              help="Default: the example's, the run's generator.sampling_params.temperature.")  # fmt: skip
@json_option
@click.pass_context
def serve_query(
    ctx: click.Context,
    config_path: Path | None,
    region: str | None,
    profile: str | None,
    adapter_name: str | None,
    example_adapter: str | None,
    example_file: Path | None,
    image_file: Path | None,
    prompt: str | None,
    prompt_file: Path | None,
    url: str | None,
    max_tokens: int | None,
    temperature: float | None,
    as_json: bool,
) -> None:
    """Send one OpenAI-style chat request in VisGym's format (task text + maze image) and print the answer.

    By default it is the training's own first turn: the query example the training job wrote when it checked the
    checkpoint (VisGym's task with SkyRL's format instruction, and the frame VisGym drew of the run's first eval maze,
    with the run's max_generate_length and temperature), which `adapter publish` copied into the adapter's S3 folder.
    --image and --prompt replace its picture and its text."""
    config = load_project_config(config_path, region=region)
    if prompt and prompt_file:
        fail(["serve query: pass --prompt or --prompt-file, not both"], EXIT_BAD_INPUT)
    text = prompt_file.read_text(encoding="utf-8") if prompt_file else prompt
    example = None
    if image_file is None or text is None:
        example = query_example(ctx, config, profile, example_file, example_adapter or adapter_name)
    try:
        image_url = serve_module.image_data_url(image_file) if image_file else None
    except ValueError as error:
        fail([f"serve query: {error}"], EXIT_BAD_INPUT)
    messages = serve_module.query_messages(example, text, image_url)
    knobs = config.training.knobs
    model = f"{config.serving.model_id}:{adapter_name}" if adapter_name else config.serving.model_id
    if example is not None:
        max_tokens = max_tokens or example.max_tokens
        temperature = example.temperature if temperature is None else temperature
    body = serve_module.chat_request(
        model,
        messages,
        max_tokens=max_tokens or knobs.max_generate_length,
        temperature=knobs.temperature if temperature is None else temperature,
    )
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


def query_example(
    ctx: click.Context, config: ProjectConfig, profile: str | None, path: Path | None, adapter: str | None
) -> serve_module.QueryExample:
    """The query example from `path`, else from `adapter`'s S3 folder; one line saying what to pass otherwise."""
    try:
        if path is not None:
            return serve_module.parse_query_example(path.read_text(encoding="utf-8"), str(path))
        if adapter is None:
            fail(
                [
                    "serve query: the base model has no query example of its own: name a published adapter whose "
                    "example to send (--example-from NAME), a run's query-example.json (--example-file), or give "
                    "--image and --prompt"
                ],
                EXIT_BAD_INPUT,
            )
        outputs = deployed_outputs(config)
        uri = serve_module.query_example_uri(lora_loading_path(config, outputs), adapter)
        s3 = clients_from_context(ctx, profile, outputs.region)("s3", outputs.region)
        return serve_module.parse_query_example(serve_module.read_s3_text(s3, uri), uri)
    except serve_module.ServeError as error:
        fail([f"serve query: {error} (adapter publish copies it; or give --image and --prompt)"], EXIT_FINDINGS)
        raise
