"""Registry stack: the ECR repository the image build pushes to and HyperPod nodes pull from."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from constructs import Construct

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.values.stack_outputs import OutputKey

from .components.registry import TrainingImageRepository


class RegistryStack(cdk.Stack):
    """Exposes `repository` (ecr.IRepository) to the image-build stack."""

    def __init__(self, scope: Construct, construct_id: str, *, config: ProjectConfig, **kwargs: Any) -> None:
        description = f"{config.name_prefix}: ECR repository of the training image"
        super().__init__(scope, construct_id, description=description, **kwargs)
        self.repository: ecr.IRepository = TrainingImageRepository(
            self,
            "TrainingImage",
            repository_name=config.names.ecr_repository,
            running_tag=config.training_image.tag,
        ).repository
        # Consumers derive the URI with Fn::Split on the ARN; cfn-lint rejects a weak Fn::GetStackOutput
        # there (E1022/E6101) but accepts Fn::ImportValue. The repository keeps a fixed name and is
        # retained, so its ARN never changes and an export can never block an update.
        self.repository.apply_cross_stack_reference_strength(cdk.ReferenceStrength.STRONG)
        cdk.CfnOutput(
            self,
            OutputKey.ECR_REPOSITORY_URI.value,
            value=self.repository.repository_uri,
            description="ECR repository of the training image",
        )
