"""The `versions:` section: the charts and EKS add-ons the stacks install (the SkyRL and image pins are the version
lock, version_lock.py)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from ..plumbing.upstream import (
    HYPERPOD_CHART_PATH,
    KUBERAY_COMMIT,
    KUBERAY_OPERATOR_CHART_PATH,
    KUBERAY_RELEASE,
    KUBERAY_TAG,
)
from .base import GITHUB_REPOSITORY_PATTERN, CommitId, StrictModel


class VersionsConfig(StrictModel):
    """Versions of every chart and add-on. `None` for an EKS add-on = the default for the cluster version."""

    kuberay_operator_chart: str = Field(
        default=KUBERAY_RELEASE,
        description="The KubeRay release installed (its kuberay-operator chart, from the release tag's commit) and "
        "validated against; only this release until its CRDs, operator checks and chart digests are updated together.",
    )
    kuberay_repository: str = Field(
        default="https://github.com/ray-project/kuberay",
        pattern=GITHUB_REPOSITORY_PATTERN,
        description=f"GitHub repository whose {KUBERAY_OPERATOR_CHART_PATH} at tag {KUBERAY_TAG} (commit "
        f"{KUBERAY_COMMIT}) the git Helm installer installs, every file checked against this project's list.",
    )
    hyperpod_cli_repository: str = Field(
        default="https://github.com/aws/sagemaker-hyperpod-cli",
        pattern=GITHUB_REPOSITORY_PATTERN,
        description="GitHub repository of the HyperPod dependencies chart (and the Ray endpoint operator's chart).",
    )
    # Release v3.9.0 of aws/sagemaker-hyperpod-cli: the first release whose dependencies chart lists the
    # g7e types for the health-monitoring agent and both device plugins. `python -m
    # skyrl_hyperpod.validation.hyperpod_chart` checks the values this project sets against it.
    hyperpod_cli_commit: CommitId = Field(
        default="b01cf90676553a711ab1a8ac51422adbb09aef6b",
        description=f"Commit of hyperpod_cli_repository whose {HYPERPOD_CHART_PATH} is installed (default: v3.9.0).",
    )
    vpc_cni_addon: str | None = None
    kube_proxy_addon: str | None = None
    coredns_addon: str | None = None
    pod_identity_agent_addon: str | None = None
    fsx_csi_driver_addon: str | None = None
    hyperpod_observability_addon: str | None = None

    @field_validator("kuberay_operator_chart")
    @classmethod
    def _semver(cls, value: str) -> str:
        if not re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", value):
            raise ValueError(f"must be an exact chart version such as {KUBERAY_RELEASE} (no ranges, no 'latest')")
        if value != KUBERAY_RELEASE:
            raise ValueError(
                f"the manifests are validated against the KubeRay {KUBERAY_TAG} CRDs and operator checks; "
                f"only {KUBERAY_RELEASE} is allowed until those are updated together"
            )
        return value
