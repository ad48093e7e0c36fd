"""The `network:` section and the VPC's subnet plan (what the CDK Vpc construct allocates)."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from pydantic import Field, field_validator, model_validator

from .base import Cidr, StrictModel

_AZ_ID = re.compile(r"^[a-z]{2,5}[0-9]-az[0-9]{1,2}$")
# A VPC's IPv4 CIDR is /16 (65,536 addresses) at most and /28 at least
# (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateVpc.html); this project's subnet plan needs /20 or
# larger (2-6 public and private subnets plus HyperPod's /18-sized one by default), so /16 to /20.
VPC_LARGEST_PREFIX = 16
VPC_SMALLEST_PREFIX = 20


class NetworkConfig(StrictModel):
    vpc_cidr: Cidr = Field(
        default="10.192.0.0/16",
        description=f"VPC CIDR, /{VPC_LARGEST_PREFIX} (AWS's largest VPC) to /{VPC_SMALLEST_PREFIX}.",
    )
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
        if vpc.prefixlen > VPC_SMALLEST_PREFIX:
            raise ValueError(f"vpc_cidr {vpc} is too small: use /{VPC_SMALLEST_PREFIX} or larger")
        if vpc.prefixlen < VPC_LARGEST_PREFIX:
            raise ValueError(
                f"vpc_cidr {vpc} is larger than AWS allows: a VPC's CIDR is /{VPC_LARGEST_PREFIX} (65,536 addresses) "
                f"at most; use /{VPC_LARGEST_PREFIX} to /{VPC_SMALLEST_PREFIX}, such as 10.192.0.0/16"
            )
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
