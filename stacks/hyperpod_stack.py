"""HyperPod: lifecycle scripts, the node execution role and the EKS-orchestrated HyperPod cluster."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3 as s3
from constructs import Construct

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.values.stack_outputs import OperatorOutputKey, OutputKey

from .components.alerts import HyperPodFailureAlerts
from .components.hyperpod_cluster import HyperPodCluster, HyperPodExecutionRole
from .components.lifecycle import LifecycleScripts


class HyperPodStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ProjectConfig,
        eks_cluster: eks.ICluster,
        vpc: ec2.IVpc,
        hyperpod_subnet: ec2.ISubnet,
        hyperpod_security_group: ec2.ISecurityGroup,
        lifecycle_bucket: s3.IBucket,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        cluster_name = config.names.hyperpod_cluster

        self.lifecycle_scripts = LifecycleScripts(
            self, "LifecycleScripts", bucket=lifecycle_bucket, key_prefix=f"lifecycle-scripts/{cluster_name}"
        )
        self.execution_role = HyperPodExecutionRole(
            self,
            "ExecutionRole",
            eks_cluster=eks_cluster,
            vpc=vpc,
            subnet=hyperpod_subnet,
            security_group=hyperpod_security_group,
            lifecycle_bucket=lifecycle_bucket,
            # By name (the registry stack creates it with this name): no cross-stack export for an ARN.
            image_repository=ecr.Repository.from_repository_name(
                self, "TrainingImageRepository", config.names.ecr_repository
            ),
        ).role
        self.hyperpod_cluster = HyperPodCluster(
            self,
            "HyperPod",
            cluster_name=cluster_name,
            hyperpod=config.hyperpod,
            eks_cluster=eks_cluster,
            subnet=hyperpod_subnet,
            security_group=hyperpod_security_group,
            execution_role=self.execution_role,
            lifecycle_scripts=self.lifecycle_scripts,
        )

        self.alerts = HyperPodFailureAlerts(
            self, "FailureAlerts", cluster_name=cluster_name, email_addresses=config.alerts.email_addresses
        )

        cdk.CfnOutput(self, OutputKey.HYPERPOD_CLUSTER_NAME.value, value=cluster_name)
        cdk.CfnOutput(
            self,
            OperatorOutputKey.ALERTS_TOPIC_ARN.value,
            value=self.alerts.topic.topic_arn,
            description="SNS topic of HyperPod failure events: subscribe with aws sns subscribe",
        )
        cdk.CfnOutput(self, OutputKey.HYPERPOD_CLUSTER_ARN.value, value=self.hyperpod_cluster.cluster_arn)
        cdk.CfnOutput(self, OutputKey.HYPERPOD_EXECUTION_ROLE_ARN.value, value=self.execution_role.role_arn)
