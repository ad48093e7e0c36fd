"""ImageBuildStack: the CodeBuild project that builds docker/ and pushes the configured tag.

Synthesized once in a small app (a registry stack with its own repository + the image build
stack, cdk-nag on) so these tests do not depend on the registry stack's implementation.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ecr as ecr
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks
from conftest import cdk_json_context, cfn_lint_errors

from skyrl_hyperpod.config import validate_config
from skyrl_hyperpod.config.images import image_input_files
from skyrl_hyperpod.plumbing.locations import DOCKER_DIR
from skyrl_hyperpod.values.stack_outputs import OutputKey
from stacks.components.image_build import TrainingImageBuild, build_script
from stacks.image_build_stack import ImageBuildStack

STACK = "skyrl-hp-image-build"


@pytest.fixture(scope="module")
def assembly(default_config):
    # Asset staging stays on here (unlike the platform fixture): the build context is a few KB and
    # the test checks exactly what would be uploaded.
    app = cdk.App(outdir=tempfile.mkdtemp(prefix="cdk.out.image."), context=cdk_json_context())
    env = cdk.Environment(account="111111111111", region="us-west-2")
    registry = cdk.Stack(app, "skyrl-hp-registry-test", env=env)
    repository = ecr.Repository(registry, "Repository", repository_name=default_config.names.ecr_repository)
    repository.apply_cross_stack_reference_strength(cdk.ReferenceStrength.STRONG)  # as the registry stack does
    ImageBuildStack(app, STACK, env=env, config=default_config, repository=repository)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return app.synth()  # raises ValidationFailed on any unacknowledged cdk-nag finding


@pytest.fixture(scope="module")
def template_json(assembly) -> dict:
    return assembly.get_stack_by_name(STACK).template


@pytest.fixture(scope="module")
def template(template_json) -> Template:
    return Template.from_json(template_json)


def project_properties(template_json) -> dict:
    [project] = [r["Properties"] for r in template_json["Resources"].values() if r["Type"] == "AWS::CodeBuild::Project"]
    return project


def test_project_builds_privileged_on_the_configured_compute(template_json, default_config):
    environment = project_properties(template_json)["Environment"]
    assert environment["PrivilegedMode"] is True  # the Docker daemon needs it
    assert environment["Type"] == "LINUX_CONTAINER"
    assert (
        environment["ComputeType"]
        == f"BUILD_GENERAL1_{default_config.training_image.build_compute_type.replace('_', '')}"
    )
    assert project_properties(template_json)["TimeoutInMinutes"] == default_config.training_image.build_timeout_minutes


def test_only_the_build_project_is_privileged(template_json):
    privileged = [
        name
        for name, resource in template_json["Resources"].items()
        if resource["Type"] == "AWS::CodeBuild::Project" and resource["Properties"]["Environment"].get("PrivilegedMode")
    ]
    assert len(privileged) == 1


def test_project_pushes_the_configured_tag_with_the_configured_build_args(template_json, default_config):
    image = default_config.training_image
    variables = {
        v["Name"]: v["Value"] for v in project_properties(template_json)["Environment"]["EnvironmentVariables"]
    }
    assert variables["IMAGE_TAG"] == image.tag
    assert {"REPOSITORY_URI", "REPOSITORY_NAME"} <= set(variables)
    [script] = json.loads(project_properties(template_json)["Source"]["BuildSpec"])["phases"]["build"]["commands"]
    assert script == build_script(image)  # whose behaviour the tests below run
    for name, value in image.build_args.items():
        if name != "BASE_IMAGE_DIGEST":
            assert f"--build-arg {name}={value}" in script
    assert '--build-arg BASE_IMAGE_DIGEST="$BASE_IMAGE_DIGEST"' in script
    assert '--tag "$IMAGE_URI"' in script and 'docker push "$IMAGE_URI"' in script
    assert 'IMAGE_URI="$REPOSITORY_URI:$IMAGE_TAG"' in script


def test_source_asset_is_exactly_the_build_context(assembly, template_json):
    location = project_properties(template_json)["Source"]["Location"]
    object_key = location.split("/", 1)[1]
    staged = Path(assembly.directory) / f"asset.{object_key.removesuffix('.zip')}"
    files = sorted(p.relative_to(staged).as_posix() for p in staged.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(DOCKER_DIR).as_posix() for p in image_input_files())
    assert "train_job.py" not in files


def test_role_is_scoped_to_the_one_repository(template_json):
    [policy] = [r["Properties"] for r in template_json["Resources"].values() if r["Type"] == "AWS::IAM::Policy"]
    statements = policy["PolicyDocument"]["Statement"]
    ecr_statements = [s for s in statements if any(a.startswith("ecr:") for a in _actions(s))]
    for statement in ecr_statements:
        if _actions(statement) == ["ecr:GetAuthorizationToken"]:
            assert statement["Resource"] == "*"  # the only action without resource-level permissions
        else:
            assert "ecr:PutImage" in _actions(statement)
            assert "Repository" in json.dumps(statement["Resource"])  # the registry stack's repository ARN
            assert "*" not in json.dumps(statement["Resource"])
    wildcard = [s for s in statements if s["Resource"] == "*"]
    assert [_actions(s) for s in wildcard] == [["ecr:GetAuthorizationToken"]]
    assert all("*" not in action for s in statements for action in _actions(s))


def test_role_trusts_only_codebuild(template):
    template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": [Match.object_like({"Principal": {"Service": "codebuild.amazonaws.com"}})]
            },
            "ManagedPolicyArns": Match.absent(),
        },
    )


def test_logs_go_to_a_retained_log_group(template, template_json, default_config):
    template.has_resource(
        "AWS::Logs::LogGroup",
        {
            "Properties": {"RetentionInDays": default_config.training_image.build_log_retention_days},
            "DeletionPolicy": "Retain",
        },
    )
    logs_config = project_properties(template_json)["LogsConfig"]["CloudWatchLogs"]
    assert logs_config["Status"] == "ENABLED" and "Ref" in logs_config["GroupName"]


@pytest.mark.parametrize("days", [1, 3653])
def test_log_retention_is_the_configured_number_of_days(days):
    config = validate_config({"training_image": {"build_log_retention_days": days}})
    app = cdk.App(context={**cdk_json_context(), "aws:cdk:disable-asset-staging": True})
    stack = cdk.Stack(app, "retention", env=cdk.Environment(account="111111111111", region="us-west-2"))
    repository = ecr.Repository.from_repository_name(stack, "Repository", config.names.ecr_repository)
    TrainingImageBuild(stack, "Build", image=config.training_image, repository=repository)
    Template.from_stack(stack).has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": days})


def test_artifacts_use_a_rotating_kms_key(template, template_json):
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    assert "Fn::GetAtt" in project_properties(template_json)["EncryptionKey"]


def test_outputs_name_the_project_the_log_group_and_the_image(template, template_json, default_config):
    outputs = template_json["Outputs"]
    for output, resource_type in (
        (OutputKey.IMAGE_BUILD_PROJECT_NAME.value, "AWS::CodeBuild::Project"),
        (OutputKey.IMAGE_BUILD_LOG_GROUP_NAME.value, "AWS::Logs::LogGroup"),
    ):
        [logical_id] = template.find_resources(resource_type)
        template.has_output(output, {"Value": {"Ref": logical_id}})
    assert json.dumps(outputs[OutputKey.TRAINING_IMAGE_URI.value]["Value"]).endswith(
        f':{default_config.training_image.tag}"]]}}'
    )


def test_cfn_lint_reports_no_errors(template_json):
    assert cfn_lint_errors(template_json) == []


def _actions(statement: dict) -> list[str]:
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else list(actions)


def test_build_context_is_published_as_a_zip(assembly):
    # CodeBuild unpacks zip sources; the CDK CLI zips the staged directory when it publishes.
    manifest = json.loads((Path(assembly.directory) / f"{STACK}.assets.json").read_text())
    packaging = {
        f["source"]["packaging"] for f in manifest["files"].values() if f["source"]["path"].startswith("asset.")
    }
    assert packaging == {"zip"}


RESOLVED_DIGEST = "sha256:" + "0123456789abcdef" * 4


def run_build_script(tmp_path: Path, image, *, tag_exists: bool, registry_answers: bool = True):
    """Run the CodeBuild script in bash with recording stand-ins for the aws and docker CLIs;
    `docker buildx imagetools inspect` answers RESOLVED_DIGEST, or fails when the registry does not answer."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "calls"
    record.touch()
    missing = "" if tag_exists else '[ "$2" = describe-images ] && exit 254\n'
    resolve = f"echo {RESOLVED_DIGEST}" if registry_answers else "exit 1"
    stubs = {
        "aws": missing,
        "docker": f'if [ "$1 $2 $3" = "buildx imagetools inspect" ]; then {resolve}; fi\n',
    }
    for tool, behaviour in stubs.items():
        stub = bin_dir / tool
        stub.write_text(f'#!/bin/bash\nprintf "%s\\n" "{tool} $*" >> {record}\n{behaviour}exit 0\n')
        stub.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "REPOSITORY_URI": "111111111111.dkr.ecr.us-west-2.amazonaws.com/skyrl-hp/skyrl-train",
        "REPOSITORY_NAME": "skyrl-hp/skyrl-train",
        "IMAGE_TAG": image.tag,
        "AWS_REGION": "us-west-2",
    }
    result = subprocess.run(["bash", "-c", build_script(image)], env=env, capture_output=True, text=True)
    return result, record.read_text().splitlines(), f"{env['REPOSITORY_URI']}:{env['IMAGE_TAG']}"


@pytest.mark.parametrize("tag_exists", [True, False])
def test_build_script_builds_and_pushes_only_a_missing_tag(tmp_path, default_config, tag_exists):
    result, calls, image_uri = run_build_script(tmp_path, default_config.training_image, tag_exists=tag_exists)
    if tag_exists:
        assert result.returncode == 0
        assert [c.split()[:3] for c in calls] == [["aws", "ecr", "describe-images"]]
        assert "already exists" in result.stdout
    else:
        assert result.returncode == 0, result.stderr
        assert any(c.startswith("docker login") and "111111111111.dkr.ecr.us-west-2.amazonaws.com" in c for c in calls)
        [build] = [c for c in calls if c.startswith("docker build ")]
        assert build.endswith(f"--tag {image_uri} .")
        assert calls[-1] == f"docker push {image_uri}"


def test_build_script_builds_from_the_digest_it_resolves_and_prints_it(tmp_path, default_config):
    image = default_config.training_image
    assert not image.base_image_pinned  # the default base is resolved at build time (docker/README.md)
    result, calls, _ = run_build_script(tmp_path, image, tag_exists=False)
    assert result.returncode == 0, result.stderr
    resolve = f"docker buildx imagetools inspect --format {{{{.Manifest.Digest}}}} {image.base_image}"
    [build] = [c.split() for c in calls if c.startswith("docker build ")]
    assert calls.index(resolve) < calls.index(" ".join(build))
    assert f"BASE_IMAGE_DIGEST={RESOLVED_DIGEST}" in build and f"BASE_IMAGE={image.base_image}" in build
    [notice] = [line for line in result.stdout.splitlines() if line.startswith("notice:")]
    assert f"training_image.base_image_digest: {RESOLVED_DIGEST}" in notice


def test_build_script_stops_when_the_base_digest_cannot_be_resolved(tmp_path, default_config):
    image = default_config.training_image
    result, calls, _ = run_build_script(tmp_path, image, tag_exists=False, registry_answers=False)
    assert result.returncode != 0
    assert not any(c.startswith(("docker build ", "docker push")) for c in calls)  # never builds a moving base
    assert f"could not resolve the digest of {image.base_image}" in result.stderr


def test_build_script_uses_a_pinned_digest_as_is(tmp_path):
    pinned = validate_config({"training_image": {"base_image_digest": RESOLVED_DIGEST}}).training_image
    result, calls, _ = run_build_script(tmp_path, pinned, tag_exists=False, registry_answers=False)
    assert result.returncode == 0, result.stderr
    assert not any("imagetools" in c for c in calls) and "notice:" not in result.stdout
    [build] = [c.split() for c in calls if c.startswith("docker build ")]
    assert f"BASE_IMAGE_DIGEST={RESOLVED_DIGEST}" in build


def test_build_script_passes_shellcheck(default_config):
    result = subprocess.run(
        ["shellcheck", "--shell=bash", "-"],
        input=build_script(default_config.training_image),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout
