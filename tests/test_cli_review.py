"""`skyrl-hp review BASE HEAD`: offline diff of cloud assemblies and cdk8s manifests as PR-comment Markdown.

Assemblies are written here by hand (manifest.json + templates); create-only properties come from the
CloudFormation resource schemas cfn-lint ships, so expectations about them are read from the same schemas.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.cli.review import DEFAULT_SCHEMA_REGION

FIXTURES = Path(__file__).parent / "fixtures" / "cli"
STACK = "skyrl-hp-test"


def create_only(resource_type: str) -> list[str]:
    # Imported here: cfn-lint's schema package takes ~0.4 s to import, which every xdist worker would pay
    # at collection (only the one running this module needs it).
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    return PROVIDER_SCHEMA_MANAGER.get_resource_schema(DEFAULT_SCHEMA_REGION, resource_type).schema.get(
        "createOnlyProperties", []
    )


def hyperpod_cluster() -> dict:
    group = {"ExecutionRole": {"Fn::GetAtt": ["Role", "Arn"]}, "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-x/",
             "OnCreate": "on_create.sh"}, "ThreadsPerCore": 1}
    return {
        "Type": "AWS::SageMaker::Cluster",
        "Properties": {
            "ClusterName": "skyrl-hp-hyperpod",
            "NodeRecovery": "Automatic",
            "Orchestrator": {"Eks": {"ClusterArn": "arn:aws:eks:us-west-2:111111111111:cluster/skyrl-hp-eks"}},
            "VpcConfig": {"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1"]},
            "InstanceGroups": [
                {**group, "InstanceGroupName": "head", "InstanceType": "ml.r5d.16xlarge", "InstanceCount": 1},
                {**group, "InstanceGroupName": "gpu-workers", "InstanceType": "ml.g7e.12xlarge", "InstanceCount": 3},
            ],
        },
    }


def file_system() -> dict:
    return {
        "Type": "AWS::FSx::FileSystem",
        "DeletionPolicy": "Delete",
        "UpdateReplacePolicy": "Delete",
        "Properties": {
            "FileSystemType": "LUSTRE",
            "StorageCapacity": 1200,
            "SubnetIds": ["subnet-1"],
            "LustreConfiguration": {"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250},
        },
    }


def base_template() -> dict:
    return {
        "Resources": {
            "Cluster": hyperpod_cluster(),
            "FileSystem": file_system(),
            "CDKMetadata": {"Type": "AWS::CDK::Metadata", "Properties": {"Analytics": "v2:deflate64:abc"}},
        },
        "Outputs": {"HyperPodClusterName": {"Value": {"Ref": "Cluster"}}},
    }


def write_assembly(directory: Path, templates: dict[str, dict]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    artifacts = {}
    for name, template in templates.items():
        (directory / f"{name}.template.json").write_text(json.dumps(template))
        artifacts[name] = {"type": "aws:cloudformation:stack", "properties": {"templateFile": f"{name}.template.json"}}
    artifacts["Tree"] = {"type": "cdk:tree", "properties": {"file": "tree.json"}}
    (directory / "manifest.json").write_text(json.dumps({"version": "48.0.0", "artifacts": artifacts}))
    return directory


def review(tmp_path, base: dict, head: dict, *args: str):
    base_dir = write_assembly(tmp_path / "base", {STACK: base})
    head_dir = write_assembly(tmp_path / "head", {STACK: head})
    return CliRunner().invoke(cli, ["review", str(base_dir), str(head_dir), *args])


def resource_line(markdown: str, logical_id: str) -> str:
    return next(line for line in markdown.splitlines() if line.startswith("- **") and f"`{logical_id}`" in line)


def test_identical_assemblies_report_no_changes(tmp_path):
    result = review(tmp_path, base_template(), base_template(), "--fail-on-stateful-replacement")
    assert result.exit_code == 0, result.output
    assert "No changes" in result.stdout


def test_hyperpod_cluster_name_change_is_a_replacement(tmp_path):
    assert "/properties/ClusterName" in create_only("AWS::SageMaker::Cluster")
    head = base_template()
    head["Resources"]["Cluster"]["Properties"]["ClusterName"] = "renamed-hyperpod"
    result = review(tmp_path, base_template(), head, "--fail-on-stateful-replacement")
    # A HyperPod cluster holds no data: the replacement is flagged but is not a stateful one.
    assert result.exit_code == 0, result.output
    assert resource_line(result.stdout, "Cluster").startswith("- **REPLACE**")
    assert "create-only property `ClusterName` changed" in result.stdout
    assert '`ClusterName`: `"skyrl-hp-hyperpod"` → `"renamed-hyperpod"` **(create-only)**' in result.stdout


def test_instance_count_change_is_an_update_in_place(tmp_path):
    head = base_template()
    head["Resources"]["Cluster"]["Properties"]["InstanceGroups"][1]["InstanceCount"] = 4
    result = review(tmp_path, base_template(), head)
    assert result.exit_code == 0
    assert resource_line(result.stdout, "Cluster").startswith("- **MODIFY**")
    assert "`InstanceGroups[1].InstanceCount`: `3` → `4`" in result.stdout
    assert "REPLACE" not in result.stdout


def test_gpu_group_instance_type_follows_the_bundled_schema(tmp_path):
    head = base_template()
    head["Resources"]["Cluster"]["Properties"]["InstanceGroups"][1]["InstanceType"] = "ml.g7e.24xlarge"
    result = review(tmp_path, base_template(), head)
    expected = "REPLACE" if "/properties/InstanceGroups/*/InstanceType" in create_only("AWS::SageMaker::Cluster") else "MODIFY"
    assert resource_line(result.stdout, "Cluster").startswith(f"- **{expected}**")
    assert "`InstanceGroups[1].InstanceType`" in result.stdout


@pytest.mark.parametrize(("field", "value", "replaced"), [("InstanceType", "ml.g7e.24xlarge", True),
                                                          ("InstanceCount", 5, False)])
def test_nested_create_only_paths_from_a_schema_override(tmp_path, field, value, replaced):
    """A schema that declares /properties/InstanceGroups/*/InstanceType create-only (as the HyperPod
    CloudFormation docs state) flags the GPU group's type change, and only that."""
    head = base_template()
    head["Resources"]["Cluster"]["Properties"]["InstanceGroups"][1][field] = value
    result = review(tmp_path, base_template(), head, "--schema-dir", str(FIXTURES / "schemas"))
    assert result.exit_code == 0, result.output
    line = resource_line(result.stdout, "Cluster")
    assert line.startswith("- **REPLACE**" if replaced else "- **MODIFY**")
    if replaced:
        assert "create-only property `InstanceGroups[1].InstanceType` changed" in result.stdout
        assert "custom name ClusterName is unchanged" in result.stdout


def test_fsx_subnet_change_replaces_and_loses_data(tmp_path):
    assert "/properties/SubnetIds" in create_only("AWS::FSx::FileSystem")
    head = base_template()
    head["Resources"]["FileSystem"]["Properties"]["SubnetIds"] = ["subnet-2"]
    result = review(tmp_path, base_template(), head, "--fail-on-stateful-replacement")
    assert result.exit_code == 1
    assert resource_line(result.stdout, "FileSystem").startswith("- **REPLACE**")
    assert "DATA LOSS: the old AWS::FSx::FileSystem is deleted with its data" in result.stdout
    assert "stateful resource(s) replaced or removed" in result.stderr
    assert f"{STACK}/FileSystem" in result.stderr


def test_fsx_capacity_change_is_not_a_replacement(tmp_path):
    assert "/properties/StorageCapacity" not in create_only("AWS::FSx::FileSystem")
    head = base_template()
    head["Resources"]["FileSystem"]["Properties"]["StorageCapacity"] = 2400
    result = review(tmp_path, base_template(), head, "--fail-on-stateful-replacement")
    assert result.exit_code == 0, result.output
    assert resource_line(result.stdout, "FileSystem").startswith("- **MODIFY**")


def test_retained_fsx_replacement_is_orphaned(tmp_path):
    base = base_template()
    base["Resources"]["FileSystem"]["UpdateReplacePolicy"] = "Retain"
    base["Resources"]["FileSystem"]["DeletionPolicy"] = "Retain"
    head = copy.deepcopy(base)
    head["Resources"]["FileSystem"]["Properties"]["SubnetIds"] = ["subnet-2"]
    result = review(tmp_path, base, head, "--fail-on-stateful-replacement")
    assert result.exit_code == 1
    assert "retained, orphaned (UpdateReplacePolicy Retain)" in result.stdout


def test_logical_id_change_is_remove_plus_add(tmp_path):
    bucket = {"Type": "AWS::S3::Bucket", "DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain",
              "Properties": {"VersioningConfiguration": {"Status": "Enabled"}}}
    base, head = base_template(), base_template()
    base["Resources"]["ArtifactsBucket"] = bucket
    head["Resources"]["ArtifactsBucketRenamed"] = bucket
    result = review(tmp_path, base, head, "--fail-on-stateful-replacement")
    assert result.exit_code == 1
    assert resource_line(result.stdout, "ArtifactsBucket").startswith("- **REMOVE**")
    assert resource_line(result.stdout, "ArtifactsBucketRenamed").startswith("- **ADD**")
    assert "retained, orphaned (DeletionPolicy Retain)" in result.stdout
    assert "under a new logical id" in result.stdout


def test_replacing_a_referenced_subnet_replaces_the_file_system(tmp_path):
    subnet = {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": "vpc-1", "CidrBlock": "10.192.128.0/18"}}
    base = base_template()
    base["Resources"]["Subnet"] = subnet
    base["Resources"]["FileSystem"]["Properties"]["SubnetIds"] = [{"Ref": "Subnet"}]
    head = copy.deepcopy(base)
    head["Resources"]["Subnet"]["Properties"]["CidrBlock"] = "10.192.64.0/18"
    result = review(tmp_path, base, head)
    assert resource_line(result.stdout, "Subnet").startswith("- **REPLACE**")
    assert resource_line(result.stdout, "FileSystem").startswith("- **REPLACE**")
    assert "references Subnet, which is replaced" in result.stdout


def test_removed_output_and_added_stack_are_listed(tmp_path):
    head = base_template()
    del head["Outputs"]["HyperPodClusterName"]
    base_dir = write_assembly(tmp_path / "base", {STACK: base_template()})
    head_dir = write_assembly(tmp_path / "head", {STACK: head, "skyrl-hp-new": {"Resources": {
        "Repo": {"Type": "AWS::ECR::Repository", "Properties": {"RepositoryName": "skyrl-hp/x"}}}}})
    result = CliRunner().invoke(cli, ["review", str(base_dir), str(head_dir)])
    assert result.exit_code == 0, result.output
    assert "- Outputs removed: `HyperPodClusterName`" in result.stdout
    assert "### Stack `skyrl-hp-new` (added)" in result.stdout
    assert resource_line(result.stdout, "Repo").startswith("- **ADD**")


def test_kubernetes_manifests_are_compared_by_kind_namespace_and_name(tmp_path):
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ml"},
                  "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "repo:1"}]}}}}
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "ml"}}
    for side, image, objects in (("base", "repo:1", [deployment]), ("head", "repo:2", [deployment, config_map])):
        root = tmp_path / side
        write_assembly(root / "cdk.out", {STACK: base_template()})
        (root / "dist").mkdir()
        docs = copy.deepcopy(objects)
        docs[0]["spec"]["template"]["spec"]["containers"][0]["image"] = image
        (root / "dist" / "app.k8s.yaml").write_text(yaml.safe_dump_all(docs))
    result = CliRunner().invoke(cli, ["review", str(tmp_path / "base"), str(tmp_path / "head")])
    assert result.exit_code == 0, result.output
    assert "- **MODIFY** `Deployment ml/web`" in result.stdout
    assert '`spec.template.spec.containers[0].image`: `"repo:1"` → `"repo:2"`' in result.stdout
    assert "- **ADD** `ConfigMap ml/settings`" in result.stdout


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        ("missing-dir", "is not a directory"),
        ("bad-json", "is not valid JSON"),
        ("no-artifacts", "has no 'artifacts' mapping"),
        ("missing-template", "does not exist"),
        ("bad-yaml", "is not valid YAML"),
    ],
)
def test_malformed_input_is_one_line(tmp_path, breakage, message):
    good = write_assembly(tmp_path / "good", {STACK: base_template()})
    bad = tmp_path / "bad"
    if breakage != "missing-dir":
        write_assembly(bad, {STACK: base_template()})
    if breakage == "bad-json":
        (bad / "manifest.json").write_text("{not json")
    elif breakage == "no-artifacts":
        (bad / "manifest.json").write_text(json.dumps({"version": "48.0.0"}))
    elif breakage == "missing-template":
        (bad / f"{STACK}.template.json").unlink()
    elif breakage == "bad-yaml":
        (bad / "dist").mkdir()
        (bad / "dist" / "app.k8s.yaml").write_text("kind: [unclosed")
    result = CliRunner().invoke(cli, ["review", str(good), str(bad)])
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("review error:")
    assert "Traceback" not in result.output


def test_the_real_app_against_itself_has_no_changes(platform_assembly):
    directory = platform_assembly.directory
    result = CliRunner().invoke(cli, ["review", directory, directory, "--fail-on-stateful-replacement"])
    assert result.exit_code == 0, result.output
    assert "No changes" in result.stdout
