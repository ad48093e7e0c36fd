"""`review BASE HEAD`: offline diff of two synthesized outputs, as Markdown for a pull-request comment.

BASE and HEAD are each a cloud assembly directory (`cdk.out`, holding manifest.json) or a directory that
holds `cdk.out/`, the cdk8s `dist/` manifests and optionally `cost.json` (`skyrl-hp cost --json` of that
side). Nothing is synthesized here.

Which source decides which verdict (see README, "skyrl-hp review"):

- REPLACE: a changed property is in the resource schema's `createOnlyProperties` (the CloudFormation
  resource provider schemas cfn-lint ships), or the CDK service spec that `cdk diff` reads
  (`node_modules/aws-cdk/db.json.gz`, `causesReplacement: yes`, nested property types included) says so
  and the service's own API model (botocore) does not contradict it.
- REPLACE OR FAILED UPDATE: a nested field that the service's Create operation takes but its Update
  operation has no field for (botocore's API models), when neither source above lists it.
- MAY REPLACE: the schema's `conditionalCreateOnlyProperties`, `causesReplacement: maybe`, or the CDK spec
  says replacement while the Update operation accepts the field (the sources disagree).
- A replaced resource replaces every consumer whose create-only property reads it, in its own stack
  (Ref, Fn::GetAtt, Fn::Sub) or in another (Fn::GetStackOutput, Fn::ImportValue, resolved back to the
  producing resource through the producer's outputs), repeated until nothing new is replaced.
- Disruptive in-place updates (HyperPod node replacement, a RayService that KubeRay rebuilds) come from a
  curated table, each row with its primary source, for facts no machine-readable source has.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import gzip
import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from skyrl_hyperpod.errors import ProblemsError
from skyrl_hyperpod.synthesized_manifests import read_manifest_documents

RETAIN_POLICIES = frozenset({"Retain", "RetainExceptOnCreate"})
IGNORED_TYPES = frozenset({"AWS::CDK::Metadata"})
RESOURCE_ATTRIBUTES = ("Type", "DeletionPolicy", "UpdateReplacePolicy", "Condition", "DependsOn")
DEFAULT_SCHEMA_REGION = "us-east-1"
MAX_PROPERTY_LINES = 25
MAX_VALUE_CHARS = 80
_MISSING = object()
REPO_ROOT = Path(__file__).resolve().parents[2]
# The CDK service spec (npm @aws-cdk/aws-service-spec) as the pinned aws-cdk CLI bundles it for `cdk diff`.
DEFAULT_SERVICE_SPEC = REPO_ROOT / "node_modules" / "aws-cdk" / "db.json.gz"
COST_FILE = "cost.json"

# Resources whose replacement or removal loses state even without a retain policy. The CDK service spec's
# `isStateful` flag adds its own list (FSx, S3 buckets, log groups, KMS keys, ...); these are what it lacks.
STATEFUL_TYPES = {
    "AWS::ECR::Repository": "its images",
    "AWS::SageMaker::Cluster": "every HyperPod node: running jobs and node-local storage",
    "AWS::EKS::Cluster": "the Kubernetes control plane: every workload, custom resource and secret in it",
}

# What no machine-readable source has: instance-group fields whose change replaces or re-provisions HyperPod
# nodes in place (UpdateCluster, no CloudFormation replacement). Each row: field, effect, primary source.
HYPERPOD_UPDATE_GUIDE = (
    "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-operate-cli-command-update-cluster.html"
)
HYPERPOD_LIFECYCLE_GUIDE = (
    "https://docs.aws.amazon.com/sagemaker/latest/dg/"
    "sagemaker-hyperpod-lifecycle-best-practices-slurm-slurm-update-cluster-lifecycle.html"
)
HYPERPOD_NODE_DISRUPTIONS: dict[str, tuple[str, str]] = {
    "InstanceType": (
        "every node of the group is replaced by an instance of the new type: its pods stop and node-local data "
        "(instance store, the secondary EBS volume) is lost", HYPERPOD_UPDATE_GUIDE),
    "ThreadsPerCore": (
        "CPU options are fixed when an instance launches: the group's nodes are replaced", HYPERPOD_UPDATE_GUIDE),
    "InstanceStorageConfigs": (
        "the secondary EBS volume is attached when a node launches: the group's nodes are replaced or keep the "
        "old volume until they are", HYPERPOD_UPDATE_GUIDE),
    "LifeCycleConfig": (
        "UpdateCluster runs lifecycle scripts only on new nodes; existing nodes keep the old set-up until "
        "UpdateClusterSoftware re-runs the scripts on the whole group (a rolling node replacement)",
        HYPERPOD_LIFECYCLE_GUIDE),
}  # fmt: skip
HYPERPOD_CLUSTER_TYPE = "AWS::SageMaker::Cluster"

# KubeRay v1.7.0, ray-operator/controllers/ray/utils/util.go GenerateHashWithoutReplicasAndWorkersToDelete and
# rayservice_controller.go shouldPrepareNewCluster / isZeroDowntimeUpgradeEnabled: a RayService builds a new
# RayCluster when its rayClusterConfig changes outside these fields (unless worker groups are only appended)
# and the upgrade strategy is NewCluster (the default when unset).
KUBERAY_SOURCE = (
    "https://github.com/ray-project/kuberay/blob/v1.7.0/ray-operator/controllers/ray/rayservice_controller.go"
)
NEW_CLUSTER_STRATEGIES = frozenset({"NewCluster", "NewClusterWithIncrementalUpgrade"})
GPU_RESOURCE = "nvidia.com/gpu"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


# The git Helm installer (stacks/components/git_helm_installer_handler/index.py). A change of a release's identity
# makes it answer with a new physical id: it installs the new release and CloudFormation's clean-up deletes the
# old resource, which uninstalls the old release (objects deleted, CRDs in templates with their custom resources).
# A new ServiceToken or logical id creates a second resource that takes the release over; the old one's Delete
# then leaves it installed (owner label), but the release is upgraded by a new resource.
HELM_RELEASE_TYPE = "Custom::HelmChartFromGit"
HELM_RELEASE_IDENTITY = ("ClusterName", "Namespace", "Release")
HELM_INSTALLER_SOURCE = "README.md#the-git-helm-installer"

VerdictKind = Literal["REPLACE", "REPLACE_OR_FAIL", "MAY_REPLACE"]
ResourceAction = Literal["ADD", "REMOVE", "MODIFY", "REPLACE"]
ManifestAction = Literal["ADD", "REMOVE", "MODIFY"]
StackStatus = Literal["added", "removed", "changed"]


class ReviewError(ProblemsError):
    """Unreadable input; `problems` holds one line each."""


# --- loading -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SynthOutput:
    root: Path
    stacks: dict[str, dict[str, Any]] | None  # stack name -> template; None = no cloud assembly here
    manifests: dict[str, dict[str, Any]] | None  # "Kind namespace/name" -> object; None = no dist/ here
    cost: dict[str, Any] | None = None  # `skyrl-hp cost --json` of this side


def _read_json(file: Path, what: str) -> Any:
    if not file.is_file():
        raise ReviewError([f"review error: {what} {file} does not exist"])
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ReviewError([f"review error: {what} {file} is not valid JSON (line {exc.lineno})"]) from None


def _inside_assembly(root: Path, directory: Path, relative: str, field: str, artifact_id: str) -> Path:
    # The head's manifest is the pull request's output (the PR review gate reads it as data): a path it names
    # must not lead the reviewer out of the assembly, by `..`, an absolute path or a symbolic link.
    path = (directory / relative).resolve()
    if not path.is_relative_to(root.resolve()):
        raise ReviewError(
            [
                f"review error: {field} {relative!r} of artifact {artifact_id!r} in {directory / 'manifest.json'} "
                f"is outside the cloud assembly {root}: only paths inside it are read"
            ]
        )
    return path


def read_assembly(directory: Path, root: Path | None = None) -> dict[str, dict[str, Any]]:
    """Stack name -> template, following nested assemblies (CDK stages) inside `root` (default: `directory`)."""
    root = root or directory
    manifest = _read_json(directory / "manifest.json", "cloud assembly manifest")
    artifacts = manifest.get("artifacts") if isinstance(manifest, dict) else None
    if not isinstance(artifacts, dict):
        raise ReviewError(
            [f"review error: {directory / 'manifest.json'} has no 'artifacts' mapping: not a cloud assembly"]
        )
    stacks: dict[str, dict[str, Any]] = {}
    for artifact_id, artifact in artifacts.items():
        if not isinstance(artifact, dict):
            raise ReviewError(
                [f"review error: artifact {artifact_id!r} in {directory / 'manifest.json'} is not a mapping"]
            )
        properties = artifact.get("properties") or {}
        if artifact.get("type") == "aws:cloudformation:stack":
            template_file = properties.get("templateFile")
            if not isinstance(template_file, str):
                raise ReviewError(
                    [f"review error: stack artifact {artifact_id!r} in {directory} names no templateFile"]
                )
            template_path = _inside_assembly(root, directory, template_file, "templateFile", artifact_id)
            template = _read_json(template_path, f"template of stack {artifact_id}")
            if not isinstance(template, dict) or not isinstance(template.get("Resources", {}), dict):
                raise ReviewError([f"review error: {directory / template_file} is not a CloudFormation template"])
            stacks[properties.get("stackName") or artifact_id] = template
        elif artifact.get("type") == "cdk:cloud-assembly" and isinstance(properties.get("directoryName"), str):
            nested = _inside_assembly(root, directory, properties["directoryName"], "directoryName", artifact_id)
            stacks.update(read_assembly(nested, root))
    return stacks


def manifest_key(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    return f"{obj['kind']} {namespace + '/' if namespace else ''}{metadata['name']}"


def read_manifests(directory: Path) -> dict[str, dict[str, Any]]:
    objects: dict[str, dict[str, Any]] = {}
    try:
        documents = read_manifest_documents(directory, prefix="review error")
    except ProblemsError as error:
        raise ReviewError(error.problems) from None
    for document in documents:
        obj = document.content
        if not isinstance(obj, dict) or "kind" not in obj or not (obj.get("metadata") or {}).get("name"):
            raise ReviewError(
                [
                    f"review error: document {document.number} of {document.file} is not a Kubernetes object (kind, metadata.name)"
                ]
            )
        objects[manifest_key(obj)] = obj
    return objects


def read_cost(file: Path) -> dict[str, Any] | None:
    if not file.is_file():
        return None
    data = _read_json(file, "cost estimate")
    totals = data.get("totals") if isinstance(data, dict) else None
    if (
        not isinstance(totals, dict)
        or not isinstance(totals.get("hourly"), int | float)
        or not isinstance(totals.get("monthly"), int | float)
    ):
        raise ReviewError([f"review error: {file} is not `skyrl-hp cost --json` output (no totals.hourly/monthly)"])
    return data


def load_synth_output(path: Path) -> SynthOutput:
    if not path.is_dir():
        raise ReviewError(
            [f"review error: {path} is not a directory (expected cdk.out or a folder holding cdk.out/ and dist/)"]
        )
    assembly = path if (path / "manifest.json").exists() else path / "cdk.out" if (path / "cdk.out").is_dir() else None
    dist = path / "dist" if (path / "dist").is_dir() else None
    if assembly is None and dist is None:
        raise ReviewError(
            [f"review error: {path} holds neither a cloud assembly (manifest.json, cdk.out/) nor dist/ manifests"]
        )
    return SynthOutput(
        root=path,
        stacks=read_assembly(assembly) if assembly else None,
        manifests=read_manifests(dist) if dist else None,
        cost=read_cost(path / COST_FILE),
    )


# --- replacement facts: resource schemas, the CDK service spec, the service API models ------------------------


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
    elif isinstance(document, dict) and not _is_intrinsic(document):
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
            return self._types.get(type_ref["reference"]["$ref"], {}).get("properties", {})
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
    """Replacement verdicts per resource type and property path, from the sources the module docstring lists.

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
                schema = _read_json(file, "resource schema")
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


# --- diffing ---------------------------------------------------------------------------------------------------


def _is_intrinsic(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)).startswith(("Fn::", "Ref", "Condition"))


def deep_diff(old: Any, new: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any, Any]]:
    """Leaf-level differences; intrinsic functions compare as a whole, lists index by index."""
    if old == new:
        return
    if isinstance(old, dict) and isinstance(new, dict) and not _is_intrinsic(old) and not _is_intrinsic(new):
        for key in sorted(set(old) | set(new), key=str):
            yield from deep_diff(old.get(key, _MISSING), new.get(key, _MISSING), (*path, key))
    elif isinstance(old, list) and isinstance(new, list):
        for i in range(max(len(old), len(new))):
            yield from deep_diff(old[i] if i < len(old) else _MISSING, new[i] if i < len(new) else _MISSING, (*path, i))
    else:
        yield path, old, new


def display_path(path: tuple[Any, ...]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(whole value)"


def _display_form(value: Any) -> Any:
    """A resolved cross-stack read shown as what it reads: {"<producer stack>:": <its output value>}."""
    if isinstance(value, list):
        return [_display_form(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"Review::CrossStack"}:
            return {f"{value['Review::CrossStack']['Stack']}:": _display_form(value["Review::CrossStack"]["Value"])}
        return {k: _display_form(v) for k, v in value.items()}
    return value


def display_value(value: Any) -> str:
    if value is _MISSING:
        return "(absent)"
    text = json.dumps(_display_form(value), sort_keys=True, default=str)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


# --- cross-stack references ---------------------------------------------------------------------------------------

CROSS_STACK = "Review::CrossStack"  # stands for a value another stack's output holds


def _export_index(stacks: dict[str, dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """Export name -> (stack, output key)."""
    index = {}
    for stack, template in stacks.items():
        for key, output in (template.get("Outputs") or {}).items():
            name = (output.get("Export") or {}).get("Name") if isinstance(output, dict) else None
            if isinstance(name, str):
                index[name] = (stack, key)
    return index


def resolve_cross_stack(value: Any, stacks: dict[str, dict[str, Any]], exports: dict[str, tuple[str, str]]) -> Any:
    """Replace Fn::GetStackOutput (weak) and Fn::ImportValue (strong) with the producer's output value, tagged with
    the producing stack and how it is read: the same value read either way compares equal."""
    if isinstance(value, list):
        return [resolve_cross_stack(v, stacks, exports) for v in value]
    if not isinstance(value, dict):
        return value
    producer: tuple[str, str] | None = None
    strength = ""
    if set(value) == {"Fn::GetStackOutput"} and isinstance(value["Fn::GetStackOutput"], dict):
        ref = value["Fn::GetStackOutput"]
        if isinstance(ref.get("StackName"), str) and isinstance(ref.get("OutputName"), str):
            producer, strength = (ref["StackName"], ref["OutputName"]), "weak"
    elif set(value) == {"Fn::ImportValue"} and isinstance(value["Fn::ImportValue"], str):
        producer, strength = exports.get(value["Fn::ImportValue"]), "strong"
    if producer is not None:
        output = ((stacks.get(producer[0]) or {}).get("Outputs") or {}).get(producer[1])
        if isinstance(output, dict) and "Value" in output:
            export = value.get("Fn::ImportValue")
            return {
                CROSS_STACK: {
                    "Stack": producer[0],
                    "Value": output["Value"],
                    "Strength": strength,
                    **({"Export": export} if export else {}),
                }
            }
    return {k: resolve_cross_stack(v, stacks, exports) for k, v in value.items()}


def _strip_strength(value: Any) -> Any:
    """Values compared between BASE and HEAD: how a cross-stack value is read does not change the value."""
    if isinstance(value, list):
        return [_strip_strength(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {CROSS_STACK}:
            inner = value[CROSS_STACK]
            return {CROSS_STACK: {"Stack": inner["Stack"], "Value": inner["Value"]}}
        return {k: _strip_strength(v) for k, v in value.items()}
    return value


Node = tuple[str, str]  # (stack, logical id)


def references(value: Any, stack: str) -> set[Node]:
    """Resources a value reads: Ref, Fn::GetAtt, Fn::Sub in its own stack, resolved cross-stack values in another."""
    found: set[Node] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == CROSS_STACK:
                found |= references(inner["Value"], inner["Stack"])
                continue
            if key == "Ref" and isinstance(inner, str) and not inner.startswith("AWS::"):
                found.add((stack, inner))
            elif key == "Fn::GetAtt":
                target = inner[0] if isinstance(inner, list) and inner else str(inner).split(".")[0]
                found.add((stack, str(target)))
            elif key == "Fn::Sub":
                template = inner[0] if isinstance(inner, list) else inner
                if isinstance(template, str):
                    found.update(
                        (stack, m.split(".")[0])
                        for m in re.findall(r"\$\{([^}!]+)\}", template)
                        if not m.startswith("AWS::")
                    )
            found |= references(inner, stack)
    elif isinstance(value, list):
        for item in value:
            found |= references(item, stack)
    return found


def _strong_exports(value: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        if set(value) == {CROSS_STACK} and value[CROSS_STACK].get("Export"):
            found.add(value[CROSS_STACK]["Export"])
        for inner in value.values():
            found |= _strong_exports(inner)
    elif isinstance(value, list):
        for item in value:
            found |= _strong_exports(item)
    return found


def reading_paths(properties: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(path, value) of every intrinsic in a resource's properties (the places that read other resources)."""
    if isinstance(properties, dict) and (_is_intrinsic(properties) or set(properties) == {CROSS_STACK}):
        yield path, properties
    elif isinstance(properties, dict):
        for key, value in properties.items():
            yield from reading_paths(value, (*path, key))
    elif isinstance(properties, list):
        for i, value in enumerate(properties):
            yield from reading_paths(value, (*path, i))


# --- the review model -----------------------------------------------------------------------------------------


@dataclass
class PropertyChange:
    path: tuple[Any, ...]
    old: Any
    new: Any
    create_only: bool = False


@dataclass
class ResourceChange:
    stack: str
    logical_id: str
    resource_type: str
    action: ResourceAction
    properties: list[PropertyChange] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    risks: list[str] = field(default_factory=list)
    stateful_loss: bool = False
    cdk_path: str = ""
    caused_by: Node | None = None  # the replaced resource this replacement follows from
    possible: list[str] = field(default_factory=list)  # MAY_REPLACE / REPLACE_OR_FAIL findings

    @property
    def node(self) -> Node:
        return (self.stack, self.logical_id)

    @property
    def title(self) -> str:
        return f"`{self.logical_id}` ({self.resource_type})"


@dataclass
class StackDiff:
    name: str
    status: StackStatus
    resources: list[ResourceChange]
    outputs: dict[str, list[str]]


@dataclass
class ManifestChange:
    key: str
    action: ManifestAction
    fields: list[PropertyChange]


@dataclass
class Disruption:
    subject: str
    text: str
    source: str
    details: tuple[str, ...] = ()  # one sub-bullet each (per instance type, the verdict)


@dataclass
class Review:
    base: str
    head: str
    stacks: list[StackDiff]
    manifests: list[ManifestChange]
    notes: list[str]
    disruptions: list[Disruption] = field(default_factory=list)
    cost: tuple[dict[str, Any], dict[str, Any]] | None = None
    paths: dict[Node, str] = field(default_factory=dict)

    @property
    def resource_changes(self) -> list[ResourceChange]:
        return [r for s in self.stacks for r in s.resources]

    @property
    def stateful_replacements(self) -> list[ResourceChange]:
        return [r for r in self.resource_changes if r.stateful_loss]

    @property
    def empty(self) -> bool:
        return not any(s.resources or any(s.outputs.values()) for s in self.stacks) and not self.manifests

    def chain(self, change: ResourceChange) -> list[str]:
        """Display names from this resource back to the change that started the cascade."""
        by_node = {c.node: c for c in self.resource_changes}
        chain, seen, current = [], set(), change.caused_by
        while current is not None and current not in seen:
            seen.add(current)
            chain.append(self.paths.get(current) or f"{current[0]}/{current[1]}")
            current = by_node[current].caused_by if current in by_node else None
        return chain


def _display_name(stack: str, logical_id: str, resource: dict[str, Any]) -> str:
    path = (resource.get("Metadata") or {}).get("aws:cdk:path")
    if isinstance(path, str) and path:
        return path.removesuffix("/Resource")
    return f"{stack}/{logical_id}"


def _loss_risks(change: ResourceChange, old: dict[str, Any], facts: ReplacementFacts, *, replaced: bool) -> None:
    policy_key = "UpdateReplacePolicy" if replaced else "DeletionPolicy"
    policy = old.get(policy_key, "Delete")
    what = (
        "the old resource stays, a new empty one is created"
        if replaced
        else "the old resource stays and is no longer managed"
    )
    stateful = facts.stateful_reason(str(old.get("Type")))
    if policy in RETAIN_POLICIES:
        change.risks.append(f"retained, orphaned ({policy_key} {policy}): {what}")
        change.stateful_loss = True
    elif policy == "Snapshot":
        change.risks.append(f"{'old resource ' if replaced else ''}deleted after a snapshot ({policy_key} Snapshot)")
        change.stateful_loss = stateful is not None
    elif stateful is not None:
        change.risks.append(f"DATA LOSS: the {'old ' if replaced else ''}{old.get('Type')} is deleted with {stateful}")
        change.stateful_loss = True
    if replaced and old.get("DeletionPolicy") in RETAIN_POLICIES and not change.stateful_loss:
        change.risks.append("retained, orphaned on replacement (DeletionPolicy Retain)")
        change.stateful_loss = True


def _custom_name_risk(
    change: ResourceChange, old: dict[str, Any], new: dict[str, Any], facts: ReplacementFacts
) -> None:
    """CloudFormation creates the replacement before deleting the old resource: a name that stays the same fails."""
    name = facts.name_property(change.resource_type)
    old_props, new_props = old.get("Properties") or {}, new.get("Properties") or {}
    if name and name in new_props and _strip_strength(old_props.get(name)) == _strip_strength(new_props.get(name)):
        change.risks.append(
            f"custom name {name} is unchanged: CloudFormation cannot replace a custom-named resource, the update "
            "fails and rolls back; change the name too or delete the resource first"
        )


def _mark_replaced(change: ResourceChange, old: dict[str, Any], new: dict[str, Any], facts: ReplacementFacts) -> None:
    change.action = "REPLACE"
    _loss_risks(change, old, facts, replaced=True)
    _custom_name_risk(change, old, new, facts)


def _diff_resource(
    stack: str, logical_id: str, old: dict[str, Any], new: dict[str, Any], facts: ReplacementFacts
) -> ResourceChange | None:
    resource_type = str(new.get("Type"))
    old_props, new_props = _strip_strength(old.get("Properties") or {}), _strip_strength(new.get("Properties") or {})
    changes = [PropertyChange(p, o, n) for p, o, n in deep_diff(old_props, new_props)]
    for attribute in RESOURCE_ATTRIBUTES:
        if old.get(attribute) != new.get(attribute):
            changes.append(
                PropertyChange((f"({attribute})",), old.get(attribute, _MISSING), new.get(attribute, _MISSING))
            )
    if not changes:
        return None
    change = ResourceChange(stack, logical_id, resource_type, "MODIFY", changes)
    if old.get("Type") != new.get("Type"):
        change.reasons.append(f"resource type changed from {old.get('Type')} to {resource_type}")
        _mark_replaced(change, old, new, facts)
        return change
    create_only, conditional, found = facts.lookup(resource_type)
    replace = replace_or_fail = False
    for pointers, definite in ((create_only, True), (conditional, False)):
        for pointer in pointers:
            pattern = pointer_segments(pointer)
            before, after = concrete_values(old_props, pattern), concrete_values(new_props, pattern)
            changed_paths = {p for p in set(before) | set(after) if before.get(p, _MISSING) != after.get(p, _MISSING)}
            if not changed_paths:
                continue
            for prop in changes:
                if any(prop.path[: len(c)] == c or c[: len(prop.path)] == prop.path for c in changed_paths):
                    prop.create_only = definite or prop.create_only
            shown = ", ".join(f"`{display_path(p)}`" for p in sorted(changed_paths, key=str))
            if definite:
                replace = True
                change.reasons.append(f"create-only property {shown} changed (resource schema)")
            else:
                change.possible.append(f"may require replacement: conditionally create-only {shown} changed")
    for prop in changes:
        if prop.create_only or prop.path[0].startswith("("):
            continue
        verdict = facts.verdict(resource_type, prop.path, schema=False)
        if verdict is None:
            continue
        if verdict.kind == "REPLACE":
            prop.create_only = True
            replace = True
            change.reasons.append(verdict.text)
        elif verdict.text not in change.possible:
            change.possible.append(verdict.text)
            replace_or_fail = replace_or_fail or verdict.kind == "REPLACE_OR_FAIL"
    if resource_type == HELM_RELEASE_TYPE:
        replace = _helm_release_replaced(change, old_props, new_props) or replace
    if not found and not resource_type.startswith("Custom::"):
        change.reasons.append("no resource schema known for this type: replacement cannot be ruled out")
    if replace:
        _mark_replaced(change, old, new, facts)
    elif replace_or_fail:
        # Either outcome blocks the PR: a replacement loses or orphans the data, a failed update rolls back.
        stateful = facts.stateful_reason(resource_type)
        if stateful or old.get("UpdateReplacePolicy") in RETAIN_POLICIES:
            change.risks.append(
                "if CloudFormation replaces it: "
                + (f"loses {stateful}" if stateful else "orphans the retained resource")
            )
            change.stateful_loss = True
    return change


def _helm_release_replaced(change: ResourceChange, old: dict[str, Any], new: dict[str, Any]) -> bool:
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


def _propagate(
    base: dict[str, dict[str, Any]],
    head: dict[str, dict[str, Any]],
    changes: dict[Node, ResourceChange],
    facts: ReplacementFacts,
    base_imports: dict[str, set[str]],
    paths: dict[Node, str],
) -> None:
    """Replace every consumer whose create-only property reads a replaced resource, across stacks, until stable."""
    replaced = {node for node, c in changes.items() if c.action == "REPLACE"}
    grew = True
    while grew:
        grew = False
        for stack, template in head.items():
            for logical_id, resource in (template.get("Resources") or {}).items():
                node = (stack, logical_id)
                old = ((base.get(stack) or {}).get("Resources") or {}).get(logical_id)
                if old is None or resource.get("Type") in IGNORED_TYPES or node in replaced:
                    continue
                resource_type = str(resource.get("Type"))
                for path, value in reading_paths(resource.get("Properties") or {}):
                    targets = sorted(references(value, stack) & replaced)
                    if not targets:
                        continue
                    change = changes.get(node) or ResourceChange(stack, logical_id, resource_type, "MODIFY")
                    changes[node] = change
                    producer = targets[0]
                    verdict = facts.verdict(resource_type, path)
                    blocked = [e for e in _strong_exports(value) if e in base_imports]
                    shown = paths.get(producer) or f"{producer[0]}/{producer[1]}"
                    reads = f"`{display_path(path)}` reads `{shown}`, which is replaced"
                    risk = (
                        (
                            f"strong reference: CloudFormation refuses to change export {blocked[0]} while it is "
                            f"imported (by {', '.join(sorted(base_imports[blocked[0]]))}): the deploy of "
                            f"{producer[0]} fails before anything is replaced"
                        )
                        if blocked
                        else None
                    )
                    if risk and risk not in change.risks:
                        change.risks.append(risk)
                    if verdict is not None and verdict.kind == "REPLACE":
                        weak = producer[0] != stack and not blocked
                        change.reasons.append(
                            f"{reads}: {verdict.text}"
                            + (
                                "; read through a weak reference (Fn::GetStackOutput): nothing in CloudFormation stops "
                                "this deploy"
                                if weak
                                else ""
                            )
                        )
                        change.caused_by = producer
                        _mark_replaced(change, old, resource, facts)
                        replaced.add(node)
                        grew = True
                        break
                    if verdict is not None:
                        line = f"{reads}; {verdict.text}"
                        if line not in change.possible:
                            change.possible.append(line)
                    elif f"{reads}: updated in place" not in change.reasons:
                        change.reasons.append(f"{reads}: updated in place")


def resolve_platform(stacks: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every stack's template with its cross-stack reads resolved (`resolve_cross_stack`)."""
    exports = _export_index(stacks)
    return {s: resolve_cross_stack(t, stacks, exports) for s, t in stacks.items()}


def diff_platform(
    base: dict[str, dict[str, Any]], head: dict[str, dict[str, Any]], facts: ReplacementFacts
) -> tuple[list[StackDiff], dict[Node, str]]:
    base_r, head_r = resolve_platform(base), resolve_platform(head)
    base_imports: dict[str, set[str]] = {}
    for stack, template in base_r.items():
        for export in _strong_exports(template.get("Resources") or {}):
            base_imports.setdefault(export, set()).add(stack)
    paths: dict[Node, str] = {}
    changes: dict[Node, ResourceChange] = {}
    for stack in sorted(set(base_r) | set(head_r)):
        old_resources = {
            k: v
            for k, v in ((base_r.get(stack) or {}).get("Resources") or {}).items()
            if v.get("Type") not in IGNORED_TYPES
        }
        new_resources = {
            k: v
            for k, v in ((head_r.get(stack) or {}).get("Resources") or {}).items()
            if v.get("Type") not in IGNORED_TYPES
        }
        for logical_id in sorted(set(old_resources) | set(new_resources)):
            old, new = old_resources.get(logical_id), new_resources.get(logical_id)
            resource = new if new is not None else old
            assert resource is not None  # logical_id comes from one of the two sides
            paths[(stack, logical_id)] = _display_name(stack, logical_id, resource)
            if old is None:
                assert new is not None
                changes[(stack, logical_id)] = ResourceChange(stack, logical_id, str(new.get("Type")), "ADD")
            elif new is None:
                change = ResourceChange(stack, logical_id, str(old.get("Type")), "REMOVE")
                _loss_risks(change, old, facts, replaced=False)
                changes[(stack, logical_id)] = change
            else:
                diff = _diff_resource(stack, logical_id, old, new, facts)
                if diff is not None:
                    changes[(stack, logical_id)] = diff
    _propagate(base_r, head_r, changes, facts, base_imports, paths)
    for change in changes.values():
        change.cdk_path = paths.get(change.node, "")

    stacks: list[StackDiff] = []
    order = {"REPLACE": 0, "REMOVE": 1, "MODIFY": 2, "ADD": 3}
    for stack in sorted(set(base) | set(head)):
        own = [c for c in changes.values() if c.stack == stack]
        added = [c for c in own if c.action == "ADD"]
        for removed in (c for c in own if c.action == "REMOVE"):
            twins = [a.logical_id for a in added if a.resource_type == removed.resource_type]
            if twins:
                removed.reasons.append(
                    f"if {', '.join(f'`{t}`' for t in twins)} is this resource under a new logical id, CloudFormation "
                    "creates the new one and deletes this one (a replacement)"
                )
        base_outputs, head_outputs = (
            (base.get(stack) or {}).get("Outputs") or {},
            (head.get(stack) or {}).get("Outputs") or {},
        )
        outputs = {
            "added": sorted(set(head_outputs) - set(base_outputs)),
            "removed": sorted(set(base_outputs) - set(head_outputs)),
            "changed": sorted(k for k in set(base_outputs) & set(head_outputs) if base_outputs[k] != head_outputs[k]),
        }
        if own or any(outputs.values()):
            status: StackStatus = "added" if stack not in base else "removed" if stack not in head else "changed"
            stacks.append(StackDiff(stack, status, sorted(own, key=lambda c: (order[c.action], c.logical_id)), outputs))
    return stacks, paths


def diff_manifests(base: dict[str, dict[str, Any]], head: dict[str, dict[str, Any]]) -> list[ManifestChange]:
    changes: list[ManifestChange] = []
    for key in sorted(set(base) | set(head)):
        if key not in base:
            changes.append(ManifestChange(key, "ADD", []))
        elif key not in head:
            changes.append(ManifestChange(key, "REMOVE", []))
        else:
            fields = [PropertyChange(p, o, n) for p, o, n in deep_diff(base[key], head[key])]
            if fields:
                changes.append(ManifestChange(key, "MODIFY", fields))
    return changes


# --- HyperPod and KubeRay awareness ------------------------------------------------------------------------------


def _hyperpod_clusters(stacks: dict[str, dict[str, Any]]) -> dict[Node, dict[str, Any]]:
    return {
        (s, lid): r
        for s, t in stacks.items()
        for lid, r in (t.get("Resources") or {}).items()
        if r.get("Type") == HYPERPOD_CLUSTER_TYPE
    }


def _groups(cluster: dict[str, Any]) -> dict[str, dict[str, Any]]:
    groups = (cluster.get("Properties") or {}).get("InstanceGroups")
    return (
        {
            g["InstanceGroupName"]: g
            for g in groups
            if isinstance(g, dict) and isinstance(g.get("InstanceGroupName"), str)
        }
        if isinstance(groups, list)
        else {}
    )


def helm_release_disruptions(stacks: list[StackDiff]) -> list[Disruption]:
    """Every replaced or removed git Helm installer release: Helm upgrades or uninstalls a live release."""
    found = []
    for stack in stacks:
        added = {c.logical_id for c in stack.resources if c.action == "ADD" and c.resource_type == HELM_RELEASE_TYPE}
        for change in stack.resources:
            if change.resource_type != HELM_RELEASE_TYPE or change.action not in ("REPLACE", "REMOVE"):
                continue
            if change.action == "REPLACE":
                text = "replaced: " + "; ".join(change.reasons[-1:])
            elif added:
                text = (
                    f"removed while {', '.join(f'`{a}`' for a in sorted(added))} is added: a new resource takes the "
                    "release over and this one's delete leaves it installed only if the release names match"
                )
            else:
                text = "removed: the installer uninstalls the release it owns"
            found.append(
                Disruption(f"Helm release `{change.cdk_path or change.logical_id}`", text, HELM_INSTALLER_SOURCE)
            )
    return found


def hyperpod_disruptions(
    base: dict[str, dict[str, Any]], head: dict[str, dict[str, Any]], replaced: set[Node]
) -> list[Disruption]:
    """Instance-group changes that UpdateCluster applies by replacing or re-provisioning the group's nodes."""
    found = []
    base_clusters = _hyperpod_clusters(base)
    for node, cluster in _hyperpod_clusters(head).items():
        if node not in base_clusters or node in replaced:
            continue
        old_groups = _groups(base_clusters[node])
        for name, group in _groups(cluster).items():
            old = old_groups.get(name)
            if old is None:
                continue
            for field_name, (effect, source) in HYPERPOD_NODE_DISRUPTIONS.items():
                if _strip_strength(old.get(field_name)) != _strip_strength(group.get(field_name)):
                    nodes = old.get("InstanceCount", "?")
                    change = f"{display_value(old.get(field_name, _MISSING))} → {display_value(group.get(field_name, _MISSING))}"
                    found.append(
                        Disruption(
                            f"HyperPod group `{name}` ({nodes} node(s)), `{node[0]}/{node[1]}`",
                            f"{field_name} {change}: {effect}",
                            source,
                        )
                    )
    return found


def _strip_fields(spec: dict[str, Any]) -> dict[str, Any]:
    """rayClusterConfig without the fields KubeRay v1.7.0 leaves out of its upgrade hash."""
    spec = json.loads(json.dumps(spec))
    spec.pop("suspend", None)
    spec.pop("upgradeStrategy", None)
    head_pod = ((spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
    head_pod.pop("tolerations", None)
    head_pod.pop("schedulingGates", None)
    for group in spec.get("workerGroupSpecs") or []:
        for key in ("replicas", "minReplicas", "maxReplicas"):
            group.pop(key, None)
        (group.get("scaleStrategy") or {}).pop("workersToDelete", None)
        pod = (group.get("template") or {}).get("spec") or {}
        pod.pop("tolerations", None)
        pod.pop("schedulingGates", None)
    return spec


def _pod_gpus(pod_spec: dict[str, Any]) -> int:
    total = 0
    for container in pod_spec.get("containers") or []:
        resources = container.get("resources") or {}
        value = (resources.get("limits") or {}).get(
            GPU_RESOURCE, (resources.get("requests") or {}).get(GPU_RESOURCE, 0)
        )
        with contextlib.suppress(TypeError, ValueError):
            total += int(value)
    return total


def ray_cluster_gpus(spec: dict[str, Any]) -> dict[str, int]:
    """Instance type (node selector) -> GPUs a RayCluster spec requests at its configured replicas."""
    demand: dict[str, int] = {}
    pods = [(((spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}, 1)]
    for group in spec.get("workerGroupSpecs") or []:
        replicas = group.get("replicas", group.get("minReplicas", 0)) or 0
        pods.append((((group.get("template") or {}).get("spec") or {}), int(replicas)))
    for pod, count in pods:
        gpus = _pod_gpus(pod) * count
        if gpus:
            instance_type = (pod.get("nodeSelector") or {}).get(INSTANCE_TYPE_LABEL, "(any node)")
            demand[instance_type] = demand.get(instance_type, 0) + gpus
    return demand


def _cluster_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    spec = obj.get("spec") or {}
    return {"RayService": spec.get("rayClusterConfig"), "RayCluster": spec, "RayJob": spec.get("rayClusterSpec")}.get(
        str(obj.get("kind"))
    )


def gpu_capacity(stacks: dict[str, dict[str, Any]] | None, fallback: dict[str, int]) -> dict[str, int]:
    """Instance type -> GPUs in the HyperPod groups of that type (HEAD's templates, else the configuration)."""
    from skyrl_hyperpod.config import INSTANCE_CATALOG

    capacity: dict[str, int] = {}
    for cluster in _hyperpod_clusters(stacks or {}).values():
        for group in _groups(cluster).values():
            spec = INSTANCE_CATALOG.get(str(group.get("InstanceType")))
            count = group.get("InstanceCount")
            if spec is not None and isinstance(count, int):
                capacity[group["InstanceType"]] = capacity.get(group["InstanceType"], 0) + spec.gpus * count
    return capacity or fallback


def rayservice_disruptions(
    base: dict[str, dict[str, Any]], head: dict[str, dict[str, Any]], capacity: dict[str, int]
) -> list[Disruption]:
    found = []
    for key, new in head.items():
        old = base.get(key)
        if new.get("kind") != "RayService" or old is None:
            continue
        old_spec, new_spec = (old.get("spec") or {}), (new.get("spec") or {})
        old_cluster, new_cluster = (
            _strip_fields(old_spec.get("rayClusterConfig") or {}),
            _strip_fields(new_spec.get("rayClusterConfig") or {}),
        )
        if old_cluster == new_cluster:
            continue
        old_groups, new_groups = old_cluster.get("workerGroupSpecs") or [], new_cluster.get("workerGroupSpecs") or []
        appended = (
            len(new_groups) > len(old_groups)
            and {**new_cluster, "workerGroupSpecs": new_groups[: len(old_groups)]} == old_cluster
        )
        strategy = (new_spec.get("upgradeStrategy") or {}).get("type")
        if appended:
            continue
        if strategy is not None and strategy not in NEW_CLUSTER_STRATEGIES:
            found.append(
                Disruption(
                    f"`{key}`",
                    f"rayClusterConfig changed under upgradeStrategy {strategy}: "
                    "KubeRay does not roll it out; the running cluster keeps the old spec",
                    KUBERAY_SOURCE,
                )
            )
            continue
        old_gpus = ray_cluster_gpus(old_spec.get("rayClusterConfig") or {})
        new_gpus = ray_cluster_gpus(new_spec.get("rayClusterConfig") or {})
        others: dict[str, int] = {}
        for other_key, obj in head.items():
            spec = _cluster_spec(obj) if other_key != key else None
            for instance_type, gpus in ray_cluster_gpus(spec or {}).items():
                others[instance_type] = others.get(instance_type, 0) + gpus
        parts = []
        fits = True
        for instance_type in sorted(set(old_gpus) | set(new_gpus)):
            during = old_gpus.get(instance_type, 0) + new_gpus.get(instance_type, 0)
            have = capacity.get(instance_type)
            other = others.get(instance_type, 0)
            text = (
                f"{new_gpus.get(instance_type, 0)} GPU(s) on {instance_type} for the new cluster while the old one "
                f"holds {old_gpus.get(instance_type, 0)}: {during} during the upgrade"
            )
            if have is None:
                text += ", and no HyperPod group of that type is known"
                fits = False
            else:
                text += f", against the group's {have}"
                fits = fits and during <= have
                if other and during <= have < during + other:
                    text += f" (not while the other Ray clusters in the manifests hold their {other} there)"
            parts.append(text)
        verdict = (
            "fits"
            if fits
            else "does NOT fit: the new cluster's pods stay Pending and the upgrade never "
            "completes (the old cluster keeps serving) until GPUs are freed"
        )
        found.append(
            Disruption(
                f"`{key}`",
                f"rayClusterConfig changed: KubeRay builds a new RayCluster (upgradeStrategy {strategy or 'unset = NewCluster'})"
                " and switches traffic when it is ready",
                KUBERAY_SOURCE,
                details=(*(f"needs {part}" for part in parts or ["no GPUs"]), f"verdict: {verdict}"),
            )
        )
    return found


# --- the review --------------------------------------------------------------------------------------------------


def review(
    base_dir: Path, head_dir: Path, facts: ReplacementFacts, gpu_fallback: dict[str, int] | None = None
) -> Review:
    base, head = load_synth_output(base_dir), load_synth_output(head_dir)
    notes: list[str] = list(facts.notes)
    stacks: list[StackDiff] = []
    paths: dict[Node, str] = {}
    disruptions: list[Disruption] = []
    if base.stacks is not None and head.stacks is not None:
        stacks, paths = diff_platform(base.stacks, head.stacks, facts)
        replaced = {c.node for s in stacks for c in s.resources if c.action == "REPLACE"}
        disruptions += helm_release_disruptions(stacks)
        disruptions += hyperpod_disruptions(resolve_platform(base.stacks), resolve_platform(head.stacks), replaced)
    elif (base.stacks is None) != (head.stacks is None):
        notes.append("only one side has a cloud assembly: CloudFormation templates were not compared")
    manifests: list[ManifestChange] = []
    if base.manifests is not None and head.manifests is not None:
        manifests = diff_manifests(base.manifests, head.manifests)
        disruptions += rayservice_disruptions(
            base.manifests, head.manifests, gpu_capacity(head.stacks, gpu_fallback or {})
        )
    elif (base.manifests is None) != (head.manifests is None):
        notes.append("only one side has dist/ manifests: Kubernetes manifests were not compared")
    cost = (base.cost, head.cost) if base.cost is not None and head.cost is not None else None
    if cost is None and (base.cost is not None or head.cost is not None):
        notes.append(f"only one side has {COST_FILE}: costs were not compared")
    return Review(str(base_dir), str(head_dir), stacks, manifests, notes, disruptions, cost, paths)


# --- Markdown ------------------------------------------------------------------------------------------------


def _property_lines(changes: list[PropertyChange], indent: str = "  ") -> list[str]:
    lines: list[str] = []
    for c in changes[:MAX_PROPERTY_LINES]:
        suffix = " **(replacement)**" if c.create_only else ""
        detail = _structured_diff(c.old, c.new)
        if detail:
            lines.append(f"{indent}- `{display_path(c.path)}`{suffix}:")
            lines += [f"{indent}  - {line}" for line in detail]
        else:
            lines.append(
                f"{indent}- `{display_path(c.path)}`: `{display_value(c.old)}` → `{display_value(c.new)}`{suffix}"
            )
    if len(changes) > MAX_PROPERTY_LINES:
        lines.append(f"{indent}- … and {len(changes) - MAX_PROPERTY_LINES} more")
    return lines


def _as_mapping(value: Any) -> dict[str, Any] | list[Any] | None:
    """A JSON or YAML document held in a string (Helm `Values`, `serveConfigV2`), else None."""
    if isinstance(value, (dict, list)):
        return value
    if not isinstance(value, str) or not value.lstrip().startswith(("{", "[")) and "\n" not in value:
        return None
    try:
        loaded = yaml.safe_load(value)
    except yaml.YAMLError:
        return None
    return loaded if isinstance(loaded, (dict, list)) else None


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for index, item in enumerate(value):
            out.update(_flatten(item, f"{prefix}[{index}]"))
        return out
    return {prefix or "(value)": value}


def _arguments(value: Any) -> list[str] | None:
    """A command line's arguments (a RayJob entrypoint), when `value` is one."""
    if not isinstance(value, str) or "\n" in value.strip() or value.count(" ") < 3:
        return None
    try:
        return shlex.split(value)
    except ValueError:
        return value.split()


def _structured_diff(old: Any, new: Any) -> list[str]:
    """What changed inside a long value, one line each: a JSON/YAML document by key, a command line by
    argument. Empty when the values are short or unstructured (the one-line `old → new` says it all)."""
    if old is _MISSING or new is _MISSING:
        return []
    old_doc, new_doc = _as_mapping(old), _as_mapping(new)
    if old_doc is not None and new_doc is not None:
        before, after = _flatten(old_doc), _flatten(new_doc)
        lines = []
        for key in [*before, *(k for k in after if k not in before)]:
            if before.get(key, _MISSING) != after.get(key, _MISSING):
                lines.append(
                    f"`{key}`: `{display_value(before.get(key, _MISSING))}` → `{display_value(after.get(key, _MISSING))}`"
                )
        return _capped(lines)
    old_args, new_args = _arguments(old), _arguments(new)
    if old_args is not None and new_args is not None:
        lines = []
        matcher = difflib.SequenceMatcher(a=old_args, b=new_args, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            removed, added = " ".join(old_args[i1:i2]), " ".join(new_args[j1:j2])
            if tag == "replace":
                lines.append(f"argument `{removed}` → `{added}`")
            elif tag == "delete":
                lines.append(f"argument removed: `{removed}`")
            elif tag == "insert":
                lines.append(f"argument added: `{added}`")
        return _capped(lines)
    return []


def _capped(lines: list[str]) -> list[str]:
    if len(lines) > MAX_PROPERTY_LINES:
        return [*lines[:MAX_PROPERTY_LINES], f"… and {len(lines) - MAX_PROPERTY_LINES} more"]
    return lines


def _money(value: float) -> str:
    sign = "-" if value < 0 else ""
    return f"{sign}${abs(value):,.2f}"


def _change(value: float) -> str:
    return ("+" if value > 0 else "") + _money(value)


def _cost_lines(base: dict[str, Any], head: dict[str, Any]) -> list[str]:
    b, h = base["totals"], head["totals"]
    lines = [
        "| | base | head | change |",
        "|---|---:|---:|---:|",
        f"| per hour | {_money(b['hourly'])} | {_money(h['hourly'])} | {_change(h['hourly'] - b['hourly'])} |",
        f"| per month | {_money(b['monthly'])} | {_money(h['monthly'])} | {_change(h['monthly'] - b['monthly'])} |",
    ]
    old_items = {i["component"]: i for i in base.get("items") or [] if isinstance(i, dict) and "component" in i}
    new_items = {i["component"]: i for i in head.get("items") or [] if isinstance(i, dict) and "component" in i}
    changed = []
    for name in [*old_items, *(n for n in new_items if n not in old_items)]:
        old, new = old_items.get(name, {}).get("monthly_usd", 0.0), new_items.get(name, {}).get("monthly_usd", 0.0)
        if abs(new - old) >= 0.005:
            changed.append(f"- {name}: {_money(old)} → {_money(new)} per month")
    if changed:
        lines += ["", *changed]
    unconfirmed = sorted(set(head.get("unconfirmed") or []) | set(base.get("unconfirmed") or []))
    region = head.get("region", "?")
    lines += [
        "",
        f"Prices for {region} as of {head.get('prices_as_of', '?')} ({head.get('price_file', '?')})"
        + (f"; unconfirmed: {', '.join(unconfirmed)}" if unconfirmed else "")
        + ".",
    ]
    return lines


def render_markdown(result: Review) -> str:
    changes = result.resource_changes
    counts = {a: sum(1 for c in changes if c.action == a) for a in ("ADD", "REMOVE", "MODIFY", "REPLACE")}
    lines = [f"## Infrastructure review: `{result.base}` → `{result.head}`", ""]
    if result.empty:
        lines.append("No changes: the CloudFormation templates and Kubernetes manifests are identical.")
        lines += [f"> {n}" for n in result.notes]
        if result.cost is not None:
            lines += ["", "### Cost", "", *_cost_lines(*result.cost)]
        return "\n".join(lines) + "\n"
    lines.append(
        f"**{len(result.stacks)} stack(s) changed**: {counts['ADD']} added, {counts['REMOVE']} removed, "
        f"{counts['MODIFY']} modified in place, **{counts['REPLACE']} replaced**; "
        f"{len(result.manifests)} Kubernetes object(s) changed."
    )
    lines += [f"> {n}" for n in result.notes]
    stateful = result.stateful_replacements
    if stateful:
        lines += [
            "",
            f"**❌ {len(stateful)} stateful resource(s) replaced or removed**: "
            + ", ".join(f"`{c.cdk_path or c.stack + '/' + c.logical_id}`" for c in stateful),
        ]
    risky = [c for c in changes if c.risks or c.action == "REPLACE" or c.possible]
    if risky:
        lines += ["", "### ⚠️ Replacements and data-loss risks", ""]
        for c in risky:
            action = "MAY REPLACE" if c.action == "MODIFY" and c.possible else c.action
            lines.append(f"- **{action}** `{c.cdk_path or c.stack + '/' + c.logical_id}` ({c.resource_type})")
            chain = result.chain(c)
            if chain:
                lines.append(f"  - replaced because {' ← '.join(f'`{n}` is replaced' for n in chain)}")
            lines += [f"  - {r}" for r in (c.reasons if c.action == "REPLACE" else [])[:3]]
            lines += [f"  - {p}" for p in c.possible[:3]]
            lines += [f"  - risk: {r}" for r in c.risks]
    if result.disruptions:
        lines += ["", "### ⚠️ Disruptive updates (no replacement, but workloads are interrupted)", ""]
        for d in result.disruptions:
            lines.append(f"- {d.subject}: {d.text} ([source]({d.source}))")
            lines += [f"  - {detail}" for detail in d.details]
    if result.cost is not None:
        lines += ["", "### Cost", "", *_cost_lines(*result.cost)]
    for stack in result.stacks:
        lines += ["", f"### Stack `{stack.name}` ({stack.status})", ""]
        for c in stack.resources:
            lines.append(f"- **{c.action}** {c.title}")
            lines += [f"  - {reason}" for reason in c.reasons]
            lines += [f"  - {p}" for p in c.possible]
            lines += [f"  - risk: {risk}" for risk in c.risks]
            if c.action in ("MODIFY", "REPLACE"):
                lines += _property_lines(c.properties)
        for kind, keys in stack.outputs.items():
            if keys:
                lines.append(f"- Outputs {kind}: {', '.join(f'`{k}`' for k in keys)}")
    if result.manifests:
        lines += ["", "### Kubernetes manifests", ""]
        for m in result.manifests:
            lines.append(f"- **{m.action}** `{m.key}`")
            lines += _property_lines(m.fields)
    return "\n".join(lines) + "\n"
