"""`python -m skyrl_hyperpod.drill`: run the synthesized manifests on real Ray and SkyRL, offline, on 127.0.0.1.

The drill runs inside its own network, PID and mount namespaces (`unshare --net --pid --mount-proc`, as root):
the only network is a loopback interface, so nothing it starts can reach or be reached from another address;
every process it starts ends with it, whatever happens; and its /tmp is a directory of its own (a bind mount of
the run directory), so nothing it or SkyRL writes to /tmp lands on the machine's. PID 1 of the namespace is this
module's small init, which reaps the Ray daemons and exits with the drill's status. The run directory is kept
when a check fails (its path is printed) and removed otherwise.

One line per check (`drill: ...`); exit 1 if any fails, 2 when the drill cannot run. See README, "What runs on
the real engines".
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import ConfigError, ProjectConfig, load_config
from .manifests import Manifests
from .run import DrillEnv, Outcome, TrainingCluster, version_problems
from .scenarios import SCENARIOS
from .serve import ServingCluster

IN_NAMESPACE = "HP_DRILL_NAMESPACE"
HOST_RUN_DIR = "HP_DRILL_HOST_RUN_DIR"
CLUSTER_TIMEOUT_SECONDS = 300
# Inside the namespace /tmp is the run directory: short paths for Ray's Unix sockets.
RUN_DIR = Path("/tmp/run")


@dataclass
class Drill:
    config: ProjectConfig
    manifests: Manifests
    env: DrillEnv
    run_dir: Path
    _training: TrainingCluster | None = field(default=None, init=False)
    _serving: ServingCluster | None = field(default=None, init=False)

    @property
    def rayjobs(self) -> list[dict[str, Any]]:
        return self.manifests.rayjobs()

    @property
    def training(self) -> TrainingCluster:
        if self._training is None:
            raise RuntimeError("no training cluster is running")
        return self._training

    def start_training(self) -> str:
        (spec,) = {id(self.manifests.cluster_of(job)): self.manifests.cluster_of(job) for job in self.rayjobs}.values()
        cluster = TrainingCluster(self.run_dir, self.manifests, self.config, self.env, spec)
        cluster.start(CLUSTER_TIMEOUT_SECONDS)
        self._training = cluster
        return cluster.describe()

    def stop_training(self) -> None:
        if self._training is not None:
            self._training.stop()
            self._training = None

    @property
    def serving(self) -> ServingCluster:
        if self._serving is None:
            raise RuntimeError("no serving cluster is running")
        return self._serving

    def start_serving(self) -> str:
        cluster = ServingCluster(self.run_dir, self.manifests, self.env.serve_python, self.manifests.one("RayService"))
        cluster.start(CLUSTER_TIMEOUT_SECONDS)
        self._serving = cluster
        nodes = cluster.cluster.nodes
        gpus = sum(int(node.params.get("num-gpus", 0)) for node in nodes)
        return f"{len(nodes)} nodes (head + {len(nodes) - 1} workers), {gpus} logical GPUs"

    def stop_serving(self) -> None:
        if self._serving is not None:
            self._serving.stop()
            self._serving = None


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(None)
    except ConfigError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        return 2
    env = DrillEnv(train_python=Path(args.env) / "bin" / "python", serve_python=Path(sys.executable))
    if not env.train_python.is_file():
        print(f"drill: no drill environment at {args.env} (make drill-env builds it)", file=sys.stderr)
        return 2
    if problems := version_problems(env, config):
        for problem in problems:
            print(f"drill: {problem}", file=sys.stderr)
        return 2
    manifests = Manifests.load(Path(args.manifests))
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    logs = os.environ.get(HOST_RUN_DIR, str(RUN_DIR))
    drill = Drill(config=config, manifests=manifests, env=env, run_dir=RUN_DIR)
    selected = [SCENARIOS[name] for name in args.scenario] if args.scenario else list(SCENARIOS.values())
    outcomes: list[Outcome] = []
    try:
        training = [scenario for scenario in selected if scenario.cluster == "training"]
        if training:
            print(f"drill: training cluster: {drill.start_training()}", flush=True)
            try:
                for scenario in training:
                    for outcome in scenario.run(drill):
                        outcomes.append(outcome)
                        print(outcome.line, flush=True)
            finally:
                drill.stop_training()
        serving = [scenario for scenario in selected if scenario.cluster == "serving"]
        if serving:
            print(f"drill: serving cluster: {drill.start_serving()}", flush=True)
            try:
                for scenario in serving:
                    for outcome in scenario.run(drill):
                        outcomes.append(outcome)
                        print(outcome.line, flush=True)
            finally:
                drill.stop_serving()
    except (RuntimeError, ValueError, OSError, ConfigError) as error:
        print(f"drill: {error} (logs: {logs})", file=sys.stderr)
        return 1
    failed = sum(not outcome.ok for outcome in outcomes)
    print(f"drill: {len(outcomes) - failed} passed, {failed} failed" + (f" (logs: {logs})" if failed else ""))
    return 1 if failed else 0


def init(argv: list[str]) -> int:
    """PID 1 of the drill's namespaces: loopback up, /tmp onto the run directory, the drill as a child, and every
    orphaned Ray daemon reaped until the drill exits (the kernel then ends whatever is left)."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    subprocess.run(["mount", "--bind", os.environ[HOST_RUN_DIR], "/tmp"], check=True)
    child = subprocess.Popen(
        [sys.executable, "-m", "skyrl_hyperpod.drill", *argv], env={**os.environ, IN_NAMESPACE: "1"}
    )
    while True:
        pid, status = os.wait()
        if pid == child.pid:
            return os.waitstatus_to_exitcode(status)


def host_run_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    runs = cache / "skyrl-hp" / "drill-runs"
    runs.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=runs))


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m skyrl_hyperpod.drill", description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", required=True, help="the drill environment (make drill-env prints it)")
    parser.add_argument("--manifests", default="dist", help="synthesized manifests (default: dist)")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="run only these (repeatable)")
    parser.add_argument("--keep", action="store_true", help="keep the run directory after a passing drill")
    return parser


def main() -> int:
    args = parser().parse_args()
    if os.environ.get(IN_NAMESPACE) == "1":
        return run(args)
    if os.getpid() == 1:
        return init(sys.argv[1:])
    unshare = shutil.which("unshare")
    if unshare is None:
        print("drill: `unshare` (util-linux) is needed to run the drill in its own namespaces", file=sys.stderr)
        return 2
    run_dir = host_run_dir()
    command = [unshare, "--net", "--pid", "--fork", "--mount-proc", "--kill-child", sys.executable, "-m",
               "skyrl_hyperpod.drill", *sys.argv[1:]]  # fmt: skip
    code = subprocess.run(command, env={**os.environ, HOST_RUN_DIR: str(run_dir)}, check=False).returncode
    if code == 0 and not args.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
