"""The ECR repository of the training image.

- IMMUTABLE tags: a tag names exactly one image, so a RayJob that pins a tag always runs the image
  it was tested with (rebuilds must use a new tag, e.g. the git commit).
- Lifecycle: the tag the manifests run (`config.training_image.tag`) is never expired: the
  highest-priority rule selects exactly that tag and keeps up to one image of it (an immutable tag
  names one image), and ECR never applies a lower-priority rule to an image an earlier rule
  selected (https://docs.aws.amazon.com/AmazonECR/latest/userguide/LifecyclePolicies.html,
  "Lifecycle policy evaluation rules"). Untagged images (superseded pushes, failed multi-step
  builds) expire after UNTAGGED_IMAGE_RETENTION; the repository keeps the newest MAX_IMAGES images. Training images are
  tens of GB (CUDA, vLLM, PyTorch), so an unbounded history is a real storage bill; 20 images keeps
  several weeks of daily builds to roll back to.
- Encryption: AES256 (SSE with S3-managed keys), not a customer-managed KMS key. The encryption
  configuration is create-only (a change replaces the repository), and CloudFormation cannot replace a
  resource with a fixed name, so switching a deployed repository would fail the update; the image is built
  from public sources and holds no secrets. New images would not need KMS permissions on the nodes: ECR
  decrypts through its own grant on the key
  (https://docs.aws.amazon.com/AmazonECR/latest/userguide/encryption-at-rest.html).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from constructs import Construct

UNTAGGED_IMAGE_RETENTION = cdk.Duration.days(7)
MAX_IMAGES = 20


class TrainingImageRepository(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, repository_name: str, running_tag: str) -> None:
        super().__init__(scope, construct_id)
        self.repository = ecr.Repository(
            self,
            "Repository",
            repository_name=repository_name,
            image_scan_on_push=True,
            image_tag_mutability=ecr.TagMutability.IMMUTABLE,
            encryption=ecr.RepositoryEncryption.AES_256,
            lifecycle_rules=[
                ecr.LifecycleRule(
                    rule_priority=1,
                    description="Never expire the tag the manifests run",
                    tag_status=ecr.TagStatus.TAGGED,
                    tag_pattern_list=[running_tag],
                    max_image_count=1,
                ),
                ecr.LifecycleRule(
                    description="Expire untagged images",
                    tag_status=ecr.TagStatus.UNTAGGED,
                    max_image_age=UNTAGGED_IMAGE_RETENTION,
                ),
                ecr.LifecycleRule(
                    description=f"Keep the newest {MAX_IMAGES} images",
                    tag_status=ecr.TagStatus.ANY,
                    max_image_count=MAX_IMAGES,
                ),
            ],
            # The image is the tested artefact of a training run: keep it after `cdk destroy`.
            removal_policy=cdk.RemovalPolicy.RETAIN,
            empty_on_delete=False,
        )
