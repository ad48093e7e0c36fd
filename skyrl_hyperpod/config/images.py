"""Container images: the training image this project builds and the serving image it pulls."""

from __future__ import annotations

from pydantic import Field

from .platform import CommitId, StrictModel


class TrainingImageConfig(StrictModel):
    """Build inputs of docker/ (issue 4 owns the build); the RayCluster and RayJob run its tag."""

    base_image: str = "novaskyai/skyrl-train-ray-2.57.0-py3.12-cu13.0"
    ray_version: str = Field(default="2.57.0", pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$")
    skyrl_repository: str = "https://github.com/NovaSky-AI/SkyRL"
    skyrl_ref: CommitId = "4298730b55bb01fe1b711662df53dca42a3b7615"
    # SkyRL's docs use this fork; which repository holds the ref is unconfirmed (FACTS.md).
    visgym_repository: str = "https://github.com/anyscale/VisGym"
    visgym_ref: CommitId = "184fbd5e5dc81e32c8b944d9e40ac54dad62e3f2"
    pygame_version: str = "2.6.1"
    default_model_id: str = "Qwen/Qwen3-VL-8B-Instruct"

    @property
    def tag(self) -> str:
        """Immutable tag derived from the pinned inputs; the build pushes it, the charts run it."""
        return f"ray{self.ray_version}-skyrl-{self.skyrl_ref[:12]}-visgym-{self.visgym_ref[:12]}"


class ServingImageConfig(StrictModel):
    image: str = "public.ecr.aws/deep-learning-containers/ray:serve-llm-cuda-v1.0"
    ray_version: str = Field(default="2.58.0", pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$")
