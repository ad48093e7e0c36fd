"""In-cloud build of the training image: a CodeBuild project that builds docker/ and pushes
`<repository>:<config.training_image.tag>`, so nobody needs Docker or an x86 build host locally.
The build runs FROM the base image's digest: the configured pin, else the digest its name points
at when the build starts (printed in the log, recorded in the image's labels).

Start it with the command `skyrl-hp image start-build-command` prints
(docker/README.md). A build whose tag already exists in ECR ends without rebuilding: tags are
derived from the image's inputs and the repository keeps them immutable.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import aws_cdk as cdk
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from skyrl_hyperpod.config.images import TrainingImageConfig
from skyrl_hyperpod.plumbing.locations import DOCKER_DIR
from skyrl_hyperpod.values.image_commands import base_digest_steps, docker_build_command

from .iam_wildcards import nag_rule
from .log_encryption import allow_log_groups

_COMPUTE_TYPES = {
    "LARGE": codebuild.ComputeType.LARGE,
    "X_LARGE": codebuild.ComputeType.X_LARGE,
    "X2_LARGE": codebuild.ComputeType.X2_LARGE,
}

_IMAGE_URI_PLACEHOLDER = "__IMAGE_URI__"

# Pull (base layers already in the repository) and push of the training image; DescribeImages lets a
# build of an existing tag end early.
ECR_ACTIONS_PULL_PUSH = (
    "ecr:BatchCheckLayerAvailability",
    "ecr:BatchGetImage",
    "ecr:CompleteLayerUpload",
    "ecr:DescribeImages",
    "ecr:GetDownloadUrlForLayer",
    "ecr:InitiateLayerUpload",
    "ecr:PutImage",
    "ecr:UploadLayerPart",
)


def build_context_excludes(context_dir: Path) -> list[str]:
    """Docker-style exclude patterns that make the uploaded source exactly the build context:
    the .dockerignore rules, plus the Dockerfile and .dockerignore that Docker always sends."""
    rules = [
        line.strip()
        for line in (context_dir / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    return [*rules, "!Dockerfile", "!.dockerignore"]


def build_script(image: TrainingImageConfig) -> str:
    """Bash run by CodeBuild; REPOSITORY_URI, REPOSITORY_NAME and IMAGE_TAG come from the project."""
    build = docker_build_command(image, _IMAGE_URI_PLACEHOLDER, ".", buildx=False)
    build = build.replace(_IMAGE_URI_PLACEHOLDER, '"$IMAGE_URI"')
    return "\n".join(
        [
            "set -euo pipefail",
            'IMAGE_URI="$REPOSITORY_URI:$IMAGE_TAG"',
            'if aws ecr describe-images --repository-name "$REPOSITORY_NAME" --image-ids imageTag="$IMAGE_TAG" \\',
            "    >/dev/null 2>&1; then",
            '  echo "$IMAGE_URI already exists: its tag is derived from the image inputs, nothing to build"',
            "else",
            '  aws ecr get-login-password --region "$AWS_REGION" \\',
            '    | docker login --username AWS --password-stdin "${REPOSITORY_URI%%/*}"',
            *(f"  {step}" for step in base_digest_steps(image)),
            f"  {build}",
            '  docker push "$IMAGE_URI"',
            '  echo "pushed $IMAGE_URI"',
            "fi",
        ]
    )


class TrainingImageBuild(Construct):
    """CodeBuild project + its source asset, log group and KMS key; least-privilege role."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        image: TrainingImageConfig,
        repository: ecr.IRepository,
        context_dir: Path = DOCKER_DIR,
    ) -> None:
        super().__init__(scope, construct_id)
        self.image_tag = image.tag

        self.key = kms.Key(
            self,
            "Key",
            description="Encrypts the training image build's CodeBuild artifacts and caches",
            enable_key_rotation=True,
        )
        # The build logs, retained like this key, are encrypted with it too.
        allow_log_groups(self.key)
        self.log_group = logs.LogGroup(self, "Logs", encryption_key=self.key)
        # The config already limits the retention to the periods CloudWatch Logs accepts
        # (LOG_RETENTION_DAYS). RetentionDays cannot be looked up by day count from Python (its
        # members' values are their names), so the number goes straight to the CloudFormation property.
        log_group_resource = cast(logs.CfnLogGroup, self.log_group.node.default_child)
        log_group_resource.retention_in_days = image.build_log_retention_days
        source = s3_assets.Asset(
            self,
            "BuildContext",
            path=str(context_dir),
            exclude=build_context_excludes(context_dir),
            ignore_mode=cdk.IgnoreMode.DOCKER,
        )

        # CodeBuild passes the project's account and ARN (aws:SourceAccount, aws:SourceArn) when it assumes the
        # service role, so the trust names this project alone ("Cross-service confused deputy prevention",
        # https://docs.aws.amazon.com/codebuild/latest/userguide/cross-service-confused-deputy-prevention.html).
        # The project names this role, so the role cannot reference the project's ARN attribute (a circular
        # dependency): the project gets a fixed name and the ARN is built from it.
        stack = cdk.Stack.of(self)
        project_name = f"{stack.stack_name}-training-image"
        project_arn = stack.format_arn(
            service="codebuild",
            resource="project",
            resource_name=project_name,
            arn_format=cdk.ArnFormat.SLASH_RESOURCE_NAME,
        )
        # The role is written out statement by statement and handed to the Project read-only, so
        # CDK's broader automatic grants (wildcard S3/KMS actions, the unused default log group)
        # never reach it. ECR_ACTIONS_PULL_PUSH act on the one training image repository only.
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal(
                "codebuild.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnEquals": {"aws:SourceArn": project_arn},
                },
            ),
            description="Training image build: read its source, push to its repository, write its logs",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadBuildContext",
                actions=["s3:GetObject", "s3:GetObjectVersion"],
                resources=[source.bucket.arn_for_objects(source.s3_object_key)],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="LocateBuildContextBucket",
                actions=["s3:GetBucketAcl", "s3:GetBucketLocation"],
                resources=[source.bucket.bucket_arn],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="PushTrainingImage", actions=list(ECR_ACTIONS_PULL_PUSH), resources=[repository.repository_arn]
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(sid="LogInToEcr", actions=["ecr:GetAuthorizationToken"], resources=["*"])
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteBuildLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="UseBuildKey",
                actions=["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"],
                resources=[self.key.key_arn],
            )
        )
        cdk.Validations.of(self.role).acknowledge(
            cdk.Acknowledgment(
                id=nag_rule("IAM5[Resource::*]"),
                reason="ecr:GetAuthorizationToken supports no resource-level permissions, so it needs '*'; it only "
                "issues a registry login token, and every image action is scoped to the one repository",
            )
        )

        self.project = codebuild.Project(
            self,
            "Project",
            project_name=project_name,
            description=f"Builds docker/ and pushes the training image tag {self.image_tag}",
            role=self.role.without_policy_updates(),
            source=codebuild.Source.s3(bucket=source.bucket, path=source.s3_object_key),
            environment=codebuild.BuildEnvironment(
                build_image=codebuild.LinuxBuildImage.STANDARD_7_0,
                compute_type=_COMPUTE_TYPES[image.build_compute_type],
                privileged=True,
            ),
            environment_variables={
                "REPOSITORY_URI": codebuild.BuildEnvironmentVariable(value=repository.repository_uri),
                "REPOSITORY_NAME": codebuild.BuildEnvironmentVariable(value=repository.repository_name),
                "IMAGE_TAG": codebuild.BuildEnvironmentVariable(value=self.image_tag),
            },
            build_spec=codebuild.BuildSpec.from_object(
                {
                    "version": "0.2",
                    "env": {"shell": "bash"},
                    "phases": {"build": {"on-failure": "ABORT", "commands": [build_script(image)]}},
                }
            ),
            encryption_key=self.key,
            logging=codebuild.LoggingOptions(cloud_watch=codebuild.CloudWatchLoggingOptions(log_group=self.log_group)),
            timeout=cdk.Duration.minutes(image.build_timeout_minutes),
            grant_report_group_permissions=False,
        )
        cdk.Validations.of(self.project).acknowledge(
            cdk.Acknowledgment(
                id=nag_rule("CB3"),
                reason="docker build needs the Docker daemon, which CodeBuild runs only in privileged mode; "
                "the project runs nothing but the build script of this construct on the docker/ sources",
            )
        )
