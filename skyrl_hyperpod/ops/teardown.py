"""`skyrl-hp teardown --plan`: the order of operations that removes the platform without losing data.

Offline and read-only: it prints commands, it never runs them. What stays behind on purpose (data) and
by CloudFormation's or the services' own doing (log groups, a retained key) is listed with the command
that removes each, and docs/teardown.md lists the same (a test keeps them in step).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from skyrl_hyperpod.config import CONFIG_ENV_VAR, ProjectConfig
from skyrl_hyperpod.config.names import PROJECT_TAG_KEY
from skyrl_hyperpod.values.stack_outputs import OperatorOutputKey, OutputKey

from .preflight import STACK_DEPENDENCIES


@dataclass(frozen=True)
class Step:
    title: str
    why: str
    commands: tuple[str, ...]


@dataclass(frozen=True)
class Leftover:
    what: str
    removal: str


def _output(stack: str, key: str) -> str:
    return (
        f"aws cloudformation describe-stacks --stack-name {stack} "
        f"--query \"Stacks[0].Outputs[?OutputKey=='{key}'].OutputValue\" --output text"
    )


def replaced_file_systems_query(prefix: str, current: str = "$FSX_ID") -> str:
    """JMESPath over `aws fsx describe-file-systems`: the project's file systems other than the current one,
    i.e. those an update replaced (the storage stack retains a replaced file system)."""
    return (
        f"FileSystems[?FileSystemId!='{current}' && Tags[?Key=='{PROJECT_TAG_KEY}' && Value=='{prefix}']].FileSystemId"
    )


def stack_names_pattern(config: ProjectConfig) -> str:
    """This configuration's stack names in shell brace form, `<name_prefix>-{network,storage,...}`: never
    `<name_prefix>-*`, which also matches a deployment whose name_prefix starts with `<name_prefix>-`."""
    return f"{config.name_prefix}-{{{','.join(STACK_DEPENDENCIES)}}}"


def plan(config: ProjectConfig, config_file: str | None = None, region: str | None = None) -> list[Step]:
    """The ordered steps for this configuration (`config_file`, None for the defaults) in `region`."""
    names = config.names
    storage = names.stack("storage")
    stacks = stack_names_pattern(config)
    target = [f"export {CONFIG_ENV_VAR}={shlex.quote(config_file)}"] if config_file else [f"unset {CONFIG_ENV_VAR}"]
    target.append(
        f"export AWS_REGION={region}"
        if region
        else "export AWS_REGION=<region>  # env.region is not set: the region the stacks were deployed to"
    )
    steps = [
        Step(
            f"Point this shell at the configuration (stacks {stacks})",
            "cdk destroy, the aws commands and skyrl-hp below act on the stacks of this configuration in this region",
            (*target, "skyrl-hp kubeconfig  # kubectl's context for the cluster"),
        ),
        Step(
            "Record the FSx file system id (it names the final backup later)",
            "the storage stack and its outputs are gone after the destroy",
            (f"FSX_ID=$({_output(storage, OutputKey.FSX_FILE_SYSTEM_ID.value)})",),
        ),
        Step(
            "Delete the Kubernetes workloads",
            "nothing may write to FSx while its final backup runs, and a Service of type LoadBalancer "
            "would leave a load balancer (network interfaces, security groups) in the VPC",
            (
                "kubectl delete -f dist/ --ignore-not-found --wait=true",
                "kubectl get services --all-namespaces --field-selector spec.type=LoadBalancer  # must list nothing",
            ),
        ),
        Step(
            "Take a full FSx backup now and wait until it is AVAILABLE",
            "CloudFormation waits at most an hour for the storage stack's final backup, and a first backup copies "
            "the whole file system; FSx backups are incremental, so with this one in place the final backup only "
            "copies what changed since. Nothing limits how long this one takes",
            (
                "BACKUP_ID=$(aws fsx create-backup --file-system-id $FSX_ID --query Backup.BackupId --output text)",
                "aws fsx describe-backups --backup-ids $BACKUP_ID --query 'Backups[0].[Lifecycle,ProgressPercent]' "
                "--output text  # repeat until AVAILABLE; FAILED: read FailureDetails and take it again",
            ),
        ),
        Step(
            "Delete the FSx file systems that updates replaced",
            "the storage stack keeps a file system an update replaced (with its data); its network interfaces sit "
            "in the HyperPod subnet and would make deleting the network stack fail. FSx backs each one up before "
            "deleting it (SkipFinalBackup=false)",
            (
                f'aws fsx describe-file-systems --query "{replaced_file_systems_query(config.name_prefix)}" '
                "--output text  # usually none",
                "aws fsx delete-file-system --file-system-id <id> --lustre-configuration SkipFinalBackup=false"
                "  # for each, once you have what you need from it",
            ),
        ),
    ]
    if config.studio.enabled:
        studio = names.stack("studio")
        steps += [
            Step(
                "Remove the Studio users' apps, spaces and user profiles",
                "SageMaker refuses to delete a domain that still has them; a space's EBS volume is deleted with "
                "the space, so users copy what they need to their home directory or S3 first",
                (
                    f"DOMAIN_ID=$({_output(studio, OperatorOutputKey.STUDIO_DOMAIN_ID.value)})",
                    f"HOME_EFS=$({_output(studio, OperatorOutputKey.STUDIO_HOME_EFS_ID.value)})",
                    "aws sagemaker list-apps --domain-id-equals $DOMAIN_ID  # aws sagemaker delete-app ... for each",
                    "aws sagemaker list-spaces --domain-id-equals $DOMAIN_ID"
                    "  # aws sagemaker delete-space ... for each",
                    "aws sagemaker list-user-profiles --domain-id-equals $DOMAIN_ID"
                    "  # aws sagemaker delete-user-profile ... for each",
                ),
            ),
            Step(
                "Delete the Studio stack",
                "DeleteDomain keeps the users' home EFS file system (its data stays)",
                (f"cdk destroy {studio}",),
            ),
            Step(
                "Take the home EFS out of the VPC (the file system and its data stay)",
                "its mount targets and the two NFS security groups SageMaker created sit in the HyperPod subnet "
                "and would make deleting the network stack fail",
                (
                    "for mt in $(aws efs describe-mount-targets --file-system-id $HOME_EFS "
                    "--query 'MountTargets[].MountTargetId' --output text); do "
                    "aws efs delete-mount-target --mount-target-id $mt; done",
                    "# wait until `aws efs describe-mount-targets --file-system-id $HOME_EFS` lists none, then:",
                    "for name in inbound outbound; do aws ec2 delete-security-group --group-id $(aws ec2 "
                    "describe-security-groups --filters Name=group-name,Values=security-group-for-$name-nfs-$DOMAIN_ID "
                    "--query 'SecurityGroups[0].GroupId' --output text); done",
                ),
            ),
        ]
    steps += [
        Step(
            "Turn off the storage stack's termination protection",
            "it keeps a stray `cdk destroy` of the storage stack alone from deleting FSx under running pods",
            (
                f"aws cloudformation update-termination-protection --no-enable-termination-protection --stack-name {storage}",
            ),
        ),
        Step(
            "Delete every stack",
            "the storage stack takes a final FSx backup (incremental after the one above) before deleting the "
            "file system, and fails, keeping it, if that backup fails or is not AVAILABLE within CloudFormation's "
            "hour. Then run this command again: the delete waits for the backup in progress",
            ("cdk destroy --all",),
        ),
    ]
    return steps


def leftovers(config: ProjectConfig) -> list[Leftover]:
    """What remains after the plan, and how to remove each (docs/teardown.md)."""
    prefix = config.name_prefix
    items = [
        Leftover(
            "FSx backups: the final one, the full one taken before the destroy, and any you took yourself",
            "aws fsx describe-backups --filters Name=file-system-id,Values=$FSX_ID; "
            "aws fsx delete-backup --backup-id <id>  (restore instead: aws fsx create-file-system-from-backup)",
        ),
        Leftover(
            "S3 buckets: artifacts (LoRA adapters), lifecycle scripts, access logs, with their bucket policies",
            "delete every object version (versioned buckets), then aws s3 rb s3://<bucket>",
        ),
        Leftover(
            f"ECR repository {config.names.ecr_repository} (training images)",
            f"aws ecr delete-repository --repository-name {config.names.ecr_repository} --force",
        ),
        Leftover(
            "KMS keys: the image build's (CodeBuild artifacts, cache and build logs) and those of the retained log "
            "groups (VPC flow logs, lifecycle-script upload, git Helm installer)",
            f"aws resourcegroupstaggingapi get-resources --tag-filters Key={PROJECT_TAG_KEY},Values={prefix} "
            "--resource-type-filters kms:key; aws kms schedule-key-deletion --key-id <id> --pending-window-in-days 7",
        ),
        Leftover(
            "Log groups of the stacks: VPC flow logs, image build, Lambda handlers (kubectl, Helm installer, "
            "lifecycle-script upload, default-security-group cleanup)",
            "aws logs describe-log-groups --log-group-name-prefix <stack>- and --log-group-name-prefix "
            f"/aws/lambda/<stack>- for each <stack> of {stack_names_pattern(config)}; "
            "aws logs delete-log-group --log-group-name <name>",
        ),
        Leftover(
            "Log groups the services create: EKS control plane, HyperPod nodes, container insights",
            f"aws logs describe-log-groups --log-group-name-prefix /aws/eks/{config.names.eks_cluster}/ (and "
            f"/aws/sagemaker/Clusters/{config.names.hyperpod_cluster}/, /aws/containerinsights/"
            f"{config.names.eks_cluster}/); aws logs delete-log-group --log-group-name <name>",
        ),
    ]
    if config.observability.enabled:
        items.append(
            Leftover(
                "Amazon Managed Service for Prometheus workspace (metrics history)",
                f"aws amp list-workspaces --alias {config.names.hyperpod_cluster}; "
                "aws amp delete-workspace --workspace-id <id>",
            )
        )
    if config.studio.enabled:
        items.append(
            Leftover(
                "Studio home EFS file system (users' home directories)",
                "aws efs delete-file-system --file-system-id $HOME_EFS",
            )
        )
    return items


def render_plan(steps: list[Step], remaining: list[Leftover]) -> str:
    lines = ["Teardown plan (nothing has been run; run each step yourself, in order):", ""]
    for number, step in enumerate(steps, start=1):
        lines += [f"{number}. {step.title}", f"   why: {step.why}"]
        lines += [f"   $ {command}" for command in step.commands]
        lines.append("")
    lines.append("What remains afterwards, and how to remove it when you are sure:")
    lines += [f"- {item.what}: {item.removal}" for item in remaining]
    return "\n".join(lines)
