"""The root of the typed configuration: what every part of the project reads."""

from __future__ import annotations

from functools import cached_property

from pydantic import Field, ValidationInfo, field_validator

from .images import ServingImageConfig, TrainingImageConfig
from .platform import (
    AlertsConfig,
    EksConfig,
    EnvironmentConfig,
    FsxConfig,
    HelmInstallerConfig,
    HyperPodConfig,
    NetworkConfig,
    ObservabilityConfig,
    RayEndpointOperatorConfig,
    StrictModel,
    StudioConfig,
    VersionsConfig,
    az_id_prefix,
)
from .serving import ServingConfig, check_serving
from .training import TrainingConfig, resolve_runs
from .workloads import WorkloadsConfig

# Longest derived name is the lifecycle bucket "sagemaker-<prefix>-lifecycle-<account>-<region>",
# which must fit S3's 63 characters with a 12-digit account and the longest region names.
NAME_PREFIX_MAX = 15


class DerivedNames(StrictModel):
    """Physical names computed once from name_prefix; stacks, charts and tooling read these."""

    prefix: str

    @property
    def eks_cluster(self) -> str:
        return f"{self.prefix}-eks"

    @property
    def hyperpod_cluster(self) -> str:
        return f"{self.prefix}-hyperpod"

    @property
    def ecr_repository(self) -> str:
        return f"{self.prefix}/skyrl-train"

    def stack(self, component: str) -> str:
        return f"{self.prefix}-{component}"

    def lifecycle_bucket(self, configured: str | None, *, account: str, region: str) -> str:
        """`hyperpod.lifecycle_bucket_name`, else `sagemaker-<prefix>-lifecycle-<account>-<region>`:
        globally unique and readable by the managed HyperPod instance policy (which reads only
        `sagemaker-*` buckets). account/region may be CloudFormation tokens."""
        return configured or f"sagemaker-{self.prefix}-lifecycle-{account}-{region}"


class ProjectConfig(StrictModel):
    name_prefix: str = Field(
        default="skyrl-hp",
        min_length=3,
        max_length=NAME_PREFIX_MAX,
        pattern=r"^[a-z][a-z0-9-]*[a-z0-9]$",
        description="Prefix of every stack and physical name (lowercase, digits, hyphens).",
    )
    env: EnvironmentConfig = EnvironmentConfig()
    network: NetworkConfig = NetworkConfig()
    eks: EksConfig = EksConfig()
    hyperpod: HyperPodConfig = HyperPodConfig()
    fsx: FsxConfig = FsxConfig()
    observability: ObservabilityConfig = ObservabilityConfig()
    alerts: AlertsConfig = AlertsConfig()
    studio: StudioConfig = StudioConfig()
    ray_endpoint_operator: RayEndpointOperatorConfig = RayEndpointOperatorConfig()
    versions: VersionsConfig = VersionsConfig()
    helm_installer: HelmInstallerConfig = HelmInstallerConfig()
    training_image: TrainingImageConfig = TrainingImageConfig()
    serving_image: ServingImageConfig = ServingImageConfig()
    workloads: WorkloadsConfig = WorkloadsConfig()
    # Declared after hyperpod and workloads: their validators cross-check against those sections.
    training: TrainingConfig = TrainingConfig()
    serving: ServingConfig = ServingConfig()

    @field_validator("network")
    @classmethod
    def _az_in_region(cls, network: NetworkConfig, info: ValidationInfo) -> NetworkConfig:
        env = info.data.get("env")
        region = env.region if env is not None else None
        prefix = az_id_prefix(region) if region else None
        if prefix is not None and network.hyperpod_az_id.split("-az")[0] != prefix:
            raise ValueError(
                f"hyperpod_az_id {network.hyperpod_az_id!r} is an availability zone id of another region: "
                f"env.region {region} has ids {prefix}-az1, {prefix}-az2, ..."
            )
        return network

    @field_validator("training")
    @classmethod
    def _training_fits_cluster(cls, training: TrainingConfig, info: ValidationInfo) -> TrainingConfig:
        if "hyperpod" in info.data and "workloads" in info.data:
            resolve_runs(training, info.data["hyperpod"], info.data["workloads"])
        return training

    @field_validator("serving")
    @classmethod
    def _serving_fits_cluster(cls, serving: ServingConfig, info: ValidationInfo) -> ServingConfig:
        if all(section in info.data for section in ("training", "hyperpod", "workloads")):
            data = info.data
            check_serving(serving, training=data["training"], hyperpod=data["hyperpod"], workloads=data["workloads"])
        return serving

    @cached_property
    def names(self) -> DerivedNames:
        return DerivedNames(prefix=self.name_prefix)
