"""A real Ray cluster on 127.0.0.1 shaped like a KubeRay RayCluster spec.

Each pod becomes one `ray start` with the command line KubeRay v1.7.0 builds for it
(ray-operator/controllers/ray/common/pod.go: `setMissingRayStartParams`, `generateRayStartCommand`): the
group's rayStartParams, `num-cpus` and `memory` from the container's limits, `num-gpus` from its
`nvidia.com/gpu` limit, a worker's `address` pointing at the head, the metrics and dashboard-agent ports, and
token authentication as KubeRay configures it for `authOptions.mode: token` (`RAY_AUTH_MODE=token` and the
cluster's `RAY_AUTH_TOKEN` on every container). The container's env is set, its paths mapped (layout.PathMap).

What the drill changes, and why:
- `memory` and `object-store-memory` are scaled to `NODE_MEMORY` and `NODE_OBJECT_STORE`: the nodes share
  one 24 GiB machine. The logical CPUs and GPUs stay as the manifest has them, because they decide where
  SkyRL's placement group lands; the GPUs are logical only (no CUDA device exists).
- The nodes share one network namespace, so the ports KubeRay fixes per pod (metrics 8080, dashboard agent
  52365) are made distinct per node, and every address is 127.0.0.1 (`dashboard-host` too).
- Raylets do not prestart one Python worker per logical CPU (RAY_prestart_worker_first_driver=0): 48 idle
  workers on the head would not fit two cores. Ray's start-up deadlines (a raylet's registration, the
  dashboard's modules) are raised: on a shared two-core machine they are missed, not failed.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skyrl_hyperpod.plumbing.upstream import GPU_RESOURCE

from .layout import PathMap

GIB = 1024**3
MIB = 1024**2
NODE_MEMORY = 2 * GIB
NODE_OBJECT_STORE = 128 * MIB
# KubeRay's defaults (ray-operator/controllers/ray/utils/constant.go).
GCS_PORT = 6379
DASHBOARD_PORT = 8265
METRICS_PORT = 8080
DASHBOARD_AGENT_LISTEN_PORT = 52365
LOOPBACK = "127.0.0.1"
# Raylet settings for a small machine (RayConfig names, read from RAY_<name>).
SMALL_MACHINE_RAY_ENV = {
    "RAY_prestart_worker_first_driver": "0",
    "RAY_enable_worker_prestart": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_raylet_start_wait_time_s": "180",
    "RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT": "300",
}
_SUFFIXES = {"Ki": 1024, "Mi": MIB, "Gi": GIB, "Ti": 1024**4, "k": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4}


def quantity(value: str | int) -> float:
    """A Kubernetes resource quantity ("20", "500m", "461Gi") as a number."""
    text = str(value)
    if text.endswith("m"):
        return float(text[:-1]) / 1000
    for suffix, factor in _SUFFIXES.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text)


@dataclass(frozen=True)
class RayNode:
    name: str
    head: bool
    params: dict[str, str]
    env: dict[str, str]
    # What the manifest asked for where the drill scaled it down: param -> (manifest, drill).
    scaled: dict[str, tuple[str, str]] = field(default_factory=dict)

    def start_command(self, ray: Path) -> list[str]:
        return [str(ray), "start", *convert_param_map(self.params)]


# `ray start` flags that take an explicit true/false (convertParamMap in pod.go).
_VALUED_BOOLEAN_FLAGS = ("log-color", "include-dashboard", "include-log-monitor")


def convert_param_map(params: dict[str, str]) -> list[str]:
    """KubeRay's `convertParamMap`: sorted flags; "true" is a bare switch, "false" drops it."""
    flags = []
    for name in sorted(params):
        value = params[name]
        if value.lower() in ("true", "false") and name not in _VALUED_BOOLEAN_FLAGS:
            if value.lower() == "true":
                flags.append(f"--{name}")
        else:
            flags.append(f"--{name}={value}")
    return flags


def kuberay_params(group: dict[str, Any], *, head: bool) -> dict[str, str]:
    """rayStartParams completed as KubeRay v1.7.0 completes them (before the drill's changes)."""
    params = {name: str(value) for name, value in group.get("rayStartParams", {}).items()}
    container = group["template"]["spec"]["containers"][0]
    limits = container.get("resources", {}).get("limits", {})
    requests = container.get("resources", {}).get("requests", {})
    if "num-cpus" not in params and (cpu := limits.get("cpu") or requests.get("cpu")):
        params["num-cpus"] = str(int(quantity(cpu)))
    if "memory" not in params and (memory := limits.get("memory")):
        params["memory"] = str(int(quantity(memory)))
    if "num-gpus" not in params and (gpus := limits.get(GPU_RESOURCE)):
        params["num-gpus"] = str(int(quantity(gpus)))
    if head:
        params.setdefault("dashboard-host", "0.0.0.0")
    params.setdefault("metrics-export-port", str(METRICS_PORT))
    params.setdefault("dashboard-agent-listen-port", str(DASHBOARD_AGENT_LISTEN_PORT))
    return params


def container_env(group: dict[str, Any], paths: PathMap) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in group["template"]["spec"]["containers"][0].get("env", []):
        if "value" in item:
            env[item["name"]] = paths.text(str(item["value"]))
    return env


def plan_cluster(
    spec: dict[str, Any], *, paths: PathMap, base_env: Mapping[str, str], temp_root: Path, token: str
) -> list[RayNode]:
    """One RayNode per pod of a RayCluster spec: the head, then each worker group's replicas. Each node has its own
    Ray temp dir under `temp_root`, as each pod has its own filesystem (and its own log monitor's files)."""
    if spec.get("authOptions", {}).get("mode") != "token":
        raise ValueError("the RayCluster has no token authentication (authOptions.mode: token)")
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    groups = [("head", spec["headGroupSpec"], True)]
    for group in spec.get("workerGroupSpecs", []):
        for replica in range(int(group.get("replicas", group.get("minReplicas", 0)))):
            groups.append((f"{group['groupName']}-{replica}", group, False))
    nodes = []
    for index, (name, group, head) in enumerate(groups):
        node = _node(name, group, head=head, index=index, paths=paths, base_env=base_env, auth=auth)
        node.params["temp-dir"] = str(temp_root / f"n{index}")
        nodes.append(node)
    return nodes


def _node(
    name: str,
    group: dict[str, Any],
    *,
    head: bool,
    index: int,
    paths: PathMap,
    base_env: Mapping[str, str],
    auth: dict[str, str],
) -> RayNode:
    params = kuberay_params(group, head=head)
    scaled: dict[str, tuple[str, str]] = {}
    for param, size in (("memory", NODE_MEMORY), ("object-store-memory", NODE_OBJECT_STORE)):
        if param in params and int(params[param]) > size:
            scaled[param] = (params[param], str(size))
            params[param] = str(size)
    params["node-ip-address"] = LOOPBACK
    params["metrics-export-port"] = str(int(params["metrics-export-port"]) + index)
    params["dashboard-agent-listen-port"] = str(int(params["dashboard-agent-listen-port"]) + index)
    if head:
        params = {"head": "true", **params, "port": str(GCS_PORT), "dashboard-port": str(DASHBOARD_PORT)}
        params["dashboard-host"] = LOOPBACK
    else:
        params["address"] = f"{LOOPBACK}:{GCS_PORT}"
    params["disable-usage-stats"] = "true"
    env = {**base_env, **SMALL_MACHINE_RAY_ENV, **container_env(group, paths), **auth}
    return RayNode(name=name, head=head, params=params, env=env, scaled=scaled)


@dataclass
class RunningCluster:
    nodes: list[RayNode]
    ray: Path
    python: Path
    token: str
    log: Path

    @property
    def gcs_address(self) -> str:
        return f"{LOOPBACK}:{GCS_PORT}"

    @property
    def dashboard_url(self) -> str:
        return f"http://{LOOPBACK}:{DASHBOARD_PORT}"

    @property
    def client_env(self) -> dict[str, str]:
        """The environment of a process that talks to the cluster as KubeRay's submitter does."""
        return dict(self.nodes[0].env)

    def add(self, node: RayNode, timeout: float) -> None:
        """Start one more node and wait until it is alive."""
        start_node(self, node)
        self.nodes.append(node)
        wait_for_nodes(self, len(self.nodes), timeout)

    def stop(self) -> None:
        """`ray stop --force`: the drill runs in its own PID namespace, so this reaches its own Ray processes only."""
        with self.log.open("a", encoding="utf-8") as out:
            subprocess.run([str(self.ray), "stop", "--force"], env=self.client_env, stdout=out, stderr=out, check=False)


def start_cluster(
    nodes: list[RayNode], *, ray: Path, python: Path, token: str, log: Path, timeout: float
) -> RunningCluster:
    """Start the head, then each worker, then wait until all are alive. One at a time: on two cores, raylets that
    start side by side miss Ray's registration deadline."""
    cluster = RunningCluster(nodes=nodes, ray=ray, python=python, token=token, log=log)
    for node in nodes:
        start_node(cluster, node)
    resources = wait_for_nodes(cluster, len(nodes), timeout)
    cluster_log = {"nodes": len(nodes), "resources": resources}
    with log.open("a", encoding="utf-8") as out:
        out.write(json.dumps(cluster_log) + "\n")
    return cluster


def start_node(cluster: RunningCluster, node: RayNode) -> None:
    """`ray start` of one node, its output in cluster-<node>.log; the whole cluster stops if it fails."""
    node_log = cluster.log.with_name(f"{cluster.log.stem}-{node.name}.log")
    with node_log.open("w", encoding="utf-8") as out:
        out.write(f"$ {' '.join(node.start_command(cluster.ray))}\n")
        out.flush()
        result = subprocess.run(node.start_command(cluster.ray), env=node.env, stdout=out, stderr=out, check=False)
    if result.returncode != 0:
        cluster.stop()
        raise RuntimeError(f"`ray start` of node {node.name} failed (exit {result.returncode}; see {node_log})")


_NODES_PROBE = """
import json, sys, urllib.request, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
alive = [n for n in ray.nodes() if n["Alive"]]
try:
    dashboard = b"success" in urllib.request.urlopen(sys.argv[2] + "/api/gcs_healthz", timeout=10).read()
except OSError:
    dashboard = False
print(json.dumps({"alive": len(alive), "dashboard": dashboard, "resources": ray.cluster_resources()}))
"""


def wait_for_nodes(cluster: RunningCluster, count: int, timeout: float) -> dict[str, float]:
    """The cluster's resources once `count` nodes are alive and the dashboard answers (a driver connects with the
    cluster's token)."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        probe = subprocess.run(
            [str(cluster.python), "-c", _NODES_PROBE, cluster.gcs_address, cluster.dashboard_url],
            env=cluster.client_env,
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0:
            state = json.loads(probe.stdout.strip().splitlines()[-1])
            if state["alive"] >= count and state["dashboard"]:
                return dict(state["resources"])
            last = f"{state['alive']} of {count} nodes alive, dashboard {'up' if state['dashboard'] else 'down'}"
        else:
            last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        time.sleep(2)
    cluster.stop()
    raise RuntimeError(f"the Ray cluster did not come up within {timeout:.0f} s ({last})")
