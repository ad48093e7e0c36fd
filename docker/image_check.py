"""Build-time check of the training image: fail the build rather than the GPU job.

Runs inside `docker build` (the Dockerfile's ARGs are environment variables there) and can be
re-run in a running container: `python /home/ray/.image_check.py` with the same variables set.
"""

from __future__ import annotations

import ctypes.util
import importlib.metadata as metadata
import os
import sys
from pathlib import Path


def first_observation_problem(env_id: str) -> str | None:
    """Why SkyRL's VisGym environment (examples/train/visgym/env_sft.py, from the checkout on PYTHONPATH) cannot open
    an episode of `env_id` with its task text and a rendered frame, headless; None when it can."""
    try:
        from examples.train.visgym.env_sft import VisGymEnv

        env = VisGymEnv(extras={"visgym_env_id": env_id, "seed": 0})
        (message,), _ = env.init([])
        env.close()
    except Exception as exc:  # VisGym, pygame and SDL raise many types; report one line
        return f"VisGym {env_id} did not open an episode through SkyRL's VisGymEnv: {exc}"
    kinds = [part.get("type") for part in message.get("content", [])]
    if kinds != ["text", "image_url"]:
        return f"VisGym {env_id}'s first observation is {kinds}, not a text and an image"
    return None


def main() -> int:
    ray_version = os.environ["RAY_VERSION"]
    pygame_version = os.environ["PYGAME_VERSION"]
    # The configured SkyRL release and what it pins (skyrl_hyperpod/config/version_lock.py).
    pinned = {
        "skyrl": os.environ["SKYRL_VERSION"],
        "torch": os.environ["TORCH_VERSION"],
        "vllm": os.environ["VLLM_VERSION"],
    }
    visgym_dir = Path(os.environ["VISGYM_DIR"]).resolve()
    skyrl_dir = Path(os.environ["SKYRL_DIR"])
    problems: list[str] = []

    # KubeRay's rayVersion and the Ray inside the image must be the same release.
    if metadata.version("ray") != ray_version:
        problems.append(f"ray {metadata.version('ray')} is installed but the configuration says {ray_version}")
    for distribution, version in pinned.items():
        # A local version label (torch's +cu130) names the build, not the release.
        installed = metadata.version(distribution).split("+")[0]
        if installed != version:
            problems.append(f"{distribution} {installed} is installed but SkyRL {pinned['skyrl']} pins {version}")
    if metadata.version("pygame") != pygame_version:
        problems.append(f"pygame {metadata.version('pygame')} is installed but the configuration says {pygame_version}")
    for distribution, variable in (
        ("mlflow-skinny", "MLFLOW_VERSION"),
        ("sagemaker-mlflow", "SAGEMAKER_MLFLOW_VERSION"),
    ):
        if metadata.version(distribution) != os.environ[variable]:
            problems.append(
                f"{distribution} {metadata.version(distribution)} is installed but the configuration says "
                f"{os.environ[variable]}"
            )
    # NCCL over EFA: NCCL_NET_PLUGIN=ofi makes NCCL dlopen libnccl-net-ofi.so, which needs libfabric;
    # both must resolve through the loader, or NCCL silently falls back to TCP sockets.
    if os.environ.get("NCCL_NET_PLUGIN") != "ofi":
        plugin = os.environ.get("NCCL_NET_PLUGIN")
        problems.append(f"NCCL_NET_PLUGIN is {plugin!r}, not 'ofi': NCCL would not load aws-ofi-nccl")
    for library in ("nccl-net-ofi", "fabric"):
        if ctypes.util.find_library(library) is None:
            problems.append(
                f"lib{library}.so is not in the loader cache: EFA installer {os.environ['EFA_INSTALLER_VERSION']} "
                "did not install it"
            )
    # train_job.py runs these two SkyRL scripts.
    for script in ("examples/train/visgym/entrypoint.py", "examples/train/visgym/dataset.py"):
        if not (skyrl_dir / script).is_file():
            problems.append(f"{skyrl_dir / script} is missing: train_job.py needs it")

    import gymnasium
    import hf_transfer  # noqa: F401  HF_HUB_ENABLE_HF_TRANSFER=1 makes downloads fail without it
    import huggingface_hub  # noqa: F401  train_job.py downloads the SFT checkpoint with it
    import ray.dashboard  # noqa: F401  the Ray head serves the job submission API from the dashboard
    import skyrl  # noqa: F401
    import skyrl_gym  # noqa: F401

    env_ids = os.environ["VISGYM_ENV_IDS"].split(",")
    if not Path(gymnasium.__file__).resolve().is_relative_to(visgym_dir):
        problems.append(f"gymnasium is imported from {gymnasium.__file__}, not from VisGym at {visgym_dir}")
    else:
        problems += [problem for env_id in env_ids if (problem := first_observation_problem(env_id))]

    for problem in problems:
        print(f"image check failed: {problem}", file=sys.stderr)
    if not problems:
        print(
            f"image check passed: ray {ray_version}, skyrl {pinned['skyrl']} (torch {pinned['torch']}, vllm "
            f"{pinned['vllm']}), pygame {pygame_version}, aws-ofi-nccl and libfabric load by name, "
            f"SkyRL's VisGymEnv opens {', '.join(env_ids)} with a rendered frame"
        )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
