"""The `studio:` and `ray_endpoint_operator:` sections: the optional SageMaker Studio domain and the HyperPod Ray
endpoint operator."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from ..plumbing.upstream import RAY_ENDPOINT_OPERATOR_CHART_PATH
from .base import CommitId, StrictModel


class StudioConfig(StrictModel):
    enabled: bool = False


class RayEndpointOperatorConfig(StrictModel):
    """HyperPod Ray endpoint operator: needs a Route 53 domain the user owns, so off by default."""

    enabled: bool = False
    domain: str | None = Field(default=None, description="Route 53 domain you own (the chart's `domain` value).")
    enable_endpoints_by_default: bool = False
    # No default: the chart is not in any commit this project's chart check can read (it arrived in
    # aws/sagemaker-hyperpod-cli PR #445, release v3.10.0), so nobody here can vouch for a pin.
    commit: CommitId | None = Field(
        default=None,
        description=f"Commit of versions.hyperpod_cli_repository that contains {RAY_ENDPOINT_OPERATOR_CHART_PATH} "
        "(release v3.10.0 or later). Required when enabled.",
    )
    namespace: str = Field(
        default="hyperpod-ray",
        pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
        description="Namespace of the operator's Helm release (also the chart's `namespace` value).",
    )
    kms_key_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/.+$",
        description="KMS key the operator signs dashboard URLs with (the chart's optional `kmsKeyArn`).",
    )
    admin_group: str | None = Field(default=None, description="The chart's optional `adminGroup`.")
    spaces_addon_configuration: dict[str, Any] = Field(
        default_factory=dict,
        description="Configuration values of the amazon-sagemaker-spaces add-on that turn on web browser access "
        "(AWS 'Setting up the Spaces add-on'; schema: `aws eks describe-addon-configuration --addon-name "
        "amazon-sagemaker-spaces`). Required when enabled.",
    )

    @model_validator(mode="after")
    def _required_when_enabled(self) -> RayEndpointOperatorConfig:
        if not self.enabled:
            return self
        missing = []
        if not self.domain:
            missing.append("domain is empty: set domain to a Route 53 domain you own")
        if self.commit is None:
            missing.append(
                "commit is empty: set it to a full commit id of https://github.com/aws/sagemaker-hyperpod-cli that "
                f"contains {RAY_ENDPOINT_OPERATOR_CHART_PATH} (release v3.10.0 or later; `git ls-remote --tags "
                "https://github.com/aws/sagemaker-hyperpod-cli v3.10.0`)"
            )
        if not self.spaces_addon_configuration:
            missing.append(
                "spaces_addon_configuration is empty: the operator needs the Spaces add-on with web browser access; "
                "give the add-on configuration that enables it (see docs/ray-endpoint-operator.md)"
            )
        if missing:
            raise ValueError("enabled is true but " + "; ".join(missing))
        return self
