"""`skyrl-hp preflight`: read-only checks against moto (sts, ec2, s3, ecr, eks, ssm, cloudformation, sagemaker)
and botocore's Stubber for Service Quotas, whose list calls moto does not implement."""

from __future__ import annotations

import json
from collections import Counter

import boto3
import pytest
import yaml
from botocore.stub import Stubber
from click.testing import CliRunner
from moto import mock_aws

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.cli.common import AwsClients
from skyrl_hyperpod.cli.preflight import DEFAULT_BOOTSTRAP_QUALIFIER, QUOTA_NAME, lifecycle_bucket_name

ACCOUNT = "111111111111"
REGION = "us-west-2"


@pytest.fixture(autouse=True)
def fake_aws_env(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("MOTO_ACCOUNT_ID", ACCOUNT)
    # The default AMI catalogue is irrelevant here and dominates moto's EC2 start-up time.
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    for name in ("AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def needed_counts(config) -> Counter:
    counts: Counter = Counter()
    for group in (config.hyperpod.head_group, config.hyperpod.worker_group):
        counts[group.instance_type] += group.instance_count
    return counts


def quotas_client(config, region=REGION, shortfall: str | None = None, applied: bool = True):
    """Service Quotas stubbed with the cluster-usage quotas the config needs (one short if asked)."""
    client = boto3.client("service-quotas", region_name=region)
    stubber = Stubber(client)
    quotas = [
        {"QuotaName": QUOTA_NAME.format(instance_type=t), "Value": float(n - 1 if t == shortfall else n),
         "ServiceCode": "sagemaker"}
        for t, n in needed_counts(config).items()
    ]
    unrelated = [{"QuotaName": "Maximum number of clusters", "Value": 4.0, "ServiceCode": "sagemaker"}]
    stubber.add_response("list_service_quotas", {"Quotas": (quotas if applied else []) + unrelated},
                         {"ServiceCode": "sagemaker"})
    if not applied:
        stubber.add_response("list_aws_default_service_quotas", {"Quotas": quotas}, {"ServiceCode": "sagemaker"})
    stubber.activate()
    return client, stubber


def bootstrap(region=REGION, version="27"):
    boto3.client("ssm", region_name=region).put_parameter(
        Name=f"/cdk-bootstrap/{DEFAULT_BOOTSTRAP_QUALIFIER}/version", Value=version, Type="String"
    )


def preflight(config, *args, region=REGION, quotas=None, config_file=None):
    client, stubber = quotas or quotas_client(config, region)
    extra = ["--config", config_file] if config_file else []
    result = CliRunner().invoke(cli, ["preflight", "--region", region, *extra, *args],
                                obj=AwsClients(overrides={"service-quotas": client}))
    return result, stubber


def line_for(result, name: str) -> str:
    return next(line for line in result.stdout.splitlines() if f" {name}:" in line)


@mock_aws
def test_everything_in_place_passes(default_config):
    bootstrap()
    result, stubber = preflight(default_config)
    assert result.exit_code == 0, result.output
    stubber.assert_no_pending_responses()
    assert result.stdout.splitlines()[-1] == "all checks passed"
    assert f"account {ACCOUNT}" in line_for(result, "credentials")
    for instance_type, count in needed_counts(default_config).items():
        assert line_for(result, f"offering {instance_type}").startswith("PASS")
        quota = line_for(result, f"quota {instance_type}")
        assert quota.startswith("PASS") and f"config needs {count}" in quota
    for kind in ("lifecycle bucket", "ECR repository", "EKS cluster", "HyperPod cluster"):
        assert line_for(result, f"name {kind}").startswith("PASS")


@mock_aws
def test_quota_below_the_configured_count_fails_with_a_hint(default_config):
    bootstrap()
    worker = default_config.hyperpod.worker_group.instance_type
    result, _ = preflight(default_config, quotas=quotas_client(default_config, shortfall=worker))
    assert result.exit_code == 1
    line = line_for(result, f"quota {worker}")
    assert line.startswith("FAIL")
    assert f"'{worker} for cluster usage'" in line and f"config needs {needed_counts(default_config)[worker]}" in line
    assert "fix: request an increase" in line


@mock_aws
def test_unraised_quotas_fall_back_to_the_aws_defaults(default_config):
    bootstrap()
    result, stubber = preflight(default_config, quotas=quotas_client(default_config, applied=False))
    assert result.exit_code == 0, result.output
    stubber.assert_no_pending_responses()
    assert "(default)" in line_for(result, f"quota {default_config.hyperpod.worker_group.instance_type}")


@mock_aws
def test_missing_cdk_bootstrap_fails_with_the_command_to_run(default_config):
    result, _ = preflight(default_config)
    assert result.exit_code == 1
    assert line_for(result, "cdk bootstrap").endswith(f"fix: run: cdk bootstrap aws://{ACCOUNT}/{REGION}")


@mock_aws
def test_old_cdk_bootstrap_fails(default_config):
    bootstrap(version="5")
    result, _ = preflight(default_config)
    assert result.exit_code == 1
    assert line_for(result, "cdk bootstrap").startswith("FAIL")


@mock_aws
def test_name_collisions_outside_the_projects_stacks_fail(default_config):
    bootstrap()
    boto3.client("ecr", region_name=REGION).create_repository(repositoryName=default_config.names.ecr_repository)
    bucket = lifecycle_bucket_name(default_config, ACCOUNT, REGION)
    boto3.client("s3", region_name=REGION).create_bucket(
        Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION}
    )
    result, _ = preflight(default_config)
    assert result.exit_code == 1
    assert line_for(result, "name ECR repository").startswith("FAIL")
    assert default_config.names.ecr_repository in line_for(result, "name ECR repository")
    assert line_for(result, "name lifecycle bucket").startswith("FAIL")
    assert bucket in line_for(result, "name lifecycle bucket")


@mock_aws
def test_existing_names_owned_by_the_deployed_stack_pass(default_config):
    bootstrap()
    boto3.client("ecr", region_name=REGION).create_repository(repositoryName=default_config.names.ecr_repository)
    boto3.client("cloudformation", region_name=REGION).create_stack(
        StackName=default_config.names.stack("registry"),
        TemplateBody=json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}),
    )
    result, _ = preflight(default_config)
    assert result.exit_code == 0, result.output
    assert "belongs to the deployed stack" in line_for(result, "name ECR repository")


@mock_aws
def test_unknown_region_fails_and_skips_the_rest(default_config):
    result, _ = preflight(default_config, region="xx-nowhere-1")
    assert result.exit_code == 1
    assert line_for(result, "region").startswith("FAIL")
    assert "SKIP" in line_for(result, "remaining checks")
    assert "Traceback" not in result.output


@mock_aws
def test_az_id_not_in_the_region_fails(tmp_path, default_config):
    bootstrap()
    file = tmp_path / "config.yaml"
    file.write_text(yaml.safe_dump({"network": {"hyperpod_az_id": "usw2-az9"}}))
    result, _ = preflight(default_config, config_file=str(file))
    assert result.exit_code == 1
    assert "usw2-az9 is not an availability zone id" in line_for(result, "hyperpod AZ id")


@mock_aws
def test_instance_type_not_offered_in_the_az_fails(tmp_path, default_config):
    # moto's offering data: in us-east-1, use1-az4 has r5d.16xlarge but no g7e.12xlarge.
    region = "us-east-1"
    bootstrap(region)
    file = tmp_path / "config.yaml"
    file.write_text(yaml.safe_dump({"network": {"hyperpod_az_id": "use1-az4"}}))
    worker = default_config.hyperpod.worker_group.instance_type
    head = default_config.hyperpod.head_group.instance_type
    result, _ = preflight(default_config, region=region, quotas=quotas_client(default_config, region),
                          config_file=str(file))
    assert result.exit_code == 1
    assert line_for(result, f"offering {worker}").startswith("FAIL")
    assert line_for(result, f"offering {head}").startswith("PASS")


def test_no_credentials_fails_without_a_traceback(default_config, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    result = CliRunner().invoke(cli, ["preflight", "--region", REGION])
    assert result.exit_code == 1
    assert line_for(result, "credentials").startswith("FAIL")
    assert "SKIP" in line_for(result, "remaining checks")
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_bad_config_is_exit_2(tmp_path):
    file = tmp_path / "config.yaml"
    file.write_text(yaml.safe_dump({"hyperpod": {"worker_group": {"instance_type": "ml.p99.huge"}}}))
    result = CliRunner().invoke(cli, ["preflight", "--config", str(file)])
    assert result.exit_code == 2
    assert all(line.startswith("config error:") for line in result.stderr.strip().splitlines())
