"""Checks on every synthesized template: snapshots, cfn-lint, cdk-nag, the outputs contract."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import cfn_lint_errors
from syrupy.extensions.json import JSONSnapshotExtension

from skyrl_hyperpod.outputs import FIELD_BY_OUTPUT_KEY, OutputKey, StackOutputs

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
    missing = {key.value for key in OutputKey} - emitted
    assert missing == set()
    # Every field the charts read is filled from one of those outputs.
    required = {name for name, field in StackOutputs.model_fields.items() if field.is_required()}
    assert required <= set(FIELD_BY_OUTPUT_KEY.values())


def test_stateful_resources_are_retained(templates):
    stateful = {"AWS::FSx::FileSystem", "AWS::S3::Bucket", "AWS::ECR::Repository"}
    found = 0
    for stack_name, template in templates.items():
        for logical_id, resource in template["Resources"].items():
            if resource["Type"] in stateful:
                found += 1
                assert resource.get("DeletionPolicy") == "Retain", f"{stack_name}/{logical_id} is not retained"
                assert resource.get("UpdateReplacePolicy") == "Retain", f"{stack_name}/{logical_id}"
    assert found >= 4  # FSx, lifecycle bucket, artifacts bucket, ECR repository
