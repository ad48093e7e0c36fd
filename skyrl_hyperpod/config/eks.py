"""The `eks:` section: Kubernetes version, API endpoint access, cluster admins, control-plane logs."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator

from .base import Cidr, StrictModel

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


# HyperPod's EKS orchestrator supports a range of Kubernetes versions
# (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-prerequisites.html); this project
# ships kubectl layers (aws-cdk.lambda-layer-kubectl-vNN) for the versions below, so those are the ones it deploys.
SUPPORTED_KUBERNETES_VERSIONS = ("1.33", "1.34", "1.35")

ControlPlaneLogType = Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]
DEFAULT_CONTROL_PLANE_LOGS: tuple[ControlPlaneLogType, ...] = ("api", "audit", "authenticator")

# The broadest CIDR eks.public_access_cidrs accepts (/16 = 65,536 addresses, a large corporate egress
# range); anything broader is refused.
MIN_PUBLIC_ACCESS_PREFIX = 16
# EKS's quota "Public endpoint access CIDR ranges per cluster": 40, not adjustable
# (https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html).
MAX_PUBLIC_ACCESS_CIDRS = 40


class EksConfig(StrictModel):
    kubernetes_version: str = Field(default="1.33", description="EKS version: 1.33, 1.34 or 1.35.")
    public_access_cidrs: list[Cidr] = Field(
        default_factory=list,
        description="Empty = private API endpoint. List your own CIDRs (each /16 or narrower, at most "
        f"{MAX_PUBLIC_ACCESS_CIDRS}: EKS's limit) to reach the API from outside the VPC.",
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
        if len(value) > MAX_PUBLIC_ACCESS_CIDRS:
            raise ValueError(
                f"{len(value)} CIDRs listed; EKS accepts at most {MAX_PUBLIC_ACCESS_CIDRS} per cluster (a quota that "
                "cannot be raised): merge neighbouring ranges, or reach the private endpoint from inside the VPC"
            )
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
