"""Storage stack: FSx for Lustre, the lifecycle/artifacts/access-log buckets and the outputs the charts read."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template
from conftest import VARIANT_ENV_PERSISTENT_1, VARIANT_NAMED_BUCKET

from skyrl_hyperpod.config import ConfigError, ProjectConfig, validate_config
from skyrl_hyperpod.config.project import NAME_PREFIX_MAX
from skyrl_hyperpod.values.stack_outputs import OutputKey
from stacks.components.storage import (
    CUSTOM_RESOURCE_TIMEOUT_LIMIT,
    FINAL_BACKUP_RESOURCE_TYPE,
    load_final_backup_handler,
)


def storage_template(templates: dict, config: ProjectConfig) -> Template:
    return Template.from_json(templates[config.names.stack("storage")])


@pytest.fixture(scope="module")
def storage(templates, default_config) -> Template:
    return storage_template(templates, default_config)


def resolve_cross_stack(value, templates: dict):
    """Follow a cross-stack reference (export/import or weak Fn::GetStackOutput) to the producer's value."""
    if isinstance(value, dict) and "Fn::GetStackOutput" in value:
        ref = value["Fn::GetStackOutput"]
        return templates[ref["StackName"]]["Outputs"][ref["OutputName"]]["Value"]
    if isinstance(value, dict) and "Fn::ImportValue" in value:
        name = value["Fn::ImportValue"]
        for template in templates.values():
            for output in template.get("Outputs", {}).values():
                if output.get("Export", {}).get("Name") == name:
                    return output["Value"]
    raise AssertionError(f"{value} is not a cross-stack reference")


def the_file_system(template: Template) -> tuple[str, Mapping[str, Any]]:
    found = template.find_resources("AWS::FSx::FileSystem")
    assert len(found) == 1
    return next(iter(found.items()))


def buckets(template: Template) -> Mapping[str, Any]:
    return template.find_resources("AWS::S3::Bucket")


def bucket_id(template: Template, construct_name: str) -> str:
    ids = [logical_id for logical_id in buckets(template) if construct_name in logical_id]
    assert len(ids) == 1, ids
    return ids[0]


# --- FSx for Lustre --------------------------------------------------------------------------


def test_file_system_follows_the_fsx_config(storage, default_config):
    fsx = default_config.fsx
    _, file_system = the_file_system(storage)
    props = file_system["Properties"]
    assert props["FileSystemType"] == "LUSTRE"
    assert props["FileSystemTypeVersion"] == fsx.lustre_version == "2.15"
    assert props["StorageCapacity"] == fsx.storage_capacity_gib
    lustre = props["LustreConfiguration"]
    assert lustre["DeploymentType"] == fsx.deployment_type == "PERSISTENT_2"
    assert lustre["PerUnitStorageThroughput"] == fsx.per_unit_storage_throughput
    assert lustre["DataCompressionType"] == fsx.data_compression
    # PERSISTENT_2 on 2.15: FSx provisions metadata IOPS with the capacity.
    assert lustre["MetadataConfiguration"] == {"Mode": "AUTOMATIC"}


def test_file_system_is_deleted_only_after_its_final_backup_and_kept_when_replaced(storage):
    # Retained on stack deletion, the file system would keep its ENIs in the network stack's subnet and group.
    # Replaced by an update (a create-only property changed), it is kept: CloudFormation would otherwise delete
    # it in the cleanup phase, and abandon that delete (reporting success) if it failed.
    fs_id, file_system = the_file_system(storage)
    assert file_system["DeletionPolicy"] == "Delete"
    assert file_system["UpdateReplacePolicy"] == "Retain"
    ((backup_id, backup),) = storage.find_resources(FINAL_BACKUP_RESOURCE_TYPE).items()
    # The reference makes CloudFormation delete the backup resource (and wait for it) before the file system.
    assert backup["Properties"]["FileSystemId"] == {"Ref": fs_id}
    assert backup["DeletionPolicy"] == "Delete"


def waiter_budget_seconds(storage: Template) -> int:
    """How long the provider framework's waiter polls is_complete: MaxAttempts x IntervalSeconds (backoff 1)."""
    (machine,) = storage.find_resources("AWS::StepFunctions::StateMachine").values()
    definition = "".join(
        part if isinstance(part, str) else "<ref>" for part in machine["Properties"]["DefinitionString"]["Fn::Join"][1]
    )
    retry = json.loads(definition.replace('"<ref>"', '"ref"').replace("<ref>", "ref"))["States"][
        "framework-isComplete-task"
    ]["Retry"][0]
    assert retry["BackoffRate"] == 1
    return int(retry["MaxAttempts"]) * int(retry["IntervalSeconds"])


def test_final_backup_wait_fits_cloudformations_hour(storage):
    # CloudFormation waits at most 3600 s for a custom resource (ServiceTimeout 1-3600), and the provider
    # framework's total timeout is capped at the same hour: the handler gives up first, with its own message,
    # then the waiter, both while CloudFormation still listens. A delete run again joins the running backup.
    (backup,) = storage.find_resources(FINAL_BACKUP_RESOURCE_TYPE).values()
    service_timeout = int(backup["Properties"]["ServiceTimeout"])
    assert service_timeout == CUSTOM_RESOURCE_TIMEOUT_LIMIT.to_seconds() == 3600
    waiter = waiter_budget_seconds(storage)
    handler_wait = int(backup["Properties"][load_final_backup_handler().WAIT_PROPERTY])
    assert 0 < handler_wait < waiter < service_timeout


def test_storage_stack_is_termination_protected(default_config, platform_assembly):
    # Deleting the storage stack alone would remove FSx under running pods; the teardown plan lifts the protection.
    stack = platform_assembly.get_stack_by_name(default_config.names.stack("storage"))
    assert stack.termination_protection is True
    others = [s.stack_name for s in platform_assembly.stacks if s.termination_protection]
    assert others == [stack.stack_name]


def test_final_backup_handler_may_back_up_only_this_file_system(storage):
    fs_id, _ = the_file_system(storage)
    (backup,) = storage.find_resources(FINAL_BACKUP_RESOURCE_TYPE).values()
    policies = storage.find_resources("AWS::IAM::Policy")
    statements = [
        statement
        for policy in policies.values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if "fsx:CreateBackup" in json.dumps(statement["Action"])
    ]
    (create,) = statements
    rendered = json.dumps(create["Resource"])
    assert f'"Ref": "{fs_id}"' in rendered and ":file-system/*" not in rendered
    assert backup["Properties"]["ServiceToken"]


def test_automatic_backups_follow_the_config(storage, default_config, assembly_for):
    _, file_system = the_file_system(storage)
    lustre = file_system["Properties"]["LustreConfiguration"]
    assert lustre["AutomaticBackupRetentionDays"] == default_config.fsx.automatic_backup_retention_days > 0
    assert lustre["CopyTagsToBackups"] is True
    variant = assembly_for({"fsx": {"automatic_backup_retention_days": 30}})
    template = Template.from_json(variant.get_stack_by_name(default_config.names.stack("storage")).template)
    _, file_system = the_file_system(template)
    assert file_system["Properties"]["LustreConfiguration"]["AutomaticBackupRetentionDays"] == 30


@pytest.mark.parametrize("days", [-1, 91])
def test_backup_retention_outside_what_fsx_accepts_is_refused(days):
    with pytest.raises(ConfigError) as error:
        validate_config({"fsx": {"automatic_backup_retention_days": days}})
    assert "automatic_backup_retention_days" in str(error.value.problems)


def test_file_system_sits_in_the_hyperpod_subnet_and_security_group(storage, templates, default_config):
    _, file_system = the_file_system(storage)
    props = file_system["Properties"]
    network = templates[default_config.names.stack("network")]
    (subnet,) = props["SubnetIds"]
    subnet_ref = resolve_cross_stack(subnet, templates)
    assert network["Resources"][subnet_ref["Ref"]]["Properties"]["AvailabilityZoneId"] == (
        default_config.network.hyperpod_az_id
    )
    (group,) = props["SecurityGroupIds"]
    group_ref = resolve_cross_stack(group, templates)
    assert network["Resources"][group_ref["Fn::GetAtt"][0]]["Type"] == "AWS::EC2::SecurityGroup"


# --- Buckets ---------------------------------------------------------------------------------


def test_every_bucket_is_encrypted_private_and_retained(storage):
    found = buckets(storage)
    assert len(found) == 3  # lifecycle scripts, artifacts, access logs
    for logical_id, bucket in found.items():
        props = bucket["Properties"]
        assert bucket["DeletionPolicy"] == bucket["UpdateReplacePolicy"] == "Retain", logical_id
        assert props["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }, logical_id
        (rule,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256", logical_id


def test_bucket_policies_are_retained_with_their_buckets(storage):
    policies = storage.find_resources("AWS::S3::BucketPolicy")
    assert {policy["Properties"]["Bucket"]["Ref"] for policy in policies.values()} == set(buckets(storage))
    for logical_id, policy in policies.items():
        assert policy["DeletionPolicy"] == policy["UpdateReplacePolicy"] == "Retain", logical_id


def test_every_bucket_policy_denies_requests_without_tls(storage):
    for logical_id in buckets(storage):
        storage.has_resource_properties(
            "AWS::S3::BucketPolicy",
            {
                "Bucket": {"Ref": logical_id},
                "PolicyDocument": {
                    "Statement": Match.array_with(
                        [
                            Match.object_like(
                                {
                                    "Effect": "Deny",
                                    "Action": "s3:*",
                                    "Principal": {"AWS": "*"},
                                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                                }
                            )
                        ]
                    )
                },
            },
        )


def test_access_log_bucket_is_versioned_and_expires_old_versions(storage):
    bucket = buckets(storage)[bucket_id(storage, "AccessLogsBucket")]["Properties"]
    assert bucket["VersioningConfiguration"] == {"Status": "Enabled"}
    (rule,) = bucket["LifecycleConfiguration"]["Rules"]
    assert "ExpirationInDays" in rule and "NoncurrentVersionExpiration" in rule
    assert "LoggingConfiguration" not in bucket  # it is the destination: logging it into itself would loop


@pytest.mark.parametrize("name", ["ArtifactsBucket", "LifecycleBucket"])
def test_artifacts_and_lifecycle_buckets_are_versioned_and_access_logged(storage, name):
    bucket = buckets(storage)[bucket_id(storage, name)]["Properties"]
    assert bucket["VersioningConfiguration"] == {"Status": "Enabled"}
    assert bucket["LoggingConfiguration"]["DestinationBucketName"] == {"Ref": bucket_id(storage, "AccessLogsBucket")}
    rules = bucket["LifecycleConfiguration"]["Rules"]
    assert any("NoncurrentVersionExpiration" in rule for rule in rules), "old versions must not pile up forever"


def test_lifecycle_bucket_name_is_derived_from_the_prefix_account_and_region(storage, default_config):
    assert default_config.hyperpod.lifecycle_bucket_name is None
    name = buckets(storage)[bucket_id(storage, "LifecycleBucket")]["Properties"]["BucketName"]
    # Environment-agnostic synth: account and region are pseudo parameters.
    assert name == {
        "Fn::Join": [
            "",
            [
                f"sagemaker-{default_config.name_prefix}-lifecycle-",
                {"Ref": "AWS::AccountId"},
                "-",
                {"Ref": "AWS::Region"},
            ],
        ]
    }


def test_derived_lifecycle_bucket_name_is_readable_by_the_hyperpod_instance_policy():
    # The longest prefix the configuration allows, with the longest region names, still fits S3's 63.
    names = validate_config({"name_prefix": "p" * NAME_PREFIX_MAX}).names
    name = names.lifecycle_bucket(None, account="111111111111", region="ap-southeast-4")
    assert name.startswith("sagemaker-") and len(name) <= 63
    assert names.lifecycle_bucket("sagemaker-mine", account="a", region="r") == "sagemaker-mine"


# --- Outputs ---------------------------------------------------------------------------------


def test_outputs_carry_what_the_kubernetes_manifests_need(storage):
    fs_id, _ = the_file_system(storage)
    outputs = storage.to_json()["Outputs"]
    assert outputs[OutputKey.FSX_FILE_SYSTEM_ID.value]["Value"] == {"Ref": fs_id}
    assert outputs[OutputKey.FSX_DNS_NAME.value]["Value"] == {"Fn::GetAtt": [fs_id, "DNSName"]}
    assert outputs[OutputKey.FSX_MOUNT_NAME.value]["Value"] == {"Fn::GetAtt": [fs_id, "LustreMountName"]}
    assert outputs[OutputKey.ARTIFACTS_BUCKET_NAME.value]["Value"] == {"Ref": bucket_id(storage, "ArtifactsBucket")}
    assert outputs[OutputKey.REGION.value]["Value"] == {"Ref": "AWS::Region"}


# --- Variant configurations ------------------------------------------------------------------


def test_persistent_1_variant_with_a_concrete_environment(assembly_for):
    config = validate_config(VARIANT_ENV_PERSISTENT_1)
    assembly = assembly_for(VARIANT_ENV_PERSISTENT_1)
    template = Template.from_json(assembly.get_stack_by_name(config.names.stack("storage")).template)
    _, file_system = the_file_system(template)
    props = file_system["Properties"]
    assert props["StorageCapacity"] == config.fsx.storage_capacity_gib
    lustre = props["LustreConfiguration"]
    assert lustre["DeploymentType"] == config.fsx.deployment_type
    assert lustre["PerUnitStorageThroughput"] == config.fsx.per_unit_storage_throughput
    assert "MetadataConfiguration" not in lustre, "PERSISTENT_1 rejects a metadata configuration"
    name = buckets(template)[bucket_id(template, "LifecycleBucket")]["Properties"]["BucketName"]
    assert name == f"sagemaker-{config.name_prefix}-lifecycle-{config.env.account}-{config.env.region}"
    assert template.to_json()["Outputs"][OutputKey.REGION.value]["Value"] == config.env.region


def test_configured_lifecycle_bucket_name_wins(assembly_for):
    config = validate_config(VARIANT_NAMED_BUCKET)
    assembly = assembly_for(VARIANT_NAMED_BUCKET)
    template = Template.from_json(assembly.get_stack_by_name(config.names.stack("storage")).template)
    name = buckets(template)[bucket_id(template, "LifecycleBucket")]["Properties"]["BucketName"]
    assert name == config.hyperpod.lifecycle_bucket_name
