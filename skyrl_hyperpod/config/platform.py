"""Configuration of the AWS platform: network, EKS, HyperPod, FSx, observability, versions.

Defaults reproduce the reference deployment (README, docs/sources.md). Every model is frozen and
rejects unknown keys, so a misspelt key in a user's YAML is an error, not a silent default.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import ipaddress
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from ..upstream import KUBERAY_COMMIT, KUBERAY_OPERATOR_CHART_PATH, KUBERAY_RELEASE, KUBERAY_TAG
from .catalog import INSTANCE_CATALOG, InstanceSpec, unknown_instance_type

_HYPERPOD_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_AZ_ID = re.compile(r"^[a-z]{2,5}[0-9]-az[0-9]{1,2}$")
_PRINCIPAL_ARN = re.compile(r"^arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/[\w+=,.@/-]{1,512}$")
# What `aws sts get-caller-identity` prints under an assumed role: the session, not the role.
_ROLE_SESSION_ARN = re.compile(r"^arn:(aws[a-z-]*):sts::([0-9]{12}):assumed-role/([\w+=,.@-]+)/.+$")


def _session_role_hint(arn: str) -> str | None:
    """For an STS role session ARN, the IAM role ARN to list instead; None for anything else.

    EKS access entries take IAM principals, not STS sessions, and a role ARN may carry a path
    (https://docs.aws.amazon.com/eks/latest/userguide/creating-access-entries.html). A session ARN drops the path:
    IAM Identity Center's roles sit under aws-reserved/sso.amazonaws.com/, plus the region unless Identity Center is
    in us-east-1 (https://docs.aws.amazon.com/singlesignon/latest/userguide/referencingpermissionsets.html)."""
    session = _ROLE_SESSION_ARN.fullmatch(arn)
    if session is None:
        return None
    partition, account, role = session.groups()
    lookup = f"`aws iam get-role --role-name {role} --query Role.Arn` prints it exactly"
    if role.startswith("AWSReservedSSO_"):
        role_arn = f"arn:{partition}:iam::{account}:role/aws-reserved/sso.amazonaws.com/{role}"
        where = f"with <region>/ before {role} when IAM Identity Center is not in us-east-1; {lookup}"
    else:
        role_arn = f"arn:{partition}:iam::{account}:role/{role}"
        where = f"with the role's path, if it has one, before {role}; {lookup}"
    return (
        f"{arn!r} is an STS session of IAM role {role} (as aws sts get-caller-identity prints it), and EKS access "
        f"entries take the role: list {role_arn} ({where})"
    )


# Chart locations inside aws/sagemaker-hyperpod-cli (helm_chart/HyperPodHelmChart at release v3.9.0; the
# operator's sub-chart from release v3.10.0 on).
HYPERPOD_CHART_PATH = "helm_chart/HyperPodHelmChart"
RAY_ENDPOINT_OPERATOR_CHART_PATH = f"{HYPERPOD_CHART_PATH}/charts/hyperpod-ray-endpoint-operator"

# HyperPod's EKS orchestrator supports a range of Kubernetes versions
# (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-prerequisites.html); this project
# ships kubectl layers (aws-cdk.lambda-layer-kubectl-vNN) for the versions below, so those are the ones it deploys.
SUPPORTED_KUBERNETES_VERSIONS = ("1.33", "1.34", "1.35")

# FSx for Lustre per-unit storage throughput (MB/s/TiB) allowed for each SSD deployment type.
FSX_THROUGHPUT_TIERS: dict[str, tuple[int, ...]] = {
    "PERSISTENT_1": (50, 100, 200),
    "PERSISTENT_2": (125, 250, 500, 1000),
}

ControlPlaneLogType = Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]
DEFAULT_CONTROL_PLANE_LOGS: tuple[ControlPlaneLogType, ...] = ("api", "audit", "authenticator")
DeepHealthCheck = Literal["InstanceStress", "InstanceConnectivity"]


class StrictModel(BaseModel):
    """Base for every configuration model: immutable, unknown keys rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)


def _commit_id(value: str) -> str:
    if not _COMMIT.fullmatch(value):
        raise ValueError("must be a full 40-character lowercase git commit id (never a branch or tag)")
    return value


CommitId = Annotated[str, AfterValidator(_commit_id)]


def _cidr(value: str) -> str:
    try:
        return str(ipaddress.IPv4Network(value))
    except ValueError as exc:
        raise ValueError(f"must be an IPv4 CIDR such as 10.0.0.0/16 ({exc})") from None


Cidr = Annotated[str, AfterValidator(_cidr)]


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


def _cfn_lint_data() -> Path:
    """cfn-lint's bundled CloudFormation resource data (the package is located, not imported: its import is slow)."""
    spec = importlib.util.find_spec("cfnlint")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("the cfn-lint package is not installed (requirements.txt): run `make setup`")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "schemas"


@functools.cache
def aws_regions() -> frozenset[str]:
    """Every region cfn-lint ships resource schemas for (data/schemas/providers/<region>.json)."""
    return frozenset(p.stem for p in (_cfn_lint_data() / "providers").glob("*-*-*.json"))


@functools.cache
def hyperpod_instance_types_by_region() -> dict[str, frozenset[str]]:
    """AWS::SageMaker::Cluster InstanceType values per region, as cfn-lint ships them (its schema extension,
    refreshed from the SageMaker price list with each release); a region missing here has no HyperPod."""
    file = _cfn_lint_data() / "extensions" / "aws_sagemaker_cluster" / "instancetype_enum.json"
    data = json.loads(file.read_text(encoding="utf-8"))
    return {region: frozenset(entry["enum"]) for region, entry in data.items() if isinstance(entry, dict)}


def region_problem(region: str, groups: dict[str, str]) -> str | None:
    """One line when `region` is not an AWS region, has no HyperPod, or lacks a group's instance type
    (`groups`: config key -> instance type); None when HyperPod offers every group there."""
    regions = aws_regions()
    if region not in regions:
        guess = difflib.get_close_matches(region, sorted(regions), n=1, cutoff=0.7)
        hint = f"; did you mean {guess[0]}?" if guess else ""
        return f"region = {region!r}: not an AWS region{hint}"
    offered = hyperpod_instance_types_by_region()
    if region not in offered:
        return (
            f"region = {region!r}: SageMaker HyperPod is not offered there; regions with HyperPod: "
            f"{', '.join(sorted(offered))}"
        )
    for key, instance_type in groups.items():
        if instance_type not in offered[region]:
            elsewhere = sorted(r for r, types in offered.items() if instance_type in types)
            return f"{key} = {instance_type!r}: not offered by HyperPod in {region}; it is in {', '.join(elsewhere)}"
    return None


# AZ ids start with the region's short code: the country, the initials of the direction words, the
# number (us-west-2 -> usw2, ap-northeast-1 -> apne1, us-gov-west-1 -> usgw1); see "AZ IDs for your
# AWS resources", https://docs.aws.amazon.com/ram/latest/userguide/working-with-az-ids.html.
_DIRECTIONS = {"north": "n", "south": "s", "east": "e", "west": "w", "central": "c",
               "northeast": "ne", "northwest": "nw", "southeast": "se", "southwest": "sw"}  # fmt: skip


def az_id_prefix(region: str) -> str | None:
    """`usw2` for us-west-2: what every AZ id of `region` starts with (None for an unrecognised name)."""
    parts = region.split("-")
    if len(parts) < 3 or not parts[-1].isdigit():
        return None
    words = parts[1:-1]
    code = "".join("g" if word == "gov" else _DIRECTIONS.get(word, "") for word in words)
    if len(code) < len(words) or not code:
        return None
    return f"{parts[0]}{code}{parts[-1]}"


class NetworkConfig(StrictModel):
    vpc_cidr: Cidr = Field(default="10.192.0.0/16", description="VPC CIDR, /20 or larger.")
    max_azs: int = Field(default=2, ge=2, le=6, description="AZs for the public/private subnets (EKS needs 2+).")
    nat_gateways: int = Field(default=1, ge=1, le=6, description="NAT gateways; one per AZ for zone resilience.")
    # AZ *ids* are stable across accounts, names are not.
    hyperpod_az_id: str = Field(
        default="usw2-az2",
        description="AZ id of HyperPod's private subnet; must offer the GPU instance type (check with `preflight`).",
    )
    hyperpod_subnet_cidr: Cidr = Field(default="10.192.128.0/18", description="CIDR of HyperPod's private subnet.")

    @field_validator("hyperpod_az_id")
    @classmethod
    def _az_id(cls, value: str) -> str:
        if not _AZ_ID.fullmatch(value):
            raise ValueError("must be an availability zone id such as usw2-az2 (not a zone name like us-west-2b)")
        return value

    @model_validator(mode="after")
    def _subnet_inside_vpc(self) -> NetworkConfig:
        vpc = ipaddress.IPv4Network(self.vpc_cidr)
        subnet = ipaddress.IPv4Network(self.hyperpod_subnet_cidr)
        if not subnet.subnet_of(vpc):
            raise ValueError(f"hyperpod_subnet_cidr {subnet} must lie inside vpc_cidr {vpc}")
        if vpc.prefixlen > 20:
            raise ValueError(f"vpc_cidr {vpc} is too small: use /20 or larger")
        if self.nat_gateways > self.max_azs:
            raise ValueError(f"nat_gateways ({self.nat_gateways}) cannot exceed max_azs ({self.max_azs})")
        overlaps = hyperpod_subnet_overlaps(self)
        if overlaps:
            raise ValueError(overlaps[0])
        return self


# Fractions of the VPC given to each subnet (as extra prefix bits): private 1/16, public 1/256.
_PRIVATE_EXTRA_BITS = 4
_PUBLIC_EXTRA_BITS = 8
# The CDK Vpc construct accepts subnet masks from /16 to /28.
_MIN_MASK, _MAX_MASK = 16, 28


@dataclass(frozen=True)
class SubnetMasks:
    public: int
    private: int


def vpc_subnet_masks(vpc_cidr: str) -> SubnetMasks:
    """Masks of the Vpc construct's public and private subnets, scaled to the VPC size."""
    prefix = ipaddress.IPv4Network(vpc_cidr).prefixlen

    def clamp(mask: int) -> int:
        return max(_MIN_MASK, min(_MAX_MASK, mask))

    return SubnetMasks(public=clamp(prefix + _PUBLIC_EXTRA_BITS), private=clamp(prefix + _PRIVATE_EXTRA_BITS))


def vpc_subnet_plan(network: NetworkConfig) -> list[ipaddress.IPv4Network]:
    """CIDRs the CDK Vpc construct allocates for `max_azs` public then `max_azs` private subnets (same algorithm:
    sequential from the VPC start, each block aligned to its own size)."""
    vpc = ipaddress.IPv4Network(network.vpc_cidr)
    masks = vpc_subnet_masks(network.vpc_cidr)
    next_free = int(vpc.network_address)
    plan = []
    for mask in [masks.public] * network.max_azs + [masks.private] * network.max_azs:
        size = 2 ** (32 - mask)
        start = -(-next_free // size) * size  # round up to the block boundary
        plan.append(ipaddress.IPv4Network((start, mask)))
        next_free = start + size
    return plan


def hyperpod_subnet_overlaps(network: NetworkConfig, allocated: list[str] | None = None) -> list[str]:
    """One line per VPC subnet that collides with the HyperPod subnet (empty list = no collision)."""
    hyperpod = ipaddress.IPv4Network(network.hyperpod_subnet_cidr)
    vpc = ipaddress.IPv4Network(network.vpc_cidr)
    cidrs = [ipaddress.IPv4Network(c) for c in allocated] if allocated is not None else vpc_subnet_plan(network)
    upper_half = list(vpc.subnets(prefixlen_diff=1))[1]
    return [
        f"hyperpod_subnet_cidr {hyperpod} overlaps the VPC's public/private subnet {cidr} "
        f"(they fill vpc_cidr from its start); choose a CIDR inside {upper_half}"
        for cidr in cidrs
        if cidr.overlaps(hyperpod)
    ]


# The broadest CIDR eks.public_access_cidrs accepts (/16 = 65,536 addresses, a large corporate egress
# range); anything broader is refused.
MIN_PUBLIC_ACCESS_PREFIX = 16


class EksConfig(StrictModel):
    kubernetes_version: str = Field(default="1.33", description="EKS version: 1.33, 1.34 or 1.35.")
    public_access_cidrs: list[Cidr] = Field(
        default_factory=list,
        description="Empty = private API endpoint. List your own CIDRs (each /16 or narrower) to reach the API from "
        "outside the VPC.",
    )
    admin_principal_arns: list[str] = Field(
        default_factory=list,
        description="IAM role/user ARNs granted cluster-admin through EKS access entries. List yourself (aws sts "
        "get-caller-identity): the stacks grant nobody access implicitly, and `preflight` fails without it.",
    )
    private_network_access: bool = Field(
        default=False,
        description="True when a VPN, Direct Connect or bastion reaches the VPC: `preflight` then accepts a private "
        "endpoint without public_access_cidrs or Studio. Nothing is deployed for it.",
    )
    control_plane_log_types: list[ControlPlaneLogType] = Field(default_factory=lambda: list(DEFAULT_CONTROL_PLANE_LOGS))

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, value: str) -> str:
        if value not in SUPPORTED_KUBERNETES_VERSIONS:
            raise ValueError(f"must be one of {', '.join(SUPPORTED_KUBERNETES_VERSIONS)} (HyperPod EKS support)")
        return value

    @field_validator("public_access_cidrs")
    @classmethod
    def _no_open_internet(cls, value: list[str]) -> list[str]:
        # A prefix limit, not a check for 0.0.0.0/0 alone: 0.0.0.0/1 + 128.0.0.0/1 cover the same internet.
        for cidr in value:
            if ipaddress.IPv4Network(cidr).prefixlen < MIN_PUBLIC_ACCESS_PREFIX:
                raise ValueError(
                    f"{cidr} is broader than /{MIN_PUBLIC_ACCESS_PREFIX} and would open the API server to a large "
                    f"part of the internet: list your own CIDRs, each /{MIN_PUBLIC_ACCESS_PREFIX} or narrower"
                )
        return value

    @field_validator("admin_principal_arns")
    @classmethod
    def _principals(cls, value: list[str]) -> list[str]:
        for arn in value:
            if not _PRINCIPAL_ARN.fullmatch(arn):
                generic = f"{arn!r} is not an IAM role or user ARN (arn:aws:iam::111111111111:role/Name)"
                raise ValueError(_session_role_hint(arn) or generic)
        return value

    @property
    def endpoint_public(self) -> bool:
        return bool(self.public_access_cidrs)


class InstanceGroupConfig(StrictModel):
    name: str
    instance_type: str = Field(description="An instance type from the catalog (skyrl_hyperpod/config/catalog.py).")
    instance_count: int = Field(ge=0, le=256, description="Nodes in the group.")
    ebs_volume_gb: int = Field(
        default=500, ge=1, le=16384, description="Secondary EBS volume mounted at /opt/sagemaker."
    )
    threads_per_core: Literal[1, 2] = Field(
        default=1, description="1 turns hyperthreading off: the node then exposes half the catalog's vCPUs."
    )
    deep_health_checks: list[DeepHealthCheck] = Field(default_factory=list, description="GPU groups only.")
    system_reserved_vcpus: int | None = Field(
        default=None,
        ge=1,
        description="vCPUs per node left to kubelet, HyperPod agents and daemon sets (device plugins, CNI, CSI, "
        "observability) when sizing Ray pods. Default: max(4, node vCPUs / 8), at most half the node.",
    )
    training_plan_arn: str | None = Field(
        default=None, pattern=r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:[0-9]{12}:training-plan/.+$"
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _HYPERPOD_NAME.fullmatch(value):
            raise ValueError("must be 1-63 letters, digits or hyphens, starting and ending with a letter or digit")
        return value

    @field_validator("instance_type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        if value not in INSTANCE_CATALOG:
            raise ValueError(unknown_instance_type(value))
        return value

    @model_validator(mode="after")
    def _health_checks_need_gpus(self) -> InstanceGroupConfig:
        if self.deep_health_checks and self.spec.gpus == 0:
            raise ValueError(
                f"deep_health_checks {self.deep_health_checks} need a GPU instance type; {self.instance_type} has none"
            )
        if self.system_reserved_vcpus is not None and self.system_reserved_vcpus >= self.node_vcpus:
            raise ValueError(
                f"system_reserved_vcpus {self.system_reserved_vcpus} leaves nothing for Ray: a {self.instance_type} "
                f"node with threads_per_core {self.threads_per_core} exposes {self.node_vcpus} vCPUs"
            )
        return self

    @property
    def spec(self) -> InstanceSpec:
        return INSTANCE_CATALOG[self.instance_type]

    @property
    def node_vcpus(self) -> int:
        """vCPUs the OS, and so the kubelet, sees on one node of this group."""
        return self.spec.physical_cores * self.threads_per_core

    @property
    def allocatable_vcpus(self) -> int:
        """vCPUs one pod per node may request: leaves room for kubelet, HyperPod agents and daemon sets."""
        reserved = self.system_reserved_vcpus or min(self.node_vcpus // 2, max(4, self.node_vcpus // 8))
        return self.node_vcpus - reserved

    @property
    def allocatable_memory_gib(self) -> int:
        """Memory one pod per node may request after system reservations (kubelet, agents, page cache)."""
        memory = self.spec.memory_gib
        return memory - max(8, memory // 10)


class HyperPodConfig(StrictModel):
    node_recovery: Literal["Automatic", "None"] = "Automatic"
    head_group: InstanceGroupConfig = InstanceGroupConfig(
        name="head", instance_type="ml.r5d.16xlarge", instance_count=1, threads_per_core=2
    )
    worker_group: InstanceGroupConfig = InstanceGroupConfig(
        name="gpu-workers",
        instance_type="ml.g7e.12xlarge",
        instance_count=3,
        deep_health_checks=["InstanceStress", "InstanceConnectivity"],
    )
    lifecycle_bucket_name: str | None = Field(
        default=None,
        description="Default: derived from name_prefix. Must start with 'sagemaker-' (the instance role policy reads only those).",
    )

    @field_validator("lifecycle_bucket_name")
    @classmethod
    def _lifecycle_bucket(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not value.startswith("sagemaker-"):
            raise ValueError("must start with 'sagemaker-' (AmazonSageMakerClusterInstanceRolePolicy reads only those)")
        if not _BUCKET.fullmatch(value) or ".." in value:
            raise ValueError("must be a valid S3 bucket name: 3-63 lowercase letters, digits, dots or hyphens")
        return value

    @property
    def instance_groups(self) -> dict[str, InstanceGroupConfig]:
        """Every instance group of the HyperPod cluster by its configuration key, in the order the cluster lists
        them (the Ray head's first). What applies to every group (the cluster's groups, prices, capacity,
        status, device plugins) reads this, so another group is one more entry here; what needs the Ray head or
        the GPU workers reads `head_group` or `worker_group`."""
        return {"head_group": self.head_group, "worker_group": self.worker_group}

    @model_validator(mode="after")
    def _groups(self) -> HyperPodConfig:
        if self.head_group.instance_count < 1:
            raise ValueError("head_group.instance_count must be at least 1: the Ray head needs a node")
        if self.worker_group.spec.gpus == 0:
            raise ValueError(f"worker_group.instance_type {self.worker_group.instance_type} has no GPUs")
        if self.worker_group.instance_count < 1:
            raise ValueError("worker_group.instance_count must be at least 1")
        seen: dict[str, str] = {}
        for key, group in self.instance_groups.items():
            if group.name in seen:
                raise ValueError(f"{seen[group.name]}.name and {key}.name are both {group.name!r}")
            seen[group.name] = key
        return self


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

    @model_validator(mode="after")
    def _throughput_for_type(self) -> FsxConfig:
        tiers = FSX_THROUGHPUT_TIERS[self.deployment_type]
        if self.per_unit_storage_throughput not in tiers:
            raise ValueError(
                f"per_unit_storage_throughput {self.per_unit_storage_throughput} is not allowed for "
                f"{self.deployment_type}: use one of {', '.join(map(str, tiers))} MB/s/TiB"
            )
        return self


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


class VersionsConfig(StrictModel):
    """Versions of every chart and add-on. `None` for an EKS add-on = the default for the cluster version."""

    kuberay_operator_chart: str = Field(
        default=KUBERAY_RELEASE,
        description="kuberay-operator Helm chart version; must match the KubeRay CRDs the manifests are validated against.",
    )
    kuberay_repository: str = Field(
        default="https://github.com/ray-project/kuberay",
        pattern=r"^https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$",
        description=f"GitHub repository whose {KUBERAY_OPERATOR_CHART_PATH} at tag {KUBERAY_TAG} (commit "
        f"{KUBERAY_COMMIT}) the git Helm installer installs, every file checked against this project's list.",
    )
    hyperpod_cli_repository: str = "https://github.com/aws/sagemaker-hyperpod-cli"
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
