"""ImageBuildStack: the in-cloud build of the training image (no local Docker needed)."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from constructs import Construct

from skyrl_hyperpod.config import ProjectConfig
from skyrl_hyperpod.values.stack_outputs import OutputKey

from .components.image_build import TrainingImageBuild


class ImageBuildStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ProjectConfig,
        repository: ecr.IRepository,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, description="Builds and pushes the SkyRL training image", **kwargs)
        self.image_build = TrainingImageBuild(self, "TrainingImage", image=config.training_image, repository=repository)
        cdk.CfnOutput(
            self,
            OutputKey.IMAGE_BUILD_PROJECT_NAME.value,
            value=self.image_build.project.project_name,
            description="Start the image build: aws codebuild start-build --project-name <this value>",
        )
        cdk.CfnOutput(
            self,
            OutputKey.IMAGE_BUILD_LOG_GROUP_NAME.value,
            value=self.image_build.log_group.log_group_name,
            description="Follow the image build: aws logs tail <this value> --follow",
        )
        cdk.CfnOutput(
            self,
            OutputKey.TRAINING_IMAGE_URI.value,
            value=f"{repository.repository_uri}:{self.image_build.image_tag}",
            description="The image the build pushes and the RayCluster/RayJob run",
        )
