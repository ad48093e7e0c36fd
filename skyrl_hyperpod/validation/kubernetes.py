"""Core Kubernetes objects against Kubernetes' own (strict) JSON schemas from `kubernetes-validate`.

`kubernetes_validate.validate` re-reads the 1.4 MB definitions file on every call, so this module
resolves the same schema files through the package's helpers and keeps one validator per
(version, apiVersion, kind) for the life of the process.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING, Any

from jsonschema import Draft202012Validator
from packaging.version import Version

from ..config import ConfigError
from ..plumbing.json_types import JsonObject
from ..plumbing.upstream import DNS1035_LABEL_PATTERN, DNS1123_LABEL_PATTERN, DNS1123_SUBDOMAIN_PATTERN

if TYPE_CHECKING:
    from referencing.jsonschema import SchemaRegistry

_DNS1123_SUBDOMAIN = re.compile(DNS1123_SUBDOMAIN_PATTERN)
_DNS1123_LABEL = re.compile(DNS1123_LABEL_PATTERN)
_DNS1035_LABEL = re.compile(DNS1035_LABEL_PATTERN)
# Kinds whose names the API server checks as DNS labels rather than subdomains.
_LABEL_NAMED_KINDS = {"Namespace": _DNS1123_LABEL, "Service": _DNS1035_LABEL}
OBJECT_META_REF = "https://kubernetes.io/api/_definitions.json#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


@cache
def schema_version(kubernetes_version: str) -> str:
    """The newest schema set kubernetes-validate ships that is not newer than the cluster."""
    from kubernetes_validate import utils

    wanted = Version(kubernetes_version)
    shipped: list[str] = [v for v in utils.all_versions() if Version(v).release[:2] <= wanted.release[:2]]
    if not shipped or Version(utils.latest_version()).release[:2] < wanted.release[:2]:
        from kubernetes_validate.version import __version__

        raise ConfigError(
            [
                f"validation error: kubernetes-validate {__version__} has no schemas for Kubernetes "
                f"{kubernetes_version} (it ships {utils.all_versions()[0]}-{utils.latest_version()})"
            ]
        )
    return shipped[-1]


@cache
def _registry(version: str) -> SchemaRegistry:
    from kubernetes_validate import utils
    from referencing import Registry, Resource

    definitions = utils.schema_contents(f"kubernetes-json-schema/v{version}-local-strict/_definitions.json", version)
    return Resource.from_contents(definitions) @ Registry()


@cache
def core_validator(kubernetes_version: str, api_version: str, kind: str) -> Draft202012Validator | None:
    from kubernetes_validate import utils

    version = schema_version(kubernetes_version)
    # Same file naming as kubernetes_validate.validate: rbac.authorization.k8s.io/v1 -> rbac-v1.
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = utils.schema_contents(
            f"kubernetes-json-schema/v{version}-local-strict/{kind.lower()}-{group_version}.json", version
        )
    except FileNotFoundError:
        return None
    return Draft202012Validator(schema, registry=_registry(version))


@cache
def object_meta_validator(kubernetes_version: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": OBJECT_META_REF}, registry=_registry(schema_version(kubernetes_version)))


def name_problems(kind: str, name: Any) -> list[str]:
    if not isinstance(name, str) or not name:
        return ["metadata.name: required field is missing"]
    pattern = _LABEL_NAMED_KINDS.get(kind)
    if pattern is not None:
        if len(name) > 63 or not pattern.match(name):
            return [f"metadata.name: {name!r} must be a DNS label (lowercase letters, digits, '-', at most 63)"]
    elif len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name):
        return [f"metadata.name: {name!r} must be a DNS subdomain (lowercase letters, digits, '-', '.')"]
    return []


def core_problems(doc: JsonObject, kubernetes_version: str) -> list[str]:
    """Problems of a core object (" <json path>: <message>" without the object label)."""
    from . import structural
    from .report import json_path

    validator = core_validator(kubernetes_version, str(doc.get("apiVersion")), str(doc.get("kind")))
    if validator is None:
        return [
            f".: no Kubernetes {kubernetes_version} schema for apiVersion {doc.get('apiVersion')!r} "
            f"kind {doc.get('kind')!r} (kubernetes-validate): unknown kind or apiVersion"
        ]
    problems = [
        f"{json_path(path)}: {message}"
        for error in validator.iter_errors(doc)
        for path, message in structural.describe(error)
    ]
    return sorted(set(problems)) + name_problems(str(doc.get("kind")), (doc.get("metadata") or {}).get("name"))
