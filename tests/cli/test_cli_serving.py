"""`skyrl-hp adapter publish` and `skyrl-hp serve up | query`: the cluster through the kubernetes client against a
fake API server, Ray Serve's OpenAI endpoint as a fake HTTP server reached through the commands' port-forward relay."""

from __future__ import annotations

import base64
import io
import json

import boto3
import pytest
import yaml
from botocore.response import StreamingBody
from botocore.stub import Stubber
from click.testing import CliRunner
from deployed_cluster import NAMESPACE, RAYCLUSTER, deployed_outputs, write_dist
from fake_http import FakeHttp
from fake_kube import FakeKube, pod

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.cli.common import AwsClients, CliState
from skyrl_hyperpod.config import load_config
from skyrl_hyperpod.values.stack_outputs import FIELD_BY_OUTPUT_KEY

pytestmark = pytest.mark.usefixtures("fake_aws_env", "isolated")
JOBS = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    monkeypatch.delenv("SKYRL_HP_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    config = load_config(None)
    values = deployed_outputs(config).model_dump()
    outputs = {"skyrl-hp-storage": {key: values[name] for key, name in FIELD_BY_OUTPUT_KEY.items()}}
    (tmp_path / "outputs.json").write_text(json.dumps(outputs))
    monkeypatch.setenv("SKYRL_HP_OUTPUTS", str(tmp_path / "outputs.json"))


def run(kube: FakeKube | None, *args: str, http: FakeHttp | None = None, input: str | None = None):
    state = CliState(kube=kube.api_client() if kube else None, poll_seconds=0)
    state.connector = http.connector if http else None
    return CliRunner().invoke(cli, list(args), obj=state, input=input)


# --- adapter publish -------------------------------------------------------------------------------------------


def test_publish_creates_the_job_the_chart_synthesizes(kube, tmp_path):
    result = run(kube, "adapter", "publish", "--experiment", "maze-grpo")
    assert result.exit_code == 0, result.output
    [path] = kube.applied()
    assert path == f"{JOBS}/publish-maze-grpo-step-160"
    created = kube.objects[path]
    # The same Job as dist/04-publish-adapter (one builder); only the managed-by label differs.
    dist = write_dist(tmp_path / "dist", load_config(None))
    synthesized = next(yaml.safe_load_all((dist / "04-publish-adapter.k8s.yaml").read_text()))
    assert created["spec"] == synthesized["spec"]
    assert created["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "skyrl-hp"
    script = created["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert (
        "aws s3 sync /shared/runs/maze-grpo/global_step_160/policy s3://skyrl-hp-artifacts-111111111111/adapters/maze-grpo/"
        in script
    )
    assert "serve query --adapter maze-grpo" in result.stdout


def test_publish_another_step_under_another_name(kube):
    result = run(kube, "adapter", "publish", "--experiment", "maze-grpo", "--step", "80", "--name", "maze-early")
    assert result.exit_code == 0, result.output
    created = kube.objects[f"{JOBS}/publish-maze-early-step-80"]
    script = created["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert "/global_step_80/policy s3://skyrl-hp-artifacts-111111111111/adapters/maze-early/" in script


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--step", "150"),
            "--step: step 150 is never exported: run 'maze-grpo' exports every 20 steps, at each epoch's end (8 steps) "
            "and at its last step 160",
        ),
        (("--step", "400"), "--step: step 400 is never exported"),
        (("--name", "Maze_GRPO"), "--name: adapter name 'Maze_GRPO': at most 40 lowercase letters"),
    ],
)
def test_publish_refuses_a_step_never_exported_or_a_bad_name(kube, args, message):
    result = run(kube, "adapter", "publish", "--experiment", "maze-grpo", *args)
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(message)
    assert kube.requests == []


def test_publish_of_an_existing_job_changes_nothing(kube):
    kube.put(f"{JOBS}/publish-maze-grpo-step-160", {"status": {"conditions": [{"type": "Complete", "status": "True"}]}})
    result = run(kube, "adapter", "publish", "--experiment", "maze-grpo")
    assert result.exit_code == 0, result.output
    assert "already exists (Complete)" in result.stdout
    assert kube.applied() == []


def test_publish_wait_prints_the_published_files(kube):
    def job_controller(path: str, obj: dict) -> None:
        obj["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
        name = "publish-maze-grpo-step-160-abcde"
        kube.put(
            f"/api/v1/namespaces/{NAMESPACE}/pods/{name}",
            pod(name, NAMESPACE, {"job-name": "publish-maze-grpo-step-160"}),
        )
        kube.logs[f"{NAMESPACE}/{name}"] = "2026-11-20 12:00:00   81234567 adapter_model.safetensors\n"

    kube.on_apply = job_controller
    result = run(kube, "adapter", "publish", "--experiment", "maze-grpo", "--wait")
    assert result.exit_code == 0, result.output
    assert "Job publish-maze-grpo-step-160: Complete" in result.stdout
    assert "adapter_model.safetensors" in result.stdout


def test_publish_without_outputs_says_how_to_write_them(kube, monkeypatch, tmp_path):
    monkeypatch.setenv("SKYRL_HP_OUTPUTS", str(tmp_path / "absent.json"))
    result = run(kube, "adapter", "publish", "--experiment", "maze-grpo")
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert "does not exist" in line and "skyrl-hp outputs" in line


# --- serve up --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    return write_dist(tmp_path_factory.mktemp("serve") / "dist", load_config(None))


def training_cluster(kube: FakeKube, workers: int = 3, job_status: str | None = "RUNNING") -> None:
    rayclusters = f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayclusters"
    gpu_group = {
        "replicas": workers,
        "template": {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}},
    }
    kube.put(
        f"{rayclusters}/{RAYCLUSTER}", {"metadata": {"name": RAYCLUSTER}, "spec": {"workerGroupSpecs": [gpu_group]}}
    )
    if job_status:
        kube.put(
            f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayjobs/skyrl-visgym-maze-grpo",
            {"metadata": {"name": "skyrl-visgym-maze-grpo"}, "spec": {"clusterSelector": {"ray.io/cluster": RAYCLUSTER}},
             "status": {"jobStatus": job_status}},
        )  # fmt: skip


def test_serve_up_asks_before_deleting_the_training_cluster_and_stops_on_no(kube, dist):
    training_cluster(kube)
    result = run(kube, "serve", "up", "--dist", str(dist), input="n\n")
    assert result.exit_code == 1
    assert (
        f"{RAYCLUSTER} (3 GPU workers) hold every GPU node (3 of 3 ml.g7e.12xlarge); the RayService needs 1 "
        "(serving.worker_replicas); RayJob skyrl-visgym-maze-grpo is still running and stops with it."
    ) in result.stderr
    # Why: fixed nodes are all there is.
    assert "With hyperpod.worker_group.scaling fixed these nodes are all there is" in result.stderr
    assert kube.deleted() == [] and kube.applied() == []


def test_serve_up_on_demand_serves_beside_training_and_deletes_nothing(kube, tmp_path):
    from conftest import VARIANT_ON_DEMAND

    file = tmp_path / "on-demand.yaml"
    file.write_text(yaml.safe_dump(VARIANT_ON_DEMAND))
    dist = write_dist(tmp_path / "dist", load_config(file), config_file=str(file))
    training_cluster(kube)  # every one of the 3 nodes the NodePool allows
    result = run(kube, "serve", "up", "--config", str(file), "--dist", str(dist))
    assert result.exit_code == 0, result.output
    assert kube.deleted() == [] and "Delete" not in result.stderr
    assert kube.applied() == [f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayservices/visgym-serve"]
    assert (
        "hyperpod.worker_group.scaling on_demand: the RayService runs beside 3 training GPU worker(s); its workers "
        "start when Serve asks for replicas and Karpenter adds ml.g7e.12xlarge nodes for them (up to 3, 0 free now); "
        "past that they wait until training frees a node (1 wanted)"
    ) in result.stdout


def test_serve_up_on_yes_deletes_the_training_cluster_then_applies_the_rayservice(kube, dist):
    training_cluster(kube, job_status="SUCCEEDED")
    result = run(kube, "serve", "up", "--dist", str(dist), input="y\n")
    assert result.exit_code == 0, result.output
    assert kube.deleted() == [f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayclusters/{RAYCLUSTER}"]
    assert kube.applied() == [f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayservices/visgym-serve"]
    assert [r.method for r in kube.requests].index("DELETE") < [r.method for r in kube.requests].index("PATCH")


@pytest.mark.parametrize(
    ("job_status", "deployment_status", "deleted_kind"),
    [
        ("RUNNING", "Running", "rayjobs"),
        ("FAILED", "Retrying", "rayjobs"),  # KubeRay keeps the failed attempt's status while it retries
        (None, None, "rayjobs"),  # New: the RayJob is there, its cluster is being created
        ("SUCCEEDED", "Complete", "rayclusters"),
        ("STOPPED", "Complete", "rayclusters"),
        ("no RayJob", None, "rayclusters"),  # the cluster outlived its creator
    ],
)
def test_serve_up_deletes_an_unfinished_self_contained_job_with_its_cluster(
    kube, dist, job_status, deployment_status, deleted_kind
):
    """KubeRay creates the cluster of a RayJob that has not finished again when it is deleted: that job is
    deleted instead (its cluster goes with it); a finished one keeps its record and loses only the cluster."""
    job = "skyrl-visgym-maze-grpo"
    own = f"{job}-x7k2p"
    labels = {"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": job}
    gpu_group = {
        "replicas": 3,
        "template": {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}},
    }
    kube.put(
        f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayclusters/{own}",
        {"metadata": {"name": own, "labels": labels}, "spec": {"workerGroupSpecs": [gpu_group]}},
    )
    if job_status != "no RayJob":
        status = {"jobStatus": job_status, "jobDeploymentStatus": deployment_status, "rayClusterName": own}
        kube.put(
            f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayjobs/{job}",
            {"metadata": {"name": job}, "status": {key: value for key, value in status.items() if value}},
        )
    result = run(kube, "serve", "up", "--dist", str(dist), input="y\n")
    assert result.exit_code == 0, result.output
    deleted = own if deleted_kind == "rayclusters" else job
    assert kube.deleted() == [f"/apis/ray.io/v1/namespaces/{NAMESPACE}/{deleted_kind}/{deleted}"]
    recreated = f"RayJob {job} would create its cluster again and is deleted instead"
    if deleted_kind == "rayjobs":
        assert recreated in result.stderr
        assert f"deleted RayJob {job}; its RayCluster {own} goes with it" in result.stdout
    else:
        assert recreated not in result.stderr
        assert f"deleted RayCluster {own}" in result.stdout


def test_serve_up_with_room_left_asks_nothing(kube, dist):
    training_cluster(kube, workers=2, job_status=None)  # training.cluster.worker_replicas 2 of 3 nodes
    result = run(kube, "serve", "up", "--dist", str(dist))
    assert result.exit_code == 0, result.output
    assert kube.deleted() == [] and "Delete" not in result.stderr


def test_serve_up_wait_until_ready(kube, dist):
    kube.on_apply = lambda path, obj: obj.update({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    result = run(kube, "serve", "up", "--dist", str(dist), "--wait")
    assert result.exit_code == 0, result.output
    assert "RayService visgym-serve: Ready" in result.stdout


def test_serve_up_with_serving_off_is_bad_input(kube, tmp_path, dist):
    (tmp_path / "skyrl-hp.yaml").write_text("serving:\n  enabled: false\n")
    result = run(kube, "serve", "up", "--dist", str(dist))
    assert result.exit_code == 2
    assert result.stderr.strip().endswith("serving.enabled is false in this configuration: nothing to serve")


# --- serve query -----------------------------------------------------------------------------------------------

ANSWER = {"choices": [{"message": {"role": "assistant", "content": "('move', 3)"}}]}
FRAME = "data:image/png;base64," + base64.b64encode(PNG).decode()
# A run's query example as docker/train_job.py writes it (tests/test_train_job_checkpoint_check.py checks the writer).
EXAMPLE = {
    "env_id": "maze_2d/easy",
    "seed": 42,
    "messages": [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "You are navigating a 9x9 maze. ... IMPORTANT: Respond with exactly one action",
                },
                {"type": "image_url", "image_url": {"url": FRAME}},
            ],
        }
    ],  # fmt: skip
    "prompt_tokens": 452,
    "image_tokens": 64,
    "max_tokens": 1024,
    "temperature": 0.7,
}
EXAMPLE_KEY = "adapters/maze-grpo/query-example.json"


def stubbed_s3(objects: dict[str, bytes]) -> AwsClients:
    """An S3 client answering get_object for `objects` in the artifacts bucket (and NoSuchKey once otherwise)."""
    s3 = boto3.client("s3", region_name="us-west-2")
    stubber = Stubber(s3)
    bucket = deployed_outputs(load_config(None)).artifacts_bucket_name
    for key, data in objects.items():
        stubber.add_response("get_object", {"Body": StreamingBody(io.BytesIO(data), len(data))},
                             {"Bucket": bucket, "Key": key})  # fmt: skip
    if not objects:
        stubber.add_client_error("get_object", "NoSuchKey", "The specified key does not exist.", 404)
    stubber.activate()
    return AwsClients(overrides={"s3": s3})


def run_with_s3(aws: AwsClients, *args: str):
    return CliRunner().invoke(cli, list(args), obj=CliState(aws=aws, poll_seconds=0))


def test_query_sends_the_runs_own_first_turn_and_settings_by_default(http):
    http.routes[("POST", "/v1/chat/completions")] = (200, ANSWER)
    aws = stubbed_s3({EXAMPLE_KEY: json.dumps(EXAMPLE).encode()})
    result = run_with_s3(aws, "serve", "query", "--adapter", "maze-grpo", "--url", http.url)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "visgym-qwen3vl:maze-grpo: ('move', 3)"
    [request] = http.requests
    # The example the publish Job copied beside the adapter: the training's message, max_generate_length, temperature.
    assert request.body == {
        "model": "visgym-qwen3vl:maze-grpo",
        "messages": EXAMPLE["messages"],
        "max_tokens": 1024,
        "temperature": 0.7,
    }


def test_query_replaces_the_examples_picture_and_keeps_its_text(http, tmp_path):
    http.routes[("POST", "/v1/chat/completions")] = (200, ANSWER)
    image = tmp_path / "maze.png"
    image.write_bytes(PNG[:8] + b"\x01" * 32)
    example = tmp_path / "query-example.json"
    example.write_text(json.dumps(EXAMPLE))
    result = run(None, "serve", "query", "--example-file", str(example), "--image", str(image), "--max-tokens", "16",
                 "--url", http.url)  # fmt: skip
    assert result.exit_code == 0, result.output
    body = http.requests[0].body
    assert body["model"] == "visgym-qwen3vl" and body["max_tokens"] == 16 and body["temperature"] == 0.7
    [message] = body["messages"]
    text, picture = message["content"]
    assert text == EXAMPLE["messages"][0]["content"][0]
    assert picture["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(image.read_bytes()).decode()


def test_query_with_a_picture_and_a_text_needs_no_example(http, tmp_path):
    http.routes[("POST", "/v1/chat/completions")] = (200, ANSWER)
    image = tmp_path / "maze.png"
    image.write_bytes(PNG)
    result = run(None, "serve", "query", "--adapter", "maze-grpo", "--image", str(image), "--prompt", "task",
                 "--url", http.url)  # fmt: skip
    assert result.exit_code == 0, result.output
    body = http.requests[0].body
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "task"}, {"type": "image_url", "image_url": {"url": FRAME}}]}]  # fmt: skip
    # Without an example: the configuration's generation settings (the training's).
    knobs = load_config(None).training.knobs
    assert (body["max_tokens"], body["temperature"]) == (knobs.max_generate_length, knobs.temperature)


def test_query_without_a_published_example_says_where_it_comes_from(http):
    result = run_with_s3(stubbed_s3({}), "serve", "query", "--adapter", "maze-grpo", "--url", http.url)
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert f"cannot read s3://skyrl-hp-artifacts-111111111111/{EXAMPLE_KEY}" in line
    assert "(adapter publish copies it; or give --image and --prompt)" in line
    assert http.requests == []


def test_query_of_the_base_model_names_an_adapter_whose_example_to_send(http):
    result = run(None, "serve", "query", "--url", http.url)
    assert result.exit_code == 2
    assert "name a published adapter whose example to send (--example-from NAME)" in result.stderr


def test_query_through_the_port_forward_to_the_serve_service(kube, http, tmp_path):
    http.routes[("POST", "/v1/chat/completions")] = (200, ANSWER)
    kube.put(
        f"/api/v1/namespaces/{NAMESPACE}/services/visgym-serve-serve-svc",
        {
            "spec": {
                "selector": {"ray.io/serve": "true"},
                "ports": [{"name": "serve", "port": 8000, "targetPort": 8000}],
            }
        },
    )
    kube.put(f"/api/v1/namespaces/{NAMESPACE}/pods/serve-head", pod("serve-head", NAMESPACE, {"ray.io/serve": "true"}))
    image = tmp_path / "maze.png"
    image.write_bytes(PNG)
    result = run(kube, "serve", "query", "--image", str(image), "--prompt", "task", http=http)
    assert result.exit_code == 0, result.output
    assert http.forwarded == [(NAMESPACE, "serve-head", 8000)]
    assert http.requests[0].body["model"] == "visgym-qwen3vl"  # no --adapter: the base model


def test_query_for_an_unpublished_adapter_is_one_line(http, tmp_path):
    http.routes[("POST", "/v1/chat/completions")] = (404, {"error": {"message": "LoRA adapter not found"}})
    image = tmp_path / "maze.png"
    image.write_bytes(PNG)
    result = run(None, "serve", "query", "--adapter", "nope", "--image", str(image), "--prompt", "task",
                 "--url", http.url)  # fmt: skip
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert "HTTP 404: no adapter 'nope' in the adapters prefix (skyrl-hp adapter publish)" in line


def test_query_refuses_a_file_that_is_not_an_image(tmp_path):
    text = tmp_path / "maze.png"
    text.write_text("not a picture")
    result = run(None, "serve", "query", "--image", str(text), "--prompt", "task", "--url", "http://127.0.0.1:9")
    assert result.exit_code == 2
    assert result.stderr.strip() == f"serve query: --image {text}: not a PNG or JPEG file"
