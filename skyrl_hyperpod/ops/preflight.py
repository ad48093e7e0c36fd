"""`preflight`: read-only checks before `cdk deploy`, one PASS/WARN/FAIL line each.

First the checks that read only the configuration (and the data bundled with the project), then those that ask
AWS through boto3: a user without credentials still sees every problem of the configuration in one run. Nothing
here creates, changes or deletes anything: only Describe/Get/List/Head calls.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from skyrl_hyperpod.config import ConfigError, ProjectConfig
from skyrl_hyperpod.config.loader import read_lock
from skyrl_hyperpod.config.names import KUBERAY_OPERATOR_RELEASE
from skyrl_hyperpod.config.placeholders import placeholder_findings
from skyrl_hyperpod.config.regions import aws_regions, az_id_prefix, region_problem
from skyrl_hyperpod.config.upstream_lock import LOCK_COMMAND, LOCK_FILE, lock_status
from skyrl_hyperpod.ops.review.replacement import CDK_HELM_CHART_TYPE
from skyrl_hyperpod.plumbing.errors import one_line
from skyrl_hyperpod.values.stack_ownership import has_config_fingerprint, legacy_ownership, marker_ownership


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
# The stacks stacks/compose.py `build_platform` synthesizes, by component (config.names.stack(component)), each with
# the components it depends on: what the cloud assembly's manifest (cdk.out/manifest.json) lists as the
# `dependencies` of its stack artifact, the graph `cdk deploy` and `cdk destroy` order stacks by. Written out here so
# the CLI knows them without synthesizing the app; tests/cdk/test_stack_graph.py checks both against synthesized
# platforms that between them turn every optional stack on.
STACK_DEPENDENCIES: dict[str, frozenset[str]] = {
    "network": frozenset(),
    "storage": frozenset({"network"}),
    "registry": frozenset(),
    "image-build": frozenset({"registry"}),
    "eks": frozenset({"network", "storage"}),
    "hyperpod": frozenset({"eks", "network", "storage"}),
    "observability": frozenset({"eks", "hyperpod"}),
    "studio": frozenset({"eks", "network"}),
    "ray-endpoint": frozenset({"eks", "hyperpod"}),
}
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


def check_admin_principals(config: ProjectConfig, caller_arn: str | None) -> list[CheckResult]:
    """An EKS access entry for whoever deploys (`eks.admin_principal_arns`; the stacks grant nobody cluster-admin
    implicitly). Without a caller (no credentials) only an empty list is known to fail: nothing is returned
    otherwise, and the check waits for credentials."""
    admins = config.eks.admin_principal_arns
    if caller_arn is None:
        if admins:
            return []
        return [
            CheckResult(
                "FAIL",
                "cluster access",
                "eks.admin_principal_arns is empty: after the deploy every kubectl and skyrl-hp cluster command "
                "would be refused (the stacks grant nobody cluster access implicitly)",
                "add your own IAM role or user ARN (aws sts get-caller-identity): "
                'eks: {admin_principal_arns: ["arn:aws:iam::<account>:role/<name>"]}',
            )
        ]
    caller = principal_arn(caller_arn)
    if any(_same_principal(arn, caller) for arn in admins):
        return [CheckResult("PASS", "cluster access", f"{caller} is in eks.admin_principal_arns")]
    return [
        CheckResult(
            "FAIL",
            "cluster access",
            f"{caller} is not in eks.admin_principal_arns ({len(admins)} listed): after the deploy every "
            "kubectl and skyrl-hp cluster command would be refused",
            f'add it: eks: {{admin_principal_arns: ["{caller}"]}}{_role_path_note(caller)}',
        )
    ]


def _role_path_note(role_arn: str) -> str:
    """A session ARN drops the role's path; IAM Identity Center's roles always have one
    (aws-reserved/sso.amazonaws.com/, plus the region outside us-east-1:
    https://docs.aws.amazon.com/singlesignon/latest/userguide/referencingpermissionsets.html)."""
    name = role_arn.rpartition(":role/")[2]
    if not name.startswith("AWSReservedSSO_"):
        return ""
    return (
        f", with the IAM Identity Center role's path before {name} (aws-reserved/sso.amazonaws.com/, then the region "
        f"unless Identity Center is in us-east-1): `aws iam get-role --role-name {name} --query Role.Arn` prints it"
    )


def check_endpoint_route(config: ProjectConfig) -> CheckResult:
    """A network path to the EKS API endpoint: public CIDRs, a Studio domain inside the VPC, or a stated VPN or
    Direct Connect (`eks.private_network_access`). The configuration alone decides it."""
    eks = config.eks
    if eks.public_access_cidrs:
        route = f"public endpoint for {', '.join(eks.public_access_cidrs)}"
    elif config.studio.enabled:
        route = "private endpoint, reached from the SageMaker Studio domain in the VPC"
    elif eks.private_network_access:
        route = "private endpoint, reached over the network stated in eks.private_network_access"
    else:
        return CheckResult(
            "FAIL",
            "API endpoint reachable",
            "the EKS API endpoint is private (eks.public_access_cidrs is empty) and nothing reaches the VPC: no "
            "Studio domain (studio.enabled) and no VPN or Direct Connect stated (eks.private_network_access)",
            "list your egress CIDR in eks.public_access_cidrs (curl https://checkip.amazonaws.com), or set "
            "studio.enabled: true, or eks.private_network_access: true if a VPN reaches the VPC",
        )
    return CheckResult("PASS", "API endpoint reachable", route)


def check_cluster_access(config: ProjectConfig, caller_arn: str) -> list[CheckResult]:
    """Whoever deploys must be able to use the cluster afterwards: an EKS access entry for the caller and a network
    path to the API endpoint (`check_admin_principals`, `check_endpoint_route`)."""
    return [*check_admin_principals(config, caller_arn), check_endpoint_route(config)]


def check_region_offering(config: ProjectConfig, region: str) -> CheckResult:
    """HyperPod in `region` with every group's instance type, from the AWS::SageMaker::Cluster data cfn-lint ships
    (the table the configuration is validated against when env.region is set; --region or the profile's region
    is checked here)."""
    groups = {f"hyperpod.{key}.instance_type": g.instance_type for key, g in config.hyperpod.instance_groups.items()}
    try:
        listed = region in aws_regions()
        problem = region_problem(region, groups) if listed else None
    except ValueError as error:  # cfn-lint's data missing: the setup is incomplete
        return CheckResult("WARN", "HyperPod in region", f"not checked: {error}")
    if not listed:
        return CheckResult(
            "WARN",
            "HyperPod in region",
            f"{region} is missing from the bundled HyperPod offering data (cfn-lint's), so it is not checked",
            "confirm HyperPod and the instance types in the region on the SageMaker pricing page, or update "
            "cfn-lint (requirements.txt)",
        )
    if problem:
        return CheckResult(
            "FAIL",
            "HyperPod in region",
            problem,
            "choose a region that offers every group's type (env.region or --region), or another instance type",
        )
    types = ", ".join(sorted(set(groups.values())))
    return CheckResult(
        "PASS", "HyperPod in region", f"{region} offers {types} (cfn-lint's AWS::SageMaker::Cluster data)"
    )


def check_az_id_region(config: ProjectConfig, region: str) -> CheckResult | None:
    """Whether network.hyperpod_az_id names a zone of `region`, from the id's region code (usw2 for us-west-2);
    None when the region's code is not derivable, and the EC2 zone lookup decides."""
    az_id = config.network.hyperpod_az_id
    prefix = az_id_prefix(region)
    if prefix is None:
        return None
    if az_id.split("-az")[0] != prefix:
        return CheckResult(
            "FAIL",
            "AZ id of region",
            f"network.hyperpod_az_id {az_id} is an availability zone id of another region: {region} has ids "
            f"{prefix}-az1, {prefix}-az2, ...",
            f"set network.hyperpod_az_id to an AZ id of {region} that offers the GPU type "
            f"(aws ec2 describe-availability-zones --region {region}), or target the AZ id's region",
        )
    return CheckResult("PASS", "AZ id of region", f"{az_id} is an availability zone id of {region}")


def check_placeholders(config: ProjectConfig) -> list[CheckResult]:
    """One FAIL per value of config/example.yaml still standing in for the user's own (`placeholder_findings`)."""
    results = []
    for finding in placeholder_findings(config):
        # Each finding reads "<key>: <value> ... placeholder: <what to put>"; the action becomes the fix hint.
        detail, marker, action = finding.rpartition("placeholder: ")
        if marker:
            results.append(CheckResult("FAIL", "placeholder", f"{detail}placeholder", action))
        else:
            results.append(CheckResult("FAIL", "placeholder", finding))
    return results or [CheckResult("PASS", "placeholder", "no value is one of config/example.yaml's placeholders")]


def instance_counts(config: ProjectConfig) -> Counter[str]:
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
    ml_types = sorted(instance_counts(config))
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
    needed = instance_counts(config)
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


def synthesized_stack_names(config: ProjectConfig) -> list[str]:
    """The stack names `build_platform` synthesizes for this configuration (its optional stacks as configured)."""
    optional = {
        "observability": config.observability.enabled,
        "studio": config.studio.enabled,
        "ray-endpoint": config.ray_endpoint_operator.enabled,
    }
    return [config.names.stack(component) for component in STACK_DEPENDENCIES if optional.get(component, True)]


def project_stack_components(config: ProjectConfig) -> dict[str, str]:
    """Stack name -> component for every stack the app can synthesize under this name_prefix, optional ones too: a
    stack left from an option turned off since is still this deployment's (`cdk deploy` never deletes a stack the app
    stopped synthesizing). Exact names, never a name pattern: `<name_prefix>-*` also matches every stack of a
    deployment whose name_prefix starts with `<name_prefix>-` (skyrl-hp-dev-hyperpod for skyrl-hp), and no two
    prefixes give the same name here (no component name ends with another one after a hyphen)."""
    return {config.names.stack(component): component for component in STACK_DEPENDENCIES}


def live_stacks(cloudformation: Any) -> dict[str, dict[str, Any]]:
    """Every stack of the account in the client's region that is not deleted -> its describe_stacks entry."""
    stacks: dict[str, dict[str, Any]] = {}
    for page in cloudformation.get_paginator("describe_stacks").paginate():
        for stack in page.get("Stacks", []):
            if stack["StackStatus"] != "DELETE_COMPLETE":
                stacks[stack["StackName"]] = stack
    return stacks


def deployed_project_stacks(
    cloudformation: Any, config: ProjectConfig, live: dict[str, dict[str, Any]] | None = None
) -> dict[str, dict[str, Any]]:
    """This deployment's live stacks (`project_stack_components`) -> their describe_stacks entry; `live`: the
    account's stacks when already listed."""
    ours = project_stack_components(config)
    listed = live_stacks(cloudformation) if live is None else live
    return {name: stack for name, stack in listed.items() if name in ours}


@dataclass(frozen=True)
class ProjectStacks:
    """The live stacks with this configuration's names, split by whether they are provably this deployment's
    (values/stack_ownership.py): only `ours` may be read as, updated as or deleted as this deployment's."""

    ours: dict[str, dict[str, Any]]  # stack name -> its describe_stacks entry
    evidence: dict[str, str]  # stack name in `ours` -> what shows it is ours
    unverified: dict[str, str]  # stack name -> why it is not shown to be ours


def _template(cloudformation: Any, name: str) -> dict[str, Any]:
    body = cloudformation.get_template(StackName=name, TemplateStage="Original")["TemplateBody"]
    return json.loads(body) if isinstance(body, str) else dict(body)


def project_stacks(
    cloudformation: Any, config: ProjectConfig, live: dict[str, dict[str, Any]] | None = None
) -> ProjectStacks:
    """This configuration's live stacks (`deployed_project_stacks`), each checked for the ownership marker; a stack
    without one is read through its template for what earlier versions left (`legacy_ownership`)."""
    named = deployed_project_stacks(cloudformation, config, live)
    component = project_stack_components(config)
    fingerprinted = has_config_fingerprint(named.get(config.names.stack("network")))
    ours: dict[str, dict[str, Any]] = {}
    evidence: dict[str, str] = {}
    unverified: dict[str, str] = {}
    for name, stack in sorted(named.items()):
        ownership = marker_ownership(stack, config, component[name])
        if ownership is None:
            ownership = legacy_ownership(_template(cloudformation, name), config, fingerprinted_network=fingerprinted)
        if ownership.ours:
            ours[name], evidence[name] = stack, ownership.evidence
        else:
            unverified[name] = ownership.evidence
    return ProjectStacks(ours, evidence, unverified)


def check_stack_ownership(stacks: ProjectStacks) -> list[CheckResult]:
    """One FAIL per live stack that has one of this configuration's names but is not shown to be this deployment's:
    `cdk deploy --all` would update it with this app's template and `skyrl-hp teardown` leaves it alone."""
    results = [
        CheckResult(
            "FAIL",
            "stack ownership",
            f"stack {name} has one of this configuration's names but is not this deployment's: {why}; cdk deploy --all "
            "would replace its template with this app's",
            f"choose a name_prefix no live stack uses; if {name} is this deployment's after all, see docs/teardown.md "
            "(Which stacks are this deployment's)",
        )
        for name, why in sorted(stacks.unverified.items())
    ]
    if not results:
        found = ", ".join(f"{name} ({stacks.evidence[name]})" for name in sorted(stacks.ours)) or "none deployed yet"
        results.append(CheckResult("PASS", "stack ownership", f"stacks of this deployment: {found}"))
    return results


def nested_deployments(live: dict[str, dict[str, Any]], config: ProjectConfig) -> dict[str, list[str]]:
    """Other deployments whose name_prefix nests with this one (one is the other plus `-...`) -> their live stacks.

    A deployment is recognised by its stack names, `<its prefix>-<component>`. Such a pair shares every name
    pattern: `cdk destroy '<prefix>-*'`, the `<prefix>-` log group prefixes the teardown plan lists, and any older
    skyrl-hp that selected `<prefix>-*` act on both."""
    prefix, ours = config.name_prefix, project_stack_components(config)
    found: dict[str, list[str]] = {}
    for name in sorted(set(live) - set(ours)):
        for component in STACK_DEPENDENCIES:
            other = name.removesuffix(f"-{component}")
            if other != name and (other.startswith(f"{prefix}-") or prefix.startswith(f"{other}-")):
                found.setdefault(other, []).append(name)
    return found


def check_prefix_nesting(live: dict[str, dict[str, Any]], config: ProjectConfig) -> CheckResult:
    prefix = config.name_prefix
    nested = nested_deployments(live, config)
    if not nested:
        return CheckResult("PASS", "name_prefix", f"no other deployment's name_prefix nests with {prefix!r}")
    deployments = "; ".join(f"{other!r} ({', '.join(names)})" for other, names in sorted(nested.items()))
    return CheckResult(
        "FAIL",
        "name_prefix",
        f"name_prefix {prefix!r} nests with the name_prefix of another live deployment: {deployments}; every "
        f"'<name_prefix>-*' pattern (cdk destroy '{prefix}-*', log group prefixes) would match both",
        "choose a name_prefix that is neither another deployment's name_prefix plus '-...' nor the start of one "
        "(skyrl-hp and skyrl-hp-dev nest; skyrl-hp and skyrl-dev do not)",
    )


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


def legacy_kuberay_resources(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Logical id -> resource of the CDK HelmChart resources that install the KubeRay release in a deployed EKS
    stack's template (this project declared KubeRay that way before the git installer took it over)."""
    return {
        logical_id: resource
        for logical_id, resource in (template.get("Resources") or {}).items()
        if resource.get("Type") == CDK_HELM_CHART_TYPE
        and (resource.get("Properties") or {}).get("Release") == KUBERAY_OPERATOR_RELEASE
    }


def check_kuberay_move(config: ProjectConfig, cloudformation: Any, deployed: dict[str, Any]) -> CheckResult:
    """Whether this deploy moves the KubeRay release to the git installer safely: a deployed CDK HelmChart resource
    of it must be retained before a deploy removes it, or CloudFormation's clean-up runs its `helm uninstall` on the
    release the git installer has just taken over (docs/helm-installer.md, "Moving the KubeRay release")."""
    label, stack = "KubeRay release", config.names.stack("eks")
    retaining = config.helm_installer.retain_legacy_kuberay_release
    step_one = "set helm_installer.retain_legacy_kuberay_release: true, deploy, then set it false and deploy again"
    if stack not in deployed:
        return CheckResult("PASS", label, f"{stack} is not deployed: the git installer installs the release")
    template = cloudformation.get_template(StackName=stack, TemplateStage="Original")["TemplateBody"]
    legacy = legacy_kuberay_resources(json.loads(template) if isinstance(template, str) else template)
    if not legacy:
        if retaining:
            return CheckResult(
                "WARN", label, f"{stack} has no CDK HelmChart of the release to retain", "set it false again"
            )
        return CheckResult("PASS", label, f"{stack} installs it with the git installer")
    unretained = sorted(name for name, resource in legacy.items() if resource.get("DeletionPolicy") != "Retain")
    if retaining:
        return CheckResult("PASS", label, f"this deploy retains {', '.join(sorted(legacy))}; then set it false")
    if unretained:
        return CheckResult(
            "FAIL",
            label,
            f"{stack} installs it with CDK's HelmChart ({', '.join(unretained)}, not retained): this deploy would move "
            "it to the git installer and CloudFormation's clean-up would then uninstall it",
            step_one,
        )
    return CheckResult(
        "PASS", label, f"this deploy moves it from the retained {', '.join(sorted(legacy))} to the git installer"
    )


def check_names(config: ProjectConfig, clients: AwsClients, region: str, account: str) -> list[CheckResult]:
    from botocore.exceptions import ClientError

    cloudformation = clients("cloudformation", region)
    live = live_stacks(cloudformation)
    stacks = project_stacks(cloudformation, config, live)
    # Only a stack shown to be this deployment's owns a name below or holds the KubeRay release.
    deployed = stacks.ours
    results = [check_prefix_nesting(live, config), *check_stack_ownership(stacks)]

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
    results.append(check_kuberay_move(config, cloudformation, deployed))
    return results


AUTOSCALING_CHECK = "autoscaling prerequisites"


def check_autoscaling_prerequisites(
    config: ProjectConfig, deployed: dict[str, Any] | None, charts_dir: Path | None = None
) -> list[CheckResult]:
    """HyperPod's prerequisites for managed Karpenter
    (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling.html), for a configuration
    with an autoscaled group: continuous node provisioning and automatic node recovery (the deployed cluster's,
    DescribeCluster `deployed`, else what the stack creates), and the health-monitoring agent the pinned chart
    installs. Nothing for fixed groups."""
    from skyrl_hyperpod.plumbing.errors import InputError
    from skyrl_hyperpod.plumbing.upstream import (
        AUTOSCALING_MIN_AGENT_TAG,
        AUTOSCALING_NODE_RECOVERY,
        HYPERPOD_EKS_NODE_PROVISIONING_MODE,
    )
    from skyrl_hyperpod.validation import hyperpod_chart

    if not config.hyperpod.autoscaled_groups:
        return []
    results = []
    source = "the deployed cluster" if deployed else "what the hyperpod stack creates"
    # DescribeCluster leaves NodeProvisioningMode out for a cluster created without continuous provisioning.
    mode = deployed.get("NodeProvisioningMode", "not set") if deployed else HYPERPOD_EKS_NODE_PROVISIONING_MODE
    results.append(
        CheckResult("PASS", f"{AUTOSCALING_CHECK}: node provisioning", f"{mode} ({source})")
        if mode == HYPERPOD_EKS_NODE_PROVISIONING_MODE
        else CheckResult(
            "FAIL",
            f"{AUTOSCALING_CHECK}: node provisioning",
            f"{mode} ({source}); autoscaling needs {HYPERPOD_EKS_NODE_PROVISIONING_MODE}",
            "a cluster's provisioning mode is set when it is created: tear the hyperpod stack down and deploy again, "
            "or keep hyperpod.worker_group.scaling: fixed",
        )
    )
    recovery = deployed.get("NodeRecovery", "not set") if deployed else config.hyperpod.node_recovery
    results.append(
        CheckResult("PASS", f"{AUTOSCALING_CHECK}: node recovery", f"{recovery} ({source})")
        if recovery == AUTOSCALING_NODE_RECOVERY
        else CheckResult(
            "FAIL",
            f"{AUTOSCALING_CHECK}: node recovery",
            f"{recovery} ({source}); autoscaling needs {AUTOSCALING_NODE_RECOVERY}",
            f"set hyperpod.node_recovery: {AUTOSCALING_NODE_RECOVERY}",
        )
    )
    commit = config.versions.hyperpod_cli_commit
    try:
        tag = hyperpod_chart.health_agent_image_tag(commit, charts_dir)
    except InputError as error:
        results.append(CheckResult("SKIP", f"{AUTOSCALING_CHECK}: health-monitoring agent", error.problems[0]))
        return results
    if hyperpod_chart.agent_version(tag) >= hyperpod_chart.agent_version(AUTOSCALING_MIN_AGENT_TAG):
        results.append(
            CheckResult(
                "PASS",
                f"{AUTOSCALING_CHECK}: health-monitoring agent",
                f"{tag} from the chart at {commit[:12]} (needs {AUTOSCALING_MIN_AGENT_TAG} or later)",
            )
        )
    else:
        results.append(
            CheckResult(
                "FAIL",
                f"{AUTOSCALING_CHECK}: health-monitoring agent",
                f"{tag} from the chart at {commit[:12]}; autoscaling needs {AUTOSCALING_MIN_AGENT_TAG} or later",
                "pin a newer versions.hyperpod_cli_commit",
            )
        )
    return results


def deployed_hyperpod_cluster(config: ProjectConfig, clients: AwsClients, region: str) -> dict[str, Any] | None:
    """DescribeCluster of this configuration's HyperPod cluster, None when there is none yet."""
    from botocore.exceptions import ClientError

    try:
        described: dict[str, Any] = clients("sagemaker", region).describe_cluster(
            ClusterName=config.names.hyperpod_cluster
        )
    except ClientError as error:
        if _error_code(error) in ("ResourceNotFound", "ValidationException"):
            return None
        raise
    return described


def check_upstream_lock(config: ProjectConfig, lock_file: Path | None = None) -> list[CheckResult]:
    """One FAIL per movable upstream name (image tag, SkyRL's release tag, the checkpoint's repository) that the
    configuration does not pin and upstream-lock.yaml does not resolve: a deploy would pull whatever it names today."""
    lock_file = lock_file or LOCK_FILE
    try:
        status = lock_status(config, read_lock(lock_file), lock_file)
    except ConfigError as error:
        return [CheckResult("FAIL", "upstream lock", problem, f"run `{LOCK_COMMAND}`") for problem in error.problems]
    failures = [
        CheckResult(
            "FAIL", "upstream lock", f"{pin.describe()} has no entry in {lock_file.name}", f"run `{LOCK_COMMAND}`"
        )
        for pin in status.missing
    ] + [
        CheckResult(
            "FAIL",
            "upstream lock",
            f"{pin.describe()} is not resolved in {lock_file.name} (null)",
            f"run `{LOCK_COMMAND}` with registry access and commit the file",
        )
        for pin in status.unresolved
    ]
    return failures or [CheckResult("PASS", "upstream lock", "every image, tag and checkpoint is pinned")]


def configuration_checks(config: ProjectConfig, region: str | None) -> list[CheckResult]:
    """The checks that need no AWS call, for a valid `region` (None: the region-bound ones are left out)."""
    results = []
    if region is not None and config.env.region and region != config.env.region:
        # The stacks take env.region (stacks/compose.py), so checks for another region say nothing about the deploy.
        results.append(
            CheckResult(
                "FAIL",
                "env.region",
                f"cdk deploy puts the stacks in env.region {config.env.region}, these checks ran for {region} "
                "(--region)",
                f"drop --region, or set env.region: {region}",
            )
        )
    if region is not None:
        results.append(check_region_offering(config, region))
        az = check_az_id_region(config, region)
        results += [az] if az else []
    results.append(check_endpoint_route(config))
    results += check_placeholders(config)
    results += check_upstream_lock(config)
    return results


def run_preflight(
    config: ProjectConfig, clients: AwsClients, region: str | None, qualifier: str = DEFAULT_BOOTSTRAP_QUALIFIER
) -> list[CheckResult]:
    region_result = check_region(region)
    if region_result.status == "FAIL" or region is None:
        return [
            region_result,
            *configuration_checks(config, None),
            *check_admin_principals(config, None),
            CheckResult("SKIP", "remaining checks", "they need a valid region"),
        ]
    results = [region_result, *configuration_checks(config, region)]
    credentials, account, caller = check_credentials(config, clients, region)
    if account is None or caller is None:
        return [
            *results,
            *check_admin_principals(config, None),
            credentials,
            CheckResult(
                "SKIP",
                "remaining checks",
                "cluster access of the caller, AZ offerings, quotas, cdk bootstrap, names: they need working "
                "credentials",
            ),
        ]
    results += [credentials, *check_admin_principals(config, caller)]
    # An AZ id of another region is already a FAIL line; EC2 would only report it again.
    if not any(result.name == "AZ id of region" and result.status == "FAIL" for result in results):
        results += _guard("hyperpod AZ offerings", lambda: check_instance_offerings(config, clients, region))
    results += _guard("quotas", lambda: check_quotas(config, clients, region))
    results += _guard("cdk bootstrap", lambda: check_bootstrap(clients, region, account, qualifier))
    results += _guard("names", lambda: check_names(config, clients, region, account))
    if config.hyperpod.autoscaled_groups:
        results += _guard(
            AUTOSCALING_CHECK,
            lambda: check_autoscaling_prerequisites(config, deployed_hyperpod_cluster(config, clients, region)),
        )
    return results
