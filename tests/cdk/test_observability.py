"""Observability stack (Prometheus, HyperPod observability add-on, optional Grafana) and the
optional Studio stack, each built alone against imported stand-ins."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks
from conftest import cdk_json_context

from skyrl_hyperpod.config import ProjectConfig, validate_config
from skyrl_hyperpod.values import alerting
from skyrl_hyperpod.values.stack_outputs import OPTIONAL_FIELD_BY_OUTPUT_KEY, OperatorOutputKey, OutputKey
from stacks.components.alerts import HyperPodFailureAlerts
from stacks.components.observability import (
    ADDON_NAME,
    ADDON_NAMESPACE,
    ADVANCED_ONLY_METRICS,
    COLLECTOR_SERVICE_ACCOUNT,
    LEVELLED_METRICS,
    addon_configuration,
)
from stacks.components.workload_identity import POD_IDENTITY_SERVICE
from stacks.observability_stack import ObservabilityStack
from stacks.studio_stack import StudioStack

ENV = cdk.Environment(account="111111111111", region="us-west-2")


def _app_and_stand_ins() -> tuple[cdk.App, cdk.Stack]:
    app = cdk.App(context={**cdk_json_context(), "aws:cdk:disable-asset-staging": True})
    deps = cdk.Stack(app, "stand-ins", env=ENV)
    cdk.CfnWaitConditionHandle(deps, "Placeholder")
    return app, deps


def observability_template(config: ProjectConfig, *, nag: bool = False) -> Template:
    app, deps = _app_and_stand_ins()
    stack = ObservabilityStack(
        app,
        config.names.stack("observability"),
        env=ENV,
        config=config,
        eks_cluster=eks.Cluster.from_cluster_attributes(deps, "Eks", cluster_name=config.names.eks_cluster),
        failure_alerts=HyperPodFailureAlerts(
            deps, "Alerts", cluster_name=config.names.hyperpod_cluster, email_addresses=[]
        ),
    )
    if nag:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
        app.synth()  # raises on any unacknowledged cdk-nag finding
    return Template.from_stack(stack)


def studio_template(config: ProjectConfig) -> Template:
    app, deps = _app_and_stand_ins()
    vpc = ec2.Vpc.from_vpc_attributes(
        deps,
        "Vpc",
        vpc_id="vpc-0123456789abcdef0",
        availability_zones=["us-west-2b"],
        private_subnet_ids=["subnet-0123456789abcdef0"],
        private_subnet_route_table_ids=["rtb-0123456789abcdef0"],
    )
    stack = StudioStack(
        app,
        config.names.stack("studio"),
        env=ENV,
        config=config,
        vpc=vpc,
        hyperpod_subnet=vpc.private_subnets[0],
        eks_cluster_security_group=ec2.SecurityGroup.from_security_group_id(deps, "Sg", "sg-0123456789abcdef0"),
    )
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    app.synth()
    return Template.from_stack(stack)


def resolved_addon_configuration(template: Template) -> dict:
    """The add-on's ConfigurationValues with CloudFormation references replaced by markers."""
    (addon,) = template.find_resources("AWS::EKS::Addon").values()
    value = addon["Properties"]["ConfigurationValues"]
    if isinstance(value, dict):
        value = "".join(
            part if isinstance(part, str) else json.dumps(part).replace('"', "'") for part in value["Fn::Join"][1]
        )
    return json.loads(value)


@pytest.fixture(scope="module")
def default_template(default_config) -> Template:
    return observability_template(default_config, nag=True)


def test_prometheus_workspace_is_retained(default_template):
    default_template.resource_count_is("AWS::APS::Workspace", 1)
    (workspace,) = default_template.find_resources("AWS::APS::Workspace").values()
    assert workspace["DeletionPolicy"] == "Retain"


def test_addon_is_the_hyperpod_observability_addon_with_pod_identity(default_template, default_config):
    (role_id,) = default_template.find_resources(
        "AWS::IAM::Role",
        {"Properties": {"AssumeRolePolicyDocument": {"Statement": [{"Principal": {"Service": POD_IDENTITY_SERVICE}}]}}},
    )
    (addon,) = default_template.find_resources("AWS::EKS::Addon").values()
    properties = addon["Properties"]
    assert properties["AddonName"] == ADDON_NAME
    assert properties["ClusterName"] == default_config.names.eks_cluster
    assert properties["ResolveConflicts"] == "OVERWRITE"
    assert "AddonVersion" not in properties  # config default: the EKS default for the cluster version
    assert properties["PodIdentityAssociations"] == [
        {"RoleArn": {"Fn::GetAtt": [role_id, "Arn"]}, "ServiceAccount": COLLECTOR_SERVICE_ACCOUNT}
    ]
    assert COLLECTOR_SERVICE_ACCOUNT == "hyperpod-observability-operator-otel-collector"
    assert ADDON_NAMESPACE == "hyperpod-observability"  # where the add-on installs the collector


def test_addon_configuration_follows_config(default_template, default_config):
    configuration = resolved_addon_configuration(default_template)
    assert set(configuration) == {"ampWorkspace", "metricsProvider", "logging"}
    (workspace_id,) = default_template.find_resources("AWS::APS::Workspace")
    assert set(configuration["ampWorkspace"]) == {"prometheusEndpoint", "arn"}
    assert configuration["ampWorkspace"]["arn"] == str({"Fn::GetAtt": [workspace_id, "Arn"]}).replace('"', "'")
    assert configuration["ampWorkspace"]["prometheusEndpoint"].startswith("https://aps-workspaces.us-west-2.")
    assert workspace_id in configuration["ampWorkspace"]["prometheusEndpoint"]
    assert configuration["logging"] == {"enabled": default_config.observability.logging_enabled}
    provider = configuration["metricsProvider"]
    level = default_config.observability.metrics_level.upper()
    for name in LEVELLED_METRICS:
        assert provider[name] == {
            "level": level,
            "scrapeInterval": default_config.observability.scrape_interval_seconds,
        }
    for name in ADVANCED_ONLY_METRICS:
        assert provider[name]["level"] == ("ADVANCED" if level == "ADVANCED" else "DISABLED")
    assert provider["inferenceMetrics"]["level"] == "BASIC"


# The metricsProvider keys of AWS's own template for this add-on: aws-samples/awsome-distributed-training,
# 1.architectures/7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/modules/observability/eks_addon.tf.
# Written out here, not derived from the code under test: a key no primary source lists (such as
# `clusterMetrics` or `rayMetrics`) either fails CreateAddon or is silently ignored.
AWS_TEMPLATE_METRICS_KEYS = {
    "trainingMetrics", "inferenceMetrics", "taskGovernanceMetrics", "scalingMetrics", "customMetrics",
    "nodeMetrics", "acceleratedComputeMetrics", "networkMetrics",
}  # fmt: skip


@pytest.mark.parametrize("level", ["Basic", "Advanced"])
def test_addon_configuration_uses_exactly_the_keys_of_aws_template(level):
    configuration = addon_configuration(
        validate_config({"observability": {"metrics_level": level}}).observability,
        prometheus_endpoint="https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-1",
        prometheus_arn="arn:aws:aps:us-west-2:111111111111:workspace/ws-1",
        grafana_workspace=("g", "arn:aws:grafana:us-west-2:111111111111:/workspaces/g-1"),
    )
    # Top-level keys and each metric group's keys follow the same template.
    assert set(configuration) == {"ampWorkspace", "metricsProvider", "amgWorkspace", "logging"}
    assert set(configuration["metricsProvider"]) == AWS_TEMPLATE_METRICS_KEYS
    assert {frozenset(entry) for entry in configuration["metricsProvider"].values()} == {
        frozenset({"level", "scrapeInterval"})
    }


def test_addon_configuration_reacts_to_config_changes():
    config = validate_config(
        {"observability": {"metrics_level": "Advanced", "scrape_interval_seconds": 60, "logging_enabled": False}}
    )
    configuration = resolved_addon_configuration(observability_template(config))
    assert configuration["logging"] == {"enabled": False}
    assert {entry["scrapeInterval"] for entry in configuration["metricsProvider"].values()} == {60}
    assert {configuration["metricsProvider"][name]["level"] for name in LEVELLED_METRICS + ADVANCED_ONLY_METRICS} == {
        "ADVANCED"
    }


def test_collector_role_writes_only_to_this_workspace_and_hyperpod_logs(default_template, default_config):
    (workspace_id,) = default_template.find_resources("AWS::APS::Workspace")
    (role,) = default_template.find_resources(
        "AWS::IAM::Role",
        {"Properties": {"AssumeRolePolicyDocument": {"Statement": [{"Principal": {"Service": POD_IDENTITY_SERVICE}}]}}},
    ).values()
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert sorted(trust["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    # Only the add-on's collector service account in its namespace, on this cluster, may assume it.
    assert trust["Condition"] == {
        "StringEquals": {
            "aws:SourceAccount": "111111111111",
            "aws:RequestTag/eks-cluster-name": default_config.names.eks_cluster,
            "aws:RequestTag/kubernetes-namespace": ADDON_NAMESPACE,
            "aws:RequestTag/kubernetes-service-account": COLLECTOR_SERVICE_ACCOUNT,
        }
    }
    (policy,) = role["Properties"]["Policies"]
    statements = {s["Sid"]: s for s in policy["PolicyDocument"]["Statement"]}
    assert statements["RemoteWriteToThisWorkspace"]["Action"] == "aps:RemoteWrite"
    assert statements["RemoteWriteToThisWorkspace"]["Resource"] == {"Fn::GetAtt": [workspace_id, "Arn"]}
    log_resources = statements["HyperPodClusterLogs"]["Resource"]
    # This HyperPod cluster's log groups (/aws/sagemaker/Clusters/<name>/<id>), not every cluster's.
    cluster = default_config.names.hyperpod_cluster
    assert log_resources == [
        f"arn:aws:logs:us-west-2:111111111111:log-group:/aws/sagemaker/Clusters/{cluster}/*",
        f"arn:aws:logs:us-west-2:111111111111:log-group:/aws/sagemaker/Clusters/{cluster}/*:log-stream:*",
    ]
    # The write path and the reads of AWS's template for this add-on (modules/observability/iam_roles.tf
    # in aws-samples/awsome-distributed-training), which its troubleshooting page lists; the two without
    # resource-level permissions on "*", every other one on this cluster's log groups only.
    assert sorted(statements["HyperPodClusterLogs"]["Action"]) == sorted([
        "logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents",
        "logs:GetLogEvents", "logs:FilterLogEvents", "logs:GetLogRecord", "logs:StartQuery", "logs:GetQueryResults",
    ])  # fmt: skip
    unscoped = statements["LogActionsWithoutResourceLevelPermissions"]
    assert (sorted(unscoped["Action"]), unscoped["Resource"]) == (["logs:DescribeLogGroups", "logs:StopQuery"], "*")
    from iam_reference import statement_problems

    assert [problem for statement in statements.values() for problem in statement_problems(statement)] == []


def test_collector_log_access_follows_the_name_prefix():
    config = validate_config({"name_prefix": "other-hp"})
    (role,) = (
        observability_template(config)
        .find_resources(
            "AWS::IAM::Role",
            {
                "Properties": {
                    "AssumeRolePolicyDocument": {"Statement": [{"Principal": {"Service": POD_IDENTITY_SERVICE}}]}
                }
            },
        )
        .values()
    )
    (policy,) = role["Properties"]["Policies"]
    (logs,) = [s for s in policy["PolicyDocument"]["Statement"] if s["Sid"] == "HyperPodClusterLogs"]
    assert all("/aws/sagemaker/Clusters/other-hp-hyperpod/*" in arn for arn in logs["Resource"])


def resolved_output(template: Template, key: OperatorOutputKey) -> str:
    """An output's value as one string, each reference written <LogicalId.Attribute> or <Ref>."""

    def resolve(value) -> str:
        if isinstance(value, str):
            return value
        if "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return separator.join(resolve(part) for part in parts)
        if "Fn::GetAtt" in value:
            return "<{}.{}>".format(*value["Fn::GetAtt"])
        return f"<{value['Ref']}>"

    return resolve(template.to_json()["Outputs"][key.value]["Value"])


def test_outputs_name_the_prometheus_workspace_and_its_query_endpoint(default_template):
    (workspace_id,) = default_template.find_resources("AWS::APS::Workspace")
    assert resolved_output(default_template, OperatorOutputKey.PROMETHEUS_WORKSPACE_ID) == (
        f"<{workspace_id}.WorkspaceId>"
    )
    assert resolved_output(default_template, OperatorOutputKey.PROMETHEUS_QUERY_ENDPOINT) == (
        f"https://aps-workspaces.us-west-2.<AWS::URLSuffix>/workspaces/<{workspace_id}.WorkspaceId>/api/v1/query"
    )


def test_grafana_absent_by_default(default_template, default_config):
    assert default_config.observability.grafana is False
    default_template.resource_count_is("AWS::Grafana::Workspace", 0)
    assert "amgWorkspace" not in resolved_addon_configuration(default_template)
    assert OperatorOutputKey.GRAFANA_WORKSPACE_URL.value not in default_template.to_json()["Outputs"]


def test_grafana_uses_identity_center_and_is_wired_into_the_addon():
    template = observability_template(validate_config({"observability": {"grafana": True}}), nag=True)
    template.resource_count_is("AWS::Grafana::Workspace", 1)
    (grafana_id, grafana) = next(iter(template.find_resources("AWS::Grafana::Workspace").items()))
    assert grafana["Properties"]["AuthenticationProviders"] == ["AWS_SSO"]
    amg = resolved_addon_configuration(template)["amgWorkspace"]
    assert amg["workspaceName"] == grafana["Properties"]["Name"]
    assert grafana_id in amg["arn"] and ":grafana:" in amg["arn"]
    # The workspace's Endpoint is a host name; the output is the URL to open.
    assert resolved_output(template, OperatorOutputKey.GRAFANA_WORKSPACE_URL) == f"https://<{grafana_id}.Endpoint>"
    # Every optional output `skyrl-hp outputs` reads is emitted here, under the key it reads (the configuration's
    # fingerprint is the app's, on the network stack; the MLflow App's ARN is the storage stack's:
    # tests/cdk/test_mlflow_app.py).
    emitted_elsewhere = {OperatorOutputKey.CONFIG_FINGERPRINT.value, OutputKey.MLFLOW_APP_ARN.value}
    assert set(OPTIONAL_FIELD_BY_OUTPUT_KEY) - emitted_elsewhere <= set(template.to_json()["Outputs"])


def test_observability_and_studio_stacks_in_the_platform(templates, default_config):
    names = default_config.names
    assert names.stack("observability") in templates
    assert names.stack("studio") not in templates  # Studio is off by default


def test_studio_domain_when_enabled():
    config = validate_config({"studio": {"enabled": True}})
    template = studio_template(config)
    template.resource_count_is("AWS::SageMaker::Domain", 1)
    (domain,) = template.find_resources("AWS::SageMaker::Domain").values()
    properties = domain["Properties"]
    assert properties["AuthMode"] == "IAM"
    assert properties["AppNetworkAccessType"] == "VpcOnly"
    assert properties["VpcId"] == "vpc-0123456789abcdef0"
    assert properties["SubnetIds"] == ["subnet-0123456789abcdef0"]
    # Studio has its own group, never the HyperPod one (self-referencing, all traffic).
    (group_id,) = template.find_resources("AWS::EC2::SecurityGroup")
    assert properties["DefaultUserSettings"]["SecurityGroups"] == [{"Fn::GetAtt": [group_id, "GroupId"]}]
    assert domain["DeletionPolicy"] == "Delete"  # a retained domain would block deleting the subnet
    (role_id, role) = next(iter(template.find_resources("AWS::IAM::Role").items()))
    assert properties["DefaultUserSettings"]["ExecutionRole"] == {"Fn::GetAtt": [role_id, "Arn"]}
    statements = {s["Sid"]: s for s in role["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]}
    assert statements["DescribeProjectEksCluster"]["Resource"] == (
        f"arn:aws:eks:us-west-2:111111111111:cluster/{config.names.eks_cluster}"
    )
    hyperpod = statements["DescribeProjectHyperPodCluster"]
    assert "sagemaker:DescribeCluster" in hyperpod["Action"]
    assert hyperpod["Condition"] == {"StringEquals": {"aws:ResourceTag/project": config.name_prefix}}
    actions = [
        a for s in statements.values() for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    ]
    assert actions and not any("*" in action for action in actions)


def test_studio_security_group_opens_only_what_studio_needs():
    template = studio_template(validate_config({"studio": {"enabled": True}}))
    (group_id, group) = next(iter(template.find_resources("AWS::EC2::SecurityGroup").items()))
    studio = {"Fn::GetAtt": [group_id, "GroupId"]}
    eks_api = "sg-0123456789abcdef0"  # the stand-in for the EKS cluster security group

    def rules(kind: str) -> set[tuple]:
        found = set()
        for rule in template.find_resources(f"AWS::EC2::SecurityGroup{kind}").values():
            props = rule["Properties"]
            peer = props.get("SourceSecurityGroupId") or props.get("DestinationSecurityGroupId")
            group = json.dumps(props["GroupId"])
            found.add((group, json.dumps(peer), props["IpProtocol"], props["FromPort"], props["ToPort"]))
        return found

    s, h = json.dumps(studio), json.dumps(eks_api)
    assert rules("Ingress") == {
        (s, s, "tcp", 8192, 65535),  # Studio apps to each other
        (h, s, "tcp", 443, 443),  # EKS API; Ray's ports are reached through it (kubectl port-forward)
    }  # fmt: skip
    assert rules("Egress") == {(s, s, "tcp", 8192, 65535), (s, h, "tcp", 443, 443)}
    # Inline: HTTPS to AWS APIs through NAT, and nothing else (no allow-all egress).
    assert group["Properties"]["SecurityGroupEgress"] == [
        {"CidrIp": "0.0.0.0/0", "Description": "AWS APIs and package indexes over HTTPS", "FromPort": 443,
         "IpProtocol": "tcp", "ToPort": 443}
    ]  # fmt: skip


def test_alert_rules_and_alert_manager_are_in_the_workspace(default_template, default_config):
    (namespace,) = default_template.find_resources("AWS::APS::RuleGroupsNamespace").values()
    (workspace_id,) = default_template.find_resources("AWS::APS::Workspace")
    assert namespace["Properties"]["Workspace"] == {"Fn::GetAtt": [workspace_id, "Arn"]}
    assert namespace["Properties"]["Data"] == alerting.rules_yaml(default_config)
    assert namespace["Properties"]["Name"] == f"{default_config.name_prefix}-alerts"
    (workspace,) = default_template.find_resources("AWS::APS::Workspace").values()
    definition = workspace["Properties"]["AlertManagerDefinition"]
    # The topic ARN comes from the HyperPod stack (a cross-stack reference); the rest is alerting.alertmanager_definition.
    parts = definition["Fn::Join"][1]
    assert [next(iter(part)) for part in parts if isinstance(part, dict)] in (
        ["Fn::ImportValue"],
        ["Fn::GetStackOutput"],
    )
    text = "".join(part if isinstance(part, str) else "TOPIC" for part in parts)
    assert text == alerting.alertmanager_definition("TOPIC", ENV.region)


def test_the_failure_topic_admits_this_accounts_prometheus_alert_managers(templates, default_config):
    template = templates[default_config.names.stack("hyperpod")]
    condition = {
        "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
        "ArnLike": {"aws:SourceArn": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":aps:", {"Ref": "AWS::Region"}, ":", {"Ref": "AWS::AccountId"}, ":workspace/*"]]}},
    }  # fmt: skip
    policies = [r for r in template["Resources"].values() if r["Type"] == "AWS::SNS::TopicPolicy"]
    statements = [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]]
    (publish,) = [s for s in statements if s.get("Sid") == "PrometheusAlertManagerPublish"]
    assert publish["Principal"] == {"Service": "aps.amazonaws.com"}
    assert sorted(publish["Action"]) == ["sns:GetTopicAttributes", "sns:Publish"]
    assert publish["Condition"] == condition
    keys = [r for r in template["Resources"].values() if r["Type"] == "AWS::KMS::Key"]
    key_statements = [s for k in keys for s in k["Properties"]["KeyPolicy"]["Statement"]]
    (encrypt,) = [s for s in key_statements if s.get("Sid") == "PrometheusAlertManagerEncrypt"]
    assert encrypt["Principal"] == {"Service": "aps.amazonaws.com"}
    assert encrypt["Condition"] == condition


def test_studio_reaches_the_eks_api_through_the_cluster_security_group_only(assembly_for):
    # EKS puts its cluster security group on the control plane's network interfaces only; the HyperPod group,
    # which the control plane also carries, holds every node, pod and FSx: no Studio rule may open it.
    config = validate_config({"studio": {"enabled": True}})
    templates = {s.stack_name: s.template for s in assembly_for({"studio": {"enabled": True}}).stacks}
    studio = templates[config.names.stack("studio")]
    network = templates[config.names.stack("network")]
    eks = templates[config.names.stack("eks")]
    (cluster_id,) = [i for i, r in eks["Resources"].items() if r["Type"] == "AWS::EKS::Cluster"]
    hyperpod_groups = {i for i, r in network["Resources"].items() if r["Type"] == "AWS::EC2::SecurityGroup"}

    def producer(value) -> str:
        """The producing template's expression behind a cross-stack reference (or the value itself)."""
        rendered = json.dumps(value)
        for template in (eks, network):
            for name, output in template.get("Outputs", {}).items():
                export = output.get("Export", {}).get("Name")
                if (export and export in rendered) or f'"{name}"' in rendered:
                    return json.dumps(output["Value"])
        return rendered

    (ingress,) = [
        r["Properties"] for r in studio["Resources"].values()
        if r["Type"] == "AWS::EC2::SecurityGroupIngress" and r["Properties"]["FromPort"] == 443
    ]  # fmt: skip
    assert producer(ingress["GroupId"]) == json.dumps({"Fn::GetAtt": [cluster_id, "ClusterSecurityGroupId"]})
    rules_into_network = [
        r for r in studio["Resources"].values()
        if r["Type"].startswith("AWS::EC2::SecurityGroup") and any(g in producer(r["Properties"].get("GroupId", ""))
                                                                   for g in hyperpod_groups)
    ]  # fmt: skip
    assert rules_into_network == []
