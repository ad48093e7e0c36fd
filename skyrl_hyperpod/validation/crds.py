"""KubeRay v1.7.0 CustomResourceDefinitions: where they are, what they must hash to, their schemas and each
kind's compiled CEL rules; `kuberay_problems` runs the validation layers on one ray.io object.

The CRDs are never copied into this repository. They are read from, in order: the `crds_dir`
argument, $KUBERAY_CRDS_DIR, or the default of `locations.default_upstream_dir` (../shared/kuberay-crds/v1.7.0
beside a checkout, the user's cache directory for an installed package), where `skyrl-hp fetch crds` writes them.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jsonschema import Draft4Validator, validators

from ..plumbing.errors import InputError
from ..plumbing.json_types import JsonObject
from ..plumbing.locations import default_upstream_dir
from ..plumbing.upstream import KUBERAY_API_VERSION, KUBERAY_TAG
from . import cel_rules, kuberay_operator, structural

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

CRDS_DIR_ENV_VAR = "KUBERAY_CRDS_DIR"
DEFAULT_CRDS_DIR = default_upstream_dir(f"kuberay-crds/{KUBERAY_TAG}")
FETCH_COMMAND = "skyrl-hp fetch crds --dest DIR"


@dataclass(frozen=True)
class KubeRayKind:
    kind: str
    file_name: str
    sha256: str


# sha256 sums of the files at the KubeRay v1.7.0 tag (ray-operator/config/crd/bases/).
KUBERAY_KINDS: dict[str, KubeRayKind] = {
    k.kind: k
    for k in (
        KubeRayKind(
            "RayCluster", "ray.io_rayclusters.yaml", "c44704442eef0c6721ad40c1d66782c8bd3fdab9d3344306a5820910a679baa1"
        ),
        KubeRayKind(
            "RayJob", "ray.io_rayjobs.yaml", "01a5cf3b17c1769fda44af7e82debcd98722f0c27b9ab84d084681c6649121f5"
        ),
        KubeRayKind(
            "RayService", "ray.io_rayservices.yaml", "0a8fc325e6e22b9231c1f282b309555e2ecf94227ca20a03df3d1d9a403907ab"
        ),
    )
}


def resolve_crds_dir(crds_dir: Path | str | None = None) -> Path:
    """The CRD directory to use; a one-line InputError when it is missing or incomplete."""
    if crds_dir is not None:
        directory, origin = Path(crds_dir), "crds_dir"
    elif os.environ.get(CRDS_DIR_ENV_VAR):
        directory, origin = Path(os.environ[CRDS_DIR_ENV_VAR]), f"${CRDS_DIR_ENV_VAR}"
    else:
        directory, origin = DEFAULT_CRDS_DIR, "default location"
    if not directory.is_dir():
        raise InputError(
            [
                f"validation error: KubeRay CRDs directory {str(directory)!r} ({origin}) does not exist; "
                f"set {CRDS_DIR_ENV_VAR} or download them with `{FETCH_COMMAND}`"
            ]
        )
    missing = [k.file_name for k in KUBERAY_KINDS.values() if not (directory / k.file_name).is_file()]
    if missing:
        raise InputError(
            [
                f"validation error: KubeRay CRDs directory {str(directory)!r} lacks {', '.join(missing)}; "
                f"download them with `{FETCH_COMMAND}`"
            ]
        )
    return directory.resolve()


@cache
def crd_schema(directory: Path, kind: str) -> JsonObject:
    """spec.versions[name=v1].schema.openAPIV3Schema of the kind's CRD, after a checksum check."""
    spec = KUBERAY_KINDS[kind]
    path = directory / spec.file_name
    data = path.read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    if actual != spec.sha256:
        raise InputError(
            [
                f"validation error: {path} is not the KubeRay {KUBERAY_TAG} CRD (sha256 {actual}, "
                f"expected {spec.sha256}); download it again with `{FETCH_COMMAND}`"
            ]
        )
    document = v1_only_document(data) or _load_yaml(data)
    versions = [v for v in document["spec"]["versions"] if v.get("name") == "v1"]
    if document.get("spec", {}).get("names", {}).get("kind") != kind or not versions:
        raise InputError([f"validation error: {path} does not define {KUBERAY_API_VERSION} {kind}"])
    schema: JsonObject = versions[0]["schema"]["openAPIV3Schema"]
    return schema


def _load_yaml(data: bytes | str) -> Any:
    """Whatever the YAML holds (a CRD is a mapping; the callers check what they read)."""
    from ..plumbing.yaml_loading import safe_load

    return safe_load(data)


# In the CRD files (controller-gen's block style) each entry of spec.versions starts at this indentation.
_VERSION_ENTRY = b"\n  - "
_VERSIONS_KEY = b"\n  versions:\n"


def v1_only_document(data: bytes) -> JsonObject | None:
    """The CRD with spec.versions reduced to the v1 entry, parsing only that entry's YAML.

    Every KubeRay CRD serves v1 and the deprecated v1alpha1, each with its own full schema: parsing only
    v1 halves the time the YAML takes (bench/run.py's cold `cdk8s synth`; docs/performance.md). The split relies on the layout of the checksum-pinned files
    (tests/validation/test_validation.py checks it against a full parse); None when the layout is not the expected
    one, and the caller parses everything."""
    head, found, versions = data.partition(_VERSIONS_KEY)
    if not found:
        return None
    entries = (b"\n" + versions).split(_VERSION_ENTRY)[1:]
    v1 = [entry for entry in entries if b"\n    name: v1\n" in entry]
    if len(v1) != 1:
        return None
    document = _load_yaml(head + _VERSIONS_KEY + b"  - " + v1[0])
    ok = isinstance(document, dict) and [v.get("name") for v in document.get("spec", {}).get("versions", [])] == ["v1"]
    return document if ok else None


@cache
def crd_validator(directory: Path, kind: str, kubernetes_version: str) -> Draft4Validator:
    """A strict validator for one kind; ObjectMeta positions use Kubernetes' own ObjectMeta schema."""
    from .kubernetes import object_meta_validator

    meta_validator = object_meta_validator(kubernetes_version)

    def object_meta(validator: object, enabled: object, instance: object, schema: object) -> Iterator[ValidationError]:
        if enabled and isinstance(instance, dict):
            yield from meta_validator.iter_errors(instance)

    # OpenAPI v3.0 schemas follow draft 4 (boolean exclusiveMaximum/exclusiveMinimum).
    strict = validators.extend(Draft4Validator, {structural.OBJECT_META: object_meta})
    return strict(structural.strict_schema(crd_schema(directory, kind)))


@cache
def kind_cel_rules(directory: Path, kind: str) -> cel_rules.CompiledRules:
    """The compiled CEL rules of one kind's v1 schema, once per process.

    Here rather than in cel_rules, which evaluates rules of any schema and so needs nothing of this module.
    Not cached on disk: compiling the rules costs little next to parsing the CRD they come from (docs/performance.md)."""
    return cel_rules.compile_rules(cel_rules.schema_rules(kind, crd_schema(directory, kind)))


def kuberay_problems(doc: JsonObject, *, kubernetes_version: str, crds_dir: Path | str | None) -> list[str]:
    """Problems of a ray.io object (" <json path>: <message>" without the object label)."""
    from .report import json_path

    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if api_version != KUBERAY_API_VERSION:
        return [f"apiVersion: {api_version!r} is not served for validation; use {KUBERAY_API_VERSION!r}"]
    if kind not in KUBERAY_KINDS:
        return [f"kind: {kind!r} is not a KubeRay {KUBERAY_TAG} kind ({', '.join(KUBERAY_KINDS)})"]
    directory = resolve_crds_dir(crds_dir)
    import copy

    defaulted = copy.deepcopy(doc)
    schema = crd_schema(directory, kind)
    structural.apply_defaults(defaulted, schema)
    validator = crd_validator(directory, kind, kubernetes_version)
    problems = sorted(
        {
            f"{json_path(path)}: {message}"
            for error in validator.iter_errors(defaulted)
            for path, message in structural.describe(error)
        }
    )
    problems += cel_rules.evaluate(kind_cel_rules(directory, kind), defaulted)
    if not problems:
        # The operator only ever sees objects the API server accepted.
        problems += kuberay_operator.operator_problems(defaulted)
    name = (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), dict) else None
    from .kubernetes import name_problems

    return problems + name_problems(kind, name)


def cel_rules_not_evaluated(kind: str, crds_dir: Path | str | None) -> str | None:
    """Why some of the kind's CEL rules are not evaluated on a create (None when all are)."""
    return cel_rules.not_evaluated_reason(kind_cel_rules(resolve_crds_dir(crds_dir), kind))
