"""`preflight`: read-only checks through boto3 before `cdk deploy`, one PASS/WARN/FAIL line each.

Nothing here creates, changes or deletes anything: only Describe/Get/List/Head calls.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.errors import one_line


class AwsClients(Protocol):
    """boto3 clients by (service, region) from one session: `skyrl_hyperpod.cli.common.AwsClients` or a test's."""

    @property
    def session(self) -> Any: ...

    def __call__(self, service: str, region: str | None = None) -> Any: ...


CheckStatus = Literal["PASS", "WARN", "FAIL", "SKIP"]

DEFAULT_BOOTSTRAP_QUALIFIER = "hnb659fds"
# aws-cdk-lib 2.x templates carry a rule that rejects bootstrap stacks older than version 6.
MIN_BOOTSTRAP_VERSION = 6
QUOTA_NAME = "{instance_type} for cluster usage"
# Stacks that own each physically named resource (config.names.stack(component)).
OWNER_COMPONENT = {
    "lifecycle bucket": "storage",
    "ECR repository": "registry",
    "EKS cluster": "eks",
    "HyperPod cluster": "hyperpod",
}


@dataclass(frozen=True)
class CheckResult:
    status: CheckStatus
    name: str
    detail: str
    hint: str = ""

    def line(self) -> str:
        text = f"{self.status:<4}  {self.name}: {self.detail}"
        return f"{text} -> fix: {self.hint}" if self.hint and self.status != "PASS" else text


def lifecycle_bucket_name(config: ProjectConfig, account: str, region: str) -> str:
    """The lifecycle-script bucket name: the configured one, else the derived `sagemaker-<prefix>-lifecycle-...`."""
    return config.names.lifecycle_bucket(config.hyperpod.lifecycle_bucket_name, account=account, region=region)


@functools.cache
def known_regions() -> frozenset[str]:
    """The Regions botocore's bundled endpoint data lists for SageMaker: the same for every session of a process,
    so it is parsed once."""
    import botocore.session

    session = botocore.session.get_session()
    regions: set[str] = set()
    for partition in session.get_available_partitions():
        regions.update(session.get_available_regions("sagemaker", partition_name=partition))
    return frozenset(regions)


def _error_code(error: Exception) -> str:
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _guard(name: str, check: Callable[[], list[CheckResult]]) -> list[CheckResult]:
    """Run one check; an AWS error becomes a FAIL line naming the call's error instead of a traceback."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return check()
    except (BotoCoreError, ClientError) as error:
        hint = "grant this read-only permission to the caller" if "AccessDenied" in _error_code(error) else ""
        return [CheckResult("FAIL", name, one_line(error), hint)]


def check_region(region: str | None) -> CheckResult:
    if not region:
        return CheckResult(
            "FAIL", "region", "no region set", "set env.region in the config, pass --region or export AWS_REGION"
        )
    if region not in known_regions():
        return CheckResult(
            "FAIL",
            "region",
            f"{region!r} is not a region where SageMaker is available",
            "use a region name such as us-west-2 (aws ec2 describe-regions lists yours)",
        )
    return CheckResult("PASS", "region", region)


def check_credentials(
    config: ProjectConfig, clients: AwsClients, region: str
) -> tuple[CheckResult, str | None, str | None]:
    """(result, account, caller ARN)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        identity = clients("sts", region).get_caller_identity()
    except (BotoCoreError, ClientError) as error:
        return (
            CheckResult(
                "FAIL",
                "credentials",
                one_line(error),
                "configure credentials (aws configure sso / AWS_PROFILE) for the target account",
            ),
            None,
            None,
        )
    account = identity["Account"]
    if config.env.account and config.env.account != account:
        return (
            CheckResult(
                "FAIL",
                "credentials",
                f"credentials are for account {account}, the config targets {config.env.account}",
                "switch profile or fix env.account",
            ),
            account,
            identity["Arn"],
        )
    return CheckResult("PASS", "credentials", f"account {account} as {identity['Arn']}"), account, identity["Arn"]


def principal_arn(caller_arn: str) -> str:
    """The IAM principal behind an sts:GetCallerIdentity ARN: an assumed-role session becomes its role's ARN
    (without the role's path, which the session ARN does not carry)."""
    if ":assumed-role/" in caller_arn:
        head, rest = caller_arn.split(":assumed-role/", 1)
        return head.replace(":sts::", ":iam::") + ":role/" + rest.split("/", 1)[0]
    return caller_arn


def _same_principal(configured: str, caller: str) -> bool:
    if configured == caller:
        return True
    # arn:aws:iam::<account>:role/<path>/<name> matches a session of role <name> in that account.
    conf_head, _, conf_name = configured.partition(":role/")
    call_head, _, call_name = caller.partition(":role/")
    return bool(conf_name) and conf_head == call_head and conf_name.rsplit("/", 1)[-1] == call_name


def check_cluster_access(config: ProjectConfig, caller_arn: str) -> list[CheckResult]:
    """Whoever deploys must be able to use the cluster afterwards: an EKS access entry for the caller
    (`eks.admin_principal_arns`; the stacks grant nobody cluster-admin implicitly) and a network path to the
    API endpoint (public CIDRs, a Studio domain inside the VPC, or a stated VPN/Direct Connect)."""
    caller = principal_arn(caller_arn)
    admins = config.eks.admin_principal_arns
    results = []
    if any(_same_principal(arn, caller) for arn in admins):
        results.append(CheckResult("PASS", "cluster access", f"{caller} is in eks.admin_principal_arns"))
    else:
        results.append(
            CheckResult(
                "FAIL",
                "cluster access",
                f"{caller} is not in eks.admin_principal_arns ({len(admins)} listed): after the deploy every "
                "kubectl and skyrl-hp cluster command would be refused",
                f'add it: eks: {{admin_principal_arns: ["{caller}"]}}',
            )
        )
    eks = config.eks
    if eks.public_access_cidrs:
        route = f"public endpoint for {', '.join(eks.public_access_cidrs)}"
    elif config.studio.enabled:
        route = "private endpoint, reached from the SageMaker Studio domain in the VPC"
    elif eks.private_network_access:
        route = "private endpoint, reached over the network stated in eks.private_network_access"
    else:
        route = ""
    if route:
        results.append(CheckResult("PASS", "API endpoint reachable", route))
    else:
        results.append(
            CheckResult(
                "FAIL",
                "API endpoint reachable",
                "the EKS API endpoint is private (eks.public_access_cidrs is empty) and nothing reaches the VPC: no "
                "Studio domain (studio.enabled) and no VPN or Direct Connect stated (eks.private_network_access)",
                "list your egress CIDR in eks.public_access_cidrs (curl https://checkip.amazonaws.com), or set "
                "studio.enabled: true, or eks.private_network_access: true if a VPN reaches the VPC",
            )
        )
    return results


def _instance_counts(config: ProjectConfig) -> Counter[str]:
    counts: Counter[str] = Counter()
    for group in config.hyperpod.instance_groups.values():
        counts[group.instance_type] += group.instance_count
    return counts


def check_instance_offerings(config: ProjectConfig, clients: AwsClients, region: str) -> list[CheckResult]:
    """HyperPod has no public per-AZ offering API, so ask EC2 for the same family and size in the AZ id.

    An EC2 type missing from the AZ rules the HyperPod type out; present, it is likely but not certain.
    """
    ec2 = clients("ec2", region)
    az_id = config.network.hyperpod_az_id
    zones = ec2.describe_availability_zones(AllAvailabilityZones=True)["AvailabilityZones"]
    if az_id not in {z.get("ZoneId") for z in zones}:
        return [
            CheckResult(
                "FAIL",
                "hyperpod AZ id",
                f"{az_id} is not an availability zone id of {region}",
                f"set network.hyperpod_az_id to one of {', '.join(sorted(z['ZoneId'] for z in zones))}",
            )
        ]
    results = []
    ml_types = sorted(_instance_counts(config))
    ec2_types = {t: t.removeprefix("ml.") for t in ml_types}
    offered: set[str] = set()
    paginator = ec2.get_paginator("describe_instance_type_offerings")
    for page in paginator.paginate(
        LocationType="availability-zone-id",
        Filters=[
            {"Name": "location", "Values": [az_id]},
            {"Name": "instance-type", "Values": sorted(ec2_types.values())},
        ],
    ):
        offered.update(o["InstanceType"] for o in page["InstanceTypeOfferings"])
    for ml_type, ec2_type in ec2_types.items():
        if ec2_type in offered:
            results.append(
                CheckResult(
                    "PASS",
                    f"offering {ml_type}",
                    f"{ec2_type} is offered in {az_id} (EC2 offering; HyperPod capacity is not guaranteed by it)",
                )
            )
        else:
            results.append(
                CheckResult(
                    "FAIL",
                    f"offering {ml_type}",
                    f"{ec2_type} is not offered in {az_id}",
                    "pick an AZ id that offers it (network.hyperpod_az_id) or another instance type",
                )
            )
    return results


def _quota_values(quotas_client: Any, method: str) -> dict[str, float]:
    values: dict[str, float] = {}
    for page in quotas_client.get_paginator(method).paginate(ServiceCode="sagemaker"):
        for quota in page.get("Quotas", []):
            values[quota["QuotaName"].lower()] = float(quota["Value"])
    return values


def check_quotas(config: ProjectConfig, clients: AwsClients, region: str) -> list[CheckResult]:
    quotas = clients("service-quotas", region)
    applied = _quota_values(quotas, "list_service_quotas")
    needed = _instance_counts(config)
    defaults: dict[str, float] | None = None
    results = []
    for instance_type, count in sorted(needed.items()):
        name = QUOTA_NAME.format(instance_type=instance_type)
        value = applied.get(name.lower())
        source = "applied"
        if value is None:
            # Quotas never raised have no applied value; their AWS default is what counts.
            defaults = defaults if defaults is not None else _quota_values(quotas, "list_aws_default_service_quotas")
            value, source = defaults.get(name.lower()), "default"
        if value is None:
            results.append(
                CheckResult(
                    "WARN",
                    f"quota {instance_type}",
                    f"no SageMaker quota named {name!r} found",
                    "check Service Quotas > Amazon SageMaker for the cluster-usage quota of this type",
                )
            )
        elif value >= count:
            results.append(
                CheckResult("PASS", f"quota {instance_type}", f"{name!r} = {value:g} ({source}), config needs {count}")
            )
        else:
            results.append(
                CheckResult(
                    "FAIL",
                    f"quota {instance_type}",
                    f"{name!r} = {value:g} ({source}), config needs {count}",
                    f"request an increase to >= {count} in Service Quotas > Amazon SageMaker",
                )
            )
    return results


def check_bootstrap(clients: AwsClients, region: str, account: str, qualifier: str) -> list[CheckResult]:
    from botocore.exceptions import ClientError

    parameter = f"/cdk-bootstrap/{qualifier}/version"
    try:
        version = int(clients("ssm", region).get_parameter(Name=parameter)["Parameter"]["Value"])
    except ClientError as error:
        if _error_code(error) != "ParameterNotFound":
            raise
        return [
            CheckResult(
                "FAIL",
                "cdk bootstrap",
                f"SSM parameter {parameter} not found in {region}",
                f"run: cdk bootstrap aws://{account}/{region}",
            )
        ]
    if version < MIN_BOOTSTRAP_VERSION:
        return [
            CheckResult(
                "FAIL",
                "cdk bootstrap",
                f"bootstrap version {version} < {MIN_BOOTSTRAP_VERSION}",
                f"re-run: cdk bootstrap aws://{account}/{region}",
            )
        ]
    return [CheckResult("PASS", "cdk bootstrap", f"version {version} ({parameter})")]


def deployed_project_stacks(cloudformation: Any, config: ProjectConfig) -> dict[str, dict[str, Any]]:
    """This project's live stacks (name prefix `<name_prefix>-`) -> their describe_stacks entry."""
    stacks: dict[str, dict[str, Any]] = {}
    for page in cloudformation.get_paginator("describe_stacks").paginate():
        for stack in page.get("Stacks", []):
            if stack["StackName"].startswith(f"{config.name_prefix}-") and stack["StackStatus"] != "DELETE_COMPLETE":
                stacks[stack["StackName"]] = stack
    return stacks


def _collision(
    kind: str, name: str, exists: bool, config: ProjectConfig, deployed: dict[str, Any], foreign: bool = False
) -> CheckResult:
    owner = config.names.stack(OWNER_COMPONENT[kind])
    label = f"name {kind}"
    if foreign:
        return CheckResult(
            "FAIL",
            label,
            f"{name} exists in another account (S3 names are global)",
            "set a different name_prefix (or hyperpod.lifecycle_bucket_name)",
        )
    if not exists:
        return CheckResult("PASS", label, f"{name} is free")
    if owner in deployed:
        return CheckResult("PASS", label, f"{name} exists and belongs to the deployed stack {owner}")
    return CheckResult(
        "FAIL",
        label,
        f"{name} already exists but stack {owner} does not (retained from an earlier deploy?)",
        "delete or rename it, or change name_prefix",
    )


def check_names(config: ProjectConfig, clients: AwsClients, region: str, account: str) -> list[CheckResult]:
    from botocore.exceptions import ClientError

    deployed = deployed_project_stacks(clients("cloudformation", region), config)
    results = []

    bucket = lifecycle_bucket_name(config, account, region)
    try:
        clients("s3", region).head_bucket(Bucket=bucket, ExpectedBucketOwner=account)
        results.append(_collision("lifecycle bucket", bucket, True, config, deployed))
    except ClientError as error:
        code = _error_code(error)
        if code in ("404", "NoSuchBucket", "NotFound"):
            results.append(_collision("lifecycle bucket", bucket, False, config, deployed))
        elif code in ("403", "AccessDenied"):
            results.append(_collision("lifecycle bucket", bucket, True, config, deployed, foreign=True))
        else:
            raise

    def described(describe: Callable[[], object], not_found_code: str) -> bool:
        """Whether the describe call finds the resource; other errors propagate."""
        try:
            describe()
        except ClientError as error:
            if _error_code(error) != not_found_code:
                raise
            return False
        return True

    repository = config.names.ecr_repository
    exists = described(
        lambda: clients("ecr", region).describe_repositories(repositoryNames=[repository]),
        "RepositoryNotFoundException",
    )
    results.append(_collision("ECR repository", repository, exists, config, deployed))

    eks_name = config.names.eks_cluster
    exists = described(lambda: clients("eks", region).describe_cluster(name=eks_name), "ResourceNotFoundException")
    results.append(_collision("EKS cluster", eks_name, exists, config, deployed))

    hyperpod_name = config.names.hyperpod_cluster
    summaries = clients("sagemaker", region).list_clusters(NameContains=hyperpod_name).get("ClusterSummaries", [])
    exists = any(c.get("ClusterName") == hyperpod_name for c in summaries)
    results.append(_collision("HyperPod cluster", hyperpod_name, exists, config, deployed))
    return results


def run_preflight(
    config: ProjectConfig, clients: AwsClients, region: str | None, qualifier: str = DEFAULT_BOOTSTRAP_QUALIFIER
) -> list[CheckResult]:
    region_result = check_region(region)
    if region_result.status == "FAIL" or region is None:
        return [region_result, CheckResult("SKIP", "remaining checks", "they need a valid region")]
    credentials, account, caller = check_credentials(config, clients, region)
    results = [region_result, credentials]
    if account is None or caller is None:
        return [*results, CheckResult("SKIP", "remaining checks", "they need working credentials")]
    results += check_cluster_access(config, caller)
    results += _guard("hyperpod AZ offerings", lambda: check_instance_offerings(config, clients, region))
    results += _guard("quotas", lambda: check_quotas(config, clients, region))
    results += _guard("cdk bootstrap", lambda: check_bootstrap(clients, region, account, qualifier))
    results += _guard("names", lambda: check_names(config, clients, region, account))
    return results
