"""The `fsx:` section: the FSx for Lustre file system the Ray pods share."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from .base import StrictModel

# FSx for Lustre per-unit storage throughput (MB/s/TiB) allowed for each SSD deployment type.
FSX_THROUGHPUT_TIERS: dict[str, tuple[int, ...]] = {
    "PERSISTENT_1": (50, 100, 200),
    "PERSISTENT_2": (125, 250, 500, 1000),
}


class FsxConfig(StrictModel):
    deployment_type: Literal["PERSISTENT_1", "PERSISTENT_2"] = "PERSISTENT_2"
    storage_capacity_gib: int = Field(default=1200, description="1200, 2400 or a multiple of 2400.")
    per_unit_storage_throughput: int = Field(
        default=250, description="MB/s/TiB: PERSISTENT_2 125/250/500/1000, PERSISTENT_1 50/100/200."
    )
    data_compression: Literal["NONE", "LZ4"] = "LZ4"
    lustre_version: Literal["2.15"] = "2.15"
    automatic_backup_retention_days: int = Field(
        default=7,
        ge=0,
        le=90,
        description="Days FSx keeps its daily automatic backups (0 turns them off). They are deleted with the "
        "file system; `cdk destroy` keeps a final backup either way.",
    )

    @field_validator("storage_capacity_gib")
    @classmethod
    def _capacity(cls, value: int) -> int:
        if value not in (1200, 2400) and (value <= 0 or value % 2400):
            raise ValueError("must be 1200, 2400 or a multiple of 2400 GiB")
        return value

    @property
    def baseline_throughput_mb_s(self) -> float:
        """The file system's baseline throughput: per-unit throughput times the capacity in TiB
        (https://docs.aws.amazon.com/fsx/latest/LustreGuide/performance.html)."""
        return self.storage_capacity_gib / 1024 * self.per_unit_storage_throughput

    @model_validator(mode="after")
    def _throughput_for_type(self) -> FsxConfig:
        tiers = FSX_THROUGHPUT_TIERS[self.deployment_type]
        if self.per_unit_storage_throughput not in tiers:
            raise ValueError(
                f"per_unit_storage_throughput {self.per_unit_storage_throughput} is not allowed for "
                f"{self.deployment_type}: use one of {', '.join(map(str, tiers))} MB/s/TiB"
            )
        return self
