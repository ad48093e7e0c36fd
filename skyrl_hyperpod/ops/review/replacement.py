"""Replacement facts: which property changes replace a resource, which resources hold state, and which property names it.

Sources, in the order `ReplacementFacts.verdict` consults them (see the package docstring): the CloudFormation
resource provider schemas cfn-lint ships (`createOnlyProperties`, `conditionalCreateOnlyProperties`), the CDK
service spec `cdk diff` reads (`causesReplacement`, `isStateful`), and the services' API models in botocore
(whether the update operation takes a nested field). The git Helm installer's own replacement rule is at the end.
"""

from __future__ import annotations

import functools
import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ...plumbing.locations import CHECKOUT_ROOT
from .model import ResourceChange, ReviewError, display_path, is_intrinsic
from .readers import read_json

RETAIN_POLICIES = frozenset({"Retain", "RetainExceptOnCreate"})
DEFAULT_SCHEMA_REGION = "us-east-1"
# The CDK service spec (npm @aws-cdk/aws-service-spec) as the pinned aws-cdk CLI bundles it for `cdk diff`.
DEFAULT_SERVICE_SPEC = CHECKOUT_ROOT / "node_modules" / "aws-cdk" / "db.json.gz"

# Resources whose replacement or removal loses state even without a retain policy. The CDK service spec's
# `isStateful` flag adds its own list (FSx, S3 buckets, log groups, KMS keys, ...); these are what it lacks.
STATEFUL_TYPES = {
    "AWS::ECR::Repository": "its images",
    "AWS::SageMaker::Cluster": "every HyperPod node: running jobs and node-local storage",
    "AWS::EKS::Cluster": "the Kubernetes control plane: every workload, custom resource and secret in it",
}

VerdictKind = Literal["REPLACE", "REPLACE_OR_FAIL", "MAY_REPLACE"]


def pointer_segments(pointer: str) -> tuple[str, ...]:
    """'/properties/InstanceGroups/*/InstanceType' -> ('InstanceGroups', '*', 'InstanceType')."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.strip("/").split("/")]
    return tuple(parts[1:]) if parts and parts[0] == "properties" else tuple(parts)


def concrete_values(
    document: Any, pattern: tuple[str, ...], prefix: tuple[Any, ...] = ()
) -> dict[tuple[Any, ...], Any]:
    """Every concrete path in `document` that matches `pattern` ('*' = any list index or key) -> its value."""
    if not pattern:
        return {prefix: document}
    head, rest = pattern[0], pattern[1:]
    found: dict[tuple[Any, ...], Any] = {}
    if isinstance(document, list):
        indices = (
            range(len(document)) if head == "*" else [int(head)] if head.isdigit() and int(head) < len(document) else []
        )
        for i in indices:
            found.update(concrete_values(document[i], rest, (*prefix, i)))
    elif isinstance(document, dict) and not is_intrinsic(document):
        keys = list(document) if head == "*" else [head] if head in document else []
        for key in keys:
            found.update(concrete_values(document[key], rest, (*prefix, key)))
    elif isinstance(document, dict) and prefix:
        # An intrinsic (If, Ref, ...) stands for the whole subtree: its value decides the create-only field.
        found[prefix] = document
    return found


def _names(path: tuple[Any, ...]) -> tuple[str, ...]:
    """Property names along a path, list indices dropped."""
    return tuple(p for p in path if isinstance(p, str))


def _overlaps(path: tuple[Any, ...], pattern: tuple[str, ...]) -> bool:
    """`path` lies inside the property `pattern` names, or contains it."""
    return all(want == "*" or str(part) == want for part, want in zip(path, pattern, strict=False))


@dataclass(frozen=True)
class Verdict:
    kind: VerdictKind
    text: str


class ServiceSpec:
    """The CDK service spec database (`causesReplacement` per property, nested types included; `isStateful`)."""

    def __init__(self, file: Path):
        try:
            with gzip.open(file, "rt", encoding="utf-8") as stream:
                schema = json.load(stream)["schema"]
            self._resources = {r["cloudFormationType"]: r for r in schema["resource"]["entities"]}
            self._types = {t["$id"]: t for t in schema["typeDefinition"]["entities"]}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ReviewError(
                [f"review error: {file} is not a CDK service spec database ({exc.__class__.__name__})"]
            ) from None

    def _properties_of(self, type_ref: dict[str, Any]) -> dict[str, Any]:
        while type_ref.get("type") in ("array", "map"):
            type_ref = type_ref.get("element") or {}
        if type_ref.get("type") == "union":
            type_ref = next((t for t in type_ref.get("types", []) if t.get("type") == "ref"), {})
        if type_ref.get("type") == "ref":
            properties = self._types.get(type_ref["reference"]["$ref"], {}).get("properties", {})
            return properties if isinstance(properties, dict) else {}
        return {}

    def causes_replacement(self, resource_type: str, names: tuple[str, ...]) -> str | None:
        """'yes' | 'maybe' | None for a property path (a replacing ancestor counts)."""
        resource = self._resources.get(resource_type)
        if resource is None:
            return None
        properties, found = resource.get("properties", {}), None
        for name in names:
            prop = properties.get(name)
            if prop is None:
                break
            value = prop.get("causesReplacement")
            if value == "yes":
                return "yes"
            found = found or value
            properties = self._properties_of(prop.get("type") or {})
        return found

    def is_stateful(self, resource_type: str) -> bool:
        return bool((self._resources.get(resource_type) or {}).get("isStateful"))


@functools.cache
def load_service_spec(file: Path) -> ServiceSpec:
    """Parsed once per process (the benchmark measures what that saves): read-only after loading."""
    return ServiceSpec(file)


@functools.cache
def _botocore_model(service: str) -> Any:
    import botocore.session
    from botocore.exceptions import UnknownServiceError

    try:
        return botocore.session.get_session().get_service_model(service)
    except UnknownServiceError:
        return None


def _member(shape: Any, name: str) -> Any:
    """The member of a structure (through a list) whose name matches case-insensitively, else None."""
    while getattr(shape, "type_name", None) == "list":
        shape = shape.member
    members = getattr(shape, "members", None) or {}
    return next((m for key, m in members.items() if key.lower() == name.lower()), None)


def update_accepts(resource_type: str, names: tuple[str, ...]) -> tuple[bool, str] | None:
    """Does the service's update operation (Update<Resource>, else Update<Resource>Config[uration]) take this
    nested field? (accepted, operation); None when the API model cannot tell: no Create<Resource> and update
    operation that both take the top-level property, or the Create operation names the field differently."""
    parts = resource_type.split("::")
    if len(parts) != 3 or parts[0] != "AWS" or len(names) < 2:
        return None
    model = _botocore_model(parts[1].lower())
    if model is None or f"Create{parts[2]}" not in model.operation_names:
        return None
    create = _member(model.operation_model(f"Create{parts[2]}").input_shape, names[0])
    update_name, update = "", None
    for candidate in (f"Update{parts[2]}", f"Update{parts[2]}Config", f"Update{parts[2]}Configuration"):
        if candidate in model.operation_names:
            update_name, update = candidate, _member(model.operation_model(candidate).input_shape, names[0])
            if update is not None:
                break
    if create is None or update is None:
        return None
    for name in names[1:]:
        create, update = _member(create, name), _member(update, name)
        if create is None:
            return None
        if update is None:
            return False, update_name
    return True, update_name


class ReplacementFacts:
    """Replacement verdicts per resource type and property path, from the sources the package docstring lists.

    `extra_dir` may hold resource schema JSON files (as `aws cloudformation describe-type` returns them) that
    take precedence over the bundled ones for their typeName, e.g. to review against a newer schema.
    `service_spec` None leaves the CDK service spec out (a note in the review says so).
    """

    def __init__(
        self,
        region: str = DEFAULT_SCHEMA_REGION,
        extra_dir: Path | None = None,
        service_spec: Path | None = DEFAULT_SERVICE_SPEC,
    ):
        self.region = region
        self._extra: dict[str, dict[str, Any]] = {}
        self._schemas: dict[str, dict[str, Any] | None] = {}
        self.notes: list[str] = []
        if extra_dir is not None:
            if not extra_dir.is_dir():
                raise ReviewError([f"review error: schema directory {extra_dir} does not exist"])
            for file in sorted(extra_dir.glob("*.json")):
                schema = read_json(file, "resource schema")
                if not isinstance(schema, dict) or not isinstance(schema.get("typeName"), str):
                    raise ReviewError([f"review error: {file} is not a resource schema (no typeName)"])
                self._extra[schema["typeName"]] = schema
        self.spec: ServiceSpec | None = None
        if service_spec is not None and service_spec.is_file():
            self.spec = load_service_spec(service_spec.resolve())
        elif service_spec is not None:
            self.notes.append(
                f"CDK service spec {service_spec} not found (npm ci installs it with aws-cdk): nested replacement "
                "facts come from the resource schemas and the service API models only"
            )

    def schema(self, resource_type: str) -> dict[str, Any] | None:
        if resource_type not in self._schemas:
            schema = self._extra.get(resource_type)
            if schema is None and not resource_type.startswith("Custom::"):
                from cfnlint.schema import PROVIDER_SCHEMA_MANAGER
                from cfnlint.schema._exceptions import ResourceNotFoundError

                try:
                    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(self.region, resource_type).schema
                except ResourceNotFoundError:
                    schema = None
            self._schemas[resource_type] = schema
        return self._schemas[resource_type]

    def lookup(self, resource_type: str) -> tuple[list[str], list[str], bool]:
        """(createOnlyProperties, conditionalCreateOnlyProperties, schema found)."""
        schema = self.schema(resource_type)
        if schema is None:
            return [], [], False
        return (
            list(schema.get("createOnlyProperties", [])),
            list(schema.get("conditionalCreateOnlyProperties", [])),
            True,
        )

    def name_property(self, resource_type: str) -> str | None:
        """The property that names the resource: the schema's primary identifier when it is a single property the
        template sets, else `<Resource>Name` / `Name` when create-only (CloudFormation's "Name type" properties,
        https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-name.html)."""
        schema = self.schema(resource_type) or {}
        read_only = {pointer_segments(p) for p in schema.get("readOnlyProperties", [])}
        create_only = {pointer_segments(p) for p in schema.get("createOnlyProperties", [])}
        primary = [pointer_segments(p) for p in schema.get("primaryIdentifier", [])]
        if len(primary) == 1 and len(primary[0]) == 1 and primary[0] not in read_only and primary[0] in create_only:
            return primary[0][0]
        resource_name = resource_type.split("::")[-1]
        for candidate in (f"{resource_name}Name", "Name"):
            if (candidate,) in create_only:
                return candidate
        return None

    def stateful_reason(self, resource_type: str) -> str | None:
        if resource_type in STATEFUL_TYPES:
            return STATEFUL_TYPES[resource_type]
        if self.spec is not None and self.spec.is_stateful(resource_type):
            return "its data (stateful per the CDK service spec)"
        return None

    def verdict(self, resource_type: str, path: tuple[Any, ...], *, schema: bool = True) -> Verdict | None:
        """How a change at `path` (inside Properties) is applied. `schema=False` when the caller has compared the
        schema's create-only properties by their concrete values already."""
        create_only, conditional, _ = self.lookup(resource_type)
        shown = display_path(path)
        for pointer in create_only if schema else ():
            if _overlaps(path, pointer_segments(pointer)):
                return Verdict("REPLACE", f"`{shown}` is create-only (resource schema)")
        names = _names(path)
        spec = self.spec.causes_replacement(resource_type, names) if self.spec is not None and names else None
        api = update_accepts(resource_type, names)
        # A schema that lists nested create-only properties has been kept up to date below the top level: where it
        # leaves a nested field out, the CDK spec's older replacement fact is only a possibility.
        nested_schema = len(names) > 1 and any(len(pointer_segments(p)) > 1 for p in create_only)
        if spec == "yes":
            if api is not None and api[0]:
                return Verdict(
                    "MAY_REPLACE",
                    f"`{shown}`: the CDK service spec says replacement, {api[1]} accepts it (sources disagree)",
                )
            if nested_schema:
                return Verdict(
                    "MAY_REPLACE",
                    f"`{shown}`: the CDK service spec says replacement, the resource schema "
                    "lists nested create-only properties but not this one (sources disagree)",
                )
            source = f"CDK service spec; {api[1]} has no such field" if api is not None else "CDK service spec"
            return Verdict("REPLACE", f"`{shown}` requires replacement ({source})")
        if api is not None and not api[0]:
            return Verdict(
                "REPLACE_OR_FAIL",
                f"`{shown}` cannot change in place: {api[1]} has no such field "
                "(CloudFormation replaces the resource or the update fails)",
            )
        for pointer in conditional if schema else ():
            if _overlaps(path, pointer_segments(pointer)):
                return Verdict("MAY_REPLACE", f"`{shown}` is conditionally create-only (resource schema)")
        if spec == "maybe":
            return Verdict("MAY_REPLACE", f"`{shown}` may require replacement (CDK service spec)")
        return None


# --- the git Helm installer's releases ----------------------------------------------------------------------------

# The git Helm installer (stacks/components/git_helm_installer_handler/index.py). A change of a release's identity
# makes it answer with a new physical id: it installs the new release and CloudFormation's clean-up deletes the
# old resource, which uninstalls the old release (objects deleted, CRDs in templates with their custom resources).
# A new ServiceToken or logical id creates a second resource that takes the release over; the old one's Delete
# then leaves it installed (owner label), but the release is upgraded by a new resource.
HELM_RELEASE_TYPE = "Custom::HelmChartFromGit"
HELM_RELEASE_IDENTITY = ("ClusterName", "Namespace", "Release")
HELM_INSTALLER_SOURCE = "docs/helm-installer.md"
# aws_eks_v2.HelmChart's custom resource: its handler runs `helm uninstall` of the release on Delete, whoever owns
# the release by then (the project installed KubeRay this way before the git installer took it over).
CDK_HELM_CHART_TYPE = "Custom::AWSCDK-EKS-HelmChart"


def helm_release_replaced(change: ResourceChange, old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether the git Helm installer replaces this release (see HELM_RELEASE_IDENTITY)."""
    moved = [key for key in HELM_RELEASE_IDENTITY if old.get(key) != new.get(key)]
    if moved:
        before = f"{old.get('Namespace')}/{old.get('Release')}"
        after = f"{new.get('Namespace')}/{new.get('Release')}"
        change.reasons.append(f"Helm release identity ({', '.join(moved)}) changed: {before} → {after}")
        change.risks.append(
            f"release {before} is uninstalled after {after} is installed (its objects are deleted); Helm refuses to "
            f"install objects {before} still owns: migrate first ({HELM_INSTALLER_SOURCE})"
        )
        change.stateful_loss = True
        return True
    if old.get("ServiceToken") != new.get("ServiceToken"):
        change.reasons.append("new ServiceToken: CloudFormation creates a new custom resource and deletes this one")
        return True
    return False
