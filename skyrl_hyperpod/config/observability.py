"""The `observability:` and `alerts:` sections: metrics, logs and the HyperPod failure-event alerts."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from .base import StrictModel


class ObservabilityConfig(StrictModel):
    enabled: bool = True
    grafana: bool = Field(
        default=False, description="Amazon Managed Grafana; needs IAM Identity Center in the account."
    )
    metrics_level: Literal["Basic", "Advanced"] = "Basic"
    scrape_interval_seconds: int = Field(default=30, ge=10, le=300)
    logging_enabled: bool = True


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
