"""The `observability:` and `alerts:` sections: metrics, logs and the HyperPod failure-event alerts."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from .base import StrictModel


class ObservabilityConfig(StrictModel):
    enabled: bool = True
    grafana: bool = Field(
        default=False, description="Amazon Managed Grafana; needs IAM Identity Center in the account."
    )
    metrics_level: Literal["Basic", "Advanced"] = "Basic"
    scrape_interval_seconds: int = Field(default=30, ge=10, le=300)
    logging_enabled: bool = True

    @model_validator(mode="after")
    def _grafana_needs_the_stack(self) -> ObservabilityConfig:
        # Grafana's data source is the observability stack's Prometheus workspace: with the stack off there is
        # none, and the setting would be dropped without a word.
        if self.grafana and not self.enabled:
            raise ValueError(
                "grafana = True: Grafana reads the Prometheus workspace of the observability stack, which "
                "enabled: false leaves out; set enabled: true, or grafana: false"
            )
        return self


_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


class AlertsConfig(StrictModel):
    """HyperPod failure events (instance creation, health, lifecycle scripts) go to an SNS topic."""

    email_addresses: list[str] = Field(
        default_factory=list,
        description="Subscribed to the alerts topic (each address confirms by email). Empty: subscribe later "
        "to the topic in the HyperPod stack's AlertsTopicArn output.",
    )

    @field_validator("email_addresses")
    @classmethod
    def _emails(cls, value: list[str]) -> list[str]:
        for address in value:
            if not _EMAIL.fullmatch(address):
                raise ValueError(f"{address!r} is not an email address (name@example.com)")
        if len(set(value)) != len(value):
            raise ValueError("lists an address twice")
        return value
