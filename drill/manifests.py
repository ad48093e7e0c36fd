"""The synthesized manifests the drill runs (`cdk8s synth` output: one YAML file per chart)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class Manifests:
    documents: tuple[dict[str, Any], ...]

    @classmethod
    def load(cls, directory: Path) -> Manifests:
        files = sorted(directory.glob("*.yaml"))
        if not files:
            raise FileNotFoundError(f"{directory}: no manifests (run `make synth-k8s` first)")
        documents = [doc for path in files for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
        return cls(tuple(documents))

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [doc for doc in self.documents if doc.get("kind") == kind]

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [doc for doc in self.of_kind(kind) if name is None or doc["metadata"]["name"] == name]
        if len(found) != 1:
            raise ValueError(f"expected one {kind}{f' {name!r}' if name else ''} in the manifests, found {len(found)}")
        return found[0]

    def config_map(self, name: str) -> dict[str, Any]:
        return self.one("ConfigMap", name)

    def rayjobs(self) -> list[dict[str, Any]]:
        return self.of_kind("RayJob")

    def cluster_of(self, rayjob: dict[str, Any]) -> dict[str, Any]:
        """The RayCluster spec a RayJob runs on: its own (rayClusterSpec) or the one its clusterSelector names."""
        spec = rayjob["spec"]
        if "rayClusterSpec" in spec:
            own: dict[str, Any] = spec["rayClusterSpec"]
            return own
        name = spec["clusterSelector"]["ray.io/cluster"]
        selected: dict[str, Any] = self.one("RayCluster", name)["spec"]
        return selected
