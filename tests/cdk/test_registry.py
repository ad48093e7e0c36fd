"""Registry stack: the ECR repository of the training image."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from aws_cdk.assertions import Template
from conftest import VARIANT_NAMED_BUCKET

from skyrl_hyperpod.config import ProjectConfig, validate_config
from skyrl_hyperpod.values.stack_outputs import OutputKey
from stacks.components.registry import MAX_IMAGES, UNTAGGED_IMAGE_RETENTION


def registry_template(templates: dict, config: ProjectConfig) -> Template:
    return Template.from_json(templates[config.names.stack("registry")])


@pytest.fixture(scope="module")
def registry(templates, default_config) -> Template:
    return registry_template(templates, default_config)


def the_repository(template: Template) -> tuple[str, Mapping[str, Any]]:
    found = template.find_resources("AWS::ECR::Repository")
    assert len(found) == 1
    return next(iter(found.items()))


def test_repository_is_named_from_the_config(registry, default_config):
    _, repository = the_repository(registry)
    assert repository["Properties"]["RepositoryName"] == default_config.names.ecr_repository


def test_images_are_scanned_on_push_and_tags_are_immutable(registry):
    _, repository = the_repository(registry)
    props = repository["Properties"]
    assert props["ImageScanningConfiguration"] == {"ScanOnPush": True}
    assert props["ImageTagMutability"] == "IMMUTABLE"


def test_repository_is_retained_with_its_images(registry):
    _, repository = the_repository(registry)
    assert repository["DeletionPolicy"] == repository["UpdateReplacePolicy"] == "Retain"
    assert repository["Properties"].get("EmptyOnDelete") is not True


def test_repository_uses_aes256_not_a_customer_key(registry):
    # Absent = ECR's default AES256; a KMS key would need kms:Decrypt on the HyperPod instance role.
    _, repository = the_repository(registry)
    encryption = repository["Properties"].get("EncryptionConfiguration", {"EncryptionType": "AES256"})
    assert encryption["EncryptionType"] == "AES256"


def test_lifecycle_policy_expires_untagged_images_and_caps_the_history(registry):
    _, repository = the_repository(registry)
    rules = json.loads(repository["Properties"]["LifecyclePolicy"]["LifecyclePolicyText"])["rules"]
    by_status = {rule["selection"]["tagStatus"]: rule for rule in rules}
    assert set(by_status) == {"tagged", "untagged", "any"}
    untagged = by_status["untagged"]["selection"]
    assert (untagged["countType"], untagged["countUnit"]) == ("sinceImagePushed", "days")
    assert untagged["countNumber"] == UNTAGGED_IMAGE_RETENTION.to_days()
    capped = by_status["any"]["selection"]
    assert (capped["countType"], capped["countNumber"]) == ("imageCountMoreThan", MAX_IMAGES)
    # ECR requires the tagStatus=any rule to have the lowest precedence (highest priority number).
    assert by_status["any"]["rulePriority"] == max(rule["rulePriority"] for rule in rules)
    assert all(rule["action"] == {"type": "expire"} for rule in rules)


def test_the_tag_the_manifests_run_can_never_expire(registry, default_config):
    """ECR applies each image's first matching rule only: the first rule selects exactly the running tag and
    expires only beyond one image of it, which an immutable tag never has."""
    _, repository = the_repository(registry)
    rules = sorted(
        json.loads(repository["Properties"]["LifecyclePolicy"]["LifecyclePolicyText"])["rules"],
        key=lambda rule: rule["rulePriority"],
    )
    first = rules[0]["selection"]
    assert first == {
        "tagStatus": "tagged", "tagPatternList": [default_config.training_image.tag],
        "countType": "imageCountMoreThan", "countNumber": 1,
    }  # fmt: skip
    assert repository["Properties"]["ImageTagMutability"] == "IMMUTABLE"
    assert "*" not in default_config.training_image.tag  # a pattern without wildcards matches that tag only


def test_repository_uri_is_an_output(registry):
    repository_id, _ = the_repository(registry)
    output = registry.to_json()["Outputs"][OutputKey.ECR_REPOSITORY_URI.value]["Value"]
    parts = output["Fn::Join"][1]
    assert ".dkr.ecr." in parts and parts[-1] == {"Ref": repository_id}


def test_repository_name_follows_the_name_prefix(assembly_for):
    config = validate_config(VARIANT_NAMED_BUCKET)
    assembly = assembly_for(VARIANT_NAMED_BUCKET)
    template = Template.from_json(assembly.get_stack_by_name(config.names.stack("registry")).template)
    _, repository = the_repository(template)
    assert repository["Properties"]["RepositoryName"] == config.names.ecr_repository
    assert config.names.ecr_repository.startswith(f"{config.name_prefix}/")


def test_consumers_import_the_repository_so_cfn_lint_accepts_the_uri(templates, default_config):
    # Fn::Split over a weak Fn::GetStackOutput fails cfn-lint (E1022/E6101); exports are used instead.
    registry_name = default_config.names.stack("registry")
    weak = json.dumps({"StackName": registry_name})[1:-1]
    for stack_name, template in templates.items():
        assert weak not in json.dumps(template), f"{stack_name} reads {registry_name} through a weak reference"
