"""`skyrl-hp preflight`: read-only checks against a stubbed AWS account.

Every AWS answer goes through botocore's Stubber, which checks both the request the CLI sends (parameters
and their values) and the answer given here against botocore's own service models, so a misspelt
parameter or a response shape AWS does not return fails the test. The account's contents (zones,
offerings, bootstrap version, existing names, stacks, quotas) are the `Account` below.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from botocore.stub import Stubber
from click.testing import CliRunner
from conftest import TEST_REGION as REGION
from conftest import add_modeled_error, stub_cloudformation

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.cli.common import AwsClients, new_session
from skyrl_hyperpod.config import validate_config
from skyrl_hyperpod.config.loader import read_lock
from skyrl_hyperpod.config.upstream_lock import UpstreamLock, render_lock
from skyrl_hyperpod.ops import preflight as preflight_module
from skyrl_hyperpod.ops.preflight import (
    DEFAULT_BOOTSTRAP_QUALIFIER,
    QUOTA_NAME,
    STACK_DEPENDENCIES,
    check_cluster_access,
    lifecycle_bucket_name,
    project_stack_components,
)
from skyrl_hyperpod.ops.review.replacement import CDK_HELM_CHART_TYPE
from skyrl_hyperpod.values.stack_ownership import OWNERSHIP_OUTPUT_KEY, ownership_marker

pytestmark = pytest.mark.usefixtures("fake_aws_env", "cluster_access", "resolved_upstream_lock", "local_tools")
# The stubbed account, and what makes the deployed cluster usable by its caller (arn:aws:iam::<ACCOUNT>:user/tester):
# the configurations of these tests list it unless a test is about cluster access. Neither is one of the example's
# placeholders (the account 111111111111, documentation CIDRs), which preflight fails on; 198.18.0.0/15 is the
# benchmarking range of RFC 2544, nobody's egress address but not a documentation range.
ACCOUNT = "222222222222"
ACCESS = {"eks": {"admin_principal_arns": [f"arn:aws:iam::{ACCOUNT}:user/tester"],
                  "public_access_cidrs": ["198.18.0.10/32"]}}  # fmt: skip
EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "example.yaml"


@pytest.fixture
def cluster_access(tmp_path, monkeypatch):
    """$SKYRL_HP_CONFIG names a configuration that grants the caller access (a --config still wins)."""
    file = tmp_path / "access.yaml"
    file.write_text(yaml.safe_dump(ACCESS))
    monkeypatch.setenv("SKYRL_HP_CONFIG", str(file))


@pytest.fixture
def resolved_upstream_lock(tmp_path, monkeypatch):
    """Every entry of the repository's upstream lock resolved (tests/test_upstream_lock.py covers the unresolved)."""
    lock = read_lock()
    resolved = UpstreamLock(
        images=dict.fromkeys(lock.images, "sha256:" + "0" * 64),
        git_tags=dict.fromkeys(lock.git_tags, "0" * 40),
        huggingface=dict.fromkeys(lock.huggingface, "0" * 40),
    )
    file = tmp_path / "upstream-lock.yaml"
    file.write_text(render_lock(resolved), encoding="utf-8")
    monkeypatch.setattr(preflight_module, "LOCK_FILE", file)


# AZ ids -> names; only the ids are stable across accounts, which is why the config names ids.
ZONES = {
    "us-west-2": {
        "usw2-az1": "us-west-2a",
        "usw2-az2": "us-west-2b",
        "usw2-az3": "us-west-2c",
        "usw2-az4": "us-west-2d",
    },
    "us-east-1": {f"use1-az{n}": f"us-east-1{letter}" for n, letter in zip(range(1, 7), "abcdef", strict=True)},
}


def needed_counts(config) -> Counter:
    counts: Counter = Counter()
    for group in (config.hyperpod.head_group, config.hyperpod.worker_group):
        counts[group.instance_type] += group.instance_count
    return counts


@dataclass
class Account:
    """What the stubbed account holds in one region. By default: everything the default config needs, and
    none of the names the stacks will create."""

    config: object
    region: str = REGION
    # AZ id -> EC2 instance types offered there; None: every type the config needs, in every zone.
    offered: dict[str, set[str]] | None = None
    bootstrap_version: str | None = "27"
    quota_shortfall: str | None = None  # an instance type whose applied quota is one short
    quotas_applied: bool = True  # False: only AWS's default quota values exist
    bucket_exists: bool = False
    repository_exists: bool = False
    # Live stacks and their outputs; those with one of the configuration's names carry its ownership marker (unless
    # their outputs give another) except those in `unmarked` (another application's, or deployed before the marker),
    # whose templates are given there.
    stacks: dict[str, dict[str, str]] = field(default_factory=dict)
    unmarked: dict[str, dict] = field(default_factory=dict)
    # The deployed EKS stack's template, when `stacks` holds that stack (preflight reads it for the KubeRay release).
    eks_template: dict = field(default_factory=lambda: {"Resources": {}})

    def clients(self, stub_aws, config) -> tuple[RecordingClients, list[Stubber]]:
        """Stubbed clients for one preflight run, for the effective `config` (it may differ from the default)."""
        stubbers: list[Stubber] = []

        def stub(service: str) -> tuple[object, Stubber]:
            client, stubber = stub_aws(service, self.region)
            stubbers.append(stubber)
            return client, stubber

        sts, stubber = stub("sts")
        stubber.add_response(
            "get_caller_identity",
            {"Account": ACCOUNT, "Arn": f"arn:aws:iam::{ACCOUNT}:user/tester", "UserId": "AIDAEXAMPLE"},
        )

        ec2, stubber = stub("ec2")
        zones = ZONES[self.region]
        stubber.add_response(
            "describe_availability_zones",
            {
                "AvailabilityZones": [
                    {"ZoneId": zone_id, "ZoneName": name, "RegionName": self.region, "State": "available"}
                    for zone_id, name in zones.items()
                ]
            },
            {"AllAvailabilityZones": True},
        )
        az_id = config.network.hyperpod_az_id
        wanted = sorted(t.removeprefix("ml.") for t in needed_counts(config))
        offered = set(wanted) if self.offered is None else self.offered.get(az_id, set())
        stubber.add_response(
            "describe_instance_type_offerings",
            {
                "InstanceTypeOfferings": [
                    {"InstanceType": t, "LocationType": "availability-zone-id", "Location": az_id}
                    for t in wanted
                    if t in offered
                ]
            },
            {
                "LocationType": "availability-zone-id",
                "Filters": [{"Name": "location", "Values": [az_id]}, {"Name": "instance-type", "Values": wanted}],
            },
        )

        quotas, stubber = stub("service-quotas")
        values = [
            {
                "QuotaName": QUOTA_NAME.format(instance_type=t),
                "ServiceCode": "sagemaker",
                "Value": float(n - 1 if t == self.quota_shortfall else n),
            }
            for t, n in needed_counts(config).items()
        ]
        unrelated = [{"QuotaName": "Maximum number of clusters", "Value": 4.0, "ServiceCode": "sagemaker"}]
        stubber.add_response(
            "list_service_quotas",
            {"Quotas": (values if self.quotas_applied else []) + unrelated},
            {"ServiceCode": "sagemaker"},
        )
        if not self.quotas_applied:
            stubber.add_response("list_aws_default_service_quotas", {"Quotas": values}, {"ServiceCode": "sagemaker"})

        ssm, stubber = stub("ssm")
        parameter = f"/cdk-bootstrap/{DEFAULT_BOOTSTRAP_QUALIFIER}/version"
        if self.bootstrap_version is None:
            add_modeled_error(ssm, stubber, "get_parameter", "ParameterNotFound", 400, {"Name": parameter})
        else:
            stubber.add_response(
                "get_parameter",
                {"Parameter": {"Name": parameter, "Type": "String", "Value": self.bootstrap_version}},
                {"Name": parameter},
            )

        s3, stubber = stub("s3")
        bucket = {"Bucket": lifecycle_bucket_name(config, ACCOUNT, self.region), "ExpectedBucketOwner": ACCOUNT}
        if self.bucket_exists:
            stubber.add_response("head_bucket", {}, bucket)
        else:
            # HeadBucket answers a missing bucket with a bare 404 (no error body, so no modeled code).
            stubber.add_client_error("head_bucket", "404", http_status_code=404, expected_params=bucket)

        ecr, stubber = stub("ecr")
        repository = config.names.ecr_repository
        if self.repository_exists:
            stubber.add_response(
                "describe_repositories",
                {"repositories": [{"repositoryName": repository}]},
                {"repositoryNames": [repository]},
            )
        else:
            add_modeled_error(
                ecr,
                stubber,
                "describe_repositories",
                "RepositoryNotFoundException",
                400,
                {"repositoryNames": [repository]},
            )

        eks, stubber = stub("eks")
        add_modeled_error(
            eks, stubber, "describe_cluster", "ResourceNotFoundException", 404, {"name": config.names.eks_cluster}
        )

        sagemaker, stubber = stub("sagemaker")
        stubber.add_response("list_clusters", {"ClusterSummaries": []}, {"NameContains": config.names.hyperpod_cluster})

        overrides = {
            "sts": sts,
            "ec2": ec2,
            "service-quotas": quotas,
            "ssm": ssm,
            "s3": s3,
            "ecr": ecr,
            "eks": eks,
            "sagemaker": sagemaker,
            "cloudformation": stub_cloudformation(
                stub_aws,
                self.listed(config),
                self.region,
                self.templates_read(config),
            ),
        }
        for stubber in stubbers:
            stubber.activate()
        return RecordingClients(overrides=overrides), stubbers

    def listed(self, config) -> dict[str, dict[str, str]]:
        ours = project_stack_components(config)
        return {
            name: {**({} if name in self.unmarked or name not in ours else marker(config, name)), **outputs}
            for name, outputs in self.stacks.items()
        }

    def templates_read(self, config) -> list[tuple[str, dict]]:
        """The get_template calls preflight makes, in order: each unmarked stack's (for what earlier versions left),
        then the EKS stack's when it is shown to be this deployment's (for the KubeRay release)."""
        legacy = [(name, self.unmarked[name]) for name in sorted(self.unmarked) if name in self.stacks]
        eks = config.names.stack("eks")
        fingerprinted = "ConfigFingerprint" in self.stacks.get(config.names.stack("network"), {})
        owned_eks = eks in self.stacks and (
            eks not in self.unmarked or (fingerprinted and legacy_tagged(self.unmarked[eks], config))
        )
        return [*legacy, *([(eks, self.eks_template)] if owned_eks else [])]


def marker(config, name: str) -> dict[str, str]:
    return {OWNERSHIP_OUTPUT_KEY: ownership_marker(config, name.removeprefix(f"{config.name_prefix}-"))}


def legacy_tagged(template: dict, config) -> bool:
    return any(
        {"Key": "project", "Value": config.name_prefix} in (r.get("Properties") or {}).get("Tags", [])
        for r in template.get("Resources", {}).values()
    )


class RecordingClients(AwsClients):
    """AwsClients that also record the region the CLI asks each client for (the stubbed clients answer
    whatever region is asked, so the test checks it)."""

    def __init__(self, session=None, overrides=None, asked: list | None = None):
        super().__init__(session, overrides)
        self.asked: list[tuple[str, str | None]] = [] if asked is None else asked

    def with_session(self, profile, region):
        return RecordingClients(new_session(profile, region), self._overrides, self.asked)

    def __call__(self, service, region=None):
        self.asked.append((service, region))
        return super().__call__(service, region)


@pytest.fixture
def preflight(stub_aws):
    """preflight(account, *args, config_file=None, config=None): run `skyrl-hp preflight` against `account`;
    `config` is what `config_file` holds (default: the account's)."""
    return functools.partial(run_preflight, stub_aws)


def run_preflight(stub_aws, account: Account, *args, config_file=None, config=None):
    clients, stubbers = account.clients(stub_aws, config or account.config)
    extra = ["--config", config_file] if config_file else []
    result = CliRunner().invoke(cli, ["preflight", "--region", account.region, *extra, *args], obj=clients)
    assert clients.asked and {region for _, region in clients.asked} == {account.region}, clients.asked
    return result, stubbers


def line_for(result, name: str) -> str:
    return next(line for line in result.stdout.splitlines() if f" {name}:" in line)


def failed_checks(result) -> set[str]:
    """Names of the FAIL lines. A request that does not match its stub also ends as a FAIL line (botocore's
    Stubber raises a BotoCoreError, which preflight reports), so tests compare the whole set."""
    return {line.split(None, 1)[1].split(":", 1)[0] for line in result.stdout.splitlines() if line.startswith("FAIL ")}


def test_everything_in_place_passes(default_config, preflight):
    result, stubbers = preflight(Account(default_config))
    assert result.exit_code == 0, result.output
    for stubber in stubbers:
        stubber.assert_no_pending_responses()  # every check asked AWS, with the parameters stubbed above
    assert result.stdout.splitlines()[-1] == "all checks passed"
    assert f"account {ACCOUNT}" in line_for(result, "credentials")
    for instance_type, count in needed_counts(default_config).items():
        assert line_for(result, f"offering {instance_type}").startswith("PASS")
        quota = line_for(result, f"quota {instance_type}")
        assert quota.startswith("PASS") and f"config needs {count}" in quota
    for kind in ("lifecycle bucket", "ECR repository", "EKS cluster", "HyperPod cluster"):
        assert line_for(result, f"name {kind}").startswith("PASS")
    for name in ("HyperPod in region", "AZ id of region", "API endpoint reachable", "placeholder"):
        assert line_for(result, name).startswith("PASS")


def test_the_examples_placeholders_fail_one_line_each(preflight):
    # config/example.yaml as shipped: its CIDR and admin ARN stand in for the user's own.
    config = validate_config(yaml.safe_load(EXAMPLE.read_text()))
    result, _ = preflight(Account(config), config_file=str(EXAMPLE), config=config)
    assert result.exit_code == 1
    # The stubbed caller is not the example's admin either: that is the cluster access line, not a placeholder one.
    assert failed_checks(result) == {"placeholder", "cluster access"}
    lines = [line for line in result.stdout.splitlines() if line.startswith("FAIL  placeholder: ")]
    assert len(lines) == 2, result.stdout
    cidr, arn = lines
    assert cidr.startswith("FAIL  placeholder: eks.public_access_cidrs: 203.0.113.10/32 is in a range reserved for")
    assert "-> fix: put your own egress CIDR" in cidr
    assert arn.startswith(
        "FAIL  placeholder: eks.admin_principal_arns: arn:aws:iam::111111111111:role/PlatformAdmin is in the example "
        "account 111111111111"
    )
    assert "-> fix: put your own IAM role or user ARN" in arn
    assert result.stdout.splitlines()[-1] == "3 check(s) failed"


def test_the_example_account_in_env_account_is_a_placeholder_too(tmp_path, preflight):
    overrides = {**ACCESS, "env": {"account": "111111111111"}}
    file = tmp_path / "config.yaml"
    file.write_text(yaml.safe_dump(overrides))
    config = validate_config(overrides)
    result, _ = preflight(Account(config), config_file=str(file), config=config)
    assert result.exit_code == 1
    # The stubbed credentials are for another account: that mismatch is its own line.
    assert failed_checks(result) == {"placeholder", "credentials"}
    [line] = [line for line in result.stdout.splitlines() if line.startswith("FAIL  placeholder: ")]
    assert line.startswith("FAIL  placeholder: env.account: 111111111111 is the example account")
    assert "-> fix: put your own account id or remove the key" in line


def test_quota_below_the_configured_count_fails_with_a_hint(default_config, preflight):
    worker = default_config.hyperpod.worker_group.instance_type
    result, _ = preflight(Account(default_config, quota_shortfall=worker))
    assert result.exit_code == 1
    assert failed_checks(result) == {f"quota {worker}"}
    line = line_for(result, f"quota {worker}")
    assert line.startswith("FAIL")
    assert f"'{worker} for cluster usage'" in line and f"config needs {needed_counts(default_config)[worker]}" in line
    assert "fix: request an increase" in line


def test_unraised_quotas_fall_back_to_the_aws_defaults(default_config, preflight):
    result, stubbers = preflight(Account(default_config, quotas_applied=False))
    assert result.exit_code == 0, result.output
    for stubber in stubbers:
        stubber.assert_no_pending_responses()
    assert "(default)" in line_for(result, f"quota {default_config.hyperpod.worker_group.instance_type}")


def test_missing_cdk_bootstrap_fails_with_the_command_to_run(default_config, preflight):
    result, _ = preflight(Account(default_config, bootstrap_version=None))
    assert result.exit_code == 1
    assert failed_checks(result) == {"cdk bootstrap"}
    assert line_for(result, "cdk bootstrap").endswith(f"fix: run: cdk bootstrap aws://{ACCOUNT}/{REGION}")


def test_old_cdk_bootstrap_fails(default_config, preflight):
    result, _ = preflight(Account(default_config, bootstrap_version="5"))
    assert result.exit_code == 1
    assert failed_checks(result) == {"cdk bootstrap"}
    assert line_for(result, "cdk bootstrap").startswith("FAIL")


def test_name_collisions_outside_the_projects_stacks_fail(default_config, preflight):
    result, _ = preflight(
        Account(default_config, bucket_exists=True, repository_exists=True, stacks={"someone-elses-stack": {}})
    )
    assert result.exit_code == 1
    assert failed_checks(result) == {"name ECR repository", "name lifecycle bucket"}
    assert line_for(result, "name ECR repository").startswith("FAIL")
    assert default_config.names.ecr_repository in line_for(result, "name ECR repository")
    assert line_for(result, "name lifecycle bucket").startswith("FAIL")
    assert lifecycle_bucket_name(default_config, ACCOUNT, REGION) in line_for(result, "name lifecycle bucket")


def test_existing_names_owned_by_the_deployed_stack_pass(default_config, preflight):
    result, _ = preflight(
        Account(default_config, repository_exists=True, stacks={default_config.names.stack("registry"): {}})
    )
    assert result.exit_code == 0, result.output
    assert "belongs to the deployed stack" in line_for(result, "name ECR repository")


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [("skyrl-hp", "skyrl-hp-dev"), ("skyrl-hp-dev", "skyrl-hp")],
    ids=["a prefix of another deployment's", "another deployment's prefix of this one"],
)
def test_a_name_prefix_nesting_with_another_live_deployment_fails_in_one_line(tmp_path, preflight, ours, theirs):
    # `<prefix>-*` of the shorter one matches every stack of the other: skyrl-hp-* takes in skyrl-hp-dev-hyperpod.
    overrides = {**ACCESS, "name_prefix": ours}
    file = tmp_path / "config.yaml"
    file.write_text(yaml.safe_dump(overrides))
    config = validate_config(overrides)
    stacks = {f"{theirs}-{component}": {} for component in ("network", "hyperpod", "image-build")}
    result, _ = preflight(Account(config, stacks=stacks), config_file=str(file), config=config)
    assert result.exit_code == 1
    assert failed_checks(result) == {"name_prefix"}
    [line] = [line for line in result.stdout.splitlines() if " name_prefix:" in line]
    assert line.startswith(f"FAIL  name_prefix: name_prefix {ours!r} nests with the name_prefix of another live")
    assert f"{theirs!r} ({theirs}-hyperpod, {theirs}-image-build, {theirs}-network)" in line
    assert "fix: choose a name_prefix" in line


def test_two_name_prefixes_never_give_the_same_stack_name():
    # `<a>-<component>` == `<b>-<other component>` for a != b only if a component ended in `-<other component>`.
    assert not [(c, o) for c in STACK_DEPENDENCIES for o in STACK_DEPENDENCIES if c != o and c.endswith(f"-{o}")]


def test_own_and_unrelated_stacks_pass_the_name_prefix_check(default_config, preflight):
    stacks = {
        default_config.names.stack("network"): {},
        default_config.names.stack("image-build"): {},  # ends like a stack of a deployment named skyrl-hp-image
        "skyrl-hp-experiments": {},  # matches skyrl-hp-* but is no deployment of this project
        "skyrl-hpx-network": {},  # a deployment whose prefix does not nest with this one
    }
    result, _ = preflight(Account(default_config, stacks=stacks))
    assert result.exit_code == 0, result.output
    assert line_for(result, "name_prefix").startswith("PASS")


def legacy_kuberay_template(*, retained: bool) -> dict:
    """An EKS stack as this project deployed it before the git installer took KubeRay over (the parts preflight
    reads), optionally after the first of the two deploys that move it."""
    chart = {"Type": CDK_HELM_CHART_TYPE, "Properties": {"Release": "kuberay-operator", "Chart": "kuberay-operator"}}
    other = {"Type": CDK_HELM_CHART_TYPE, "Properties": {"Release": "someone-elses", "Chart": "x"}}
    if retained:
        chart |= {"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"}
    return {"Resources": {"KubeRayOperatorC85C2BA7": chart, "Other": other}}


@pytest.mark.parametrize(
    ("retained", "retaining", "status", "says"),
    [
        (False, False, "FAIL", "CloudFormation's clean-up would then uninstall it"),
        (False, True, "PASS", "this deploy retains KubeRayOperatorC85C2BA7; then set it false"),
        (True, False, "PASS", "moves it from the retained KubeRayOperatorC85C2BA7 to the git installer"),
    ],
    ids=["deployed by CDK's HelmChart", "the first deploy of the move", "the second deploy of the move"],
)
def test_moving_the_kuberay_release_to_the_git_installer_takes_two_deploys(
    tmp_path, preflight, retained, retaining, status, says
):
    overrides = {**ACCESS, "helm_installer": {"retain_legacy_kuberay_release": retaining}}
    file = tmp_path / "config.yaml"
    file.write_text(yaml.safe_dump(overrides))
    config = validate_config(overrides)
    stacks = {config.names.stack("network"): {}, config.names.stack("eks"): {}}
    account = Account(config, stacks=stacks, eks_template=legacy_kuberay_template(retained=retained))
    result, stubbers = preflight(account, config_file=str(file), config=config)
    for stubber in stubbers:
        stubber.assert_no_pending_responses()
    line = line_for(result, "KubeRay release")
    assert line.startswith(status) and says in line, line
    assert failed_checks(result) == ({"KubeRay release"} if status == "FAIL" else set())
    if status == "FAIL":
        assert "set helm_installer.retain_legacy_kuberay_release: true, deploy, then set it false" in line


def test_a_deployment_the_git_installer_already_serves_passes_the_kuberay_check(default_config, preflight):
    stacks = {default_config.names.stack("eks"): {}}
    result, _ = preflight(Account(default_config, stacks=stacks))
    assert line_for(result, "KubeRay release").startswith("PASS") and "git installer" in line_for(
        result, "KubeRay release"
    )


def test_unknown_region_fails_and_skips_the_rest(default_config):
    result = CliRunner().invoke(cli, ["preflight", "--region", "xx-nowhere-1"], obj=AwsClients())
    assert result.exit_code == 1
    assert line_for(result, "region").startswith("FAIL")
    assert "SKIP" in line_for(result, "remaining checks")
    assert "Traceback" not in result.output


def test_az_id_not_in_the_region_fails(tmp_path, default_config, preflight):
    file = tmp_path / "config.yaml"
    overrides = {**ACCESS, "network": {"hyperpod_az_id": "usw2-az9"}}
    file.write_text(yaml.safe_dump(overrides))
    result, _ = preflight(Account(default_config), config_file=str(file), config=validate_config(overrides))
    assert result.exit_code == 1
    assert failed_checks(result) == {"hyperpod AZ id"}
    assert "usw2-az9 is not an availability zone id" in line_for(result, "hyperpod AZ id")


def test_instance_type_not_offered_in_the_az_fails(tmp_path, default_config, preflight):
    worker = default_config.hyperpod.worker_group.instance_type
    head = default_config.hyperpod.head_group.instance_type
    file = tmp_path / "config.yaml"
    overrides = {**ACCESS, "network": {"hyperpod_az_id": "use1-az4"}}
    file.write_text(yaml.safe_dump(overrides))
    account = Account(default_config, region="us-east-1", offered={"use1-az4": {head.removeprefix("ml.")}})
    result, _ = preflight(account, config_file=str(file), config=validate_config(overrides))
    assert result.exit_code == 1
    assert failed_checks(result) == {f"offering {worker}"}
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


def test_without_credentials_every_configuration_problem_shows_before_the_credentials_line(tmp_path, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    # Five problems the configuration alone shows for --region eu-west-1 (env.region unset, so loading it checks
    # neither the region nor the AZ id): HyperPod there lacks the default GPU type, usw2-az2 is a zone of us-west-2,
    # nothing reaches the private endpoint, and two of the example's placeholders.
    overrides = {
        "env": {"account": "111111111111"},
        "eks": {"admin_principal_arns": ["arn:aws:iam::111111111111:role/PlatformAdmin"]},
    }
    file = tmp_path / "config.yaml"
    file.write_text(yaml.safe_dump(overrides))
    result = CliRunner().invoke(cli, ["preflight", "--region", "eu-west-1", "--config", str(file)])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stdout.splitlines()
    assert failed_checks(result) == {
        "HyperPod in region",
        "AZ id of region",
        "API endpoint reachable",
        "placeholder",
        "credentials",
    }
    assert "'ml.g7e.12xlarge': not offered by HyperPod in eu-west-1" in line_for(result, "HyperPod in region")
    assert "usw2-az2 is an availability zone id of another region: eu-west-1 has ids euw1-az1" in line_for(
        result, "AZ id of region"
    )
    assert len([line for line in lines if line.startswith("FAIL  placeholder: ")]) == 2
    # Every configuration line first, then the credentials failure and what it leaves unchecked.
    assert lines[-3].startswith("FAIL  credentials: ")
    assert lines[-2].startswith("SKIP  remaining checks: ")
    assert lines[-1] == "6 check(s) failed"


def test_a_region_other_than_env_region_fails(tmp_path, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    file = tmp_path / "config.yaml"
    file.write_text(yaml.safe_dump({**ACCESS, "env": {"region": REGION}}))
    result = CliRunner().invoke(cli, ["preflight", "--region", "us-east-1", "--config", str(file)])
    assert result.exit_code == 1
    # usw2-az2 is no zone of us-east-1 either: the region-bound checks ran for --region.
    assert failed_checks(result) == {"env.region", "AZ id of region", "credentials"}
    line = line_for(result, "env.region")
    assert f"env.region {REGION}, these checks ran for us-east-1" in line
    assert "fix: drop --region, or set env.region: us-east-1" in line


def test_without_credentials_an_empty_admin_list_still_fails(default_config, tmp_path, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    file = tmp_path / "config.yaml"
    file.write_text(yaml.safe_dump({"studio": {"enabled": True}}))
    result = CliRunner().invoke(cli, ["preflight", "--region", REGION, "--config", str(file)])
    assert result.exit_code == 1
    assert failed_checks(result) == {"cluster access", "credentials"}
    line = line_for(result, "cluster access")
    assert "eks.admin_principal_arns is empty" in line and "fix: add your own IAM role or user ARN" in line
    lines = result.stdout.splitlines()
    assert lines.index(line) < next(i for i, text in enumerate(lines) if text.startswith("FAIL  credentials: "))


def test_an_invalid_region_still_reports_the_configuration_problems(tmp_path):
    file = tmp_path / "config.yaml"
    file.write_text(yaml.safe_dump({"eks": {"admin_principal_arns": ACCESS["eks"]["admin_principal_arns"]}}))
    result = CliRunner().invoke(cli, ["preflight", "--region", "xx-nowhere-1", "--config", str(file)], obj=AwsClients())
    assert result.exit_code == 1
    assert failed_checks(result) == {"region", "API endpoint reachable"}
    assert result.stdout.splitlines()[-2].startswith("SKIP  remaining checks: ")


def test_bad_config_is_exit_2(tmp_path):
    file = tmp_path / "config.yaml"
    file.write_text(yaml.safe_dump({"hyperpod": {"worker_group": {"instance_type": "ml.p99.huge"}}}))
    result = CliRunner().invoke(cli, ["preflight", "--config", str(file)])
    assert result.exit_code == 2
    assert all(line.startswith("config error:") for line in result.stderr.strip().splitlines())


# --- cluster access ------------------------------------------------------------------------------------------


def test_a_caller_missing_from_the_admin_principals_fails_with_the_line_to_add(tmp_path, default_config, preflight):
    file = tmp_path / "config.yaml"
    overrides = {"eks": {"public_access_cidrs": ACCESS["eks"]["public_access_cidrs"]}}
    file.write_text(yaml.safe_dump(overrides))
    result, _ = preflight(Account(default_config), config_file=str(file), config=validate_config(overrides))
    assert result.exit_code == 1
    assert failed_checks(result) == {"cluster access"}
    line = line_for(result, "cluster access")
    assert f"arn:aws:iam::{ACCOUNT}:user/tester is not in eks.admin_principal_arns" in line
    assert f'fix: add it: eks: {{admin_principal_arns: ["arn:aws:iam::{ACCOUNT}:user/tester"]}}' in line


def test_an_identity_center_session_is_told_the_role_path_its_arn_drops():
    from skyrl_hyperpod.ops.preflight import check_admin_principals

    config = validate_config({"eks": {"admin_principal_arns": [f"arn:aws:iam::{ACCOUNT}:role/Other"]}})
    session = f"arn:aws:sts::{ACCOUNT}:assumed-role/AWSReservedSSO_Admin_0123456789abcdef/user@example.com"
    [result] = check_admin_principals(config, session)
    assert result.status == "FAIL"
    assert "aws-reserved/sso.amazonaws.com/" in result.hint
    assert "aws iam get-role --role-name AWSReservedSSO_Admin_0123456789abcdef --query Role.Arn" in result.hint
    # A role without Identity Center's path gets no such note.
    [plain] = check_admin_principals(config, f"arn:aws:sts::{ACCOUNT}:assumed-role/Deployer/ci")
    assert "aws-reserved" not in plain.hint


@pytest.mark.parametrize(
    ("route", "passes"),
    [({}, False), ({"eks": {"private_network_access": True}}, True), ({"studio": {"enabled": True}}, True)],
    ids=["nothing reaches the private endpoint", "stated VPN", "Studio in the VPC"],
)
def test_a_private_endpoint_needs_a_route(tmp_path, default_config, preflight, route, passes):
    file = tmp_path / "config.yaml"
    overrides = {
        **route,
        "eks": {"admin_principal_arns": ACCESS["eks"]["admin_principal_arns"], **route.get("eks", {})},
    }
    file.write_text(yaml.safe_dump(overrides))
    result, _ = preflight(Account(default_config), config_file=str(file), config=validate_config(overrides))
    assert failed_checks(result) == (set() if passes else {"API endpoint reachable"})
    if not passes:
        assert "eks.public_access_cidrs" in line_for(result, "API endpoint reachable")


@pytest.mark.parametrize(
    ("configured", "caller", "matches"),
    [
        ("arn:aws:iam::111111111111:role/Admin", "arn:aws:sts::111111111111:assumed-role/Admin/alice", True),
        ("arn:aws:iam::111111111111:role/team/Admin", "arn:aws:sts::111111111111:assumed-role/Admin/alice", True),
        ("arn:aws:iam::111111111111:role/Admin", "arn:aws:sts::111111111111:assumed-role/Other/alice", False),
        ("arn:aws:iam::222222222222:role/Admin", "arn:aws:sts::111111111111:assumed-role/Admin/alice", False),
        ("arn:aws:iam::111111111111:user/alice", "arn:aws:iam::111111111111:user/alice", True),
    ],
)
def test_an_assumed_role_session_is_matched_to_its_role(configured, caller, matches):
    config = validate_config({"eks": {"admin_principal_arns": [configured], "private_network_access": True}})
    [access, _] = check_cluster_access(config, caller)
    assert (access.status == "PASS") is matches


# --- which stacks are this deployment's -----------------------------------------------------------------------------


def foreign_template(project: str) -> dict:
    """Another application's stack: its resources may well carry a `project` tag of the same value."""
    return {
        "Resources": {
            "Db": {"Type": "AWS::RDS::DBInstance", "Properties": {"Tags": [{"Key": "project", "Value": project}]}}
        }
    }


def prod_config(tmp_path) -> tuple[str, object]:
    overrides = {**ACCESS, "name_prefix": "prod"}
    file = tmp_path / "config.yaml"
    file.write_text(yaml.safe_dump(overrides))
    return str(file), validate_config(overrides)


def ownership_lines(result) -> list[str]:
    return [line for line in result.stdout.splitlines() if " stack ownership:" in line]


def test_another_applications_stacks_with_this_configurations_names_fail(tmp_path, preflight):
    # Another application owns prod-network, prod-storage and prod-database; this configuration's name_prefix is prod.
    file, config = prod_config(tmp_path)
    foreign = {"prod-network": foreign_template("prod"), "prod-storage": foreign_template("prod")}
    account = Account(config, stacks={name: {} for name in (*foreign, "prod-database")}, unmarked=foreign)
    result, stubbers = preflight(account, config_file=file, config=config)
    for stubber in stubbers:
        stubber.assert_no_pending_responses()  # both templates were read, nothing else was asked of them
    assert result.exit_code == 1
    assert failed_checks(result) == {"stack ownership"}
    network, storage = ownership_lines(result)
    assert network.startswith("FAIL  stack ownership: stack prod-network has one of this configuration's names but is")
    assert "no SkyrlHpOwnership output" in network and "cdk deploy --all would replace its template" in network
    assert storage.startswith("FAIL  stack ownership: stack prod-storage has one of")
    assert "prod-database" not in result.stdout  # not one of this configuration's names
    # The names those stacks would own count as free of this deployment's stacks: not owned by prod-storage.
    assert "belongs to the deployed stack" not in result.stdout


def test_this_deployments_marked_stacks_pass_the_ownership_check(default_config, preflight):
    stacks = {default_config.names.stack(c): {} for c in ("network", "storage", "eks")}
    result, _ = preflight(Account(default_config, stacks=stacks))
    assert result.exit_code == 0, result.output
    [line] = ownership_lines(result)
    assert line.startswith("PASS  stack ownership: stacks of this deployment: skyrl-hp-eks (its SkyrlHpOwnership")


def test_a_marker_of_another_deployment_or_component_fails(default_config, preflight):
    network = default_config.names.stack("network")
    stacks = {network: {"SkyrlHpOwnership": ownership_marker(default_config, "storage")}}
    result, stubbers = preflight(Account(default_config, stacks=stacks))
    for stubber in stubbers:
        stubber.assert_no_pending_responses()
    assert failed_checks(result) == {"stack ownership"}
    assert '"component":"storage"' in ownership_lines(result)[0]


def legacy_template(config) -> dict:
    """A stack as an earlier version deployed it: no marker output, resources tagged with the name prefix."""
    tags = [{"Key": "project", "Value": config.name_prefix}]
    return {"Resources": {"Role": {"Type": "AWS::IAM::Role", "Properties": {"Tags": tags}}}}


def test_a_deployment_from_before_the_marker_is_recognised_by_what_earlier_versions_left(default_config, preflight):
    names = [default_config.names.stack(c) for c in ("network", "registry", "eks")]
    stacks = {name: {} for name in names}
    stacks[names[0]] = {"ConfigFingerprint": "0123456789abcdef"}
    unmarked = {name: legacy_template(default_config) for name in names}
    account = Account(default_config, stacks=stacks, unmarked=unmarked, repository_exists=True)
    result, stubbers = preflight(account)
    for stubber in stubbers:
        stubber.assert_no_pending_responses()
    assert result.exit_code == 0, result.output
    [line] = ownership_lines(result)
    assert line.startswith("PASS") and "deployed before the SkyrlHpOwnership output" in line
    assert "belongs to the deployed stack skyrl-hp-registry" in line_for(result, "name ECR repository")


def test_tagged_stacks_without_the_network_stacks_fingerprint_are_not_recognised(default_config, preflight):
    network, registry = default_config.names.stack("network"), default_config.names.stack("registry")
    unmarked = {network: legacy_template(default_config), registry: legacy_template(default_config)}
    account = Account(default_config, stacks={network: {}, registry: {}}, unmarked=unmarked, repository_exists=True)
    result, _ = preflight(account)
    assert failed_checks(result) == {"stack ownership", "name ECR repository"}
    assert len(ownership_lines(result)) == 2
    # The repository exists, and the stack named to own it is not shown to be this deployment's.
    assert "already exists but stack skyrl-hp-registry does not" in line_for(result, "name ECR repository")


# --- autoscaling prerequisites ----------------------------------------------------------------------------------


def autoscaling_lines(config, deployed=None, charts_dir=None) -> list[str]:
    from skyrl_hyperpod.ops.preflight import check_autoscaling_prerequisites

    return [result.line() for result in check_autoscaling_prerequisites(config, deployed, charts_dir)]


def test_autoscaling_prerequisites_only_for_on_demand(default_config):
    assert autoscaling_lines(default_config) == []


def test_autoscaling_prerequisites_of_a_new_cluster_and_the_pinned_agent():
    from conftest import VARIANT_ON_DEMAND

    from skyrl_hyperpod.validation.hyperpod_chart import resolve_charts_dir

    config = validate_config(VARIANT_ON_DEMAND)
    commit = config.versions.hyperpod_cli_commit
    if not (resolve_charts_dir() / commit).is_dir():
        pytest.skip(f"no copy of the HyperPod chart at {commit} (make hyperpod-chart)")
    assert autoscaling_lines(config) == [
        "PASS  autoscaling prerequisites: node provisioning: Continuous (what the hyperpod stack creates)",
        "PASS  autoscaling prerequisites: node recovery: Automatic (what the hyperpod stack creates)",
        f"PASS  autoscaling prerequisites: health-monitoring agent: 1.0.1892.0_1.0.424.0 from the chart at "
        f"{commit[:12]} (needs 1.0.742.0_1.0.241.0 or later)",
    ]


def test_autoscaling_prerequisites_a_deployed_cluster_misses(tmp_path, monkeypatch):
    from conftest import VARIANT_ON_DEMAND

    from skyrl_hyperpod.validation import hyperpod_chart

    # A configuration without automatic recovery is refused by validation (tests/config/test_worker_scaling.py): what
    # preflight still catches is a deployed cluster that differs from the configuration.
    config = validate_config(VARIANT_ON_DEMAND)
    # A cluster created before continuous provisioning; no chart copy in tmp_path: the agent check is SKIP.
    provisioning, recovery, agent = autoscaling_lines(config, {"NodeRecovery": "None"}, tmp_path)
    assert provisioning.startswith(
        "FAIL  autoscaling prerequisites: node provisioning: not set (the deployed cluster); autoscaling needs "
        "Continuous -> fix: a cluster's provisioning mode is set when it is created"
    )
    assert recovery == (
        "FAIL  autoscaling prerequisites: node recovery: None (the deployed cluster); autoscaling needs Automatic "
        "-> fix: set hyperpod.node_recovery: Automatic"
    )
    assert agent.startswith("SKIP  autoscaling prerequisites: health-monitoring agent: chart check: no copy of")
    provisioning, recovery, _ = autoscaling_lines(
        config, {"NodeProvisioningMode": "Continuous", "NodeRecovery": "Automatic"}, tmp_path
    )
    assert provisioning == "PASS  autoscaling prerequisites: node provisioning: Continuous (the deployed cluster)"
    # The deployed cluster's recovery is what counts until the next deploy changes it.
    assert recovery == "PASS  autoscaling prerequisites: node recovery: Automatic (the deployed cluster)"
    # An agent older than the page's minimum (compared number by number, not as text).
    monkeypatch.setattr(hyperpod_chart, "health_agent_image_tag", lambda commit, charts_dir=None: "1.0.99.0_1.0.241.0")
    *_, old = autoscaling_lines(config, None, tmp_path)
    assert old.startswith("FAIL  autoscaling prerequisites: health-monitoring agent: 1.0.99.0_1.0.241.0 from the chart")
    assert hyperpod_chart.agent_version("1.0.742.0_1.0.241.0") < hyperpod_chart.agent_version("1.0.1892.0_1.0.424.0")


# --- the tools the run book has you run -------------------------------------------------------------------------


def tool_lines(monkeypatch, tmp_path, **versions) -> list[str]:
    from conftest import install_fake_tools

    monkeypatch.setenv("PATH", str(install_fake_tools(tmp_path / "tools", **versions)))
    result = CliRunner().invoke(cli, ["preflight", "--region", "xx-nowhere-1"], obj=AwsClients())
    return [line for line in result.stdout.splitlines() if line.split("  ", 1)[-1].startswith(("AWS CLI:", "kubectl:"))]


def test_preflight_passes_the_aws_cli_v2_and_a_kubectl_of_the_clusters_version(monkeypatch, tmp_path):
    assert tool_lines(monkeypatch, tmp_path) == [
        "PASS  AWS CLI: version 2.27.50",
        "PASS  kubectl: version v1.33.2 (cluster 1.33)",
    ]


def test_preflight_fails_the_aws_cli_v1_and_a_missing_kubectl(monkeypatch, tmp_path):
    aws, kubectl = tool_lines(monkeypatch, tmp_path, aws="1.45.11", kubectl=None)
    assert aws.startswith(
        "FAIL  AWS CLI: version 1.45.11: the printed image-build command ends in `aws logs tail`, which only version 2 "
        "has -> fix: install AWS CLI v2: https://docs.aws.amazon.com/cli/"
    )
    assert kubectl.startswith("FAIL  kubectl: kubectl is not on PATH (the teardown plan deletes the workloads with it)")


def test_preflight_warns_of_a_kubectl_more_than_one_minor_version_from_the_cluster(monkeypatch, tmp_path):
    [_, kubectl] = tool_lines(monkeypatch, tmp_path, kubectl="v1.30.0")
    assert kubectl.startswith("WARN  kubectl: version v1.30.0, the cluster runs 1.33 (eks.kubernetes_version)")
