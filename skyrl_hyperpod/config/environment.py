"""The `env:` section: target account and region."""

from __future__ import annotations

from pydantic import Field

from .base import StrictModel


class EnvironmentConfig(StrictModel):
    """Target account and region. Both optional: synth stays environment-agnostic without them."""

    account: str | None = Field(
        default=None,
        pattern=r"^[0-9]{12}$",
        description="12-digit account id, in quotes. Set, it makes `cdk synth` look up the account's availability "
        "zones, which needs credentials; leave it unset to synthesize offline.",
    )
    region: str | None = Field(
        default=None,
        pattern=r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]$",
        description="A region where SageMaker HyperPod offers both groups' instance types (checked at config time).",
    )
