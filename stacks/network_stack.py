"""Network stack: the VPC every other stack lives in, HyperPod's subnet and security group."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from skyrl_hyperpod.config import ProjectConfig

from .components.network import PlatformNetwork


class NetworkStack(cdk.Stack):
    """Exposes `vpc`, `hyperpod_subnet` and `hyperpod_security_group` to the storage, EKS and HyperPod stacks."""

    def __init__(self, scope: Construct, construct_id: str, *, config: ProjectConfig, **kwargs: Any) -> None:
        description = f"{config.name_prefix}: VPC, HyperPod subnet and security group"
        super().__init__(scope, construct_id, description=description, **kwargs)
        network = PlatformNetwork(self, "Network", network=config.network)
        self.vpc: ec2.IVpc = network.vpc
        self.hyperpod_subnet: ec2.ISubnet = network.hyperpod_subnet
        self.hyperpod_security_group: ec2.ISecurityGroup = network.hyperpod_security_group
