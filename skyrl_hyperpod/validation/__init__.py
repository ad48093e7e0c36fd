"""Offline validation of the synthesized Kubernetes manifests (docs/validation.md).

- `ray.io/v1` objects: KubeRay v1.7.0 CRD schemas the way the API server applies them (defaults
  first, then validation with unknown fields rejected instead of silently pruned), then the CRDs'
  CEL rules (`cel_rules`: those that apply on create; update-only rules are reported SKIPPED by
  name), then the KubeRay operator's own spec checks (`kuberay_operator`, on objects that passed).
- `karpenter.sh/v1` NodePools: Karpenter's CRD at the pinned release (schema and CEL rules; SKIPPED with its reason
  where the CRD is not on this machine); HyperpodNodeClasses: the fields AWS documents (`karpenter`).
- Core objects: Kubernetes' strict JSON schemas for the configured version (kubernetes-validate).
- RayService `serveConfigV2`: Ray's own Serve and Serve LLM schema classes, when Ray at the
  serving version is installed; otherwise the check reports itself SKIPPED (a `CheckSkipped`
  warning), never as passed.
- `deployability_problems`: placeholder stack outputs, for the `validate` step.

Schemas are loaded once per process; a serveConfigV2 that passed Ray's check is remembered on disk
(see `cache`), so a synth of an unchanged RayService does not import Ray again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config.project import ProjectConfig
from ..plumbing.json_types import JsonObject
from ..plumbing.upstream import HYPERPOD_NODECLASS_GROUP, KUBERAY_API_VERSION
from . import cel_rules, crds, karpenter, kubernetes, serve_config, skyrl_overrides
from .placeholder_outputs import deployability_problems
from .report import CheckSkipped, object_label, skipped

__all__ = [
    "CheckSkipped",
    "deployability_problems",
    "validate_manifests",
    "validation_report",
    "validate_skyrl_overrides",
]


def validate_manifests(docs: list[JsonObject], *, config: ProjectConfig, crds_dir: Path | None = None) -> list[str]:
    """One line per problem ("<kind>/<name>: <json path>: <message>"); empty when every object is valid.

    Raises InputError (one line) when the KubeRay CRDs cannot be found or are not v1.7.0.
    """
    problems, _ = validation_report(docs, config=config, crds_dir=crds_dir)
    return problems


def validation_report(
    docs: list[Any], *, config: ProjectConfig, crds_dir: Path | None = None
) -> tuple[list[str], list[str]]:
    """(problems, "SKIPPED <check>: <reason>" lines); each skip also warns `CheckSkipped`."""
    kubernetes_version = config.eks.kubernetes_version
    problems: list[str] = []
    skips: list[str] = []
    seen: dict[tuple[str, str, str, str], int] = {}
    kinds_seen: set[str] = set()
    for index, doc in enumerate(docs):
        label = object_label(doc, index)
        if not isinstance(doc, dict):
            problems.append(f"{label}: .: expected a Kubernetes object (a mapping), got {type(doc).__name__}")
            continue
        missing = [key for key in ("apiVersion", "kind") if not isinstance(doc.get(key), str) or not doc.get(key)]
        if missing:
            problems += [f"{label}: {key}: required field is missing" for key in missing]
            continue
        identity = (doc["apiVersion"].split("/")[0], doc["kind"], _namespace(doc), label)
        if identity in seen:
            problems.append(f"{label}: metadata.name: duplicates document {seen[identity]} (same kind and namespace)")
        seen.setdefault(identity, index)
        if doc["apiVersion"].split("/")[0] == "ray.io":
            lines = crds.kuberay_problems(doc, kubernetes_version=kubernetes_version, crds_dir=crds_dir)
            if doc["kind"] in crds.KUBERAY_KINDS and doc["kind"] not in kinds_seen:
                kinds_seen.add(doc["kind"])
                reason = crds.cel_rules_not_evaluated(doc["kind"], crds_dir)
                if reason:
                    skips.append(skipped(f"{doc['kind']} {cel_rules.CHECK_NAME}s", f"not evaluated: {reason}"))
        elif doc["apiVersion"].split("/")[0] in ("karpenter.sh", HYPERPOD_NODECLASS_GROUP):
            lines = _karpenter_problems(doc, kinds_seen, skips)
        else:
            lines = kubernetes.core_problems(doc, kubernetes_version)
        problems += [f"{label}: {line}" for line in lines]
        if _is_ray_service(doc):
            spec = doc["spec"] if isinstance(doc.get("spec"), dict) else {}
            if "serveConfigV2" in spec:
                lines, reason = serve_config.serve_config_problems(
                    spec["serveConfigV2"], config.serving_image.ray_version
                )
                problems += [f"{label}: spec.serveConfigV2: {line}" for line in lines]
                if reason:
                    skips.append(skipped(f"{serve_config.CHECK_NAME} ({label})", reason))
    return problems, skips


def _karpenter_problems(doc: JsonObject, kinds_seen: set[str], skips: list[str]) -> list[str]:
    """A NodePool against Karpenter's CRD (each skipped check reported once), a HyperpodNodeClass against ours."""
    if doc["apiVersion"].split("/")[0] == HYPERPOD_NODECLASS_GROUP:
        return karpenter.nodeclass_problems(doc)
    lines, reason = karpenter.nodepool_problems(doc)
    if karpenter.CHECK_NAME not in kinds_seen:
        kinds_seen.add(karpenter.CHECK_NAME)
        if reason:
            skips.append(skipped(karpenter.CHECK_NAME, reason))
        elif rules_reason := karpenter.cel_rules_not_evaluated():
            skips.append(skipped(f"NodePool {cel_rules.CHECK_NAME}s", f"not evaluated: {rules_reason}"))
    return lines


def validate_skyrl_overrides(overrides: list[str]) -> list[str]:
    """Problems SkyRL's own config classes find in dotted key=value overrides (empty when valid).

    When SkyRL cannot be imported here the check warns `CheckSkipped` and returns no problems.
    """
    problems, reason = skyrl_overrides.skyrl_override_problems(overrides)
    if reason:
        skipped(skyrl_overrides.CHECK_NAME, reason)
    return problems


def _is_ray_service(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("apiVersion") == KUBERAY_API_VERSION and doc.get("kind") == "RayService"


def _namespace(doc: JsonObject) -> str:
    metadata = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
    return str(metadata.get("namespace") or "")
