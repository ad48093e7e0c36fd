"""The root of the typed configuration: what every part of the project reads."""

from __future__ import annotations

from functools import cached_property

from pydantic import Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from .addons import RayEndpointOperatorConfig, StudioConfig
from .base import StrictModel
from .derived import DerivedValues, derive
from .eks import EksConfig
from .environment import EnvironmentConfig
from .fsx import FsxConfig
from .helm_installer import HelmInstallerConfig
from .hyperpod import HyperPodConfig
from .images import ServingImageConfig, TrainingImageConfig
from .names import DerivedNames
from .network import NetworkConfig
from .observability import AlertsConfig, ObservabilityConfig
from .regions import az_id_prefix, region_problem
from .serving import ServingConfig, check_serving
from .tracking import TrackingConfig
from .training import TrainingConfig
from .versions import VersionsConfig
from .workloads import WorkloadsConfig, reserved_namespace_problem

# Longest derived name is the lifecycle bucket "sagemaker-<prefix>-lifecycle-<account>-<region>",
# which must fit S3's 63 characters with a 12-digit account and the longest region names.
NAME_PREFIX_MAX = 15


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
    training: TrainingConfig = TrainingConfig()
    tracking: TrackingConfig = TrackingConfig()
    serving: ServingConfig = ServingConfig()

    @model_validator(mode="after")
    def _sections_fit_together(self) -> ProjectConfig:
        """Rules across sections, checked once every section is valid (so field order does not matter).
        Each problem is reported against the section it names."""
        errors: list[InitErrorDetails] = []
        for section, check in (
            ("env", self._check_region),
            ("hyperpod", self._check_instance_types_in_region),
            ("network", self._check_az_in_region),
            ("workloads", self._check_namespace_is_not_the_operators),
            ("tracking", self._check_tracking),
            ("training", lambda: self.derived),
            # Serving reads the training runs: checked only when those resolved.
            ("serving", self._check_serving),
        ):
            if section == "serving" and any(e["loc"] == ("training",) for e in errors):
                continue
            # Instance types and AZ ids are checked against a region only once the region itself is known.
            if section in ("hyperpod", "network") and any(e["loc"] == ("env",) for e in errors):
                continue
            try:
                check()
            except ValueError as exc:
                error = PydanticCustomError("value_error", "Value error, {error}", {"error": str(exc)})
                errors.append(InitErrorDetails(type=error, loc=(section,), input=getattr(self, section)))
        if errors:
            raise ValidationError.from_exception_data(type(self).__name__, errors)
        return self

    def _check_region(self) -> None:
        problem = region_problem(self.env.region, {}) if self.env.region else None
        if problem:
            raise ValueError(problem)

    def _check_instance_types_in_region(self) -> None:
        if self.env.region is None:
            return
        groups = {f"{key}.instance_type": group.instance_type for key, group in self.hyperpod.instance_groups.items()}
        problem = region_problem(self.env.region, groups)
        if problem:
            raise ValueError(problem)

    def _check_az_in_region(self) -> None:
        region = self.env.region
        prefix = az_id_prefix(region) if region else None
        if prefix is not None and self.network.hyperpod_az_id.split("-az")[0] != prefix:
            raise ValueError(
                f"hyperpod_az_id {self.network.hyperpod_az_id!r} is an availability zone id of another region: "
                f"env.region {region} has ids {prefix}-az1, {prefix}-az2, ..."
            )

    def _check_namespace_is_not_the_operators(self) -> None:
        namespace = self.workloads.namespace
        if namespace == self.ray_endpoint_operator.namespace:
            raise ValueError(
                "namespace "
                + reserved_namespace_problem(
                    namespace, "ray_endpoint_operator.namespace, the HyperPod Ray endpoint operator's"
                )
            )

    def _check_serving(self) -> None:
        head = self.derived.training_head
        check_serving(
            self.serving,
            training=self.training,
            hyperpod=self.hyperpod,
            runs=self.derived.runs,
            training_head=(head.cpus, head.memory_gib),
        )

    @cached_property
    def derived(self) -> DerivedValues:
        """Names, runs, pod sizes, worker layout and GPUs per instance type, computed once from this configuration."""
        return derive(
            names=self.names,
            hyperpod=self.hyperpod,
            training_image=self.training_image,
            workloads=self.workloads,
            training=self.training,
            serving=self.serving,
            tracking=self.tracking,
        )

    def _check_tracking(self) -> None:
        prefix = self.tracking.artifacts_prefix
        adapters = self.workloads.adapters_prefix
        if self.tracking.managed_app and (prefix == adapters or prefix.startswith(f"{adapters}/")):
            raise ValueError(
                f"artifacts_prefix = {prefix!r}: inside workloads.adapters_prefix ({adapters!r}), which the serving "
                "pods read; choose a prefix of its own"
            )

    @cached_property
    def names(self) -> DerivedNames:
        return DerivedNames(prefix=self.name_prefix)
