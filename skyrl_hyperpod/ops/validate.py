"""`validate`: check the synthesized manifests in a directory against every validation layer."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.errors import InputError, ProblemsError
from skyrl_hyperpod.synthesized_manifests import read_manifest_documents


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
    try:
        return [document.content for document in read_manifest_documents(directory, prefix="validation error")]
    except ProblemsError as error:
        raise InputError(error.problems) from None


def validate_manifests(
    directory: Path, *, config: ProjectConfig, crds_dir: Path | None = None, deployable: bool = False
) -> ManifestValidation:
    """Problems of every manifest under `directory`; with `deployable`, placeholder stack outputs too.

    Raises InputError (one line each) when the directory, a file or the KubeRay CRDs cannot be read."""
    from skyrl_hyperpod.validation import deployability_problems, validation_report

    docs = read_manifests(directory)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the skipped checks are returned (and printed) once
        problems, skipped = validation_report(docs, config=config, crds_dir=crds_dir)
    if deployable:
        problems += deployability_problems(docs)
    return ManifestValidation(documents=len(docs), problems=problems, skipped=skipped)
