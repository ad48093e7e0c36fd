"""SageMaker Studio (optional, config: studio.enabled) in the platform VPC."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.config.names import PROJECT_TAG_KEY
from skyrl_hyperpod.values.stack_outputs import OperatorOutputKey

from .components.studio import StudioDomain


class StudioStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ProjectConfig,
        vpc: ec2.IVpc,
        hyperpod_subnet: ec2.ISubnet,
        eks_cluster_security_group: ec2.ISecurityGroup,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.studio = StudioDomain(
            self,
            "Studio",
            domain_name=f"{config.name_prefix}-studio",
            project_tag=(PROJECT_TAG_KEY, config.name_prefix),
            eks_cluster_name=config.names.eks_cluster,
            vpc=vpc,
            subnet=hyperpod_subnet,
            eks_cluster_security_group=eks_cluster_security_group,
        )
        # The teardown plan reads these to find what DeleteDomain leaves in the VPC.
        cdk.CfnOutput(self, OperatorOutputKey.STUDIO_DOMAIN_ID.value, value=self.studio.domain_id)
        cdk.CfnOutput(self, OperatorOutputKey.STUDIO_HOME_EFS_ID.value, value=self.studio.home_efs_file_system_id)
