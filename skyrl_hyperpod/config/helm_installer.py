"""The `helm_installer:` section: integrity and source of the archives the git Helm installer applies."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

from .base import StrictModel


def _archive_digests(value: dict[str, str]) -> dict[str, str]:
    for name, digest in value.items():
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*\.(?:tgz|tar\.gz)", name):
            raise ValueError(f"key {name!r} must be an archive file name such as cert-manager-v1.18.2.tgz")
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise ValueError(f"value for {name!r} must be a sha256 in 64 lowercase hex characters, got {digest!r}")
    return value


class HelmInstallerConfig(StrictModel):
    """Integrity and source of the archives the git Helm installer applies (docs/helm-installer.md)."""

    archive_sha256: Annotated[dict[str, str], AfterValidator(_archive_digests)] = Field(
        default_factory=dict,
        description="Pins: archive file name -> sha256, added to (and overriding) the pins this project ships "
        "for the pinned commit's remote sub-charts.",
    )
    require_pinned_digests: bool = Field(
        default=True,
        description="Refuse any remote sub-chart archive without a pin. false: unpinned archives are trusted on "
        "first use, then enforced.",
    )
    archive_mirror: str | None = Field(
        default=None,
        pattern=r"^(s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/\S*)?|https://\S+)$",
        description="s3://bucket/prefix or https://host/path holding every archive under its upstream file name.",
    )
    retain_legacy_kuberay_release: bool = Field(
        default=False,
        description="true for one deploy of a deployment whose KubeRay operator CDK's HelmChart installed (this "
        "project before the git installer took KubeRay over): keeps that resource, now retained, so that the next "
        "deploy (false again) moves the release to the git installer without CloudFormation's clean-up "
        "uninstalling it (docs/helm-installer.md).",
    )
