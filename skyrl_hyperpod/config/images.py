"""Container images: the training image this project builds and the serving image it pulls.

The training image is built from `docker/`. This module is the one source of truth for
its build arguments and for its tag: the Dockerfile's ARG defaults equal `build_args` (a test
checks it), every build path passes `build_args` explicitly, and the CodeBuild project and the
charts both read `TrainingImageConfig.tag`, which `training_image_tag` computes.

The base image is always built FROM `name@sha256:...`, never from a tag: with
`base_image_digest` set that digest is used; unset (the default, because upstream publishes the
base only under its untagged name, i.e. `latest`), every build path resolves the name's current
digest at build time, builds FROM it, labels the image with it and prints it for pinning
(`skyrl_hyperpod.values.image_commands.base_digest_steps`).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, Field, field_validator, model_validator

from ..plumbing.errors import InputError
from ..plumbing.locations import DOCKER_DIR
from ..plumbing.upstream import SKYRL_REPOSITORY
from .base import CommitId, PinnedImage, StrictModel
from .efa import EFA_INSTALLER_KEY_FINGERPRINT
from .version_lock import (
    DEFAULT_SERVING_IMAGE,
    DEFAULT_SKYRL_VERSION,
    SERVING_IMAGES,
    SKYRL_RELEASE_TAG,
    SKYRL_RELEASES,
    SkyRLRelease,
    dotted,
)

# The VisGym environments the training image can run: VisGym's 2-D mazes draw with pygame alone (installed beside
# VisGym, headless with SDL's dummy drivers), while its other environments need display and OpenGL libraries the image
# does not carry. The image's build check (docker/image_check.py) renders each through SkyRL's VisGymEnv, so
# training.data.env_id is one of these or the build fails first.
VisGymEnvId = Literal["maze_2d/easy", "maze_2d/hard"]
VISGYM_ENV_IDS: tuple[str, ...] = get_args(VisGymEnvId)

# The build context; the repository layout puts it next to the Python package.

# CloudWatch Logs accepts only these retention periods (days).
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)

_IMAGE_NAME = re.compile(r"^[a-z0-9]+([._/-][a-z0-9]+)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$")
_RAY_IN_IMAGE_NAME = re.compile(r"ray-([0-9]+\.[0-9]+\.[0-9]+)")
# SkyRL's base images name their Python and CUDA: novaskyai/skyrl-train-ray-2.57.0-py3.12-cu13.0.
_PYTHON_IN_IMAGE_NAME = re.compile(r"-py([0-9]+)\.([0-9]+)")
_CUDA_IN_IMAGE_NAME = re.compile(r"-cu([0-9]+)\.[0-9]+")
# Every generated Ray cluster runs with token authentication (authOptions.mode: token), which
# KubeRay v1.7.0 refuses below Ray 2.52.0 (ray-operator/controllers/ray/utils/validation.go).
MIN_TOKEN_AUTH_RAY = (2, 52, 0)


def token_auth_ray_version(value: str) -> str:
    if tuple(int(part) for part in value.split(".")) < MIN_TOKEN_AUTH_RAY:
        minimum = ".".join(map(str, MIN_TOKEN_AUTH_RAY))
        raise ValueError(f"Ray token authentication (on for every Ray cluster) needs Ray {minimum} or newer")
    return value


RayVersion = Annotated[str, Field(pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$"), AfterValidator(token_auth_ray_version)]
_GIT_HTTPS = re.compile(r"^https://[A-Za-z0-9.-]+/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


class TrainingImageConfig(StrictModel):
    """Build inputs of docker/; the RayCluster and RayJob run `<ECR repository>:<tag>`."""

    base_image: str = Field(
        default="novaskyai/skyrl-train-ray-2.57.0-py3.12-cu13.0",
        description="Base image name, optionally with an explicit tag (never latest); pin it with base_image_digest.",
    )
    base_image_digest: str | None = Field(
        default=None,
        pattern=r"^sha256:[0-9a-f]{64}$",
        description="sha256 digest of base_image, for reproducible builds. Unset: the digest upstream-lock.yaml "
        "records for base_image; unresolved there, each build resolves the name's current digest, builds FROM it, "
        "records it in the image label org.opencontainers.image.base.digest and prints it.",
    )
    ray_version: RayVersion = Field(
        default=SKYRL_RELEASES[DEFAULT_SKYRL_VERSION].ray,
        description="2.52.0 or newer (Ray token authentication); the Ray that skyrl_version pins.",
    )
    skyrl_repository: str = f"https://github.com/{SKYRL_REPOSITORY}"
    skyrl_version: Literal[tuple(SKYRL_RELEASES)] = Field(  # type: ignore[valid-type]
        default=DEFAULT_SKYRL_VERSION,
        description="The SkyRL release (PyPI `skyrl`) the image builds from its git tag skyrl-v<version>; the drill "
        "and the offline override check install the same release from PyPI.",
    )
    skyrl_ref: CommitId | None = Field(
        default=None,
        description="Commit of the release tag. Unset: the commit upstream-lock.yaml records for the tag; unresolved "
        "there, each build fetches the tag and prints its commit. Either way the build checks that skyrl/__init__.py "
        "says skyrl_version.",
    )
    # SkyRL's docs use this fork; which repository holds the ref is unconfirmed (docs/sources.md).
    visgym_repository: str = "https://github.com/anyscale/VisGym"
    visgym_ref: CommitId = "184fbd5e5dc81e32c8b944d9e40ac54dad62e3f2"
    pygame_version: str = Field(default="2.6.1", pattern=r"^[0-9]+(\.[0-9]+)*$")
    # MLflow's client for SkyRL's MLflow logger (tracking.backend: mlflow) and the plugin that signs requests to a
    # SageMaker MLflow App: the pins of requirements.txt, which `skyrl-hp train metrics` reads with
    # (tests/test_version_lock.py compares them).
    mlflow_version: str = Field(default="3.17.2", pattern=r"^[0-9]+(\.[0-9]+)*$")
    sagemaker_mlflow_version: str = Field(default="0.5.0", pattern=r"^[0-9]+(\.[0-9]+)*$")
    # AWS's EFA installer (libfabric, rdma-core, the aws-ofi-nccl NCCL plugin) for NCCL over EFA.
    # 1.50.0 is the stable version the EC2 User Guide's "Get started with EFA and NCCL" installs
    # (libfabric 2.6.0amzn1.0, aws-ofi-nccl 1.21.1).
    efa_installer_version: str = Field(
        default="1.50.0",
        pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$",
        description="AWS EFA installer baked into the training image (its signature is checked at build time).",
    )
    default_model_id: str = Field(default="Qwen/Qwen3-VL-8B-Instruct", pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
    skyrl_dir: str = Field(
        default="/home/ray/SkyRL",
        pattern=r"^/[A-Za-z0-9_./-]+$",
        description="Where the image holds the SkyRL checkout; train_job.py --skyrl-dir points here.",
    )
    # In-cloud build (CodeBuild). The image carries torch, vLLM and flash-attn wheels on top of an
    # ~8 GB base: X_LARGE has the disk (256 GB) and memory for that; LARGE (128 GB) is tight.
    build_compute_type: Literal["LARGE", "X_LARGE", "X2_LARGE"] = "X_LARGE"
    build_timeout_minutes: int = Field(default=180, ge=30, le=2160)
    build_log_retention_days: int = Field(default=30, description="CloudWatch retention of the image build logs.")

    @field_validator("base_image")
    @classmethod
    def _base_image(cls, value: str) -> str:
        if "@" in value:
            raise ValueError("put the digest in base_image_digest, not in base_image")
        if not _IMAGE_NAME.fullmatch(value):
            raise ValueError("must be an image name such as registry/namespace/name[:tag]")
        last_segment = value.split("/")[-1]
        if ":" in last_segment and last_segment.rsplit(":", 1)[1] == "latest":
            raise ValueError(
                "must not use the moving 'latest' tag: name another tag, or leave the name untagged "
                "(each build then resolves, uses and records its current digest), or set base_image_digest"
            )
        return value

    @field_validator("skyrl_repository", "visgym_repository")
    @classmethod
    def _https_git(cls, value: str) -> str:
        if not _GIT_HTTPS.fullmatch(value):
            raise ValueError("must be an https git URL such as https://github.com/owner/name")
        return value

    @field_validator("build_log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            raise ValueError(f"CloudWatch Logs accepts only {', '.join(map(str, LOG_RETENTION_DAYS))} days")
        return value

    @model_validator(mode="after")
    def _versions_lock(self) -> TrainingImageConfig:
        """One Ray, Python and CUDA for the base image, the SkyRL release and the RayCluster's rayVersion."""
        match = _RAY_IN_IMAGE_NAME.search(self.base_image)
        if match and match.group(1) != self.ray_version:
            raise ValueError(
                f"ray_version {self.ray_version} differs from the Ray {match.group(1)} that base_image "
                f"{self.base_image} carries: change both together"
            )
        release = self.skyrl_release
        if self.ray_version != release.ray:
            raise ValueError(
                f"ray_version {self.ray_version} differs from the Ray that skyrl_version {release.version} pins "
                f"(ray=={release.ray}): SkyRL's lock would install its own Ray beside the cluster's"
            )
        if (python := _PYTHON_IN_IMAGE_NAME.search(self.base_image)) and (
            (int(python.group(1)), int(python.group(2))) < release.python_min
        ):
            raise ValueError(
                f"base_image {self.base_image} carries Python {python.group(1)}.{python.group(2)}; skyrl "
                f"{release.version} requires Python >= {dotted(release.python_min)}"
            )
        if (cuda := _CUDA_IN_IMAGE_NAME.search(self.base_image)) and int(cuda.group(1)) != release.torch_cuda_major:
            raise ValueError(
                f"base_image {self.base_image} carries CUDA {cuda.group(1)}; skyrl {release.version} pins torch "
                f"{release.torch}, built for CUDA {release.torch_cuda_major}"
            )
        return self

    @property
    def skyrl_release(self) -> SkyRLRelease:
        return SKYRL_RELEASES[self.skyrl_version]

    @property
    def skyrl_tag(self) -> str:
        """The git tag of skyrl_version in skyrl_repository."""
        return SKYRL_RELEASE_TAG.format(version=self.skyrl_version)

    @property
    def base_image_pinned(self) -> bool:
        """True when the configuration names the base image's digest; otherwise the build resolves it."""
        return self.base_image_digest is not None

    @property
    def build_args(self) -> dict[str, str]:
        """Dockerfile ARG name -> configured value; every build path passes all of them. An empty
        BASE_IMAGE_DIGEST means "not pinned": the build paths resolve it before `docker build`."""
        return {
            "BASE_IMAGE": self.base_image,
            "BASE_IMAGE_DIGEST": self.base_image_digest or "",
            "RAY_VERSION": self.ray_version,
            "SKYRL_REPOSITORY": self.skyrl_repository,
            "SKYRL_VERSION": self.skyrl_version,
            "SKYRL_TAG": self.skyrl_tag,
            "SKYRL_REF": self.skyrl_ref or "",
            "TORCH_VERSION": self.skyrl_release.torch,
            "VLLM_VERSION": self.skyrl_release.vllm,
            "VISGYM_REPOSITORY": self.visgym_repository,
            "VISGYM_REF": self.visgym_ref,
            "PYGAME_VERSION": self.pygame_version,
            "MLFLOW_VERSION": self.mlflow_version,
            "SAGEMAKER_MLFLOW_VERSION": self.sagemaker_mlflow_version,
            "VISGYM_ENV_IDS": ",".join(VISGYM_ENV_IDS),
            "EFA_INSTALLER_VERSION": self.efa_installer_version,
            "EFA_INSTALLER_KEY_FINGERPRINT": EFA_INSTALLER_KEY_FINGERPRINT,
            "DEFAULT_MODEL_ID": self.default_model_id,
            "SKYRL_DIR": self.skyrl_dir,
        }

    @property
    def tag(self) -> str:
        """Immutable tag derived from the build inputs; the build pushes it, the charts run it."""
        return training_image_tag(self)


def image_input_files(context_dir: Path = DOCKER_DIR) -> list[Path]:
    """The files whose bytes end up shaping the image: the Dockerfile, the .dockerignore and every
    file the .dockerignore re-includes with `!name`. Everything else in docker/ (train_job.py and its package,
    README.md) stays out of the build context, so editing it never changes the tag."""
    dockerfile = context_dir / "Dockerfile"
    dockerignore = context_dir / ".dockerignore"
    missing = [str(p) for p in (dockerfile, dockerignore) if not p.is_file()]
    if missing:
        raise InputError(
            [f"image error: {path} is missing; the training image tag is computed from it" for path in missing]
        )
    included = [
        context_dir / line[1:].strip()
        for line in dockerignore.read_text(encoding="utf-8").splitlines()
        if line.strip().startswith("!")
    ]
    return [dockerfile, dockerignore, *sorted(set(included))]


def training_image_tag(image: TrainingImageConfig, context_dir: Path = DOCKER_DIR) -> str:
    """`ray<version>-skyrl-<v<version> or ref12>-visgym-<ref12>-<content12>`: readable pins plus a digest of the
    build arguments and the build-context bytes, so any change to what the image is made of yields
    a new tag (ECR tags are immutable) and nothing else does. With an unpinned base the arguments
    hold the base's name only: the digest a build resolves is not known at synth time, so the same
    tag can hold different bases in different accounts (each image's label records which one)."""
    digest = hashlib.sha256()
    digest.update(json.dumps(image.build_args, sort_keys=True).encode())
    for path in image_input_files(context_dir):
        digest.update(b"\0" + path.relative_to(context_dir).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    skyrl = image.skyrl_ref[:12] if image.skyrl_ref else f"v{image.skyrl_version}"
    return f"ray{image.ray_version}-skyrl-{skyrl}-visgym-{image.visgym_ref[:12]}-{digest.hexdigest()[:12]}"


class ServingImageConfig(StrictModel):
    image: PinnedImage = Field(
        default=DEFAULT_SERVING_IMAGE, description="The RayService's image, pinned by tag (not latest) or digest."
    )
    ray_version: RayVersion = Field(
        default=SERVING_IMAGES[DEFAULT_SERVING_IMAGE].ray,
        description="2.52.0 or newer (Ray token authentication); for a known image, the Ray it carries.",
    )

    @model_validator(mode="after")
    def _ray_matches_image(self) -> ServingImageConfig:
        known = SERVING_IMAGES.get(self.image_name)
        if known is not None and known.ray != self.ray_version:
            raise ValueError(
                f"ray_version {self.ray_version} differs from the Ray {known.ray} that image {self.image} carries"
            )
        return self

    @property
    def image_name(self) -> str:
        """The image without its digest: `name:tag@sha256:...` (the lock's form) is still the known `name:tag`."""
        return self.image.partition("@")[0]

    @property
    def vllm_version(self) -> str | None:
        """vLLM inside a known serving image (None for another image)."""
        known = SERVING_IMAGES.get(self.image_name)
        return known.vllm if known else None
