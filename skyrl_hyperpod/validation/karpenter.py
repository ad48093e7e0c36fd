"""HyperPod's managed Karpenter objects: the NodePool against Karpenter's own v1 CRD at a pinned release, the
HyperpodNodeClass against the fields AWS documents for it (a schema of ours: AWS publishes no CRD for it).

The NodePool CRD is never copied into this repository. It is read from, in order: the `crds_dir` argument,
$KARPENTER_CRDS_DIR, or the default of `locations.default_upstream_dir` (../shared/karpenter-crds/<tag> beside a
checkout, the user's cache directory for an installed package), where `skyrl-hp fetch karpenter-crds` writes it after
checking its sha256. Where it is absent the NodePool's CRD check reports itself SKIPPED, never passed.
"""

from __future__ import annotations

import copy
import hashlib
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from jsonschema import Draft4Validator

from ..plumbing.errors import InputError
from ..plumbing.json_types import JsonObject
from ..plumbing.locations import default_upstream_dir
from ..plumbing.upstream import (
    HYPERPOD_NODECLASS_API_VERSION,
    HYPERPOD_NODECLASS_KIND,
    KARPENTER_API_VERSION,
    KARPENTER_TAG,
    NODECLASS_MAX_INSTANCE_GROUPS,
)
from . import cel_rules, structural
from .report import json_path

CRDS_DIR_ENV_VAR = "KARPENTER_CRDS_DIR"
DEFAULT_CRDS_DIR = default_upstream_dir(f"karpenter-crds/{KARPENTER_TAG}")
FETCH_COMMAND = "skyrl-hp fetch karpenter-crds --dest DIR"
CHECK_NAME = f"Karpenter {KARPENTER_TAG} NodePool CRD check"
# https://github.com/kubernetes-sigs/karpenter/tree/v1.14.1/pkg/apis/crds
RAW_URL = "https://raw.githubusercontent.com/kubernetes-sigs/karpenter/{tag}/pkg/apis/crds/{file}"


@dataclass(frozen=True)
class KarpenterKind:
    kind: str
    file_name: str
    sha256: str


# sha256 of the file at the Karpenter v1.14.1 tag (pkg/apis/crds/).
NODEPOOL = KarpenterKind(
    "NodePool", "karpenter.sh_nodepools.yaml", "62990043212a239704c0195bbd37abd0fddad90a586f5b37dfb403a0a0aefe1e"
)
KARPENTER_KINDS = {NODEPOOL.kind: NODEPOOL}

# HyperpodNodeClass: the fields of the AWS page's NodeClass (https://docs.aws.amazon.com/sagemaker/latest/dg/
# sagemaker-hyperpod-eks-autoscaling-nodeclass.html): spec.instanceGroups, the names of up to 10 HyperPod instance
# groups (names as CreateCluster takes them: ClusterInstanceGroupSpecification.InstanceGroupName,
# https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterInstanceGroupSpecification.html). Nothing else is
# documented for its spec, so nothing else is accepted; its status is the service's.
NODECLASS_SCHEMA: JsonObject = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"enum": [HYPERPOD_NODECLASS_API_VERSION]},
        "kind": {"enum": [HYPERPOD_NODECLASS_KIND]},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string", "minLength": 1}},
        },
        "spec": {
            "type": "object",
            "required": ["instanceGroups"],
            "additionalProperties": False,
            "properties": {
                "instanceGroups": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": NODECLASS_MAX_INSTANCE_GROUPS,
                    "uniqueItems": True,
                    "items": {"type": "string", "pattern": r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"},
                }
            },
        },
    },
}


def resolve_crds_dir(crds_dir: Path | str | None = None) -> Path:
    if crds_dir is not None:
        return Path(crds_dir)
    return Path(os.environ.get(CRDS_DIR_ENV_VAR) or DEFAULT_CRDS_DIR)


@cache
def nodepool_schema(directory: Path) -> JsonObject:
    """spec.versions[name=v1].schema.openAPIV3Schema of the NodePool CRD, after a checksum check."""
    from ..plumbing.yaml_loading import safe_load

    path = directory / NODEPOOL.file_name
    data = path.read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    if actual != NODEPOOL.sha256:
        raise InputError(
            [
                f"validation error: {path} is not the Karpenter {KARPENTER_TAG} NodePool CRD (sha256 {actual}, "
                f"expected {NODEPOOL.sha256}); download it again with `{FETCH_COMMAND}`"
            ]
        )
    document = safe_load(data)
    versions = [v for v in document["spec"]["versions"] if v.get("name") == "v1"]
    if document.get("spec", {}).get("names", {}).get("kind") != NODEPOOL.kind or not versions:
        raise InputError([f"validation error: {path} does not define {KARPENTER_API_VERSION} {NODEPOOL.kind}"])
    schema: JsonObject = versions[0]["schema"]["openAPIV3Schema"]
    return schema


@cache
def _nodepool_validator(directory: Path) -> Draft4Validator:
    return Draft4Validator(structural.strict_schema(nodepool_schema(directory)))


@cache
def _nodepool_rules(directory: Path) -> cel_rules.CompiledRules:
    return cel_rules.compile_rules(cel_rules.schema_rules(NODEPOOL.kind, nodepool_schema(directory)))


def missing_crd_reason(crds_dir: Path | str | None = None) -> str | None:
    """Why the NodePool CRD check cannot run here, or None when the CRD is where validation looks."""
    directory = resolve_crds_dir(crds_dir)
    if (directory / NODEPOOL.file_name).is_file():
        return None
    return (
        f"{NODEPOOL.file_name} not in {directory} (${CRDS_DIR_ENV_VAR}); download it with `{FETCH_COMMAND}` "
        "(make karpenter-crds)"
    )


def nodepool_problems(doc: JsonObject, *, crds_dir: Path | str | None = None) -> tuple[list[str], str | None]:
    """(problems, why the check was skipped) of a karpenter.sh/v1 NodePool: the CRD's schema the way the API server
    applies it (defaults, unknown fields refused), then its CEL rules that apply on create."""
    if doc.get("apiVersion") != KARPENTER_API_VERSION or doc.get("kind") not in KARPENTER_KINDS:
        return [f"apiVersion/kind: {doc.get('apiVersion')}/{doc.get('kind')} is not a Karpenter kind validated here "
                f"({KARPENTER_API_VERSION} {', '.join(KARPENTER_KINDS)})"], None  # fmt: skip
    reason = missing_crd_reason(crds_dir)
    if reason:
        return [], reason
    directory = resolve_crds_dir(crds_dir).resolve()
    defaulted = copy.deepcopy(doc)
    structural.apply_defaults(defaulted, nodepool_schema(directory))
    problems = sorted(
        {
            f"{json_path(path)}: {message}"
            for error in _nodepool_validator(directory).iter_errors(defaulted)
            for path, message in structural.describe(error)
        }
    )
    return problems + cel_rules.evaluate(_nodepool_rules(directory), defaulted), None


def cel_rules_not_evaluated(crds_dir: Path | str | None = None) -> str | None:
    """Why some of the NodePool CRD's CEL rules are not evaluated on a create (None when all are, or no CRD)."""
    if missing_crd_reason(crds_dir):
        return None
    return cel_rules.not_evaluated_reason(_nodepool_rules(resolve_crds_dir(crds_dir).resolve()))


def nodeclass_problems(doc: JsonObject) -> list[str]:
    """Problems of a HyperpodNodeClass against the fields the AWS page documents."""
    validator = Draft4Validator(NODECLASS_SCHEMA)
    return sorted(
        {
            f"{json_path(path)}: {message}"
            for error in validator.iter_errors(doc)
            for path, message in structural.describe(error)
        }
    )
