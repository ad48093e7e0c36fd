"""An optional SageMaker Studio domain in the platform VPC, for users who submit Ray jobs from Studio."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from .iam_wildcards import acknowledge_iam_wildcards, arn_pattern


class StudioDomain(Construct):
    """Studio domain with IAM sign-in and VPC-only networking.

    The default execution role may look up this project's HyperPod and EKS clusters, which is
    what submitting a Ray job (`ray job submit --address sagemaker_ray://...`) needs on the AWS
    side; Kubernetes permissions come from an EKS access entry (config: eks.admin_principal_arns).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        domain_name: str,
        project_tag: tuple[str, str],
        eks_cluster_name: str,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet,
        security_group: ec2.ISecurityGroup,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        tag_key, tag_value = project_tag

        def sagemaker_arn(resource: str, name: str = "*") -> str:
            return stack.format_arn(service="sagemaker", resource=resource, resource_name=name)

        self.execution_role = iam.Role(
            self,
            "ExecutionRole",
            description="SageMaker Studio users: look up the HyperPod and EKS clusters to submit Ray jobs",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            inline_policies={
                "SubmitRayJobs": iam.PolicyDocument(
                    statements=[
                        iam.PolicyStatement(
                            sid="DescribeProjectHyperPodCluster",
                            actions=[
                                "sagemaker:DescribeCluster",
                                "sagemaker:DescribeClusterNode",
                                "sagemaker:ListClusterNodes",
                            ],
                            # HyperPod cluster ARNs end in a generated id: select ours by its tag.
                            resources=[sagemaker_arn("cluster")],
                            conditions={"StringEquals": {f"aws:ResourceTag/{tag_key}": tag_value}},
                        ),
                        iam.PolicyStatement(
                            sid="FindHyperPodClusters",
                            actions=["sagemaker:ListClusters"],
                            resources=["*"],
                        ),
                        iam.PolicyStatement(
                            sid="DescribeProjectEksCluster",
                            actions=["eks:DescribeCluster"],
                            resources=[
                                stack.format_arn(service="eks", resource="cluster", resource_name=eks_cluster_name)
                            ],
                        ),
                        iam.PolicyStatement(
                            sid="StudioAppsInThisDomain",
                            actions=[
                                "sagemaker:DescribeApp",
                                "sagemaker:DescribeDomain",
                                "sagemaker:DescribeSpace",
                                "sagemaker:DescribeUserProfile",
                                "sagemaker:ListApps",
                                "sagemaker:ListSpaces",
                            ],
                            resources=[
                                sagemaker_arn("domain"),
                                sagemaker_arn("user-profile", "*/*"),
                                sagemaker_arn("space", "*/*"),
                                sagemaker_arn("app", "*/*/*/*"),
                            ],
                        ),
                    ]
                )
            },
        )
        acknowledge_iam_wildcards(
            self.execution_role,
            {
                arn_pattern("sagemaker", r"cluster/\*"): (
                    "HyperPod cluster ARNs end in an id generated at creation; the statement is limited "
                    "to clusters carrying this project's tag"
                ),
                r"Resource::\*": "sagemaker:ListClusters has no resource-level permissions",
                arn_pattern("sagemaker", r"(domain|user-profile|space|app)/\*(/\*)*"): (
                    "Studio's JupyterLab UI lists the domain's spaces, apps and profiles, created by users "
                    "after deployment; limited to Describe/List"
                ),
            },
        )

        self.domain = sagemaker.CfnDomain(
            self,
            "Domain",
            domain_name=domain_name,
            auth_mode="IAM",
            # No direct internet from notebooks: traffic stays in the VPC (NAT and endpoints there).
            app_network_access_type="VpcOnly",
            vpc_id=vpc.vpc_id,
            subnet_ids=[subnet.subnet_id],
            default_user_settings=sagemaker.CfnDomain.UserSettingsProperty(
                execution_role=self.execution_role.role_arn,
                security_groups=[security_group.security_group_id],
            ),
        )
        # Users' home directories (EFS) are data: keep them when the stack is deleted.
        self.domain.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
