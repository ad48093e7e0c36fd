"""The training image's build commands, computed from the configuration so nobody retypes a ref.

    skyrl-hp image tag                 # the tag the charts run and the build pushes
    skyrl-hp image build-args          # --build-arg flags, one per line (+ how to set the digest)
    skyrl-hp image buildx-command [--repository-uri URI | --outputs-file outputs.json]
    skyrl-hp image start-build-command # the in-cloud build (CodeBuild)

Options: --config FILE (default $SKYRL_HP_CONFIG, else the defaults).
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from ..config import ProjectConfig
from ..config.images import TrainingImageConfig
from ..plumbing.errors import InputError
from ..plumbing.locations import DOCKER_DIR
from .stack_outputs import OutputKey, StackOutputs

# Images run on x86_64 HyperPod nodes; a laptop on arm64 must cross-build.
PLATFORM = "linux/amd64"


# The shell variable that carries the base image's digest from base_digest_steps into the build.
DIGEST_VARIABLE = "BASE_IMAGE_DIGEST"
_DIGEST_PLACEHOLDER = "__BASE_IMAGE_DIGEST__"


def build_arg_flags(image: TrainingImageConfig) -> list[str]:
    """`--build-arg NAME=value` for every Dockerfile ARG, values from the configuration; the base
    digest is always `$BASE_IMAGE_DIGEST`, which base_digest_steps sets (pinned or resolved)."""
    flags: list[str] = []
    for name, value in image.build_args.items():
        flags += ["--build-arg", f"{name}={_DIGEST_PLACEHOLDER if name == DIGEST_VARIABLE else value}"]
    return flags


def shell_join(words: Sequence[str]) -> str:
    """shlex.join, with the digest placeholder turned into a quoted expansion of the shell variable."""
    return shlex.join(words).replace(_DIGEST_PLACEHOLDER, f'"${DIGEST_VARIABLE}"')


def base_digest_steps(image: TrainingImageConfig) -> list[str]:
    """Shell commands, to run in order (one per line under `set -e`, or joined with &&), that set
    $BASE_IMAGE_DIGEST: the configured pin, else the digest the base's name points at right now.

    The Dockerfile builds FROM `<BASE_IMAGE>@<BASE_IMAGE_DIGEST>`, so the build never pulls a tag:
    the digest resolved here is the one built, the one the image's label records and the one the
    notice tells the user to pin. `docker buildx imagetools inspect` reads the registry without
    pulling (buildx ships with CodeBuild's standard image and with Docker Desktop)."""
    name = image.base_image
    if image.base_image_pinned:
        return [f"{DIGEST_VARIABLE}={image.base_image_digest}"]
    inspect = f"docker buildx imagetools inspect --format '{{{{.Manifest.Digest}}}}' {shlex.quote(name)}"
    return [
        f'{{ {DIGEST_VARIABLE}=$({inspect}) && [[ "${DIGEST_VARIABLE}" =~ ^sha256:[0-9a-f]{{64}}$ ]]; }} '
        f'|| {{ echo "error: could not resolve the digest of {name}" >&2; false; }}',
        f'echo "notice: base image {name} is not pinned; building FROM {name}@${DIGEST_VARIABLE}. '
        f'For reproducible builds set training_image.base_image_digest: ${DIGEST_VARIABLE}"',
    ]


def image_uri(repository_uri: str, image: TrainingImageConfig) -> str:
    return f"{repository_uri}:{image.tag}"


def docker_build_command(image: TrainingImageConfig, uri: str, context: str, *, buildx: bool) -> str:
    """Shell text of the one build invocation every path uses (CodeBuild runs it with buildx=False);
    it expects $BASE_IMAGE_DIGEST from base_digest_steps."""
    # --load: a docker-container buildx builder (cross-building on arm64) keeps images to itself otherwise.
    head = ["docker", "buildx", "build", "--load"] if buildx else ["docker", "build"]
    return shell_join([*head, "--platform", PLATFORM, *build_arg_flags(image), "--tag", uri, context])


def buildx_command(image: TrainingImageConfig, repository_uri: str, context: Path = DOCKER_DIR) -> str:
    context_arg = os.path.relpath(context) if Path.cwd() in context.parents else str(context)
    uri = image_uri(repository_uri, image)
    registry = repository_uri.split("/", 1)[0]
    region = registry.split(".")[3] if registry.count(".") >= 5 else "<region>"
    login = f"aws ecr get-login-password --region {region} | docker login --username AWS --password-stdin {registry}"
    # One && chain: pasted into an interactive shell, a failed step stops the rest without exiting the shell.
    steps = [*base_digest_steps(image), docker_build_command(image, uri, context_arg, buildx=True)]
    return f"{login}\n" + " \\\n  && ".join(steps) + f" \\\n  && docker push {shlex.quote(uri)}"


def repository_uri_from(config: ProjectConfig, outputs_file: Path | None) -> tuple[str, bool]:
    """(URI, is_placeholder): from `cdk deploy --outputs-file` when given, else a placeholder."""
    if outputs_file is None:
        return StackOutputs.placeholder(config).ecr_repository_uri, True
    try:
        stacks = json.loads(outputs_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError([f"outputs error: cannot read {outputs_file}: {exc}"]) from None
    for stack_name, outputs in stacks.items() if isinstance(stacks, dict) else ():
        if stack_name.startswith(f"{config.name_prefix}-") and isinstance(outputs, dict):
            uri = outputs.get(OutputKey.ECR_REPOSITORY_URI.value)
            if uri:
                return uri, False
    raise InputError(
        [
            f"outputs error: {outputs_file} has no {OutputKey.ECR_REPOSITORY_URI.value} output "
            f"of a {config.name_prefix}-* stack"
        ]
    )


def start_build_command(config: ProjectConfig, region: str | None = None) -> str:
    """The in-cloud build's commands, each with `--region` (the configuration's, else the shell's AWS_REGION)."""
    stack = config.names.stack("image-build")
    where = f" --region {region}" if region else ""
    query = "Stacks[0].Outputs[?OutputKey=='{key}'].OutputValue"
    project = (
        f"PROJECT=$(aws cloudformation describe-stacks{where} --stack-name {stack} "
        f'--query "{query.format(key=OutputKey.IMAGE_BUILD_PROJECT_NAME.value)}" --output text)'
    )
    log_group = (
        f"LOG_GROUP=$(aws cloudformation describe-stacks{where} --stack-name {stack} "
        f'--query "{query.format(key=OutputKey.IMAGE_BUILD_LOG_GROUP_NAME.value)}" --output text)'
    )
    return "\n".join(
        [
            project,
            log_group,
            f'BUILD_ID=$(aws codebuild start-build{where} --project-name "$PROJECT" --query build.id --output text)',
            f'aws logs tail{where} "$LOG_GROUP" --follow --since 5m   # Ctrl-C once the push is logged',
            f'aws codebuild batch-get-builds{where} --ids "$BUILD_ID" --query "builds[0].buildStatus" --output text',
        ]
    )
