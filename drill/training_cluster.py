"""The drill's moving parts: its environments, the training cluster, and one RayJob run to its end."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.parse
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.plumbing.locations import DOCKER_DIR
from skyrl_hyperpod.plumbing.upstream import VISGYM_COMMIT
from skyrl_hyperpod.values.job_files import JOB_PACKAGE, JOB_SCRIPT_NAME

from . import kuberay
from .cluster import RayNode, RunningCluster, plan_cluster, start_cluster
from .layout import (
    Entrypoint,
    ModelMaker,
    PathMap,
    image_env,
    load_job_package,
    pod_mounts,
    prepare_job_state,
    write_example_checkout,
)
from .log_stamps import StampedLog
from .manifests import Manifests

SITE_DIR = Path(__file__).with_name("site")
TINY_MODEL = Path(__file__).with_name("tiny_model.py")
# The drill environment records the VisGym commit it installed (the Makefile's drill-env).
VISGYM_COMMIT_FILE = "visgym.commit"
STOP_MARKER = "SKYRL_HP_DRILL_STOP"
GPU_BOUNDARY = "gpu-boundary"
TRAINER_START = "trainer-start"
RESUME = "resume"
TRAIN_ON_CPU = "train-on-cpu"
# SkyRL's override parser, validation and initialize_ray take well under this on two cores.
JOB_TIMEOUT_SECONDS = 900
# A submitter that exited may leave a child holding its output open (the pipe then never ends): read what came.
OUTPUT_DRAIN_SECONDS = 30
DOCKERFILE = DOCKER_DIR / "Dockerfile"
_EXCEPTION_LINE = re.compile(r"^\s*(?:\(\S+ pid=\d+\)\s*)?([A-Za-z_][\w.]*(?:Error|Exception)(?:\([\w.]+\))?: .*)$")


@dataclass(frozen=True)
class Outcome:
    ok: bool
    line: str


@dataclass(frozen=True)
class DrillEnv:
    """The interpreters: the training image's stand-in (the drill venv), the serving image's Ray (this venv), the
    serving environment with vLLM's CPU build (`make drill-serve-env`) that publishes and serves the adapter, and the
    MLflow tracking server's (`make drill-mlflow-env`)."""

    train_python: Path
    serve_python: Path
    serve_llm_env: Path | None = None
    # PyPI's full mlflow (`make drill-mlflow-env`): the tracking server the first RayJob's training logs to.
    mlflow_env: Path | None = None

    @property
    def train_bin(self) -> Path:
        return self.train_python.parent

    @property
    def serve_bin(self) -> Path:
        return self.serve_python.parent

    def model_maker(self, skyrl_dir: Path, run_dir: Path) -> ModelMaker:
        """Makes the SFT checkpoint's stand-in (tiny_model.py) with this environment's interpreter, SkyRL's VisGym
        example from the checkout at `skyrl_dir` on its path."""

        def make(model_dir: Path, env_id: str) -> None:
            env = {
                "PATH": f"{self.train_bin}:/usr/bin:/bin",
                "HOME": str(run_dir),
                "LANG": "C.UTF-8",
                "PYTHONPATH": str(skyrl_dir),
                "SDL_VIDEODRIVER": "dummy",
                "HF_HUB_OFFLINE": "1",
            }
            result = subprocess.run(
                [str(self.train_python), str(TINY_MODEL), str(model_dir), env_id],
                env=env, capture_output=True, text=True, check=False,
            )  # fmt: skip
            if result.returncode != 0:
                raise RuntimeError(f"tiny model: {(result.stderr.strip().splitlines() or ['?'])[-1]}")

        return make

    def versions(self, python: Path, distributions: tuple[str, ...]) -> dict[str, str | None]:
        code = (
            "import json, sys, importlib.metadata as m\n"
            "def v(d):\n try: return m.version(d)\n except m.PackageNotFoundError: return None\n"
            "print(json.dumps({d: v(d) for d in sys.argv[1:]}))"
        )
        result = subprocess.run([str(python), "-c", code, *distributions], capture_output=True, text=True, check=True)
        found: dict[str, str | None] = json.loads(result.stdout)
        return found


def version_problems(env: DrillEnv, config: ProjectConfig) -> list[str]:
    """One line per installed version that differs from the version lock (config/version_lock.py), and the VisGym
    commit the environment installed when it is not the one upstream.py pins."""
    release = config.training_image.skyrl_release
    wanted = {
        "ray": config.training_image.ray_version,
        "skyrl": release.version,
        "skyrl-gym": release.skyrl_gym,
        "torch": release.torch,
    }
    problems = []
    installed = env.versions(env.train_python, tuple(wanted))
    for name, version in wanted.items():
        have = (installed[name] or "").split("+")[0]
        if have != version:
            problems.append(
                f"drill environment {env.train_python.parent.parent}: {name} {installed[name] or 'is missing'}, "
                f"the version lock says {version} (rebuild it: make drill-env)"
            )
    commit_file = env.train_python.parent.parent / VISGYM_COMMIT_FILE
    installed_visgym = commit_file.read_text(encoding="utf-8").strip() if commit_file.is_file() else "none"
    if installed_visgym != VISGYM_COMMIT:
        problems.append(
            f"drill environment {env.train_python.parent.parent}: VisGym {installed_visgym} installed, "
            f"{VISGYM_COMMIT} pinned (rebuild it: make drill-env)"
        )
    serving_ray = env.versions(env.serve_python, ("ray",))["ray"]
    if serving_ray != config.serving_image.ray_version:
        problems.append(
            f"{env.serve_python}: ray {serving_ray}, the serving image's is {config.serving_image.ray_version} "
            "(requirements-dev.txt)"
        )
    return problems


@dataclass
class JobRun:
    rayjob: str
    job_id: str
    status: str
    message: str
    logs: str
    expected_env: dict[str, str]
    # The trainer's report where the drill stopped it (GPU_BOUNDARY or TRAINER_START); None if it never got there.
    stop: dict[str, Any] | None
    # The logs as `kubectl logs --timestamps` shows them (log_stamps.py), and when the submitter was started.
    stamped_logs: str = ""
    launched_at: datetime | None = None

    @property
    def boundary(self) -> dict[str, Any] | None:
        return self.stop if self.stop and self.stop.get("at") == GPU_BOUNDARY else None

    def env_problems(self) -> list[str]:
        """Each job variable that did not reach SkyRL's trainer process with its value."""
        seen = (self.stop or {}).get("env") or {}
        return [
            f"{name}={value} did not reach SkyRL's trainer process (it saw {seen.get(name)!r})"
            for name, value in sorted(self.expected_env.items())
            if seen.get(name) != value
        ]

    @property
    def first_error(self) -> str:
        for line in self.logs.splitlines():
            if match := _EXCEPTION_LINE.match(line):
                return _shorten(match.group(1))
        return _shorten(self.message or f"job {self.status} without an error line in its logs")


def _shorten(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def marker_json(line: str, marker: str) -> Any:
    """The JSON value after `marker` on a log line. Only the value is read: Ray's log streaming can append the
    driver's next output (a traceback's first line) to the worker's line without a newline."""
    value, _ = json.JSONDecoder().raw_decode(line.split(marker, 1)[1].strip())
    return value


def parse_stop(logs: str) -> dict[str, Any] | None:
    for line in logs.splitlines():
        if STOP_MARKER in line:
            stop: dict[str, Any] = marker_json(line, STOP_MARKER)
            return stop
    return None


def job_env(rayjob: dict[str, Any]) -> dict[str, str]:
    """Every variable a RayJob sets: its entrypoint's `env NAME=VALUE` words and its runtimeEnvYAML's env_vars."""
    env = dict(Entrypoint.parse(rayjob["spec"]["entrypoint"]).env)
    runtime_env = yaml.safe_load(rayjob["spec"].get("runtimeEnvYAML") or "{}") or {}
    env.update({name: str(value) for name, value in (runtime_env.get("env_vars") or {}).items()})
    return env


@dataclass
class Submission:
    """A RayJob whose submitter is running: KubeRay's command follows the job's logs until the job ends."""

    cluster: TrainingCluster
    rayjob: str
    job_id: str
    expected_env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[bytes]
    output: StampedLog
    launched_at: datetime

    def wait(self, timeout: float) -> JobRun:
        """The job's end (stopped after `timeout`): its status, its logs and the trainer's report."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.cluster.stop_job(self.job_id)
            self.process.wait()
        self.output.join(OUTPUT_DRAIN_SECONDS)
        status, message = self.cluster.job_status(self.job_id)
        logs = self.log_path.read_text(encoding="utf-8", errors="replace")
        stamped = self.output.stamped.read_text(encoding="utf-8", errors="replace")
        return JobRun(
            self.rayjob, self.job_id, status, message, logs, self.expected_env, parse_stop(logs), stamped,
            self.launched_at,
        )  # fmt: skip


@dataclass
class TrainingCluster:
    """The RayCluster the RayJobs run on, started on 127.0.0.1 with its volumes and image paths mapped."""

    run_dir: Path
    manifests: Manifests
    config: ProjectConfig
    env: DrillEnv
    cluster_spec: dict[str, Any]
    # SkyRL's VisGym example, the verified copy the image's checkout is given.
    example_dir: Path
    # Real training on CPU (cpu_training.py): one more worker node, a copy of a GPU worker, for the inference engine
    # (not colocated, it needs a GPU bundle of its own).
    inference_node: bool = False
    paths: PathMap = field(init=False)
    cluster: RunningCluster = field(init=False)
    # The environment every Ray node's processes start with (the image's ENV, paths mapped, the drill's own).
    node_env: dict[str, str] = field(init=False)
    train_job: ModuleType = field(init=False)
    skyrl_dir: Path = field(init=False)
    token: str = field(init=False)

    def start(self, timeout: float) -> None:
        mounts: dict[str, Path] = {}
        head = self.cluster_spec["headGroupSpec"]["template"]
        for template in [head, *(group["template"] for group in self.cluster_spec.get("workerGroupSpecs", []))]:
            mounts.update(pod_mounts(template, self.run_dir, self.manifests))
        image = self.config.training_image
        self.skyrl_dir = self.run_dir / "image" / image.skyrl_dir.strip("/")
        # The image holds its checkout before any job runs (the image check opens VisGym through it first).
        write_example_checkout(self.example_dir, self.skyrl_dir)
        mounts[image.skyrl_dir] = self.skyrl_dir
        self.paths = PathMap(mounts)
        job_dir = next(path for path in mounts.values() if (path / JOB_SCRIPT_NAME).is_file())
        self.train_job = load_job_package(job_dir / JOB_PACKAGE)
        self.run_init_containers()
        self.token = kuberay.random_token()
        base_env = {
            "PATH": f"{self.env.train_bin}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.run_dir / "home"),
            "TMPDIR": str(self.run_dir / "tmp"),
            "LANG": "C.UTF-8",
            **{name: self.paths.text(value) for name, value in image_env(DOCKERFILE, image.build_args).items()},
            "HP_DRILL_BOUNDARY": "1",
            "HP_DRILL_DIR": str(self.run_dir),
        }
        base_env["PYTHONPATH"] = f"{SITE_DIR}:{base_env.get('PYTHONPATH', '')}".rstrip(":")
        self.node_env = base_env
        (self.run_dir / "home").mkdir(exist_ok=True)
        (self.run_dir / "tmp").mkdir(exist_ok=True)
        nodes = plan_cluster(
            self.cluster_spec, paths=self.paths, base_env=base_env, temp_root=self.run_dir / "r", token=self.token
        )
        if self.inference_node:
            nodes.append(inference_node(nodes, self.run_dir / "r"))
        self.cluster = start_cluster(
            nodes,
            ray=self.env.train_bin / "ray",
            python=self.env.train_python,
            token=self.token,
            log=self.run_dir / "cluster.log",
            timeout=timeout,
        )

    def prepare(self, entrypoint: str) -> dict[str, Any]:
        """What the job finds prepared (layout.prepare_job_state) for this entrypoint, paths mapped."""
        make_model = self.env.model_maker(self.skyrl_dir, self.run_dir)
        return prepare_job_state(Entrypoint.parse(entrypoint), self.train_job, self.skyrl_dir, self.example_dir,
                                 make_model)  # fmt: skip

    def run_init_containers(self) -> None:
        """The head's init containers' shell commands, paths mapped (they create the shared directories)."""
        spec = self.cluster_spec["headGroupSpec"]["template"]["spec"]
        for container in spec.get("initContainers", []):
            command = [self.paths.text(word) for word in container.get("command", []) + container.get("args", [])]
            subprocess.run(command, check=True, capture_output=True)

    def describe(self) -> str:
        nodes = self.cluster.nodes
        scaled = {param: change for node in nodes for param, change in node.scaled.items()}
        changes = ", ".join(
            f"{param} {int(a) / 2**30:g} GiB -> {int(b) / 2**20:g} MiB" for param, (a, b) in scaled.items()
        )
        extra = [node for node in nodes if node.name == INFERENCE_NODE]
        manifest = [node for node in nodes if node.name != INFERENCE_NODE]
        described = (
            f"{len(manifest)} nodes (head + {len(manifest) - 1} workers), "
            f"{sum(int(node.params.get('num-gpus', 0)) for node in manifest)} logical GPUs"
        )
        if extra:
            described += (
                f" + {INFERENCE_NODE} ({extra[0].params.get('num-gpus')} logical GPUs, room for the engine's bundle)"
            )
        return f"{described}; scaled: {changes}"

    def submit(self, rayjob: dict[str, Any], *, timeout: float, stop_at: str = GPU_BOUNDARY) -> JobRun:
        """Run one RayJob as KubeRay's K8sJobMode submitter does, to its end (or `timeout`); the trainer stops at
        `stop_at` (the GPU boundary, or its start)."""
        return self.launch(rayjob, stop_at=stop_at).wait(timeout)

    def launch(self, rayjob: dict[str, Any], *, stop_at: str = GPU_BOUNDARY) -> Submission:
        """Start KubeRay's submitter for one RayJob and return at once (a scenario may act on the running job, e.g.
        stop its driver, before `Submission.wait`). Each launch is a new submission id, as each KubeRay attempt is."""
        name = rayjob["metadata"]["name"]
        entrypoint = self.paths.text(rayjob["spec"]["entrypoint"])
        self.prepare(entrypoint)
        expected = job_env(rayjob)
        (self.run_dir / "report-env-names").write_text("\n".join(sorted(expected)) + "\n", encoding="utf-8")
        (self.run_dir / "stop-at").write_text(stop_at + "\n", encoding="utf-8")
        job_id = kuberay.submission_id(name)
        address = self.cluster.dashboard_url
        command = kuberay.submit_command(rayjob["spec"], address=address, job_id=job_id, entrypoint=entrypoint)
        log_path = self.run_dir / f"{job_id}.log"
        env = kuberay.submitter_env(self.cluster.client_env, address=address, job_id=job_id)
        launched_at = datetime.now(UTC)
        process = subprocess.Popen(
            kuberay.submitter_argv(command), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        assert process.stdout is not None
        output = StampedLog(process.stdout, log_path, self.run_dir / f"{job_id}.timestamps.log")
        return Submission(self, name, job_id, expected, log_path, process, output, launched_at)

    def add_overlap_node(self, gpus: int, timeout: float) -> str:
        """One more node with `gpus` logical GPUs, for an attempt that must run while a stale one holds its GPUs
        (KubeRay's retry gets a RayCluster of its own). SkyRL packs its bundles onto it (PACK placement groups)."""
        node = worker_copy(self.cluster.nodes, self.run_dir / "r", OVERLAP_NODE, gpus)
        self.cluster.add(node, timeout)
        return f"{OVERLAP_NODE} ({gpus} logical GPUs)"

    def job_info(self, job_id: str) -> dict[str, Any]:
        """Ray's job record (status, message, start_time and end_time in ms, driver_info), {} if unreadable."""
        code, body = kuberay.request("GET", f"{self.cluster.dashboard_url}/api/jobs/{job_id}", token=self.token)
        info: dict[str, Any] = json.loads(body) if code == 200 else {}
        return info

    def job_actors(self, job_id: str, class_name: str) -> list[dict[str, Any]]:
        """The live actors of class `class_name` that submission `job_id` created (Ray's state API, with pids)."""
        ray_job_id = self.job_info(job_id).get("job_id")
        if not ray_job_id:
            return []
        query = urllib.parse.urlencode(
            [("filter_keys", "job_id"), ("filter_predicates", "="), ("filter_values", ray_job_id)]
            + [("filter_keys", "class_name"), ("filter_predicates", "="), ("filter_values", class_name)]
            + [("filter_keys", "state"), ("filter_predicates", "="), ("filter_values", "ALIVE")]
            + [("detail", "1"), ("limit", "100")]
        )
        code, body = kuberay.request("GET", f"{self.cluster.dashboard_url}/api/v0/actors?{query}", token=self.token)
        if code != 200:
            return []
        listed = ((json.loads(body).get("data") or {}).get("result") or {}).get("result") or []
        return [actor for actor in listed if actor.get("pid")]

    def job_status(self, job_id: str) -> tuple[str, str]:
        code, body = kuberay.request("GET", f"{self.cluster.dashboard_url}/api/jobs/{job_id}", token=self.token)
        if code != 200:
            return "UNKNOWN", f"GET /api/jobs/{job_id}: HTTP {code}"
        info = json.loads(body)
        return info.get("status", "UNKNOWN"), info.get("message") or ""

    def stop_job(self, job_id: str) -> None:
        kuberay.request("POST", f"{self.cluster.dashboard_url}/api/jobs/{job_id}/stop", token=self.token)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.job_status(job_id)[0] not in ("STOPPED", "FAILED", "SUCCEEDED"):
            time.sleep(2)

    def stop(self) -> None:
        self.cluster.stop()


INFERENCE_NODE = "drill-vllm-cpu"
OVERLAP_NODE = "drill-overlap"


def inference_node(nodes: list[RayNode], temp_root: Path) -> RayNode:
    """A copy of the last worker, with its logical GPUs, its own ports and temp dir: room for the non-colocated
    vLLM engine's {GPU: 1} bundle. A whole worker, not one GPU: SkyRL places the engine first, on any node with a
    free GPU, and then asks for policy_num_nodes whole-node bundles of policy_num_gpus_per_node GPUs
    (workers/worker.py, PPORayActorGroup); with one worker more, that many untouched workers always remain."""
    return worker_copy(nodes, temp_root, INFERENCE_NODE)


def worker_copy(nodes: list[RayNode], temp_root: Path, name: str, gpus: int | None = None) -> RayNode:
    """A copy of the last worker with its own name, ports and temp dir (and `gpus` logical GPUs if given)."""
    worker = nodes[-1]
    if worker.head:
        raise ValueError(f"the cluster has no worker to copy for node {name}")
    params = dict(worker.params)
    for port in ("metrics-export-port", "dashboard-agent-listen-port"):
        params[port] = str(max(int(node.params[port]) for node in nodes) + 1)
    params["temp-dir"] = str(temp_root / f"n{len(nodes)}")
    if gpus is not None:
        params["num-gpus"] = str(gpus)
    return replace(worker, name=name, params=params)


def boundary_summary(run: JobRun) -> Outcome:
    """The drill's line for one RayJob, and whether what ran is what the manifests configure."""
    report = run.boundary
    if report is None:
        return Outcome(False, f"drill: {run.rayjob}: stopped before the GPU boundary: {run.first_error}")
    problems = run.env_problems()
    placement = report.get("placement", {})
    group = report.get("placement_group")
    expected_per_node = [placement.get("policy_num_gpus_per_node")] * int(placement.get("policy_num_nodes") or 0)
    if group is None or group["state"] != "CREATED" or group["bundles_per_node"] != expected_per_node:
        problems.append(f"placement group {group} is not the configured layout {expected_per_node}")
    if problems:
        return Outcome(False, f"drill: {run.rayjob}: reached the GPU boundary, but " + "; ".join(problems))
    bundle = group["bundles"][0] if group else {}
    what = (
        f"SkyRL {report['skyrl']} on Ray {report['ray']}, torch {report['torch']}, Python {report['python']}: "
        f"overrides parsed and validated, initialize_ray, tokenizer, {report['train_rows']} train / "
        f"{report['eval_rows']} eval rows, placement group {len(group['bundles']) if group else 0} x {bundle} "
        f"{group['strategy'] if group else ''} on {len(expected_per_node)} nodes "
        f"({'+'.join(map(str, group['bundles_per_node'])) if group else ''} GPUs); "
        f"job env reached the trainer: {', '.join(f'{k}={v}' for k, v in sorted(run.expected_env.items())) or 'none'}"
    )
    return Outcome(True, f"drill: {run.rayjob}: reached the GPU boundary ({what})")
