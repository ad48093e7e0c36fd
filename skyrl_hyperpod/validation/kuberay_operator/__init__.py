"""The KubeRay v1.7.0 operator's own checks of RayCluster, RayJob and RayService specs, offline.

The API server accepts objects that the operator then refuses before reconciling (the object sits
with a warning event and nothing runs). These checks restate, as facts, the rules in
ray-operator/controllers/ray/utils/validation.go at the v1.7.0 tag
(https://github.com/ray-project/kuberay/blob/v1.7.0/ray-operator/controllers/ray/utils/validation.go);
each problem line ends with the Go function it comes from. Where the operator stops at the first
failure, every failing rule is reported here.

They run on the defaulted object, and only on objects that pass the CRD schema and its CEL rules (the
operator never sees any other). Objects whose `spec.managedBy` names another controller are not
checked: the operator does not reconcile them. Status checks (ValidateRayClusterStatus,
ValidateRayJobStatus) concern what the operator writes, not a manifest. KubeRay's optional admission
webhooks (the kuberay-operator Helm chart installs none) are not modelled. Rules that the CRD already
enforces (an enum, a minimum, a CEL rule) are left to that layer, so that each failure has one line.

Feature gates: FEATURE_GATES holds what the kuberay-operator Helm chart 1.7.0 that the platform installs
sets (its values.yaml `featureGates`, the same as the operator's defaults in
ray-operator/pkg/features/features.go). Rules behind a gate that is off stop at the gate, as the operator
does; the rules after such a gate (mTLS, history-server collector details) are not encoded.

Layout: one module per kind (raycluster.py, rayjob.py, rayservice.py), each with CHECKS, a table of small
check functions named after the Go functions they mirror, run in the operator's order; kind_checks.py holds what
the kinds share (the finding type, the feature gates, the name limits and the metadata check).
"""

from __future__ import annotations

from collections.abc import Mapping

from ...plumbing.json_types import JsonObject
from ...plumbing.upstream import KUBERAY_TAG
from ..report import json_path
from . import raycluster, rayjob, rayservice
from .kind_checks import FEATURE_GATES, KUBERAY_CONTROLLER, MAX_NAME_LENGTH, KindCheck, mapping

__all__ = ["FEATURE_GATES", "MAX_NAME_LENGTH", "operator_problems"]

_KIND_CHECKS: dict[str, tuple[KindCheck, ...]] = {
    "RayCluster": raycluster.CHECKS,
    "RayJob": rayjob.CHECKS,
    "RayService": rayservice.CHECKS,
}


def operator_problems(doc: JsonObject, *, gates: Mapping[str, bool] = FEATURE_GATES) -> list[str]:
    """Problems (" <json path>: <message> (KubeRay v1.7.0 <Go function>)") of a schema-valid, defaulted object."""
    checks = _KIND_CHECKS.get(str(doc.get("kind")))
    if checks is None or mapping(doc.get("spec")).get("managedBy", KUBERAY_CONTROLLER) != KUBERAY_CONTROLLER:
        return []
    return [
        f"{json_path(path)}: {message} (KubeRay {KUBERAY_TAG} {source})"
        for check in checks
        for path, message, source in check(doc, gates)
    ]
