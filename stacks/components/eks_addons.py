"""EKS managed add-ons the HyperPod cluster needs, installed before any HyperPod node exists.

Ordering on a cluster without nodes: CloudFormation's AWS::EKS::Addon handler treats DEGRADED as a
completed create (see hashicorp/terraform-provider-aws#44669, which contrasts Terraform's waiter with
it), and AWS's own HyperPod console template (aws/sagemaker-hyperpod-cluster-setup,
eks/cloudformation/eks-template.yaml) creates coredns on the fresh, node-less EKS cluster. So coredns
and the FSx CSI controller, whose pods stay Pending until HyperPod nodes join, finish as DEGRADED and
turn ACTIVE by themselves once nodes exist. vpc-cni, kube-proxy and the Pod Identity agent must be in
place before the nodes join anyway (node readiness, credentials), so everything lives here, ahead of
the HyperPod stack, rather than after it.
"""

from __future__ import annotations

import json
import re

import aws_cdk as cdk
from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from skyrl_hyperpod.config import ConfigError
from skyrl_hyperpod.config.versions import VersionsConfig
from skyrl_hyperpod.plumbing.upstream import KUBE_SYSTEM_NAMESPACE

from .iam_wildcards import nag_rule
from .workload_identity import pod_identity_role

# HyperPod's EKS orchestrator needs the Amazon VPC CNI at v1.18.3 or newer. With no pinned version,
# EKS installs the default for the cluster version, which for every supported version (1.33+) is
# far newer than that.
MIN_VPC_CNI = (1, 18, 3)
_ADDON_VERSION = re.compile(r"^v(\d+)\.(\d+)\.(\d+)-eksbuild\.\d+$")

# Key from the add-on's configuration schema (`aws eks describe-addon-configuration --addon-name vpc-cni`);
# the value is a string there.
VPC_CNI_CONFIGURATION = {"enableNetworkPolicy": "true"}

FSX_CSI_NAMESPACE = KUBE_SYSTEM_NAMESPACE
FSX_CSI_SERVICE_ACCOUNT = "fsx-csi-controller-sa"


def managed_addon(
    scope: Construct,
    construct_id: str,
    *,
    cluster: eks.ICluster,
    name: str,
    version: str | None,
    pod_identity_associations: list[eks_l1.CfnAddon.PodIdentityAssociationProperty] | None = None,
    configuration_values: str | None = None,
) -> eks_l1.CfnAddon:
    """An EKS managed add-on that takes over what the cluster bootstrapped (vpc-cni, kube-proxy, coredns)."""
    return eks_l1.CfnAddon(
        scope,
        construct_id,
        addon_name=name,
        cluster_name=cluster.cluster_name,
        addon_version=version,
        resolve_conflicts="OVERWRITE",
        pod_identity_associations=pod_identity_associations,
        configuration_values=configuration_values,
    )


def check_vpc_cni_version(version: str | None) -> None:
    """Reject a pinned vpc-cni older than HyperPod's minimum with a one-line message."""
    if version is None:
        return
    match = _ADDON_VERSION.fullmatch(version)
    if not match:
        raise ConfigError([f"config error: versions.vpc_cni_addon = {version!r}: must look like v1.19.0-eksbuild.1"])
    if tuple(int(part) for part in match.groups()) < MIN_VPC_CNI:
        minimum = ".".join(map(str, MIN_VPC_CNI))
        raise ConfigError(
            [f"config error: versions.vpc_cni_addon = {version!r}: HyperPod needs vpc-cni v{minimum} or newer"]
        )


class EksAddons(Construct):
    """vpc-cni, kube-proxy, coredns, eks-pod-identity-agent, aws-fsx-csi-driver. The SageMaker Spaces add-on
    needs nodes and is the Ray endpoint operator's (components/ray_endpoint_operator.py)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        versions: VersionsConfig,
    ) -> None:
        super().__init__(scope, construct_id)
        check_vpc_cni_version(versions.vpc_cni_addon)
        self._cluster = cluster
        self.addons: dict[str, eks_l1.CfnAddon] = {}

        self.vpc_cni = self._addon("VpcCni", "vpc-cni", versions.vpc_cni_addon)
        # Enforce the workloads' NetworkPolicies (the charts' Ray policies): the VPC CNI's network
        # policy agent runs in the aws-node DaemonSet on every node, HyperPod's included, once this
        # add-on setting is on (https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html).
        self.vpc_cni.configuration_values = json.dumps(VPC_CNI_CONFIGURATION)
        self.kube_proxy = self._addon("KubeProxy", "kube-proxy", versions.kube_proxy_addon)
        self.pod_identity_agent = self._addon(
            "PodIdentityAgent", "eks-pod-identity-agent", versions.pod_identity_agent_addon
        )
        self.coredns = self._addon("CoreDns", "coredns", versions.coredns_addon)
        self.coredns.node.add_dependency(self.vpc_cni)

        # Static provisioning (a pre-created PV for the project's file system, reclaim policy
        # Retain) never reaches the controller's CreateVolume/DeleteVolume, which are the calls
        # that need fsx:CreateFileSystem, fsx:DeleteFileSystem and iam:CreateServiceLinkedRole in
        # the driver's documented policy. The controller keeps the read-only describe it uses to
        # inspect a file system (e.g. before an expansion request) and nothing else.
        self.fsx_csi_role = pod_identity_role(
            self,
            "FsxCsiControllerRole",
            cluster=cluster,
            namespace=FSX_CSI_NAMESPACE,
            service_account=FSX_CSI_SERVICE_ACCOUNT,
            description="FSx for Lustre CSI controller (static provisioning: describe only)",
        )
        self.fsx_csi_role.add_to_policy(iam.PolicyStatement(actions=["fsx:DescribeFileSystems"], resources=["*"]))
        cdk.Validations.of(self.fsx_csi_role).acknowledge(
            cdk.Acknowledgment(
                id=nag_rule("IAM5[Resource::*]"),
                reason=(
                    "Only fsx:DescribeFileSystems, a read-only describe the FSx CSI driver's documented policy "
                    "grants on '*'; no write or delete action is granted to the controller."
                ),
            )
        )
        self.fsx_csi_driver = self._addon(
            "FsxCsiDriver",
            "aws-fsx-csi-driver",
            versions.fsx_csi_driver_addon,
            pod_identity_associations=[
                eks_l1.CfnAddon.PodIdentityAssociationProperty(
                    service_account=FSX_CSI_SERVICE_ACCOUNT, role_arn=self.fsx_csi_role.role_arn
                )
            ],
        )
        # The agent hands the controller its credentials.
        self.fsx_csi_driver.node.add_dependency(self.pod_identity_agent)

    def _addon(
        self,
        construct_id: str,
        name: str,
        version: str | None,
        pod_identity_associations: list[eks_l1.CfnAddon.PodIdentityAssociationProperty] | None = None,
        configuration_values: str | None = None,
    ) -> eks_l1.CfnAddon:
        addon = managed_addon(
            self,
            construct_id,
            cluster=self._cluster,
            name=name,
            version=version,
            pod_identity_associations=pod_identity_associations,
            configuration_values=configuration_values,
        )
        self.addons[name] = addon
        return addon
