"""The RayService on real Ray Serve: its RayCluster on 127.0.0.1 at the serving image's Ray, its serveConfigV2
deployed the way KubeRay deploys it (a PUT to the dashboard's Serve API with the cluster's token).

Serve parses and validates the config, starts its controller and HTTP proxy, and builds the application from
`ray.serve.llm:build_openai_app`. That import needs Ray Serve LLM's engine, vLLM (in the serving image, a CUDA
build next to its CUDA torch): this environment has Ray Serve at the serving image's version but no vLLM, so
the build stops there, which is the drill's boundary for serving. Everything after it (the engine's GPU
placement, the model load from /shared, the adapters from S3) needs the serving image on a GPU node.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import kuberay
from .cluster import RunningCluster, plan_cluster, start_cluster
from .layout import PathMap, pod_mounts
from .manifests import Manifests

DEPLOY_TIMEOUT_SECONDS = 600
# The application statuses Serve settles in (ray.serve.schema.ApplicationStatus).
SETTLED = ("RUNNING", "DEPLOY_FAILED", "UNHEALTHY")
ENGINE_IMPORT_ERROR = "Neither vLLM nor SGLang is installed"
BUILD_IMPORT = "import ray.serve.llm"


@dataclass
class ServingCluster:
    run_dir: Path
    manifests: Manifests
    python: Path
    rayservice: dict[str, Any]
    paths: PathMap = field(init=False)
    cluster: RunningCluster = field(init=False)
    token: str = field(init=False)

    def start(self, timeout: float) -> None:
        spec = self.rayservice["spec"]["rayClusterConfig"]
        mounts: dict[str, Path] = {}
        for template in [spec["headGroupSpec"]["template"], *(g["template"] for g in spec.get("workerGroupSpecs", []))]:
            mounts.update(pod_mounts(template, self.run_dir, self.manifests))
        self.paths = PathMap(mounts)
        self.token = kuberay.random_token()
        base_env = {
            "PATH": f"{self.python.parent}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.run_dir / "home-serving"),
            "TMPDIR": str(self.run_dir / "tmp"),
            "LANG": "C.UTF-8",
        }
        (self.run_dir / "home-serving").mkdir(exist_ok=True)
        (self.run_dir / "tmp").mkdir(exist_ok=True)
        nodes = plan_cluster(spec, paths=self.paths, base_env=base_env, temp_root=self.run_dir / "s", token=self.token)
        log = self.run_dir / "serving-cluster.log"
        self.cluster = start_cluster(
            nodes, ray=self.python.parent / "ray", python=self.python, token=self.token, log=log, timeout=timeout
        )

    def deploy(self) -> tuple[int, int, str]:
        """(HTTP status without a token, HTTP status with the cluster's token, response) of KubeRay's PUT."""
        config = json.loads(self.paths.text(json.dumps(kuberay.serve_config_json(self.rayservice))))
        url = self.cluster.dashboard_url + kuberay.SERVE_DEPLOY_PATH
        anonymous, _ = kuberay.request("PUT", url, body=config)
        status, body = kuberay.request("PUT", url, body=config, token=self.token, header="x-ray-authorization")
        return anonymous, status, body

    def wait_for_applications(self, timeout: float) -> dict[str, Any]:
        return wait_for_settled(self.cluster, self.token, timeout, poll_s=3)

    def stop(self) -> None:
        self.cluster.stop()


def wait_for_settled(cluster: RunningCluster, token: str, timeout: float, *, poll_s: float) -> dict[str, Any]:
    """GET /api/serve/applications/ until every application has settled (or `timeout`): the last details read."""
    url = cluster.dashboard_url + kuberay.SERVE_DEPLOY_PATH
    deadline = time.monotonic() + timeout
    details: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            code, body = kuberay.request("GET", url, token=token, header="x-ray-authorization")
        except OSError as error:
            # A `ray stop` run on the machine outside the drill's namespaces also ends the drill's Ray.
            raise RuntimeError(f"the serving cluster's dashboard stopped answering ({error})") from None
        if code == 200:
            details = json.loads(body)
            applications = details.get("applications") or {}
            if applications and all(app.get("status") in SETTLED for app in applications.values()):
                return details
        time.sleep(poll_s)
    return details
