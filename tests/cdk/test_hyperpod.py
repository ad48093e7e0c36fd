"""HyperPod stack: the AWS::SageMaker::Cluster and its execution role follow the configuration.

Most tests build only the HyperPod stack in a small App, against stand-ins for the network,
storage and EKS stacks (imported by attributes: no resources, so synth is cheap).
"""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks
from conftest import VARIANT_ON_DEMAND, cdk_json_context, cfn_lint_errors

from skyrl_hyperpod.config import ConfigError, ProjectConfig, load_config, validate_config
from skyrl_hyperpod.plumbing.upstream import HYPERPOD_AUTOSCALER_TYPE, HYPERPOD_AUTOSCALING_PRINCIPAL
from skyrl_hyperpod.values.stack_outputs import OutputKey
from stacks.components.hyperpod_cluster import INSTANCE_ROLE_MANAGED_POLICY
from stacks.components.lifecycle import LIFECYCLE_SCRIPTS_DIR, ON_CREATE_SCRIPT
from stacks.hyperpod_stack import HyperPodStack

ENV = cdk.Environment(account="111111111111", region="us-west-2")
LIFECYCLE_BUCKET = "sagemaker-skyrl-hp-lifecycle-111111111111-us-west-2"
SUBNET_ID = "subnet-0123456789abcdef0"
SECURITY_GROUP_ID = "sg-0123456789abcdef0"
VPC_ID = "vpc-0123456789abcdef0"
VPC_ARN = f"arn:aws:ec2:us-west-2:111111111111:vpc/{VPC_ID}"


def _app(outdir: Path | None = None) -> cdk.App:
    context = {**cdk_json_context(), "aws:cdk:disable-asset-staging": True}
    return cdk.App(context=context, outdir=str(outdir) if outdir else None)


def stand_ins_stack(app: cdk.App) -> cdk.Stack:
    """Holds imported stand-ins; CloudFormation rejects a template without resources."""
    deps = cdk.Stack(app, "stand-ins", env=ENV)
    cdk.CfnWaitConditionHandle(deps, "Placeholder")
    return deps


def imported_subnet(scope: cdk.Stack) -> ec2.ISubnet:
    return ec2.Subnet.from_subnet_attributes(
        scope, "Subnet", subnet_id=SUBNET_ID, availability_zone="us-west-2b", route_table_id="rtb-0123456789abcdef0"
    )


def imported_vpc(scope: cdk.Stack) -> ec2.IVpc:
    return ec2.Vpc.from_vpc_attributes(scope, "Vpc", vpc_id=VPC_ID, availability_zones=["us-west-2b"])


def build_hyperpod_stack(config: ProjectConfig, app: cdk.App | None = None) -> HyperPodStack:
    """The HyperPod stack wired to imported stand-ins of the network, storage and EKS stacks."""
    app = app or _app()
    deps = stand_ins_stack(app)
    return HyperPodStack(
        app,
        config.names.stack("hyperpod"),
        env=ENV,
        config=config,
        eks_cluster=eks.Cluster.from_cluster_attributes(deps, "Eks", cluster_name=config.names.eks_cluster),
        vpc=imported_vpc(deps),
        hyperpod_subnet=imported_subnet(deps),
        hyperpod_security_group=ec2.SecurityGroup.from_security_group_id(deps, "Sg", SECURITY_GROUP_ID),
        lifecycle_bucket=s3.Bucket.from_bucket_name(deps, "Lifecycle", LIFECYCLE_BUCKET),
    )


def hyperpod_template(config: ProjectConfig) -> Template:
    return Template.from_stack(build_hyperpod_stack(config))


def the_cluster(template: Template) -> dict:
    (cluster,) = template.find_resources("AWS::SageMaker::Cluster").values()
    return cluster["Properties"]


def groups_by_name(template: Template) -> dict[str, dict]:
    return {group["InstanceGroupName"]: group for group in the_cluster(template)["InstanceGroups"]}


@pytest.fixture(scope="module")
def default_template(default_config) -> Template:
    return hyperpod_template(default_config)


def test_cluster_top_level_properties_come_from_config(default_template, default_config):
    cluster = the_cluster(default_template)
    assert cluster["ClusterName"] == default_config.names.hyperpod_cluster
    assert cluster["NodeRecovery"] == default_config.hyperpod.node_recovery == "Automatic"
    assert cluster["NodeProvisioningMode"] == "Continuous"
    assert cluster["VpcConfig"] == {"Subnets": [SUBNET_ID], "SecurityGroupIds": [SECURITY_GROUP_ID]}


def test_orchestrator_is_the_eks_cluster(default_template, default_config):
    orchestrator_arn = the_cluster(default_template)["Orchestrator"]["Eks"]["ClusterArn"]
    assert orchestrator_arn == f"arn:aws:eks:{ENV.region}:{ENV.account}:cluster/{default_config.names.eks_cluster}"


def test_both_instance_groups_follow_config(default_template, default_config):
    groups = groups_by_name(default_template)
    configured = (default_config.hyperpod.head_group, default_config.hyperpod.worker_group)
    assert set(groups) == {group.name for group in configured}
    for group in configured:
        rendered = groups[group.name]
        assert rendered["InstanceType"] == group.instance_type
        assert rendered["InstanceCount"] == group.instance_count
        assert rendered["ThreadsPerCore"] == group.threads_per_core
        assert rendered["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": group.ebs_volume_gb}}]
        assert "TrainingPlanArn" not in rendered


def test_reference_deployment_shape(default_template):
    """The defaults reproduce the reference run: 1 CPU head and 3 GPU workers."""
    types_and_counts = sorted(
        (g["InstanceType"], g["InstanceCount"]) for g in groups_by_name(default_template).values()
    )
    assert types_and_counts == [("ml.g7e.12xlarge", 3), ("ml.r5d.16xlarge", 1)]


def test_deep_health_checks_only_on_the_gpu_group(default_template, default_config):
    groups = groups_by_name(default_template)
    worker = default_config.hyperpod.worker_group
    assert worker.spec.gpus > 0
    assert groups[worker.name]["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert "OnStartDeepHealthChecks" not in groups[default_config.hyperpod.head_group.name]


def test_groups_run_the_projects_lifecycle_scripts(default_template, default_config):
    for group in groups_by_name(default_template).values():
        lifecycle = group["LifeCycleConfig"]
        assert lifecycle["OnCreate"] == ON_CREATE_SCRIPT
        assert (LIFECYCLE_SCRIPTS_DIR / lifecycle["OnCreate"]).is_file()
        # The managed instance policy only reads lifecycle scripts from sagemaker-* buckets.
        assert lifecycle["SourceS3Uri"].startswith("s3://sagemaker-")
        assert (
            lifecycle["SourceS3Uri"]
            == f"s3://{LIFECYCLE_BUCKET}/lifecycle-scripts/{default_config.names.hyperpod_cluster}"
        )


def test_scripts_are_uploaded_to_the_lifecycle_prefix_before_the_cluster(default_template, default_config):
    (deployment_id, deployment) = next(iter(default_template.find_resources("Custom::CDKBucketDeployment").items()))
    assert deployment["Properties"]["DestinationBucketName"] == LIFECYCLE_BUCKET
    assert deployment["Properties"]["DestinationBucketKeyPrefix"] == (
        f"lifecycle-scripts/{default_config.names.hyperpod_cluster}/"
    )
    (cluster,) = default_template.find_resources("AWS::SageMaker::Cluster").values()
    assert deployment_id in cluster["DependsOn"]


def test_every_group_runs_with_the_execution_role(default_template):
    (role_id,) = default_template.find_resources(
        "AWS::IAM::Role",
        {
            "Properties": {
                "AssumeRolePolicyDocument": {
                    "Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]
                }
            }
        },
    )
    for group in groups_by_name(default_template).values():
        assert group["ExecutionRole"] == {"Fn::GetAtt": [role_id, "Arn"]}


def test_execution_role_has_the_managed_instance_policy(default_template):
    default_template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]
            },
            "ManagedPolicyArns": [
                {
                    "Fn::Join": [
                        "",
                        ["arn:", {"Ref": "AWS::Partition"}, f":iam::aws:policy/{INSTANCE_ROLE_MANAGED_POLICY}"],
                    ]
                }
            ],
        },
    )


def _execution_role_statements(template: Template) -> dict[str, dict]:
    roles = template.find_resources(
        "AWS::IAM::Role",
        {
            "Properties": {
                "AssumeRolePolicyDocument": {
                    "Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]
                }
            }
        },
    )
    (role,) = roles.values()
    (policy,) = role["Properties"]["Policies"]
    return {statement["Sid"]: statement for statement in policy["PolicyDocument"]["Statement"]}


def test_execution_role_extra_permissions_are_scoped(default_template, default_config):
    statements = _execution_role_statements(default_template)
    assert set(statements) == {
        "CniCreateInterfacesInHyperPodSubnet",
        "CniAllowAttachOfThisVpcsInterfaces",
        "CniManageInterfacesOfThisVpc",
        "CniAttachInterfacesOfThisVpc",
        "CniAttachToHyperPodInstances",
        "CniModifyInterfacesInHyperPodSubnet",
        "CniTagInterfacesOnCreate",
        "CniTagInterfacesOfThisVpc",
        "CniDescribe",
        "EcrSignIn",
        "PullThisProjectsImages",
        "PullImagesOfOtherAccounts",
        "PodIdentityAgent",
    }
    subnet = f"arn:aws:ec2:us-west-2:111111111111:subnet/{SUBNET_ID}"
    group = f"arn:aws:ec2:us-west-2:111111111111:security-group/{SECURITY_GROUP_ID}"
    own_enis = "arn:aws:ec2:us-west-2:111111111111:network-interface/*"
    create = statements["CniCreateInterfacesInHyperPodSubnet"]
    assert create["Action"] == "ec2:CreateNetworkInterface"
    assert sorted(create["Resource"]) == sorted([own_enis, subnet, group])
    assert statements["PodIdentityAgent"]["Resource"] == (
        f"arn:aws:eks:us-west-2:111111111111:cluster/{default_config.names.eks_cluster}"
    )
    this_vpc = {"ec2:Vpc": VPC_ARN}
    # Every action on an existing ENI, the attach permission and its deletion included, is limited to ENIs
    # of the platform VPC; the attach permission is only ever INSTANCE-ATTACH.
    permission = statements["CniAllowAttachOfThisVpcsInterfaces"]
    assert (permission["Action"], permission["Resource"]) == ("ec2:CreateNetworkInterfacePermission", own_enis)
    assert permission["Condition"] == {"StringEquals": {**this_vpc, "ec2:Permission": "INSTANCE-ATTACH"}}
    manage = statements["CniManageInterfacesOfThisVpc"]
    assert "ec2:DeleteNetworkInterfacePermission" in manage["Action"]
    for sid in ("CniManageInterfacesOfThisVpc", "CniAttachInterfacesOfThisVpc", "CniTagInterfacesOfThisVpc"):
        assert statements[sid]["Resource"] == own_enis, sid
        assert statements[sid]["Condition"] == {"StringEquals": this_vpc}, sid
    # Tags on an ENI being created ride on CreateNetworkInterface (pinned to the subnet and group above).
    on_create = statements["CniTagInterfacesOnCreate"]
    assert on_create["Condition"] == {"StringEquals": {"ec2:CreateAction": "CreateNetworkInterface"}}
    attach_actions = {"ec2:AttachNetworkInterface", "ec2:DetachNetworkInterface", "ec2:ModifyNetworkInterfaceAttribute"}
    assert set(statements["CniAttachInterfacesOfThisVpc"]["Action"]) == attach_actions
    # The instance side is in SageMaker's account (never ours); modifying is also authorized against the
    # ENI's subnet and security groups: the HyperPod ones only.
    instances = statements["CniAttachToHyperPodInstances"]
    assert set(instances["Action"]) == attach_actions
    assert instances["Resource"] == "arn:aws:ec2:us-west-2:*:instance/*"
    modify = statements["CniModifyInterfacesInHyperPodSubnet"]
    assert modify["Action"] == "ec2:ModifyNetworkInterfaceAttribute"
    assert sorted(modify["Resource"]) == sorted([subnet, group])
    rendered = json.dumps(statements)
    assert ":111111111111:instance/" not in rendered
    # Only actions that have no resource-level permissions run on "*".
    for sid, statement in statements.items():
        if statement["Resource"] == "*":
            assert sid in ("CniDescribe", "EcrSignIn"), sid


def test_execution_role_pulls_only_the_projects_repository_in_this_account(default_template, default_config):
    # The managed instance policy grants no ECR action (AWS's policy reference): this role holds every pull.
    statements = _execution_role_statements(default_template)
    pull = ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]
    own = statements["PullThisProjectsImages"]
    assert (own["Action"], own["Resource"]) == (
        pull, f"arn:aws:ecr:us-west-2:111111111111:repository/{default_config.names.ecr_repository}"
    )  # fmt: skip
    # AWS-owned registries (EKS add-ons, HyperPod agents): any repository of another account, in this region.
    others = statements["PullImagesOfOtherAccounts"]
    assert (others["Action"], others["Resource"]) == (pull, "arn:aws:ecr:us-west-2:*:repository/*")
    assert others["Condition"] == {"StringNotEquals": {"aws:ResourceAccount": "111111111111"}}
    assert statements["EcrSignIn"]["Action"] == "ecr:GetAuthorizationToken"


def test_execution_role_statements_match_the_service_authorization_reference(default_template):
    from iam_reference import statement_problems

    statements = _execution_role_statements(default_template)
    assert [problem for statement in statements.values() for problem in statement_problems(statement)] == []


def test_the_reference_check_catches_what_iam_would_deny():
    from iam_reference import statement_problems

    eni = "arn:aws:ec2:us-west-2:111111111111:network-interface/*"
    subnet = "arn:aws:ec2:us-west-2:111111111111:subnet/subnet-0123456789abcdef0"
    # A condition key the action does not define, a resource it does not act on, "*" for a scoped action.
    assert statement_problems(
        {"Sid": "K", "Action": "ec2:AttachNetworkInterface", "Resource": eni, "Condition": {"StringEquals": {"ec2:Permission": "x"}}}
    ) == ["K: ec2:AttachNetworkInterface (on ['network-interface']) has no condition key ec2:Permission"]  # fmt: skip
    assert statement_problems({"Sid": "R", "Action": "ec2:AttachNetworkInterface", "Resource": [eni, subnet]}) == [
        f"R: no action of the statement acts on {subnet} (['subnet'])"
    ]
    assert statement_problems({"Sid": "S", "Action": "logs:StartQuery", "Resource": "*"})[0].startswith(
        "S: logs:StartQuery supports resource-level permissions"
    )
    unknown = statement_problems({"Sid": "A", "Action": "ec2:AttachNetworkInterfaces", "Resource": eni})
    assert "A: ec2:AttachNetworkInterfaces is not in the Service Authorization Reference" in unknown


def test_kms_encrypted_lifecycle_bucket_gets_decrypt_before_the_cluster(default_config):
    app = _app()
    deps = stand_ins_stack(app)
    key = kms.Key.from_key_arn(
        deps, "Key", "arn:aws:kms:us-west-2:111111111111:key/11111111-2222-3333-4444-555555555555"
    )
    bucket = s3.Bucket.from_bucket_attributes(deps, "Lifecycle", bucket_name=LIFECYCLE_BUCKET, encryption_key=key)
    stack = HyperPodStack(
        app,
        "hp",
        env=ENV,
        config=default_config,
        eks_cluster=eks.Cluster.from_cluster_attributes(deps, "Eks", cluster_name="c"),
        vpc=imported_vpc(deps),
        hyperpod_subnet=imported_subnet(deps),
        hyperpod_security_group=ec2.SecurityGroup.from_security_group_id(deps, "Sg", SECURITY_GROUP_ID),
        lifecycle_bucket=bucket,
    )
    template = Template.from_stack(stack)
    (policy_id,) = template.find_resources(
        "AWS::IAM::Policy",
        {
            "Properties": {
                "PolicyDocument": {
                    "Statement": Match.array_with(
                        [Match.object_like({"Action": "kms:Decrypt", "Resource": key.key_arn})]
                    )
                }
            }
        },
    )
    (cluster,) = template.find_resources("AWS::SageMaker::Cluster").values()
    assert policy_id in cluster["DependsOn"]


def test_outputs_carry_the_cluster_and_role(default_template, default_config):
    outputs = default_template.find_outputs("*")
    assert outputs[OutputKey.HYPERPOD_CLUSTER_NAME.value]["Value"] == default_config.names.hyperpod_cluster
    (cluster_id,) = default_template.find_resources("AWS::SageMaker::Cluster")
    assert outputs[OutputKey.HYPERPOD_CLUSTER_ARN.value]["Value"] == {"Fn::GetAtt": [cluster_id, "ClusterArn"]}
    assert outputs[OutputKey.HYPERPOD_EXECUTION_ROLE_ARN.value]["Value"]["Fn::GetAtt"][1] == "Arn"


@pytest.mark.parametrize(
    "worker_overrides",
    [
        {"instance_count": 1},
        {"instance_count": 8},
        {"instance_count": 16},
        {"instance_type": "ml.g7e.48xlarge"},
    ],
    ids=["1-worker", "8-workers", "16-workers", "g7e.48xlarge"],
)
def test_scaling_the_worker_group_changes_only_that_group(worker_overrides, default_config, default_template):
    worker = default_config.hyperpod.worker_group.model_dump() | worker_overrides
    config = validate_config({"hyperpod": {"worker_group": worker}})
    template = hyperpod_template(config)
    groups = groups_by_name(template)
    rendered_worker = groups[config.hyperpod.worker_group.name]
    assert rendered_worker["InstanceCount"] == config.hyperpod.worker_group.instance_count
    assert rendered_worker["InstanceType"] == config.hyperpod.worker_group.instance_type
    assert rendered_worker["OnStartDeepHealthChecks"] == list(config.hyperpod.worker_group.deep_health_checks)
    # The head group, and everything but the worker group, is unchanged.
    head_name = config.hyperpod.head_group.name
    assert groups[head_name] == groups_by_name(default_template)[head_name]
    changed = {k for k, v in the_cluster(template).items() if v != the_cluster(default_template).get(k)}
    assert changed == {"InstanceGroups"}


def test_training_plan_is_passed_when_set(default_config):
    plan = "arn:aws:sagemaker:us-west-2:111111111111:training-plan/reserved-g7e"
    worker = default_config.hyperpod.worker_group.model_dump() | {"training_plan_arn": plan}
    groups = groups_by_name(hyperpod_template(validate_config({"hyperpod": {"worker_group": worker}})))
    assert groups[default_config.hyperpod.worker_group.name]["TrainingPlanArn"] == plan
    assert "TrainingPlanArn" not in groups[default_config.hyperpod.head_group.name]


def test_stack_passes_cdk_nag_and_cfn_lint_with_cross_stack_references(tmp_path):
    """Real stand-in resources in another stack, env-agnostic: the cdk-nag acknowledgments must
    match the findings as rendered with cross-stack references and pseudo parameters."""
    config = load_config(None)
    app = _app(tmp_path)
    deps = cdk.Stack(app, "stand-ins")
    vpc = ec2.Vpc(
        deps,
        "Vpc",
        ip_addresses=ec2.IpAddresses.cidr(config.network.vpc_cidr),
        max_azs=2,
        subnet_configuration=[
            ec2.SubnetConfiguration(name="private", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=24)
        ],
    )
    security_group = ec2.SecurityGroup(deps, "Sg", vpc=vpc)
    bucket = s3.Bucket(deps, "Lifecycle", bucket_name=LIFECYCLE_BUCKET)
    for rule in ("VPC7", "S1", "S10"):  # findings on the stand-ins, not on the stack under test
        cdk.Validations.of(deps).acknowledge(
            cdk.Acknowledgment(id=f"AwsSolutions::AwsSolutions-{rule}", reason="test stand-in")
        )
    stack = HyperPodStack(
        app,
        config.names.stack("hyperpod"),
        config=config,
        eks_cluster=eks.Cluster.from_cluster_attributes(deps, "Eks", cluster_name=config.names.eks_cluster),
        vpc=vpc,
        hyperpod_subnet=vpc.isolated_subnets[0],
        hyperpod_security_group=security_group,
        lifecycle_bucket=bucket,
    )
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    assembly = app.synth()  # raises ValidationFailed on any unacknowledged finding

    template_file = Path(assembly.get_stack_by_name(stack.stack_name).template_full_path)
    uri = the_cluster(Template.from_json(json.loads(template_file.read_text())))["InstanceGroups"][0][
        "LifeCycleConfig"
    ]["SourceS3Uri"]
    assert "Fn::GetStackOutput" in json.dumps(uri) or "Fn::ImportValue" in json.dumps(uri)
    assert cfn_lint_errors(json.loads(template_file.read_text())) == []


def test_platform_hyperpod_stack_reads_scripts_from_the_storage_stack_bucket(templates, default_config):
    template = Template.from_json(templates[default_config.names.stack("hyperpod")])
    rendered = json.dumps(groups_by_name(template)[default_config.hyperpod.worker_group.name]["LifeCycleConfig"])
    # A cross-stack reference to the storage stack's (sagemaker-*) lifecycle bucket, never a literal.
    assert default_config.names.stack("storage") in rendered or "Fn::ImportValue" in rendered
    assert f"/lifecycle-scripts/{default_config.names.hyperpod_cluster}" in rendered


# --- failure alerts ----------------------------------------------------------------------------------------


def test_hyperpod_error_events_of_this_cluster_reach_an_encrypted_topic(default_config):
    config = validate_config({"alerts": {"email_addresses": ["ops@example.com", "ml-oncall@example.com"]}})
    template = hyperpod_template(config)
    (rule,) = template.find_resources("AWS::Events::Rule").values()
    # The event HyperPod documents for failures, for this cluster only.
    assert rule["Properties"]["EventPattern"] == {
        "source": ["aws.sagemaker"],
        "detail-type": ["SageMaker HyperPod Cluster Event"],
        "detail": {"EventDetails": {"ClusterName": [config.names.hyperpod_cluster], "EventLevel": ["Error"]}},
    }
    ((topic_id, topic),) = template.find_resources("AWS::SNS::Topic").items()
    assert [target["Arn"] for target in rule["Properties"]["Targets"]] == [{"Ref": topic_id}]
    key_id = topic["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0]
    key = template.find_resources("AWS::KMS::Key")[key_id]
    # EventBridge may use the key (it cannot use the AWS-managed SNS key) and publish to the topic, for this
    # rule only: both grants carry aws:SourceArn, so no other rule can deliver through them.
    rule_arn = f"arn:aws:events:us-west-2:111111111111:rule/{rule['Properties']['Name']}"
    this_rule = {"ArnEquals": {"aws:SourceArn": rule_arn}}
    (key_grant,) = [
        statement for statement in key["Properties"]["KeyPolicy"]["Statement"]
        if statement.get("Principal") == {"Service": "events.amazonaws.com"}
    ]  # fmt: skip
    assert "kms:GenerateDataKey*" in key_grant["Action"] and key_grant["Condition"] == this_rule
    (policy,) = template.find_resources("AWS::SNS::TopicPolicy").values()
    (publish,) = [
        statement for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement.get("Principal") == {"Service": "events.amazonaws.com"}
    ]  # fmt: skip
    assert publish["Action"] == "sns:Publish" and publish["Condition"] == this_rule
    assert policy["Properties"]["Topics"] == [{"Ref": topic_id}]
    subscriptions = template.find_resources("AWS::SNS::Subscription").values()
    assert sorted(s["Properties"]["Endpoint"] for s in subscriptions) == sorted(config.alerts.email_addresses)
    assert all(s["Properties"]["Protocol"] == "email" for s in subscriptions)
    assert "AlertsTopicArn" in template.find_outputs("*")
    # Without addresses the topic still exists, for subscriptions made later.
    default = hyperpod_template(default_config)
    default.resource_count_is("AWS::SNS::Subscription", 0)
    default.resource_count_is("AWS::SNS::Topic", 1)


@pytest.mark.parametrize("addresses", [["not-an-address"], ["ops@example.com", "ops@example.com"]])
def test_alert_addresses_are_validated(addresses):
    with pytest.raises(ConfigError) as error:
        validate_config({"alerts": {"email_addresses": addresses}})
    assert "alerts.email_addresses" in str(error.value.problems)


# hyperpod.worker_group.scaling on_demand: the cluster's AutoScaling and ClusterRole, the GPU group created with 0 nodes
# and no deep health checks, and a role that can scale this cluster only.
CLUSTER_ARN = "arn:aws:sagemaker:us-west-2:111111111111:cluster/abcdef012345"


@pytest.fixture(scope="module")
def on_demand_config():
    return validate_config(VARIANT_ON_DEMAND)


@pytest.fixture(scope="module")
def on_demand(on_demand_config) -> Template:
    return hyperpod_template(on_demand_config)


def roles(template: Template) -> dict[str, dict]:
    return template.find_resources("AWS::IAM::Role")


def autoscaling_role_id(template: Template) -> str:
    [logical_id] = [
        lid
        for lid, role in roles(template).items()
        if role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
        == {"Service": HYPERPOD_AUTOSCALING_PRINCIPAL}
    ]
    return logical_id


def test_on_demand_turns_on_managed_karpenter_with_its_own_role(on_demand):
    cluster = the_cluster(on_demand)
    assert cluster["AutoScaling"] == {"Mode": "Enable", "AutoScalerType": HYPERPOD_AUTOSCALER_TYPE}
    assert cluster["ClusterRole"] == {"Fn::GetAtt": [autoscaling_role_id(on_demand), "Arn"]}
    # The prerequisites the stack owns (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling.html).
    assert (cluster["NodeProvisioningMode"], cluster["NodeRecovery"]) == ("Continuous", "Automatic")


def test_the_gpu_group_starts_empty_without_deep_health_checks(on_demand, on_demand_config, default_config):
    groups = groups_by_name(on_demand)
    gpu = groups[on_demand_config.hyperpod.worker_group.name]
    assert gpu["InstanceCount"] == 0
    assert "OnStartDeepHealthChecks" not in gpu
    head = default_config.hyperpod.head_group
    assert groups[head.name]["InstanceCount"] == head.instance_count


def test_fixed_nodes_have_no_autoscaling_and_no_cluster_role(default_config):
    template = hyperpod_template(default_config)
    cluster = the_cluster(template)
    assert "AutoScaling" not in cluster and "ClusterRole" not in cluster
    assert groups_by_name(template)[default_config.hyperpod.worker_group.name]["InstanceCount"] == 3
    assert all(
        role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
        != {"Service": HYPERPOD_AUTOSCALING_PRINCIPAL}
        for role in roles(template).values()
    )


def test_the_role_scales_this_cluster_only(on_demand):
    from iam_reference import statement_problems

    role_id = autoscaling_role_id(on_demand)
    trust = roles(on_demand)[role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": HYPERPOD_AUTOSCALING_PRINCIPAL}}
    ]
    assert "ManagedPolicyArns" not in roles(on_demand)[role_id]["Properties"]
    policies = [
        p["Properties"]
        for p in on_demand.find_resources("AWS::IAM::Policy").values()
        if p["Properties"]["Roles"] == [{"Ref": role_id}]
    ]
    [statement] = [s for p in policies for s in p["PolicyDocument"]["Statement"]]
    [cluster_id] = on_demand.find_resources("AWS::SageMaker::Cluster")
    assert statement["Action"] == ["sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes"]
    assert statement["Resource"] == {"Fn::GetAtt": [cluster_id, "ClusterArn"]}
    assert "Condition" not in statement
    # The actions act on that resource type (Service Authorization Reference), with the ARN the cluster gets.
    assert statement_problems({**statement, "Resource": CLUSTER_ARN}) == []


def test_cfn_lint_and_the_cdk_types_know_the_new_properties(on_demand_config, tmp_path):
    """cfn-lint validates the template with its bundled resource schema; the CDK's own CfnCluster types (generated
    from the CloudFormation registry schema) carry both properties and AutoScaling's two fields."""
    from cfnlint.schema.manager import PROVIDER_SCHEMA_MANAGER

    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-west-2", "AWS::SageMaker::Cluster").schema
    assert {"AutoScaling", "ClusterRole"} <= set(schema["properties"])
    config_properties = schema["definitions"]["ClusterAutoScalingConfig"]["properties"]
    assert {"Mode", "AutoScalerType"} <= set(config_properties)
    assert {"auto_scaling", "cluster_role"} <= set(sagemaker.CfnClusterProps.__init__.__annotations__)
    assert {"mode", "auto_scaler_type"} <= set(
        sagemaker.CfnCluster.ClusterAutoScalingConfigProperty.__init__.__annotations__
    )

    app = _app(tmp_path)
    stack = build_hyperpod_stack(on_demand_config, app)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    assembly = app.synth()  # any unacknowledged cdk-nag finding fails here
    template = json.loads(Path(assembly.get_stack_by_name(stack.stack_name).template_full_path).read_text())
    assert cfn_lint_errors(template) == []
    # A value outside the schema's enum is an error there: the lint does check these properties.
    template["Resources"][next(iter(Template.from_json(template).find_resources("AWS::SageMaker::Cluster")))][
        "Properties"
    ]["AutoScaling"]["Mode"] = "Sometimes"
    assert any("Sometimes" in error for error in cfn_lint_errors(template))
