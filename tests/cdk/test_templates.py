"""Checks on every synthesized template: snapshots, cfn-lint, cdk-nag, the outputs contract."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import VARIANT_OPTIONAL, cfn_lint_errors
from syrupy.extensions.json import JSONSnapshotExtension

from skyrl_hyperpod.values.stack_outputs import CONDITIONAL_OUTPUT_KEYS, FIELD_BY_OUTPUT_KEY, OutputKey, StackOutputs
from stacks.components.storage import FINAL_BACKUP_RESOURCE_TYPE

ASSET_HASH = re.compile(r"\b[0-9a-f]{64}\b")


def normalized(template: dict) -> dict:
    """Asset hashes depend on file bytes staged by the toolchain; the snapshot cares about structure."""
    return json.loads(ASSET_HASH.sub("<asset-hash>", json.dumps(template, sort_keys=True)))


@pytest.fixture
def json_snapshot(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


def test_every_stack_matches_its_snapshot(templates, json_snapshot):
    # Review a snapshot diff like code; refresh with `pytest --snapshot-update` when the change is intended.
    for stack_name in sorted(templates):
        assert normalized(templates[stack_name]) == json_snapshot(name=stack_name)


def test_snapshot_normalization_is_stable(templates):
    for template in templates.values():
        assert normalized(template) == normalized(json.loads(json.dumps(template)))


def test_cfn_lint_reports_no_errors(templates):
    problems = [
        f"{stack_name}: {error}"
        for stack_name, template in sorted(templates.items())
        for error in cfn_lint_errors(template)
    ]
    assert problems == []


def test_cfn_lint_catches_a_schema_error():
    # The shared linter (rules built once per session) still reports schema errors, and only errors.
    broken = {"Resources": {"Fs": {"Type": "AWS::FSx::FileSystem", "Properties": {"FileSystemType": "LUSTRE"}}}}
    errors = cfn_lint_errors(broken)
    assert errors and all(error.startswith("E") for error in errors)
    assert any(error.startswith("E3003 ") for error in errors)  # required property missing
    warning_only = {"Parameters": {"Unused": {"Type": "String"}}, "Resources": {"B": {"Type": "AWS::S3::Bucket"}}}
    assert cfn_lint_errors(warning_only) == []  # W2001 (unused parameter) is reviewed, not gated


def test_cdk_nag_ran_and_every_acknowledgment_sits_at_a_resource_with_a_reason(platform_assembly):
    report = json.loads((Path(platform_assembly.directory) / "validation-report.json").read_text())
    nag = [r for r in report["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert len(nag) == 1, "cdk-nag AwsSolutions pack did not run"
    assert nag[0]["conclusion"] == "success"
    assert nag[0]["violations"] == []
    for ack in nag[0]["suppressedViolations"]:
        where = f"{ack['ruleName']} acknowledged at {ack['acknowledgedAt']}"
        assert "/" in ack["acknowledgedAt"], f"{where}: acknowledge next to the resource, not the whole stack"
        assert len(ack["reason"]) >= 30, f"{where}: give a specific reason, not {ack['reason']!r}"


def test_outputs_cover_everything_the_charts_read(templates):
    emitted = {key for template in templates.values() for key in template.get("Outputs", {})}
    missing = {key.value for key in OutputKey if key not in CONDITIONAL_OUTPUT_KEYS} - emitted
    assert missing == set()  # the conditional ones: tests/cdk/test_mlflow_app.py
    # Every field the charts read is filled from one of those outputs.
    required = {name for name, field in StackOutputs.model_fields.items() if field.is_required()}
    assert required <= set(FIELD_BY_OUTPUT_KEY.values())


# --- `cdk destroy --all` completes -----------------------------------------------------------------------

RETAINING_POLICIES = {"Retain", "RetainExceptOnCreate", "Snapshot"}
# Resources a network interface sits in: deleting one that still holds an ENI fails with DependencyViolation.
NETWORK_PLACEMENTS = {"AWS::EC2::Subnet", "AWS::EC2::SecurityGroup", "AWS::EC2::VPC"}


def referenced_resources(value, stack: str, templates: dict[str, dict]) -> set[tuple[str, str]]:
    """(stack, logical id) of every resource `value` references, following cross-stack references
    (Fn::ImportValue of an export, weak Fn::GetStackOutput) to the producing stack's resource."""
    found: set[tuple[str, str]] = set()
    if isinstance(value, list):
        for item in value:
            found |= referenced_resources(item, stack, templates)
    elif isinstance(value, dict):
        resources = templates[stack]["Resources"]
        if isinstance(value.get("Ref"), str) and value["Ref"] in resources:
            found.add((stack, value["Ref"]))
        if "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"]
            target = target[0] if isinstance(target, list) else target.split(".")[0]
            if target in resources:
                found.add((stack, target))
        if "Fn::GetStackOutput" in value:
            ref = value["Fn::GetStackOutput"]
            producer = ref["StackName"]
            output = templates[producer]["Outputs"][ref["OutputName"]]
            found |= referenced_resources(output["Value"], producer, templates)
        if "Fn::ImportValue" in value:
            for producer, template in templates.items():
                for output in template.get("Outputs", {}).values():
                    if output.get("Export", {}).get("Name") == value["Fn::ImportValue"]:
                        found |= referenced_resources(output["Value"], producer, templates)
        for key, item in value.items():
            if key not in ("Ref", "Fn::GetAtt", "Fn::GetStackOutput"):
                found |= referenced_resources(item, stack, templates)
    return found


def retained_resources_in_deleted_networks(templates: dict[str, dict]) -> list[str]:
    """One line per retained resource placed in a subnet, security group or VPC that the destroy deletes."""
    problems = []
    for stack, template in sorted(templates.items()):
        for logical_id, resource in template["Resources"].items():
            if resource.get("DeletionPolicy") not in RETAINING_POLICIES:
                continue
            targets = referenced_resources(resource.get("Properties", {}), stack, templates)
            for target_stack, target_id in sorted(targets):
                target = templates[target_stack]["Resources"][target_id]
                if target["Type"] in NETWORK_PLACEMENTS and target.get("DeletionPolicy") not in RETAINING_POLICIES:
                    problems.append(
                        f"{stack}/{logical_id} ({resource['Type']}) is retained in {target['Type']} "
                        f"{target_stack}/{target_id}, which the destroy deletes"
                    )
    return problems


def test_no_retained_resource_sits_in_a_subnet_or_group_the_destroy_deletes(templates, assembly_for):
    assert retained_resources_in_deleted_networks(templates) == []
    with_studio = assembly_for({"studio": {"enabled": True}})
    assert retained_resources_in_deleted_networks({s.stack_name: s.template for s in with_studio.stacks}) == []


def test_optional_stacks_pass_cfn_lint(assembly_for):
    # Studio (its own security group, rules into the HyperPod group), alert subscriptions and the autoscaled GPU group
    # (AutoScaling, its cluster role) are off by default.
    variant = assembly_for(VARIANT_OPTIONAL)
    assert [f"{s.stack_name}: {e}" for s in variant.stacks for e in cfn_lint_errors(s.template)] == []


def test_the_teardown_check_finds_a_retained_file_system_in_a_deleted_group(templates, default_config):
    # The shape `cdk destroy --all` cannot finish: FSx retained in the network stack's subnet and group.
    broken = json.loads(json.dumps(templates))
    storage = broken[default_config.names.stack("storage")]
    (fs_id,) = [i for i, r in storage["Resources"].items() if r["Type"] == "AWS::FSx::FileSystem"]
    storage["Resources"][fs_id]["DeletionPolicy"] = "Retain"
    problems = retained_resources_in_deleted_networks(broken)
    assert {problem.split(" is retained in ")[1].split(" ")[0] for problem in problems} == {
        "AWS::EC2::Subnet", "AWS::EC2::SecurityGroup"
    }  # fmt: skip
    assert all(problem.startswith(f"{default_config.names.stack('storage')}/{fs_id} ") for problem in problems)


def test_stateful_data_outlives_the_stacks(templates):
    """Buckets, their policies and the ECR repository are retained; FSx leaves a final backup (test_storage)."""
    kept = {"AWS::S3::Bucket", "AWS::S3::BucketPolicy", "AWS::ECR::Repository"}
    found = 0
    for stack_name, template in templates.items():
        for logical_id, resource in template["Resources"].items():
            if resource["Type"] in kept:
                found += 1
                assert resource.get("DeletionPolicy") == "Retain", f"{stack_name}/{logical_id} is not retained"
                assert resource.get("UpdateReplacePolicy") == "Retain", f"{stack_name}/{logical_id}"
            if resource["Type"] == "AWS::FSx::FileSystem":
                assert any(r["Type"] == FINAL_BACKUP_RESOURCE_TYPE for r in template["Resources"].values())
    assert found >= 7  # 3 buckets, 3 bucket policies, the ECR repository
