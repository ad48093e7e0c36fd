"""Network stack: VPC layout, HyperPod's AZ-pinned subnet, the HyperPod/FSx security group."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template
from conftest import VARIANT_ENV_PERSISTENT_1

from skyrl_hyperpod.config import ConfigError, ProjectConfig, validate_config
from skyrl_hyperpod.config.network import vpc_subnet_masks, vpc_subnet_plan
from stacks.components.network import LUSTRE_PORT, LUSTRE_PORT_RANGE
from stacks.network_stack import NetworkStack


def network_template(templates: dict, config: ProjectConfig) -> Template:
    return Template.from_json(templates[config.names.stack("network")])


@pytest.fixture(scope="module")
def network(templates, default_config) -> Template:
    return network_template(templates, default_config)


def vpc_subnets(template: Template, subnet_type: str) -> Mapping[str, Any]:
    return template.find_resources(
        "AWS::EC2::Subnet",
        {"Properties": {"Tags": Match.array_with([{"Key": "aws-cdk:subnet-type", "Value": subnet_type}])}},
    )


def hyperpod_subnet(template: Template, config: ProjectConfig) -> tuple[str, Mapping[str, Any]]:
    found = template.find_resources(
        "AWS::EC2::Subnet", {"Properties": {"AvailabilityZoneId": config.network.hyperpod_az_id}}
    )
    assert len(found) == 1, found
    return next(iter(found.items()))


def route_table_of(template: Template, subnet_id: str) -> Mapping[str, Any]:
    associations = template.find_resources(
        "AWS::EC2::SubnetRouteTableAssociation", {"Properties": {"SubnetId": {"Ref": subnet_id}}}
    )
    assert len(associations) == 1
    return next(iter(associations.values()))["Properties"]["RouteTableId"]


def the_security_group(template: Template) -> str:
    groups = template.find_resources("AWS::EC2::SecurityGroup")
    assert len(groups) == 1, "the network stack should hold exactly the HyperPod/FSx security group"
    return next(iter(groups))


# --- VPC -------------------------------------------------------------------------------------


def test_vpc_uses_the_configured_cidr(network, default_config):
    network.resource_count_is("AWS::EC2::VPC", 1)
    network.has_resource_properties("AWS::EC2::VPC", {"CidrBlock": default_config.network.vpc_cidr})


def test_public_and_private_subnets_span_max_azs(network, default_config):
    azs = default_config.network.max_azs
    for subnet_type in ("Public", "Private"):
        subnets = vpc_subnets(network, subnet_type)
        assert len(subnets) == azs
        # One subnet per AZ: Fn::Select indexes 0..max_azs-1 of Fn::GetAZs (no account lookup needed).
        indexes = sorted(s["Properties"]["AvailabilityZone"]["Fn::Select"][0] for s in subnets.values())
        assert indexes == list(range(azs))


def test_nat_gateway_count_follows_the_config(network, default_config):
    network.resource_count_is("AWS::EC2::NatGateway", default_config.network.nat_gateways)


def test_vpc_subnets_follow_the_documented_plan_and_avoid_the_hyperpod_subnet(network, default_config):
    allocated = {
        ipaddress.IPv4Network(s["Properties"]["CidrBlock"])
        for subnet_type in ("Public", "Private")
        for s in vpc_subnets(network, subnet_type).values()
    }
    assert allocated == set(vpc_subnet_plan(default_config.network))
    hyperpod = ipaddress.IPv4Network(default_config.network.hyperpod_subnet_cidr)
    assert not [cidr for cidr in allocated if cidr.overlaps(hyperpod)]


def test_private_subnets_are_tagged_for_internal_load_balancers(network, default_config):
    for subnet in vpc_subnets(network, "Private").values():
        assert {"Key": "kubernetes.io/role/internal-elb", "Value": "1"} in subnet["Properties"]["Tags"]
    for subnet in vpc_subnets(network, "Public").values():
        assert {"Key": "kubernetes.io/role/internal-elb", "Value": "1"} not in subnet["Properties"]["Tags"]


def test_flow_logs_record_all_vpc_traffic(network):
    network.has_resource_properties(
        "AWS::EC2::FlowLog",
        {"ResourceType": "VPC", "TrafficType": "ALL", "LogDestinationType": "cloud-watch-logs"},
    )
    network.has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": Match.any_value()})


# --- HyperPod subnet -------------------------------------------------------------------------


def test_hyperpod_subnet_is_pinned_by_az_id(network, default_config):
    _, subnet = hyperpod_subnet(network, default_config)
    props = subnet["Properties"]
    assert props["CidrBlock"] == default_config.network.hyperpod_subnet_cidr
    assert "AvailabilityZone" not in props, "pin by AZ id only: zone names differ between accounts"
    assert props["MapPublicIpOnLaunch"] is False


def test_hyperpod_subnet_reaches_the_internet_through_nat(network, default_config):
    subnet_id, _ = hyperpod_subnet(network, default_config)
    route_table = route_table_of(network, subnet_id)
    routes = network.find_resources(
        "AWS::EC2::Route", {"Properties": {"RouteTableId": route_table, "DestinationCidrBlock": "0.0.0.0/0"}}
    )
    assert len(routes) == 1
    nat_ref = next(iter(routes.values()))["Properties"]["NatGatewayId"]["Ref"]
    assert nat_ref in network.find_resources("AWS::EC2::NatGateway")


def test_s3_gateway_endpoint_serves_private_and_hyperpod_route_tables(network, default_config):
    endpoints = network.find_resources("AWS::EC2::VPCEndpoint", {"Properties": {"VpcEndpointType": "Gateway"}})
    assert len(endpoints) == 1
    endpoint = next(iter(endpoints.values()))["Properties"]
    assert endpoint["ServiceName"]["Fn::Join"][1][-1] == ".s3"
    subnet_id, _ = hyperpod_subnet(network, default_config)
    expected = [route_table_of(network, subnet_id)] + [
        route_table_of(network, private_id) for private_id in vpc_subnets(network, "Private")
    ]
    assert sorted(map(str, endpoint["RouteTableIds"])) == sorted(map(str, expected))


# --- Security group --------------------------------------------------------------------------


def test_security_group_lets_members_exchange_efa_and_lustre_traffic(network):
    group = the_security_group(network)
    self_ref = {"Fn::GetAtt": [group, "GroupId"]}
    rules = [
        r["Properties"]
        for r in network.find_resources("AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == self_ref
    ]
    assert all(rule.get("SourceSecurityGroupId") == self_ref for rule in rules), "rules must be self-referencing"
    ports = {(r["IpProtocol"], r.get("FromPort"), r.get("ToPort")) for r in rules}
    assert ports == {
        ("-1", None, None),  # EFA: all traffic between members
        ("tcp", LUSTRE_PORT, LUSTRE_PORT),
        ("tcp", *LUSTRE_PORT_RANGE),
    }
    assert LUSTRE_PORT_RANGE == (1018, 1023) and LUSTRE_PORT == 988


def test_security_group_admits_nothing_from_outside_and_allows_all_egress(network):
    group = the_security_group(network)
    props = network.find_resources("AWS::EC2::SecurityGroup")[group]["Properties"]
    assert "SecurityGroupIngress" not in props
    assert len(props["SecurityGroupEgress"]) == 1
    assert props["SecurityGroupEgress"][0]["CidrIp"] == "0.0.0.0/0"
    assert props["SecurityGroupEgress"][0]["IpProtocol"] == "-1"
    for rule in network.find_resources("AWS::EC2::SecurityGroupIngress").values():
        assert "CidrIp" not in rule["Properties"]


def test_security_group_lets_members_send_efa_traffic_to_each_other(network):
    # EFA's OS-bypass traffic needs an outbound rule naming the group itself; 0.0.0.0/0 does not cover it.
    group = the_security_group(network)
    self_ref = {"Fn::GetAtt": [group, "GroupId"]}
    rules = [
        r["Properties"]
        for r in network.find_resources("AWS::EC2::SecurityGroupEgress").values()
        if r["Properties"]["GroupId"] == self_ref
    ]
    assert [(r["IpProtocol"], r.get("DestinationSecurityGroupId")) for r in rules] == [("-1", self_ref)]


# --- Contract with the other stacks ----------------------------------------------------------


def test_stack_exposes_typed_references_to_its_resources(default_config):
    # Built without synthesizing: cheap, and checks the attributes other stacks read.
    stack = NetworkStack(cdk.App(), default_config.names.stack("network"), config=default_config)
    template = Template.from_stack(stack)
    subnet_id, _ = hyperpod_subnet(template, default_config)
    assert stack.resolve(stack.hyperpod_subnet.subnet_id) == {"Ref": subnet_id}
    assert stack.hyperpod_subnet.ipv4_cidr_block == default_config.network.hyperpod_subnet_cidr
    group = the_security_group(template)
    assert stack.resolve(stack.hyperpod_security_group.security_group_id) == {"Fn::GetAtt": [group, "GroupId"]}
    assert len(stack.vpc.private_subnets) == default_config.network.max_azs


def test_hyperpod_subnet_overlapping_the_vpc_subnets_is_a_config_error():
    with pytest.raises(ConfigError) as error:
        validate_config({"network": {"hyperpod_subnet_cidr": "10.192.0.0/18"}})
    [line] = error.value.problems
    assert "network" in line and "hyperpod_subnet_cidr 10.192.0.0/18" in line and "10.192.128.0/17" in line


def test_the_construct_rechecks_what_cdk_really_allocated(default_config):
    # Bypass validation to stand in for a CDK allocation change the configuration could not foresee.
    clash = default_config.network.model_copy(update={"hyperpod_subnet_cidr": "10.192.0.0/18"})
    config = default_config.model_copy(update={"network": clash})
    with pytest.raises(ConfigError) as error:
        NetworkStack(cdk.App(), "clash", config=config)
    line = error.value.problems[0]
    assert line.startswith("config error: network: hyperpod_subnet_cidr 10.192.0.0/18 overlaps")
    assert "\n" not in line


@pytest.mark.parametrize(
    ("vpc_cidr", "public", "private"),
    [("10.192.0.0/16", 24, 20), ("10.50.0.0/20", 28, 24), ("10.0.0.0/14", 22, 18)],
)
def test_subnet_masks_scale_with_the_vpc(vpc_cidr, public, private):
    masks = vpc_subnet_masks(vpc_cidr)
    assert (masks.public, masks.private) == (public, private)


def test_vpc_subnets_of_six_azs_stay_below_the_upper_half_of_the_vpc():
    config = validate_config({"network": {"max_azs": 6, "nat_gateways": 6}})
    vpc = ipaddress.IPv4Network(config.network.vpc_cidr)
    upper_half = list(vpc.subnets(prefixlen_diff=1))[1]
    plan = vpc_subnet_plan(config.network)
    assert len(plan) == 12
    assert all(cidr.subnet_of(vpc) and not cidr.overlaps(upper_half) for cidr in plan)
    assert len({str(c) for c in plan}) == 12 and not any(a.overlaps(b) for a in plan for b in plan if a != b)


# --- Variant configuration (one full synth, shared with the storage and registry tests) -------


def test_variant_with_three_azs_and_two_nat_gateways(assembly_for):
    config = validate_config(VARIANT_ENV_PERSISTENT_1)
    assembly = assembly_for(VARIANT_ENV_PERSISTENT_1)
    template = Template.from_json(assembly.get_stack_by_name(config.names.stack("network")).template)
    assert len(vpc_subnets(template, "Public")) == len(vpc_subnets(template, "Private")) == config.network.max_azs
    template.resource_count_is("AWS::EC2::NatGateway", config.network.nat_gateways)
    allocated = {
        ipaddress.IPv4Network(s["Properties"]["CidrBlock"])
        for subnet_type in ("Public", "Private")
        for s in vpc_subnets(template, subnet_type).values()
    }
    assert allocated == set(vpc_subnet_plan(config.network))
