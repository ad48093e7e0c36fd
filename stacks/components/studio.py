"""An optional SageMaker Studio domain in the platform VPC, for users who submit Ray jobs from Studio."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from .iam_wildcards import acknowledge_iam_wildcards, arn_pattern

HTTPS_PORT = 443
# Studio's apps (JupyterServer, KernelGateway) talk to each other on these ports
# (https://docs.aws.amazon.com/sagemaker/latest/dg/studio-notebooks-and-internet-access.html).
STUDIO_APP_PORT_RANGE = (8192, 65535)


class StudioSecurityGroup(Construct):
    """Studio's own group: apps reach each other, AWS APIs over HTTPS, and the EKS API only. It never
    joins the HyperPod group, whose self-referencing all-traffic rule (EFA) would open every port of
    every node and pod. Ray's ports are not opened: the namespace's NetworkPolicies (charts/ray_access.py)
    admit no VPC address on them, so a Studio user reaches a Ray head through the EKS API
    (`kubectl port-forward`), like any other operator.

    The API rule targets the EKS cluster security group, which EKS creates and attaches to the control
    plane's network interfaces (https://docs.aws.amazon.com/eks/latest/userguide/sec-group-reqs.html); no
    HyperPod node, pod or FSx carries it. A rule into the HyperPod group, which the control plane also
    carries, would open 443 on every one of them.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc, eks_cluster_security_group: ec2.ISecurityGroup
    ) -> None:
        super().__init__(scope, construct_id)
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="SageMaker Studio apps: HTTPS out, Studio app ports and the EKS API",
            allow_all_outbound=False,
        )
        group = self.security_group
        apps = ec2.Port.tcp_range(*STUDIO_APP_PORT_RANGE)
        group.add_ingress_rule(group, apps, "Studio apps to each other")
        group.add_egress_rule(group, apps, "Studio apps to each other")
        # SageMaker, STS, ECR, PyPI, Hugging Face: through NAT. The EKS API's private endpoint is in the VPC.
        group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(HTTPS_PORT), "AWS APIs and package indexes over HTTPS")
        group.connections.allow_to(
            eks_cluster_security_group, ec2.Port.tcp(HTTPS_PORT), "Studio to EKS API server (private endpoint)"
        )


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
        eks_cluster_security_group: ec2.ISecurityGroup,
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

        self.security_group = StudioSecurityGroup(
            self, "SecurityGroup", vpc=vpc, eks_cluster_security_group=eks_cluster_security_group
        ).security_group
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
                security_groups=[self.security_group.security_group_id],
            ),
        )
        # Deleted with the stack: a retained domain keeps network interfaces in the HyperPod subnet and
        # blocks deleting the network stack. DeleteDomain keeps the users' home EFS by default, and a
        # domain with user profiles or spaces cannot be deleted at all: `skyrl-hp teardown --plan`
        # lists the order (profiles and spaces, this stack, the home EFS mount targets, the rest).
        self.domain.apply_removal_policy(cdk.RemovalPolicy.DESTROY)
        self.domain_id: str = self.domain.attr_domain_id
        self.home_efs_file_system_id: str = self.domain.attr_home_efs_file_system_id
