"""`validate`: check the synthesized manifests in a directory against every validation layer."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.config.loader import ConfigSource
from skyrl_hyperpod.plumbing.errors import InputError, ProblemsError
from skyrl_hyperpod.values.synthesized_manifests import ManifestDocument, read_manifest_documents, stamp_problems


@dataclass(frozen=True)
class ManifestValidation:
    documents: int
    problems: list[str]
    skipped: list[str]  # SKIPPED lines: checks that could not run

    @property
    def status(self) -> Literal["valid", "invalid"]:
        return "invalid" if self.problems else "valid"


def read_manifests(directory: Path) -> list[Any]:
    """All documents of the manifest files under `directory`, in file-name order."""
    return [document.content for document in _documents(directory)]


def _documents(directory: Path) -> list[ManifestDocument]:
    try:
        return read_manifest_documents(directory, prefix="validation error")
    except ProblemsError as error:
        raise InputError(error.problems) from None


def is_cloud_assembly(directory: Path) -> bool:
    """A CDK cloud assembly (`cdk synth`'s cdk.out): the `cdk.out` version file, or a manifest.json with artifacts
    (aws-cdk-lib's cloud-assembly-schema)."""
    if (directory / "cdk.out").is_file():
        return True
    try:
        manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and "version" in manifest and "artifacts" in manifest


def cloud_assembly_line(directory: Path) -> str:
    return (
        f"validation error: {directory} is a CDK cloud assembly (CloudFormation templates from cdk synth), not "
        "Kubernetes manifests: skyrl-hp validate checks the manifests cdk8s writes (skyrl-hp validate dist, after "
        "make synth-k8s); the templates are checked by cfn-lint and cdk-nag in make test"
    )


def _with_files(problems: list[str], documents: list[ManifestDocument]) -> list[str]:
    """Each problem ("<kind>/<name>: ...", as the validation layers word them) prefixed with the file of its object."""
    from skyrl_hyperpod.validation.report import object_label

    files: dict[str, list[str]] = {}
    for index, document in enumerate(documents):
        names = files.setdefault(object_label(document.content, index), [])
        if str(document.file) not in names:
            names.append(str(document.file))
    labels = sorted(files, key=len, reverse=True)  # the longest label that starts the line is its object's
    named = []
    for problem in problems:
        label = next((label for label in labels if problem.startswith(f"{label}: ")), None)
        named.append(f"{', '.join(files[label])}: {problem}" if label is not None else problem)
    return named


def validate_manifests(
    directory: Path,
    *,
    config: ProjectConfig,
    crds_dir: Path | None = None,
    deployable: bool = False,
    source: ConfigSource | None = None,
) -> ManifestValidation:
    """Problems of every manifest under `directory`, each naming its file; with `deployable`, placeholder stack
    outputs too.

    Raises InputError (one line each) when the directory is a CDK cloud assembly, when a file was synthesized from
    another configuration than `config` (read from `source`), or when the directory, a file or the KubeRay CRDs
    cannot be read."""
    from skyrl_hyperpod.validation import deployability_problems, validation_report

    if directory.is_dir() and is_cloud_assembly(directory):
        raise InputError([cloud_assembly_line(directory)])
    documents = _documents(directory)
    if source is not None:
        # Checked against another configuration, valid manifests can fail and invalid ones pass.
        files = sorted({document.file for document in documents})
        mismatch = stamp_problems(files, config, source, prefix="validation error", required=False)
        if mismatch:
            raise InputError(mismatch)
    docs = [document.content for document in documents]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the skipped checks are returned (and printed) once
        problems, skipped = validation_report(docs, config=config, crds_dir=crds_dir)
    if deployable:
        problems += deployability_problems(docs)
    return ManifestValidation(documents=len(docs), problems=_with_files(problems, documents), skipped=skipped)
