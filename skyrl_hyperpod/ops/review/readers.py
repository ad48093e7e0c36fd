"""Reading one side of the review: a cloud assembly (its stacks' templates, nested assemblies followed), the cdk8s
`dist/` manifests and `cost.json`. Every path the assembly's manifest names stays inside the assembly; the manifests
are read with the bounded loader (values/synthesized_manifests.py); environment values are tagged (redaction.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skyrl_hyperpod.plumbing.errors import ProblemsError
from skyrl_hyperpod.plumbing.yaml_loading import ValueBudget
from skyrl_hyperpod.values.stack_outputs import OperatorOutputKey
from skyrl_hyperpod.values.synthesized_manifests import (
    MANIFEST_SUFFIXES,
    MAX_MANIFEST_VALUES,
    read_manifest_documents,
    read_stamp,
)

from .model import Node, ReviewError
from .redaction import redact_manifest, redact_template

COST_FILE = "cost.json"
HYPERPOD_CLUSTER_TYPE = "AWS::SageMaker::Cluster"
# The metadata entry type of an error annotation (aws-cdk cloud-assembly-schema, ArtifactMetadataEntryType.ERROR):
# the CDK CLI fails the synth on one, but the assembly it wrote stays.
CDK_ERROR_ENTRY = "aws:cdk:error"


@dataclass(frozen=True)
class SynthOutput:
    root: Path
    stacks: dict[str, dict[str, Any]] | None  # stack name -> template; None = no cloud assembly here
    manifests: dict[str, dict[str, Any]] | None  # "Kind namespace/name" -> object; None = no dist/ here
    cost: dict[str, Any] | None = None  # `skyrl-hp cost --json` of this side
    # The account and region the stacks were synthesized for (their artifacts' environment), None when the
    # synth left them to the deploying credentials (CloudFormation's pseudo parameters then stand for them).
    account: str | None = None
    region: str | None = None


def read_json(file: Path, what: str) -> Any:
    if not file.is_file():
        raise ReviewError([f"review error: {what} {file} does not exist"])
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ReviewError([f"review error: {what} {file} is not valid JSON (line {exc.lineno})"]) from None
    except RecursionError:
        raise ReviewError([f"review error: {what} {file} is nested too deep to read"]) from None


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
    manifest = read_json(directory / "manifest.json", "cloud assembly manifest")
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
        _refuse_failed_synth(root, directory, artifact_id, artifact)
        properties = artifact.get("properties") or {}
        if artifact.get("type") == "aws:cloudformation:stack":
            template_file = properties.get("templateFile")
            if not isinstance(template_file, str):
                raise ReviewError(
                    [f"review error: stack artifact {artifact_id!r} in {directory} names no templateFile"]
                )
            template_path = _inside_assembly(root, directory, template_file, "templateFile", artifact_id)
            template = read_json(template_path, f"template of stack {artifact_id}")
            if not isinstance(template, dict) or not isinstance(template.get("Resources", {}), dict):
                raise ReviewError([f"review error: {directory / template_file} is not a CloudFormation template"])
            stacks[properties.get("stackName") or artifact_id] = redact_template(template)
        elif artifact.get("type") == "cdk:cloud-assembly" and isinstance(properties.get("directoryName"), str):
            nested = _inside_assembly(root, directory, properties["directoryName"], "directoryName", artifact_id)
            stacks.update(read_assembly(nested, root))
    return stacks


def _refuse_failed_synth(root: Path, directory: Path, artifact_id: str, artifact: dict[str, Any]) -> None:
    """A synth that reported an error still writes its assembly: reviewed, it would pass for the configuration's."""
    metadata = artifact.get("metadata")
    entries = [metadata] if isinstance(metadata, dict) else []
    extra = artifact.get("additionalMetadataFile")
    if isinstance(extra, str):
        extra_file = _inside_assembly(root, directory, extra, "additionalMetadataFile", artifact_id)
        if extra_file.is_file():
            entries.append(read_json(extra_file, f"metadata of artifact {artifact_id}"))
    for by_path in entries:
        if not isinstance(by_path, dict):
            continue
        for construct_path, items in by_path.items():
            for item in items if isinstance(items, list) else []:
                if isinstance(item, dict) and item.get("type") == CDK_ERROR_ENTRY:
                    raise ReviewError(
                        [
                            f"review error: {root} is the cloud assembly of a synth that failed ({construct_path}: "
                            f"{str(item.get('data'))[:200]}): fix the error and synthesize again (make synth)"
                        ]
                    )


def assembly_environment(directory: Path) -> tuple[str | None, str | None]:
    """The account and region the assembly's stacks name (`aws://ACCOUNT/REGION`; the CDK writes
    unknown-account / unknown-region for an environment-agnostic stack)."""
    manifest = read_json(directory / "manifest.json", "cloud assembly manifest")
    for artifact in (manifest.get("artifacts") or {}).values():
        environment = artifact.get("environment") if isinstance(artifact, dict) else None
        if isinstance(environment, str) and environment.startswith("aws://"):
            account, _, region = environment.removeprefix("aws://").partition("/")
            return (
                None if account.startswith("unknown") else account,
                None if region.startswith("unknown") else region,
            )
    return None, None


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
    # The YAML inside the objects (runtimeEnvYAML, serveConfigV2) counts against a budget of its own.
    embedded = ValueBudget(MAX_MANIFEST_VALUES, f"the YAML documents inside the manifests in {str(directory)!r}")
    for document in documents:
        obj = redact_manifest(document.content, embedded)
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
    data = read_json(file, "cost estimate")
    totals = data.get("totals") if isinstance(data, dict) else None
    if (
        not isinstance(data, dict)
        or not isinstance(totals, dict)
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
    account, region = assembly_environment(assembly) if assembly else (None, None)
    output = SynthOutput(
        root=path,
        stacks=read_assembly(assembly) if assembly else None,
        manifests=read_manifests(dist) if dist else None,
        cost=read_cost(path / COST_FILE),
        account=account,
        region=region,
    )
    _refuse_mixed_configurations(path, output, assembly, dist)
    return output


def _refuse_mixed_configurations(path: Path, output: SynthOutput, assembly: Path | None, dist: Path | None) -> None:
    """One side is one configuration: its cdk.out (the ConfigFingerprint output), each dist/ file (its stamp) and
    cost.json (`config_fingerprint`) must carry the same fingerprint where they carry one, or the review would
    report one configuration's templates beside another's prices."""
    parts: list[tuple[str, str]] = []
    key = OperatorOutputKey.CONFIG_FINGERPRINT.value
    for template in (output.stacks or {}).values():
        value = ((template.get("Outputs") or {}).get(key) or {}).get("Value")
        if isinstance(value, str) and assembly is not None:
            parts.append((assembly.name, value))
    for file in sorted(dist.iterdir()) if dist else []:
        stamp = read_stamp(file) if file.suffix in MANIFEST_SUFFIXES else None
        if stamp is not None:
            parts.append((f"{file.parent.name}/{file.name}", stamp.fingerprint))
    cost_fingerprint = (output.cost or {}).get("config_fingerprint")
    if isinstance(cost_fingerprint, str):
        parts.append((COST_FILE, cost_fingerprint))
    by_fingerprint: dict[str, list[str]] = {}
    for part, fingerprint in parts:
        names = by_fingerprint.setdefault(fingerprint, [])
        if part not in names:
            names.append(part)
    if len(by_fingerprint) > 1:
        described = "; ".join(f"{', '.join(names)} from fingerprint {fp}" for fp, names in by_fingerprint.items())
        raise ReviewError(
            [
                f"review error: {path} mixes configurations ({described}): make every part from one configuration "
                f"(make synth, then skyrl-hp cost --json > {path / COST_FILE})"
            ]
        )


def hyperpod_clusters(stacks: dict[str, dict[str, Any]]) -> dict[Node, dict[str, Any]]:
    """The HyperPod clusters in these templates, by (stack, logical id)."""
    return {
        (s, lid): r
        for s, t in stacks.items()
        for lid, r in (t.get("Resources") or {}).items()
        if r.get("Type") == HYPERPOD_CLUSTER_TYPE
    }


def instance_groups(cluster: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A HyperPod cluster resource's instance groups by name."""
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
