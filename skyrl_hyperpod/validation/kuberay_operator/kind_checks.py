"""What the operator checks of RayCluster, RayJob and RayService share.

The finding type and the check signature of the kind tables, the feature gates, the name limits, the
metadata check (ValidateRayClusterMetadata, ValidateRayJobMetadata and ValidateRayServiceMetadata are one
rule with a per-kind length), and the small readers of a defaulted object that every kind's checks use.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeAlias

from ...plumbing.json_types import JsonArray, JsonObject, JsonPath
from ...plumbing.upstream import KUBERAY_NAME_PATTERN, RAYCLUSTER_NAME_MAX, RAYJOB_NAME_MAX

# What the kuberay-operator Helm chart 1.7.0 sets (values.yaml `featureGates`), the same as the operator's
# defaults in ray-operator/pkg/features/features.go.
FEATURE_GATES: Mapping[str, bool] = {
    "RayJobDeletionPolicy": True,
    "RayServiceIncrementalUpgrade": True,
    "RayClusterNetworkPolicy": False,
    "GCSFaultToleranceEmbeddedStorage": False,
    "RayClusterMTLS": False,
    "RayClusterHistoryServer": False,
}

KUBERAY_CONTROLLER = "ray.io/kuberay-operator"
# Longest object names, as KubeRay's utils/constant.go sets them: it derives the names of pods, services
# and the clusters of jobs and services from them.
MAX_NAME_LENGTH = {"RayCluster": RAYCLUSTER_NAME_MAX, "RayJob": RAYJOB_NAME_MAX, "RayService": RAYJOB_NAME_MAX}

_DNS1035_LABEL = re.compile(KUBERAY_NAME_PATTERN)

Finding: TypeAlias = tuple[JsonPath, str, str]  # (JSON path, message, Go function)
# One entry of a kind's table: the defaulted object and the feature gates in, its findings out.
KindCheck: TypeAlias = Callable[[JsonObject, Mapping[str, bool]], Iterator[Finding]]


def mapping(value: Any) -> JsonObject:
    """The value when it is a mapping, else an empty one (an absent field reads as Go's zero value)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> JsonArray:
    """The value when it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def metadata(doc: JsonObject) -> JsonObject:
    return mapping(doc.get("metadata"))


def spec_of(doc: JsonObject) -> JsonObject:
    return mapping(doc.get("spec"))


def annotations_of(doc: JsonObject) -> JsonObject:
    return mapping(metadata(doc).get("annotations"))


def env_by_name(container_or_options: JsonObject) -> dict[str, JsonObject]:
    """A container's (or autoscalerOptions') env entries by name, as KubeRay's EnvVarByName finds them."""
    return {str(e.get("name")): e for e in as_list(container_or_options.get("env")) if isinstance(e, dict)}


def autoscaling(cluster_spec: JsonObject) -> bool:
    """IsAutoscalingEnabled (ray-operator/controllers/ray/utils/util.go)."""
    return cluster_spec.get("enableInTreeAutoscaling") is True


def validate_metadata(doc: JsonObject, gates: Mapping[str, bool]) -> Iterator[Finding]:
    """ValidateRayClusterMetadata, ValidateRayJobMetadata, ValidateRayServiceMetadata: the name's length and form."""
    kind, name = doc["kind"], metadata(doc).get("name")
    source = f"Validate{kind}Metadata"
    if not isinstance(name, str):
        return
    limit = MAX_NAME_LENGTH[kind]
    if len(name) > limit:
        yield (
            ["metadata", "name"],
            f"{name!r} has {len(name)} characters; KubeRay allows at most {limit} for {kind}",
            source,
        )
    if len(name) > 63 or not _DNS1035_LABEL.match(name):
        yield (
            ["metadata", "name"],
            f"{name!r} is not a DNS-1035 label (lowercase letters, digits, '-'; starts with a letter)",
            source,
        )
