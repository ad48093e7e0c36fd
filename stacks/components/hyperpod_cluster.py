"""The SageMaker HyperPod cluster (EKS orchestrator) and the IAM role its nodes run with."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from skyrl_hyperpod.config.hyperpod import HyperPodConfig, InstanceGroupConfig
from skyrl_hyperpod.plumbing.upstream import (
    HYPERPOD_AUTOSCALER_TYPE,
    HYPERPOD_AUTOSCALING_PRINCIPAL,
    HYPERPOD_EKS_NODE_PROVISIONING_MODE,
)

from .iam_wildcards import acknowledge_iam_wildcards, arn_pattern, managed_policy_finding
from .lifecycle import LifecycleScripts

# Reads lifecycle scripts from sagemaker-* buckets and lets nodes report to HyperPod.
INSTANCE_ROLE_MANAGED_POLICY = "AmazonSageMakerClusterInstanceRolePolicy"
# HyperPod accepts only this mode for new EKS clusters: nodes are provisioned (and retried)
# in the background instead of failing the whole create call; autoscaling needs it too.
NODE_PROVISIONING_MODE = HYPERPOD_EKS_NODE_PROVISIONING_MODE
# Service Authorization Reference for every action below, its resource types and condition keys:
# https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html and
# https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonelasticcontainerregistry.html
# (tests/cdk/test_hyperpod.py checks them against that reference's data).
# Authorized against the ENI and the instance it is attached to (in SageMaker's account).
ENI_ATTACH_ACTIONS = ["ec2:AttachNetworkInterface", "ec2:DetachNetworkInterface"]
# Also authorized against the instance, and against the security groups and subnet of the ENI.
ENI_MODIFY_ACTION = "ec2:ModifyNetworkInterfaceAttribute"
ECR_PULL_ACTIONS = ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]


class HyperPodExecutionRole(Construct):
    """The role every HyperPod node assumes.

    On top of the managed instance policy, EKS-orchestrated nodes run the VPC CNI (which manages
    ENIs in the HyperPod subnet), pull images from ECR and host the EKS Pod Identity agent. Every
    action on an existing ENI is limited to ENIs of the platform VPC.

    ECR: the managed policy grants no ECR action at all
    (https://docs.aws.amazon.com/sagemaker/latest/dg/security-iam-awsmanpol-cluster.html), so this role
    holds every image pull. In this account it reaches the project's repository only; images in other
    accounts (EKS add-ons and HyperPod's agents, in AWS-owned registries) need the pull on this side
    too, and the owning registry's repository policy decides the rest.

    Instance metadata: HyperPod's cluster API (`ClusterInstanceGroupSpecification`) has no metadata
    options, and the instances run in a SageMaker service account, so this project cannot set an IMDS
    hop limit of 1. Pods on the pod network reach IMDS (and so this role's ENI permissions, now
    limited to the platform VPC) unless a NetworkPolicy denies 169.254.169.254.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        eks_cluster: eks.ICluster,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet,
        security_group: ec2.ISecurityGroup,
        lifecycle_bucket: s3.IBucket,
        image_repository: ecr.IRepository,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)

        def ec2_arn(resource: str, name: str = "*") -> str:
            return stack.format_arn(service="ec2", resource=resource, resource_name=name)

        network_interfaces = ec2_arn("network-interface")
        subnet_arn = ec2_arn("subnet", subnet.subnet_id)
        security_group_arn = ec2_arn("security-group", security_group.security_group_id)
        in_this_vpc = {"ec2:Vpc": ec2_arn("vpc", vpc.vpc_id)}
        node_permissions = iam.PolicyDocument(
            statements=[
                iam.PolicyStatement(
                    sid="CniCreateInterfacesInHyperPodSubnet",
                    actions=["ec2:CreateNetworkInterface"],
                    resources=[network_interfaces, subnet_arn, security_group_arn],
                ),
                # The permission that lets SageMaker's account attach one of this VPC's ENIs to a HyperPod
                # instance: only for ENIs of this VPC, and only the attach permission.
                iam.PolicyStatement(
                    sid="CniAllowAttachOfThisVpcsInterfaces",
                    actions=["ec2:CreateNetworkInterfacePermission"],
                    resources=[network_interfaces],
                    conditions={"StringEquals": {**in_this_vpc, "ec2:Permission": "INSTANCE-ATTACH"}},
                ),
                # DeleteNetworkInterfacePermission is authorized against the ENI the permission belongs to,
                # which carries ec2:Vpc like the other actions on an existing ENI.
                iam.PolicyStatement(
                    sid="CniManageInterfacesOfThisVpc",
                    actions=[
                        "ec2:AssignPrivateIpAddresses",
                        "ec2:UnassignPrivateIpAddresses",
                        "ec2:DeleteNetworkInterface",
                        "ec2:DeleteNetworkInterfacePermission",
                    ],
                    resources=[network_interfaces],
                    conditions={"StringEquals": in_this_vpc},
                ),
                # HyperPod instances live in a SageMaker service account; only their ENIs are in this
                # account's VPC. Attaching, detaching and modifying an ENI is authorized against the
                # ENI and against that instance (modifying also against the ENI's security groups and
                # subnet). Each resource is allowed by its own statement, so the ENI side carries the
                # VPC condition (`ec2:Vpc` is a condition key of the network-interface resource type)
                # without depending on which keys an instance in another account carries.
                iam.PolicyStatement(
                    sid="CniAttachInterfacesOfThisVpc",
                    actions=[*ENI_ATTACH_ACTIONS, ENI_MODIFY_ACTION],
                    resources=[network_interfaces],
                    conditions={"StringEquals": in_this_vpc},
                ),
                iam.PolicyStatement(
                    sid="CniAttachToHyperPodInstances",
                    actions=[*ENI_ATTACH_ACTIONS, ENI_MODIFY_ACTION],
                    # The instance's account is SageMaker's, not this one.
                    resources=[stack.format_arn(service="ec2", account="*", resource="instance", resource_name="*")],
                ),
                iam.PolicyStatement(
                    sid="CniModifyInterfacesInHyperPodSubnet",
                    actions=[ENI_MODIFY_ACTION],
                    resources=[subnet_arn, security_group_arn],
                ),
                # Tags set while CreateNetworkInterface runs (pinned above to the HyperPod subnet and
                # group), and tags on ENIs of this VPC afterwards: two statements, as the conditions differ.
                iam.PolicyStatement(
                    sid="CniTagInterfacesOnCreate",
                    actions=["ec2:CreateTags"],
                    resources=[network_interfaces],
                    conditions={"StringEquals": {"ec2:CreateAction": "CreateNetworkInterface"}},
                ),
                iam.PolicyStatement(
                    sid="CniTagInterfacesOfThisVpc",
                    actions=["ec2:CreateTags"],
                    resources=[network_interfaces],
                    conditions={"StringEquals": in_this_vpc},
                ),
                iam.PolicyStatement(
                    sid="CniDescribe",
                    actions=[
                        "ec2:DescribeInstances",
                        "ec2:DescribeInstanceTypes",
                        "ec2:DescribeNetworkInterfaces",
                        "ec2:DescribeSecurityGroups",
                        "ec2:DescribeSubnets",
                        "ec2:DescribeTags",
                        "ec2:DescribeVpcs",
                        "ec2:DescribeDhcpOptions",
                    ],
                    resources=["*"],
                ),
                iam.PolicyStatement(
                    sid="EcrSignIn",
                    actions=["ecr:GetAuthorizationToken"],
                    resources=["*"],
                ),
                iam.PolicyStatement(
                    sid="PullThisProjectsImages",
                    actions=ECR_PULL_ACTIONS,
                    resources=[image_repository.repository_arn],
                ),
                iam.PolicyStatement(
                    sid="PullImagesOfOtherAccounts",
                    actions=ECR_PULL_ACTIONS,
                    resources=[stack.format_arn(service="ecr", account="*", resource="repository", resource_name="*")],
                    # https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-resourceaccount
                    conditions={"StringNotEquals": {"aws:ResourceAccount": stack.account}},
                ),
                iam.PolicyStatement(
                    sid="PodIdentityAgent",
                    actions=["eks-auth:AssumeRoleForPodIdentity"],
                    resources=[eks_cluster.cluster_arn],
                ),
            ]
        )
        # Inline, so the permissions exist as soon as the role does: HyperPod starts nodes right away.
        # No aws:SourceAccount / aws:SourceArn condition on the trust: SageMaker documents the confused-deputy keys
        # it sets per feature (Edge Manager, images, inference, batch transform, Marketplace, Neo, Pipelines,
        # processing, Studio, training jobs:
        # https://docs.aws.amazon.com/sagemaker/latest/dg/security-confused-deputy-prevention.html), and HyperPod
        # clusters are not among them. A condition on a key the service does not set denies every AssumeRole, and
        # then no node starts.
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description="HyperPod node role: managed instance policy + VPC CNI, ECR pull, Pod Identity agent",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(INSTANCE_ROLE_MANAGED_POLICY)],
            inline_policies={"NodePermissions": node_permissions},
        )
        if lifecycle_bucket.encryption_key is not None:
            # The managed policy grants s3:GetObject on sagemaker-* buckets but no KMS access.
            lifecycle_bucket.encryption_key.grant_decrypt(self.role)

        cdk.Validations.of(self.role).acknowledge(
            cdk.Acknowledgment(
                id=managed_policy_finding(INSTANCE_ROLE_MANAGED_POLICY),
                reason=(
                    f"{INSTANCE_ROLE_MANAGED_POLICY} is the policy HyperPod requires on every cluster "
                    "instance role (node agent, lifecycle scripts from sagemaker-* buckets)"
                ),
            )
        )
        acknowledge_iam_wildcards(
            self.role,
            {
                arn_pattern("ec2", r"network-interface/\*"): (
                    "the VPC CNI on HyperPod nodes creates, attaches and tags ENIs whose ids exist only at "
                    "run time; creation is pinned to the HyperPod subnet and security group, every other "
                    "action to ENIs of the platform VPC (ec2:Vpc condition) or to tags set while creating"
                ),
                arn_pattern("ec2", r"instance/\*"): (
                    "HyperPod instances belong to a SageMaker service account whose id is not known here; "
                    "the ENI side of the same attach/detach/modify calls is limited to the platform VPC"
                ),
                arn_pattern("ecr", r"repository/\*"): (
                    "EKS add-on and HyperPod agent images live in AWS-owned registries whose accounts vary "
                    "by region; the statement excludes this account (aws:ResourceAccount), where only the "
                    "project's repository is readable"
                ),
                r"Resource::\*": ("ec2:Describe* and ecr:GetAuthorizationToken have no resource-level permissions"),
            },
        )


# The two calls HyperPod's managed Karpenter makes with the cluster role
# (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-iam.html); both are authorized
# against the cluster resource (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsagemaker.html).
AUTOSCALING_ACTIONS = ["sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes"]


class HyperPodAutoscalingRole(Construct):
    """The role HyperPod assumes to add and remove nodes of the autoscaled groups (the cluster's ClusterRole).

    Its one permission is scoped to this cluster's ARN, which exists only once the cluster does: the policy is its
    own resource, created right after the cluster in the same deploy. HyperPod uses it only when Karpenter acts on a
    pending pod, and no Ray pod exists before the stack is complete. The AWS page's KMS statement is for instance
    groups whose EBS volumes use a customer managed key; this project sets none (instance_storage_configs).

    No aws:SourceAccount / aws:SourceArn condition on the trust: the AWS page's trust policy has none, and
    HyperPod is not among the SageMaker features that document the confused-deputy keys they set
    (https://docs.aws.amazon.com/sagemaker/latest/dg/security-confused-deputy-prevention.html); a condition on a key
    the service does not set denies the AssumeRole, and then no node is ever added.
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal(HYPERPOD_AUTOSCALING_PRINCIPAL),
            description="HyperPod managed Karpenter: adds and removes this cluster's autoscaled nodes",
        )

    def allow_on(self, cluster_arn: str) -> iam.Policy:
        return iam.Policy(
            self,
            "ScaleThisCluster",
            roles=[self.role],
            statements=[
                iam.PolicyStatement(sid="ScaleThisCluster", actions=AUTOSCALING_ACTIONS, resources=[cluster_arn])
            ],
        )


class HyperPodCluster(Construct):
    """`AWS::SageMaker::Cluster` with an EKS orchestrator and one instance group per configured group."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        hyperpod: HyperPodConfig,
        eks_cluster: eks.ICluster,
        subnet: ec2.ISubnet,
        security_group: ec2.ISecurityGroup,
        execution_role: iam.IRole,
        lifecycle_scripts: LifecycleScripts,
    ) -> None:
        super().__init__(scope, construct_id)
        self._execution_role = execution_role
        self._lifecycle_scripts = lifecycle_scripts
        # Managed Karpenter for the groups with scaling on_demand: the cluster's AutoScaling and its ClusterRole
        # (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-cluster.html).
        self.autoscaling_role = HyperPodAutoscalingRole(self, "AutoscalingRole") if hyperpod.autoscaled_groups else None
        self.cluster = sagemaker.CfnCluster(
            self,
            "Cluster",
            cluster_name=cluster_name,
            orchestrator=sagemaker.CfnCluster.OrchestratorProperty(
                eks=sagemaker.CfnCluster.ClusterOrchestratorEksConfigProperty(cluster_arn=eks_cluster.cluster_arn)
            ),
            vpc_config=sagemaker.CfnCluster.VpcConfigProperty(
                subnets=[subnet.subnet_id], security_group_ids=[security_group.security_group_id]
            ),
            node_recovery=hyperpod.node_recovery,
            node_provisioning_mode=NODE_PROVISIONING_MODE,
            instance_groups=[self._instance_group(group) for group in hyperpod.instance_groups.values()],
            auto_scaling=None
            if self.autoscaling_role is None
            else sagemaker.CfnCluster.ClusterAutoScalingConfigProperty(
                mode="Enable", auto_scaler_type=HYPERPOD_AUTOSCALER_TYPE
            ),
            cluster_role=None if self.autoscaling_role is None else self.autoscaling_role.role.role_arn,
        )
        if self.autoscaling_role is not None:
            self.autoscaling_role.allow_on(self.cluster.attr_cluster_arn)
        # Nodes fetch the scripts as soon as they boot: the objects and every grant must exist.
        self.cluster.node.add_dependency(lifecycle_scripts.deployment)
        grants_added_later = execution_role.node.try_find_child("DefaultPolicy")
        if grants_added_later is not None:
            self.cluster.node.add_dependency(grants_added_later)
        self.cluster_name = cluster_name
        self.cluster_arn = self.cluster.attr_cluster_arn

    def _instance_group(self, group: InstanceGroupConfig) -> sagemaker.CfnCluster.ClusterInstanceGroupProperty:
        return sagemaker.CfnCluster.ClusterInstanceGroupProperty(
            instance_group_name=group.name,
            instance_type=group.instance_type,
            instance_count=group.initial_instance_count,
            threads_per_core=group.threads_per_core,
            execution_role=self._execution_role.role_arn,
            life_cycle_config=sagemaker.CfnCluster.ClusterLifeCycleConfigProperty(
                source_s3_uri=self._lifecycle_scripts.source_s3_uri,
                on_create=self._lifecycle_scripts.on_create,
            ),
            # HyperPod mounts this volume at /opt/sagemaker; the lifecycle scripts move containerd
            # and kubelet state onto it.
            instance_storage_configs=[
                sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty(
                    ebs_volume_config=sagemaker.CfnCluster.ClusterEbsVolumeConfigProperty(
                        volume_size_in_gb=group.ebs_volume_gb
                    )
                )
            ],
            on_start_deep_health_checks=list(group.deep_health_checks) or None,
            training_plan_arn=group.training_plan_arn,
        )
