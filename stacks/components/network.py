"""The platform's network: VPC, HyperPod's AZ-pinned private subnet and the HyperPod/FSx security group.

Address plan. `ec2.Vpc` carves its subnets sequentially from the *start* of `vpc_cidr`, each block
aligned to its mask. The masks are derived from the VPC size (private = 1/16 of the VPC, public =
1/256), so the public and private subnets of up to 6 AZs fit in the lower 7/16 of the VPC; the
upper half stays free for `hyperpod_subnet_cidr` (the default puts it at the third quarter).
`vpc_subnet_plan` (in the configuration, which validates it) computes the plan without building
anything; the construct checks what the Vpc construct really allocated as well, as a guard against
a change in CDK's allocation.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from skyrl_hyperpod.config import ConfigError
from skyrl_hyperpod.config.network import NetworkConfig, hyperpod_subnet_overlaps, vpc_subnet_masks

from .log_encryption import LogsKey

# Lustre: LNET on 988, and 1018-1023 for the client/server connections of Lustre 2.x.
LUSTRE_PORT = 988
LUSTRE_PORT_RANGE = (1018, 1023)
# Flow logs answer "who talked to what" during an incident: three months covers most reviews.
FLOW_LOG_RETENTION = logs.RetentionDays.THREE_MONTHS


class HyperPodSubnet(Construct):
    """A private subnet pinned by AZ *id* (stable across accounts), routed to a NAT gateway.

    ec2.Subnet only accepts an AZ name, hence the L1 resources; `subnet` is a typed ISubnet view.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        cidr_block: str,
        availability_zone_id: str,
        nat_gateway_id: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.cfn_subnet = ec2.CfnSubnet(
            self,
            "Subnet",
            vpc_id=vpc.vpc_id,
            cidr_block=cidr_block,
            availability_zone_id=availability_zone_id,
            map_public_ip_on_launch=False,
        )
        # Read by FSx and the HyperPod cluster, both create-only: strong references (exports) make CloudFormation
        # refuse a change that replaces this subnet under them (docs/review-gate.md, "Cross-stack references").
        cdk.CrossStackReferences.of(self.cfn_subnet).produce(cdk.ReferenceStrength.STRONG)
        self.route_table = ec2.CfnRouteTable(self, "RouteTable", vpc_id=vpc.vpc_id)
        ec2.CfnSubnetRouteTableAssociation(
            self, "RouteTableAssociation", subnet_id=self.cfn_subnet.ref, route_table_id=self.route_table.ref
        )
        # Nodes pull images and reach the SageMaker/EKS APIs through NAT. With fewer NAT gateways than
        # AZs the gateway may sit in another AZ (cross-AZ data charges); its AZ name is unknown at synth.
        ec2.CfnRoute(
            self,
            "DefaultRoute",
            route_table_id=self.route_table.ref,
            destination_cidr_block="0.0.0.0/0",
            nat_gateway_id=nat_gateway_id,
        )
        cdk.Tags.of(self).add("Name", f"{cdk.Stack.of(self).stack_name}-hyperpod-{availability_zone_id}")
        self.subnet: ec2.ISubnet = ec2.Subnet.from_subnet_attributes(
            self,
            "Ref",
            subnet_id=self.cfn_subnet.ref,
            availability_zone=self.cfn_subnet.attr_availability_zone,
            ipv4_cidr_block=cidr_block,
            route_table_id=self.route_table.ref,
        )


class HyperPodSecurityGroup(Construct):
    """Shared by HyperPod nodes, FSx for Lustre (and the EKS control plane, which the EKS stack adds).

    EFA only works when every member may send all traffic to every other member, so the group
    references itself for all traffic, inbound *and* outbound: EFA's OS-bypass traffic is matched against
    a rule naming the group, not against 0.0.0.0/0 ("Prepare an EFA-enabled security group",
    https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html#efa-start-security; the same two
    rules in https://docs.aws.amazon.com/pcs/latest/userguide/working-with_networking_efa_create-sg.html).
    The Lustre rules are explicit as well, so FSx keeps working if the EFA rule is ever narrowed.
    """

    def __init__(self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc) -> None:
        super().__init__(scope, construct_id)
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="HyperPod nodes and FSx for Lustre: EFA and Lustre traffic between members",
            allow_all_outbound=True,
        )
        # Read by FSx, the HyperPod cluster and the EKS cluster, all create-only: strong (docs/review-gate.md, "Cross-stack references").
        cdk.CrossStackReferences.of(self.security_group).produce(cdk.ReferenceStrength.STRONG)
        group = self.security_group
        group.add_ingress_rule(group, ec2.Port.all_traffic(), "EFA: all traffic between members of this group")
        # An L1 rule: while allow_all_outbound is true CDK drops every add_egress_rule, and with it false CDK refuses
        # the 0.0.0.0/0 all-traffic rule the nodes need for NAT (aws-ec2 SecurityGroup.addEgressRule).
        ec2.CfnSecurityGroupEgress(
            self,
            "EfaEgressToSelf",
            group_id=group.security_group_id,
            ip_protocol="-1",
            destination_security_group_id=group.security_group_id,
            description="EFA: all traffic to members of this group",
        )
        group.add_ingress_rule(group, ec2.Port.tcp(LUSTRE_PORT), "FSx for Lustre LNET")
        group.add_ingress_rule(group, ec2.Port.tcp_range(*LUSTRE_PORT_RANGE), "FSx for Lustre client connections")


class PlatformNetwork(Construct):
    """VPC (public + private subnets, NAT, S3 gateway endpoint, flow logs) plus HyperPod's subnet and group."""

    def __init__(self, scope: Construct, construct_id: str, *, network: NetworkConfig) -> None:
        super().__init__(scope, construct_id)
        masks = vpc_subnet_masks(network.vpc_cidr)
        nat_provider = ec2.NatProvider.gateway()
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(network.vpc_cidr),
            # Fn::GetAZs keeps synth offline and honours max_azs without an account lookup
            # (an environment-agnostic stack would otherwise get only two AZs).
            availability_zones=[cdk.Fn.select(index, cdk.Fn.get_azs()) for index in range(network.max_azs)],
            nat_gateways=network.nat_gateways,
            nat_gateway_provider=nat_provider,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=masks.public),
                ec2.SubnetConfiguration(
                    name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=masks.private
                ),
            ],
            restrict_default_security_group=True,
        )
        # Read by the EKS cluster's create-only SubnetIds: strong (docs/review-gate.md, "Cross-stack references").
        for subnet in self.vpc.private_subnets:
            cdk.CrossStackReferences.of(subnet).produce(cdk.ReferenceStrength.STRONG)
        allocated = [s.ipv4_cidr_block for s in (*self.vpc.public_subnets, *self.vpc.private_subnets)]
        overlaps = hyperpod_subnet_overlaps(network, allocated)
        if overlaps:
            raise ConfigError([f"config error: network: {line}" for line in overlaps])

        # The flow log group is retained with the stack (a record of the VPC's traffic): so is its key.
        flow_logs_key = LogsKey(
            self, "FlowLogsKey", purpose="the VPC flow logs", removal_policy=cdk.RemovalPolicy.RETAIN
        ).key
        self.flow_log_group = logs.LogGroup(
            self, "FlowLogGroup", retention=FLOW_LOG_RETENTION, encryption_key=flow_logs_key
        )
        # The role the flow logs service assumes to write that group, for flow logs of this account and Region only:
        # the aws:SourceAccount and aws:SourceArn (flow log ARN) conditions VPC recommends against the confused
        # deputy ("IAM role for publishing flow logs to CloudWatch Logs",
        # https://docs.aws.amazon.com/vpc/latest/userguide/flow-logs-iam-role.html). The flow log's id exists only
        # once it is created, naming this role, so its part of the ARN is the wildcard that page allows.
        stack = cdk.Stack.of(self)
        flow_log_role = iam.Role(
            self,
            "FlowLogRole",
            description="VPC flow logs: write the flow log records to their log group",
            assumed_by=iam.ServicePrincipal(
                "vpc-flow-logs.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {
                        "aws:SourceArn": stack.format_arn(service="ec2", resource="vpc-flow-log", resource_name="*")
                    },
                },
            ),
        )
        self.vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(self.flow_log_group, flow_log_role),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )

        # Load balancers for in-cluster services go to the private subnets, internet-facing ones to public.
        subnets_only = ["AWS::EC2::Subnet"]
        for subnet in self.vpc.private_subnets:
            cdk.Tags.of(subnet).add("kubernetes.io/role/internal-elb", "1", include_resource_types=subnets_only)
        for subnet in self.vpc.public_subnets:
            cdk.Tags.of(subnet).add("kubernetes.io/role/elb", "1", include_resource_types=subnets_only)

        hyperpod = HyperPodSubnet(
            self,
            "HyperPodSubnet",
            vpc=self.vpc,
            cidr_block=network.hyperpod_subnet_cidr,
            availability_zone_id=network.hyperpod_az_id,
            nat_gateway_id=nat_provider.configured_gateways[0].gateway_id,
        )
        self.hyperpod_subnet: ec2.ISubnet = hyperpod.subnet

        # Checkpoints, lifecycle scripts and adapters move through S3: keep that traffic off NAT.
        self.s3_endpoint = self.vpc.add_gateway_endpoint(
            "S3Endpoint",
            service=ec2.GatewayVpcEndpointAwsService.S3,
            subnets=[
                ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
                ec2.SubnetSelection(subnets=[self.hyperpod_subnet]),
            ],
        )
        self.hyperpod_security_group: ec2.ISecurityGroup = HyperPodSecurityGroup(
            self, "HyperPodSecurityGroup", vpc=self.vpc
        ).security_group
