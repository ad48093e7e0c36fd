"""`skyrl-hp review BASE HEAD`: offline diff of cloud assemblies and cdk8s manifests as PR-comment Markdown.

Two kinds of input: small hand-written assemblies (manifest.json + templates) for the mechanics, and pairs of
real synthesized platforms (the default and a one-change variant, each synthesized once per session) for each
class of change a reviewer must not miss. Expectations about create-only properties are read from the same
schemas the review reads.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.cli.common import EXIT_STATEFUL_CHANGE
from skyrl_hyperpod.ops.review import DEFAULT_SCHEMA_REGION, ReplacementFacts

pytestmark = pytest.mark.long_running

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cli"
STACK = "skyrl-hp-test"


def create_only(resource_type: str) -> list[str]:
    # Imported here: importing cfn-lint's schema package is slow, and every xdist worker would pay for it
    # at collection (only the one running this module needs it).
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    return PROVIDER_SCHEMA_MANAGER.get_resource_schema(DEFAULT_SCHEMA_REGION, resource_type).schema.get(
        "createOnlyProperties", []
    )


def hyperpod_cluster() -> dict:
    group = {
        "ExecutionRole": {"Fn::GetAtt": ["Role", "Arn"]},
        "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-x/", "OnCreate": "on_create.sh"},
        "ThreadsPerCore": 1,
    }
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
    # Replacing the HyperPod cluster replaces every node (jobs, node-local storage): the gate stops it.
    assert result.exit_code == EXIT_STATEFUL_CHANGE, result.output
    assert resource_line(result.stdout, "Cluster").startswith("- **REPLACE**")
    assert "create-only property `ClusterName` changed (resource schema)" in result.stdout
    assert '`ClusterName`: `"skyrl-hp-hyperpod"` → `"renamed-hyperpod"` **(replacement)**' in result.stdout
    assert f"{STACK}/Cluster" in result.stderr


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
    expected = (
        "REPLACE" if "/properties/InstanceGroups/*/InstanceType" in create_only("AWS::SageMaker::Cluster") else "MODIFY"
    )
    assert resource_line(result.stdout, "Cluster").startswith(f"- **{expected}**")
    assert "`InstanceGroups[1].InstanceType`" in result.stdout


@pytest.mark.parametrize(
    ("field", "value", "replaced"), [("InstanceType", "ml.g7e.24xlarge", True), ("InstanceCount", 5, False)]
)
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
    assert result.exit_code == EXIT_STATEFUL_CHANGE
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
    assert result.exit_code == EXIT_STATEFUL_CHANGE
    assert "retained, orphaned (UpdateReplacePolicy Retain)" in result.stdout


def test_logical_id_change_is_remove_plus_add(tmp_path):
    bucket = {
        "Type": "AWS::S3::Bucket",
        "DeletionPolicy": "Retain",
        "UpdateReplacePolicy": "Retain",
        "Properties": {"VersioningConfiguration": {"Status": "Enabled"}},
    }
    base, head = base_template(), base_template()
    base["Resources"]["ArtifactsBucket"] = bucket
    head["Resources"]["ArtifactsBucketRenamed"] = bucket
    result = review(tmp_path, base, head, "--fail-on-stateful-replacement")
    assert result.exit_code == EXIT_STATEFUL_CHANGE
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
    assert f"`SubnetIds[0]` reads `{STACK}/Subnet`, which is replaced" in result.stdout
    assert f"replaced because `{STACK}/Subnet` is replaced" in result.stdout


def test_removed_output_and_added_stack_are_listed(tmp_path):
    head = base_template()
    del head["Outputs"]["HyperPodClusterName"]
    base_dir = write_assembly(tmp_path / "base", {STACK: base_template()})
    head_dir = write_assembly(
        tmp_path / "head",
        {
            STACK: head,
            "skyrl-hp-new": {
                "Resources": {"Repo": {"Type": "AWS::ECR::Repository", "Properties": {"RepositoryName": "skyrl-hp/x"}}}
            },
        },
    )
    result = CliRunner().invoke(cli, ["review", str(base_dir), str(head_dir)])
    assert result.exit_code == 0, result.output
    assert "- Outputs removed: `HyperPodClusterName`" in result.stdout
    assert "### Stack `skyrl-hp-new` (added)" in result.stdout
    assert resource_line(result.stdout, "Repo").startswith("- **ADD**")


def test_kubernetes_manifests_are_compared_by_kind_namespace_and_name(tmp_path):
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ml"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "repo:1"}]}}},
    }
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


def test_reading_a_value_weakly_or_strongly_is_the_same_value(tmp_path):
    """Switching a cross-stack reference between Fn::GetStackOutput and Fn::ImportValue changes no resource."""
    producer = {"Resources": {"Subnet": {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": "vpc-1",
                "CidrBlock": "10.192.128.0/18"}}},
                "Outputs": {"PublishOutputRefSubnet": {"Value": {"Ref": "Subnet"}}}}  # fmt: skip
    strong_producer = copy.deepcopy(producer)
    strong_producer["Outputs"] = {
        "ExportsOutputRefSubnet": {"Value": {"Ref": "Subnet"}, "Export": {"Name": "producer:ExportsOutputRefSubnet"}}
    }
    weak_consumer, strong_consumer = base_template(), base_template()
    weak_consumer["Resources"]["FileSystem"]["Properties"]["SubnetIds"] = [
        {
            "Fn::GetStackOutput": {
                "StackName": "producer",
                "Region": {"Ref": "AWS::Region"},
                "OutputName": "PublishOutputRefSubnet",
            }
        }
    ]
    strong_consumer["Resources"]["FileSystem"]["Properties"]["SubnetIds"] = [
        {"Fn::ImportValue": "producer:ExportsOutputRefSubnet"}
    ]
    base_dir = write_assembly(tmp_path / "base", {"producer": producer, STACK: weak_consumer})
    head_dir = write_assembly(tmp_path / "head", {"producer": strong_producer, STACK: strong_consumer})
    result = CliRunner().invoke(cli, ["review", str(base_dir), str(head_dir), "--fail-on-stateful-replacement"])
    assert result.exit_code == 0, result.output
    assert "0 added, 0 removed, 0 modified in place, **0 replaced**" in result.stdout
    assert "- Outputs added: `ExportsOutputRefSubnet`" in result.stdout


# --- pairs of real synthesized platforms ------------------------------------------------------------------------


def groups(default_config, head: dict, worker: dict) -> dict:
    hyperpod = default_config.hyperpod
    return {
        "hyperpod": {
            "head_group": {**hyperpod.head_group.model_dump(mode="json"), **head},
            "worker_group": {**hyperpod.worker_group.model_dump(mode="json"), **worker},
        }
    }


def variants(default_config) -> dict[str, dict]:
    """One change each, against the default configuration."""
    return {
        "fsx-deployment-type": {"fsx": {"deployment_type": "PERSISTENT_1", "per_unit_storage_throughput": 100}},
        "hyperpod-az": {"network": {"hyperpod_az_id": "usw2-az3"}},
        "vpc-cidr": {"network": {"vpc_cidr": "10.1.0.0/16", "hyperpod_subnet_cidr": "10.1.128.0/18"}},
        # Two independent instance-group changes in one synth: the head group's type, the GPU group's count.
        "instance-groups": groups(
            default_config,
            head={"instance_type": "ml.m5.8xlarge"},
            worker={"instance_count": default_config.hyperpod.worker_group.instance_count + 1},
        ),
    }


def estimate(config):
    from skyrl_hyperpod.ops import cost

    file = cost.price_file_for(cost.DEFAULT_PRICE_REGION)
    return cost.estimate(
        config, cost.load_price_book(file), price_file=cost.display_path(file), run_hours=cost.DEFAULT_RUN_HOURS
    )


@pytest.fixture(scope="module")
def tree(platform_assembly, assembly_for, default_config, tmp_path_factory):
    """tree(name) -> a directory holding cdk.out/ (synthesized once per session) and cost.json, as CI builds it."""
    from skyrl_hyperpod.config import validate_config
    from skyrl_hyperpod.ops import cost

    root = tmp_path_factory.mktemp("trees")
    overrides = variants(default_config)

    def build(name: str) -> Path:
        directory = root / name
        if not directory.exists():
            config = default_config if name == "default" else validate_config(overrides[name])
            assembly = platform_assembly if name == "default" else assembly_for(overrides[name])
            directory.mkdir()
            (directory / "cdk.out").symlink_to(assembly.directory, target_is_directory=True)
            (directory / "cost.json").write_text(cost.render_json(estimate(config)))
        return directory

    return build


def review_pair(tree, name: str):
    return CliRunner().invoke(cli, ["review", str(tree("default")), str(tree(name)), "--fail-on-stateful-replacement"])


def risk_entry(markdown: str, resource_type: str) -> str:
    """The risk-section entry (heading line and its sub-lines) of the one resource of this type."""
    lines = markdown.split("### ⚠️ Replacements and data-loss risks", 1)[1].split("\n### ", 1)[0].splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("- **") and f"({resource_type})" in line]
    assert len(starts) == 1, (resource_type, starts)
    end = next((i for i in range(starts[0] + 1, len(lines)) if lines[i].startswith("- **")), len(lines))
    return "\n".join(lines[starts[0] : end])


def test_fsx_deployment_type_change_replaces_the_file_system(tree):
    # The resource schema alone does not know: the nested fact comes from the second sources.
    assert not any(p.startswith("/properties/LustreConfiguration") for p in create_only("AWS::FSx::FileSystem"))
    result = review_pair(tree, "fsx-deployment-type")
    assert result.exit_code == EXIT_STATEFUL_CHANGE, result.output
    entry = risk_entry(result.stdout, "AWS::FSx::FileSystem")
    assert entry.startswith("- **REPLACE**")
    assert (
        "`LustreConfiguration.DeploymentType` requires replacement (CDK service spec; UpdateFileSystem has no "
        "such field)"
    ) in entry
    # A replaced file system is retained (UpdateReplacePolicy): the old one and its data stay, beside a new empty one.
    assert "risk: retained, orphaned (UpdateReplacePolicy Retain): the old resource stays" in entry
    assert "DATA LOSS" not in entry
    assert "skyrl-hp-storage/SharedFileSystem" in result.stderr


def test_hyperpod_subnet_az_change_cascades_to_fsx_and_the_hyperpod_cluster(tree, templates):
    result = review_pair(tree, "hyperpod-az")
    assert result.exit_code == EXIT_STATEFUL_CHANGE, result.output
    network = templates["skyrl-hp-network"]["Resources"]
    [subnet] = [
        lid
        for lid, r in network.items()
        if r["Type"] == "AWS::EC2::Subnet" and r["Properties"].get("AvailabilityZoneId") == "usw2-az2"
    ]
    assert risk_entry(result.stdout, "AWS::EC2::Subnet").startswith("- **REPLACE**")
    chain = f"replaced because `skyrl-hp-network/{subnet}` is replaced"
    for consumer in ("AWS::FSx::FileSystem", "AWS::SageMaker::Cluster"):
        entry = risk_entry(result.stdout, consumer)
        assert entry.startswith("- **REPLACE**") and chain in entry, entry
        # The platform reads the subnet through an export: CloudFormation stops the network deploy.
        assert "strong reference: CloudFormation refuses to change export skyrl-hp-network:" in entry
    assert "custom name ClusterName is unchanged" in risk_entry(result.stdout, "AWS::SageMaker::Cluster")
    assert "(AWS::EKS::Cluster)" not in result.stdout.split("### Stack", 1)[0]  # the EKS cluster stays
    assert "skyrl-hp-storage/SharedFileSystem" in result.stderr and "skyrl-hp-hyperpod/HyperPodCluster" in result.stderr


def test_vpc_change_names_only_real_name_properties(tree):
    result = review_pair(tree, "vpc-cidr")
    assert result.exit_code == EXIT_STATEFUL_CHANGE, result.output
    facts = ReplacementFacts(DEFAULT_SCHEMA_REGION)
    for resource_type in ("AWS::EC2::VPCEndpoint", "AWS::EC2::FlowLog"):
        entry = risk_entry(result.stdout, resource_type)
        assert entry.startswith("- **REPLACE**") and "custom name" not in entry, entry
    section = result.stdout.split("### ⚠️ Replacements and data-loss risks", 1)[1].split("\n### ", 1)[0]
    current_type, named = None, []
    for line in section.splitlines():
        if line.startswith("- **"):
            current_type = line.rsplit("(", 1)[1].rstrip(")")
        elif "custom name " in line:
            named.append((current_type, line.split("custom name ", 1)[1].split(" ", 1)[0]))
    assert named, "a VPC replacement reaches a custom-named resource (the HyperPod cluster)"
    for resource_type, name in named:
        assert name == facts.name_property(resource_type), (resource_type, name)
    assert "skyrl-hp-storage/SharedFileSystem" in result.stderr and "skyrl-hp-hyperpod/HyperPodCluster" in result.stderr
    # EKS moves a cluster to other subnets and security groups in place (UpdateClusterConfig) and its resource
    # schema no longer lists them create-only; the CDK spec still says replacement: flagged, not asserted.
    eks = risk_entry(result.stdout, "AWS::EKS::Cluster")
    assert eks.startswith("- **MAY REPLACE**") and "UpdateClusterConfig accepts it (sources disagree)" in eks, eks


def test_instance_type_change_warns_and_instance_count_change_passes(tree, default_config):
    result = review_pair(tree, "instance-groups")
    assert result.exit_code == 0, result.output
    assert "**0 replaced**" in result.stdout
    head, worker = default_config.hyperpod.head_group, default_config.hyperpod.worker_group
    disruptions = result.stdout.split("### ⚠️ Disruptive updates", 1)[1].split("\n### ", 1)[0]
    # The type change replaces every node of its group: flagged with the group and its node count.
    assert f"HyperPod group `{head.name}` ({head.instance_count} node(s))" in disruptions
    assert f'InstanceType "{head.instance_type}" → "ml.m5.8xlarge": every node of the group is replaced' in disruptions
    # The count change adds a node and disrupts nothing.
    assert f"`{worker.name}`" not in disruptions
    assert (
        f"`InstanceGroups[1].InstanceCount`: `{worker.instance_count}` → `{worker.instance_count + 1}`" in result.stdout
    )
    before = json.loads((tree("default") / "cost.json").read_text())["totals"]
    after = json.loads((tree("instance-groups") / "cost.json").read_text())["totals"]
    change = after["monthly"] - before["monthly"]
    sign = "+" if change > 0 else "-"
    assert (
        f"| per month | ${before['monthly']:,.2f} | ${after['monthly']:,.2f} | {sign}${abs(change):,.2f} |"
        in result.stdout
    )


SCRIPT = Path(__file__).resolve().parents[2] / ".github" / "scripts" / "pr-review.sh"


def test_ci_script_fails_a_stateful_replacement_with_the_review_as_comment(tree, tmp_path):
    comment = tmp_path / "comment.md"
    env = {**os.environ, "PYTHON": sys.executable, "ALLOW_STATEFUL_REPLACEMENT": "false"}
    run = subprocess.run(
        ["bash", str(SCRIPT), str(tree("default")), str(tree("hyperpod-az")), str(comment)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    body = comment.read_text()
    assert run.returncode == EXIT_STATEFUL_CHANGE, run.stderr
    assert body.startswith("<!-- skyrl-hp-review -->\n## Infrastructure review:")
    assert "### Cost" in body and "replaced because `skyrl-hp-network/" in body
    assert "❌ **Gate failed**: review: 2 stateful resource(s) replaced or removed" in body
    # The line a maintainer comments to accept exactly these resources at this commit.
    [key] = re.findall(r"\(acceptance key ([0-9a-f]{16})\)$", run.stderr.strip())
    assert f"```text\nallow-stateful-replacement HEAD_SHA {key}\n```" in body


def test_the_acceptance_key_names_the_set_of_stateful_resources(tree):
    keys = {}
    for variant in ("hyperpod-az", "fsx-deployment-type"):
        result = review_pair(tree, variant)
        assert result.exit_code == EXIT_STATEFUL_CHANGE, result.output
        [keys[variant]] = re.findall(r"\(acceptance key ([0-9a-f]{16})\)$", result.stderr.strip())
        again = review_pair(tree, variant)
        assert again.stderr == result.stderr  # the same resources, the same key
    assert keys["hyperpod-az"] != keys["fsx-deployment-type"]


SCRIPT_KEY = "0123456789abcdef"
SCRIPT_SHA = "c0ffee" + "0" * 34


@pytest.mark.parametrize(("review_exit", "label", "accepted", "script_exit", "verdict"), [
    (0, "false", "", 0, "✅ **Gate passed**"),
    # Accepted: the label and a maintainer's comment naming this head and this set of resources (pr-resolve.py).
    (3, "true", f"ffffffffffffffff {SCRIPT_KEY}", 0,
     f"⚠️ **Gate overridden**: a maintainer accepted exactly these resources at this head commit (the "
     f"`allow-stateful-replacement` label and a comment naming commit {SCRIPT_SHA} and key {SCRIPT_KEY})"),
    # The label without an acceptance of this set, or an acceptance of another set: not accepted.
    (3, "true", "", 3, "The `allow-stateful-replacement` label is set, but no maintainer's comment accepts"),
    (3, "true", "ffffffffffffffff", 3, "❌ **Gate failed**: review: message"),
    (3, "false", SCRIPT_KEY, 3, f"```text\nallow-stateful-replacement {SCRIPT_SHA} {SCRIPT_KEY}\n```"),
    # A crash exits 1 like a Python traceback: never turned into a pass, whatever was accepted.
    (1, "true", SCRIPT_KEY, 1, "❌ **The review could not run**: it crashed (exit 1)"),
    (137, "true", SCRIPT_KEY, 137, "❌ **The review could not run**: it crashed (exit 137)"),
    (2, "true", SCRIPT_KEY, 2, "❌ **The review could not run**: it refused its input"),
])  # fmt: skip
def test_ci_script_verdicts(tmp_path, review_exit, label, accepted, script_exit, verdict):
    """The script's own logic, with a stand-in for the review command (exit code and messages)."""
    fake = tmp_path / "fake-python"
    fake.write_text(
        "#!/usr/bin/env bash\n"
        'out=""; while [ $# -gt 0 ]; do [ "$1" = --output ] && out=$2; shift; done\n'
        f'echo "## review" > "$out"; echo "review: message (acceptance key {SCRIPT_KEY})" >&2; exit {review_exit}\n'
    )
    fake.chmod(0o755)
    comment = tmp_path / "comment.md"
    env = {**os.environ, "PYTHON": str(fake), "ALLOW_STATEFUL_REPLACEMENT": label,
           "ACCEPTED_STATEFUL_KEYS": accepted, "HEAD_SHA": SCRIPT_SHA}  # fmt: skip
    run = subprocess.run(["bash", str(SCRIPT), "base", "head", str(comment)], env=env, capture_output=True, text=True)
    assert run.returncode == script_exit, run.stderr
    assert verdict in comment.read_text()
    assert ("## review" in comment.read_text()) == (review_exit in (0, 3))


def test_eks_cluster_rename_fails_the_gate(tmp_path):
    assert "/properties/Name" in create_only("AWS::EKS::Cluster")
    cluster = {"Type": "AWS::EKS::Cluster", "Properties": {"Name": "skyrl-hp-eks", "RoleArn": "arn:aws:iam::111111111111:role/eks",
               "ResourcesVpcConfig": {"SubnetIds": ["subnet-1", "subnet-2"]}}}  # fmt: skip
    base, head = base_template(), base_template()
    base["Resources"]["EksCluster"] = cluster
    head["Resources"]["EksCluster"] = copy.deepcopy(cluster)
    head["Resources"]["EksCluster"]["Properties"]["Name"] = "skyrl-hp-eks-2"
    result = review(tmp_path, base, head, "--fail-on-stateful-replacement")
    assert result.exit_code == EXIT_STATEFUL_CHANGE, result.output
    assert "DATA LOSS: the old AWS::EKS::Cluster is deleted with the Kubernetes control plane" in result.stdout
    assert f"{STACK}/EksCluster" in result.stderr


# --- one side, one configuration -------------------------------------------------------------------------------


def side(directory: Path, *, assembly_config, dist_config, cost_config) -> Path:
    """A review side as `make synth` and `skyrl-hp cost --json > cost.json` leave it, each part from its own
    configuration: cdk.out carrying the ConfigFingerprint output (as app.py adds it), dist/ stamped, cost.json."""
    from deployed_cluster import write_dist

    from skyrl_hyperpod.ops import cost
    from skyrl_hyperpod.values.synthesized_manifests import config_fingerprint

    template = base_template()
    template["Outputs"]["ConfigFingerprint"] = {"Value": config_fingerprint(assembly_config)}
    write_assembly(directory / "cdk.out", {STACK: template})
    write_dist(directory / "dist", dist_config)
    (directory / "cost.json").write_text(cost.render_json(estimate(cost_config)))
    return directory


def test_a_side_whose_parts_come_from_different_configurations_is_refused_naming_them(tmp_path, default_config):
    from skyrl_hyperpod.config import validate_config
    from skyrl_hyperpod.values.synthesized_manifests import config_fingerprint

    other = validate_config({"hyperpod": {"worker_group": {"instance_count": 4}}})
    base = side(
        tmp_path / "base", assembly_config=default_config, dist_config=default_config, cost_config=default_config
    )
    mixed = side(tmp_path / "head", assembly_config=other, dist_config=default_config, cost_config=other)
    result = CliRunner().invoke(cli, ["review", str(base), str(mixed)])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(
        f"review error: {mixed} mixes configurations (cdk.out, cost.json from fingerprint {config_fingerprint(other)}; "
        "dist/01-platform.k8s.yaml, "
    )
    assert f".k8s.yaml from fingerprint {config_fingerprint(default_config)}): make every part" in line
    assert result.stdout == ""


def test_a_side_from_one_configuration_is_reviewed(tmp_path, default_config):
    from skyrl_hyperpod.config import validate_config

    other = validate_config({"hyperpod": {"worker_group": {"instance_count": 4}}})
    base = side(
        tmp_path / "base", assembly_config=default_config, dist_config=default_config, cost_config=default_config
    )
    head = side(tmp_path / "head", assembly_config=other, dist_config=other, cost_config=other)
    result = CliRunner().invoke(cli, ["review", str(base), str(head)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("where", ["manifest", "additional-metadata-file"])
def test_the_assembly_of_a_failed_synth_is_refused(tmp_path, where):
    good = write_assembly(tmp_path / "good", {STACK: base_template()})
    failed = write_assembly(tmp_path / "failed", {STACK: base_template()})
    manifest = json.loads((failed / "manifest.json").read_text())
    entries = {f"/{STACK}/Bucket/Resource": [{"type": "aws:cdk:error", "data": "AwsSolutions-S1: no access logs"}]}
    if where == "manifest":
        manifest["artifacts"][STACK]["metadata"] = entries
    else:
        (failed / f"{STACK}.metadata.json").write_text(json.dumps(entries))
        manifest["artifacts"][STACK]["additionalMetadataFile"] = f"{STACK}.metadata.json"
    (failed / "manifest.json").write_text(json.dumps(manifest))
    result = CliRunner().invoke(cli, ["review", str(good), str(failed)])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        f"review error: {failed} is the cloud assembly of a synth that failed (/{STACK}/Bucket/Resource: "
        "AwsSolutions-S1: no access logs): fix the error and synthesize again (make synth)"
    )


def test_setting_env_account_keeps_a_name_that_resolves_the_same(tmp_path):
    """Without env.account the lifecycle bucket's name and the CDK asset bucket a Lambda layer is read from are built
    from CloudFormation's pseudo parameters; with it they are written out. Same value: no change, no replacement."""

    def template(account: str | None, prefix: str) -> dict:
        bucket_name: object = f"sagemaker-{prefix}-lifecycle-{account}-us-west-2"
        asset_bucket: object = f"cdk-assets-{account}-us-west-2"
        if account is None:
            bucket_name = {"Fn::Join": ["", [f"sagemaker-{prefix}-lifecycle-", {"Ref": "AWS::AccountId"}, "-",
                                             {"Ref": "AWS::Region"}]]}  # fmt: skip
            asset_bucket = {"Fn::Sub": "cdk-assets-${AWS::AccountId}-${AWS::Region}"}
        return {
            "Resources": {
                "Bucket": {
                    "Type": "AWS::S3::Bucket",
                    "Properties": {"BucketName": bucket_name},
                    "DeletionPolicy": "Retain",
                },
                "Layer": {
                    "Type": "AWS::Lambda::LayerVersion",
                    "Properties": {"Content": {"S3Bucket": asset_bucket, "S3Key": "abc.zip"}},
                },
            }  # fmt: skip
        }

    def side(name: str, account: str | None, prefix: str = "skyrl-hp") -> Path:
        directory = write_assembly(tmp_path / name, {STACK: template(account, prefix)})
        manifest = json.loads((directory / "manifest.json").read_text())
        environment = f"aws://{account}/us-west-2" if account else "aws://unknown-account/unknown-region"
        manifest["artifacts"][STACK]["environment"] = environment
        (directory / "manifest.json").write_text(json.dumps(manifest))
        return directory

    base, head = side("base", None), side("head", "111111111111")
    result = CliRunner().invoke(cli, ["review", str(base), str(head), "--fail-on-stateful-replacement"])
    assert result.exit_code == 0, result.output
    assert "No changes" in result.stdout
    # Another name stays a replacement with the account written out.
    other = side("other", "111111111111", prefix="team-a")
    result = CliRunner().invoke(cli, ["review", str(base), str(other), "--fail-on-stateful-replacement"])
    assert result.exit_code == EXIT_STATEFUL_CHANGE, result.output


def test_the_review_gate_example_is_a_real_run(tmp_path, default_config):
    """docs/review-gate.md's example output is what `cdk synth` (the real app, construct paths included) of the two
    configurations and `skyrl-hp review` print today."""
    from skyrl_hyperpod.ops import cost

    root = Path(__file__).parents[2]
    worker = default_config.hyperpod.worker_group.model_dump(mode="json")
    head_config = tmp_path / "head.yaml"
    head_config.write_text(
        yaml.safe_dump(
            {
                "network": {"hyperpod_az_id": "usw2-az3"},
                "hyperpod": {"worker_group": {**worker, "instance_count": worker["instance_count"] + 1}},
            }
        )
    )
    env = {**os.environ, "PATH": f"{root / '.venv' / 'bin'}:{root / 'node_modules' / '.bin'}:{os.environ['PATH']}",
           "CDK_DISABLE_CLI_TELEMETRY": "true"}  # fmt: skip
    env.pop("SKYRL_HP_CONFIG", None)
    for side, config_file in (("base", None), ("head", head_config)):
        side_env = {**env, **({"SKYRL_HP_CONFIG": str(config_file)} if config_file else {})}
        done = subprocess.run(
            ["cdk", "synth", "--quiet", "--no-notices", "-o", str(tmp_path / side / "cdk.out")],
            cwd=root, env=side_env, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        from skyrl_hyperpod.config import load_config

        priced = estimate(load_config(config_file))
        (tmp_path / side / "cost.json").write_text(cost.render_json(priced))
    text = (root / "docs" / "review-gate.md").read_text()
    example = text.split("$ skyrl-hp review base head --fail-on-stateful-replacement\n", 1)[1].split("\n```", 1)[0]
    shown, tail = example.split("\n…\n", 1)
    result = CliRunner().invoke(
        cli, ["review", str(tmp_path / "base"), str(tmp_path / "head"), "--fail-on-stateful-replacement"]
    )
    assert result.exit_code == EXIT_STATEFUL_CHANGE, result.output
    output = result.stdout.replace(str(tmp_path / "base"), "base").replace(str(tmp_path / "head"), "head")
    assert output.startswith(shown + "\n")
    assert tail == f"(stderr) {result.stderr.strip().splitlines()[-1]}\n$ echo $?\n{EXIT_STATEFUL_CHANGE}"
