"""One run of the drill: the configuration, the synthesized manifests, the drill's environment, its run directory,
and the Ray clusters it starts (the training RayCluster, the RayService's cluster). The scenarios receive it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skyrl_hyperpod.config import ProjectConfig

from .manifests import Manifests
from .serving_cluster import ServingCluster
from .training_cluster import DrillEnv, TrainingCluster

CLUSTER_TIMEOUT_SECONDS = 300


@dataclass
class Drill:
    config: ProjectConfig
    manifests: Manifests
    env: DrillEnv
    run_dir: Path
    # SkyRL's VisGym example (the verified copy): the image's checkout holds it.
    example_dir: Path
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

    def start_training(self, *, cpu_training: bool = False) -> str:
        # Jobs on the shared RayCluster, or each with its own (identical) rayClusterSpec: one cluster runs them all.
        specs = {json.dumps(self.manifests.cluster_of(job), sort_keys=True) for job in self.rayjobs}
        if len(specs) != 1:
            raise ValueError(f"the RayJobs run on {len(specs)} different cluster specs; the drill starts one cluster")
        spec = json.loads(specs.pop())
        cluster = TrainingCluster(self.run_dir, self.manifests, self.config, self.env, spec, self.example_dir)
        if cpu_training:
            cluster.inference_node = True
        cluster.start(CLUSTER_TIMEOUT_SECONDS)
        self._training = cluster
        return cluster.describe()

    def stop_training(self) -> None:
        if self._training is not None:
            self._training.stop()
            self._training = None

    def start_cpu_training(self) -> str:
        """The training cluster for real steps on CPU: the manifest's nodes plus the inference engine's node."""
        return self.start_training(cpu_training=True)

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

    def describe_publish_and_serve(self) -> str:
        if self.env.serve_llm_env is None:
            raise ValueError("publishing and serving need the serving environment: --serve-env (make drill-serve-env)")
        return f"moto's S3 server and the RayService's cluster on {self.env.serve_llm_env}"

    def stop_serving(self) -> None:
        if self._serving is not None:
            self._serving.stop()
            self._serving = None
