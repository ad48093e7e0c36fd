"""The managed MLflow App (tracking.backend: mlflow without a tracking_uri): the App in the storage stack with its
artifact store under its own prefix of the artifacts bucket, its role on that prefix only, its ARN as the stack
output the manifests read, and the training pods' role allowed to call it and nothing else of it."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Template
from cdk.test_storage import resolve_cross_stack

from skyrl_hyperpod.config import validate_config
from skyrl_hyperpod.values.stack_outputs import OutputKey

MLFLOW = {"tracking": {"backend": "mlflow"}}
SELF_HOSTED = {"tracking": {"backend": "mlflow", "tracking_uri": "https://mlflow.example.com"}}


@pytest.fixture(scope="module")
def tracked(assembly_for):
    config = validate_config(MLFLOW)
    assembly = assembly_for(MLFLOW)
    return config, {stack.stack_name: stack.template for stack in assembly.stacks}


def app_of(template: dict) -> tuple[str, dict]:
    apps = Template.from_json(template).find_resources("AWS::SageMaker::MlflowApp")
    assert len(apps) == 1
    return next(iter(apps.items()))


def test_the_app_stores_artifacts_under_its_own_prefix_of_the_artifacts_bucket(tracked):
    config, templates = tracked
    storage = templates[config.names.stack("storage")]
    logical_id, app = app_of(storage)
    props = app["Properties"]
    assert props["Name"] == f"{config.name_prefix}-mlflow"
    bucket = [
        key
        for key in storage["Resources"]
        if "ArtifactsBucket" in key and storage["Resources"][key]["Type"] == "AWS::S3::Bucket"
    ]
    assert props["ArtifactStoreUri"] == {"Fn::Join": ["", ["s3://", {"Ref": bucket[0]}, "/mlflow"]]}
    assert storage["Outputs"][OutputKey.MLFLOW_APP_ARN.value]["Value"] == {"Fn::GetAtt": [logical_id, "Arn"]}

    role_id = props["RoleArn"]["Fn::GetAtt"][0]
    trust = storage["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "sagemaker.amazonaws.com"}]
    assert all("aws:SourceAccount" in s["Condition"]["StringEquals"] for s in trust)
    policies = [
        resource["Properties"]
        for resource in storage["Resources"].values()
        if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in resource["Properties"]["Roles"]
    ]
    statements = [s for policy in policies for s in policy["PolicyDocument"]["Statement"]]
    text = json.dumps(statements)
    assert "/mlflow/*" in text and '"mlflow/"' in text
    for statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert all(action.startswith("s3:") for action in actions), statement
        if actions != ["s3:ListBucket"]:
            assert json.dumps(statement["Resource"]).endswith('"/mlflow/*"]]}'), statement


def test_the_training_role_may_call_the_app_and_nothing_else_of_it(tracked):
    config, templates = tracked
    eks = templates[config.names.stack("eks")]
    storage = templates[config.names.stack("storage")]
    app_id, _ = app_of(storage)
    sagemaker = [
        statement
        for resource in eks["Resources"].values()
        if resource["Type"] == "AWS::IAM::Policy"
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
        if "sagemaker" in json.dumps(statement["Action"])
    ]
    assert len(sagemaker) == 1
    assert sagemaker[0]["Action"] == "sagemaker:CallMlflowAppApi"
    assert resolve_cross_stack(sagemaker[0]["Resource"], templates) == {"Fn::GetAtt": [app_id, "Arn"]}
    from iam_reference import statement_problems

    # The action acts on an mlflow-app resource (the Service Authorization Reference), which is what the ARN names.
    deployed = {**sagemaker[0], "Sid": "App", "Resource": "arn:aws:sagemaker:us-west-2:111111111111:mlflow-app/app-x"}
    assert statement_problems(deployed) == []


@pytest.mark.parametrize("variant", [{}, SELF_HOSTED], ids=["console", "self-hosted"])
def test_no_app_without_a_managed_tracking_server(assembly_for, variant):
    config = validate_config(variant)
    templates = {stack.stack_name: stack.template for stack in assembly_for(variant).stacks}
    for template in templates.values():
        assert not Template.from_json(template).find_resources("AWS::SageMaker::MlflowApp")
        assert "CallMlflowAppApi" not in json.dumps(template)
    assert OutputKey.MLFLOW_APP_ARN.value not in templates[config.names.stack("storage")].get("Outputs", {})
