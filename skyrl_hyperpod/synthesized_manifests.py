"""The one reader of synthesized Kubernetes manifests (`cdk8s synth`'s dist/), for validate and review."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .errors import ProblemsError
from .yaml_loading import safe_load_all

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")

# The charts, in apply order (charts/__init__.py builds them; `skyrl-hp train/serve/adapter` apply them).
PLATFORM_CHART = "01-platform"
RAYCLUSTER_CHART = "02-raycluster"
RAYJOBS_CHART = "03-rayjobs"
PUBLISH_CHART = "04-publish-adapter"
RAYSERVICE_CHART = "05-rayservice"


def chart_file(chart_id: str) -> str:
    """The file `cdk8s synth` writes a chart to (one file per chart)."""
    return f"{chart_id}.k8s.yaml"


@dataclass(frozen=True)
class ManifestDocument:
    file: Path
    number: int  # 1-based position of the document in its file
    content: Any


def read_manifest_documents(directory: Path, *, prefix: str) -> list[ManifestDocument]:
    """Every non-empty document of the manifest files under `directory`, in file-name order.

    Problems start with `prefix` (e.g. "validation error") so each command's errors read alike."""
    if not directory.is_dir():
        raise ProblemsError([f"{prefix}: manifest directory {str(directory)!r} does not exist (run cdk8s synth)"])
    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix in MANIFEST_SUFFIXES)
    if not files:
        raise ProblemsError([f"{prefix}: no *.yaml, *.yml or *.json manifests in {str(directory)!r}"])
    documents: list[ManifestDocument] = []
    for path in files:
        try:
            loaded = safe_load_all(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise ProblemsError(
                [f"{prefix}: {path} is not valid YAML{where}: {getattr(exc, 'problem', exc)}"]
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ProblemsError([f"{prefix}: cannot read {path}: {exc}"]) from None
        documents += [
            ManifestDocument(path, number, doc) for number, doc in enumerate(loaded, start=1) if doc is not None
        ]
    return documents
