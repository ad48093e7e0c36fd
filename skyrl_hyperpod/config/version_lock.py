"""The version lock: what each SkyRL release and each serving image pins, so that the training image, the
manifests' `rayVersion`, the offline validation and the drill (`make drill`) all follow one configured choice.

`training_image.skyrl_version` and `serving_image.image` select rows of the tables below; the image
configurations check their Ray, Python and CUDA against them (one line per mismatch). The Makefile and the
requirements files cannot import this module: tests/test_version_lock.py checks their pins against it.

Sources (release metadata, not guesses):
- SkyRL: the `Requires-Python` and `Requires-Dist` lines of the `skyrl` wheel on PyPI
  (https://pypi.org/project/skyrl/0.4.0/): `ray==` of the `skyrl-train` extra, `torch==` and `vllm==` of the
  `fsdp` extra; its runtime-env names from the wheel's skyrl/train/utils/utils.py. PyPI's Linux torch 2.13.0
  wheel depends on the CUDA 13 runtime wheels (`nvidia-cuda-runtime` 13.x, `nvidia-cudnn-cu13`).
- The AWS Deep Learning Container for Ray Serve LLM (https://aws.github.io/deep-learning-containers/ray-llm/,
  "What's Included"): Ray 2.58.0, vLLM 0.26.0, PyTorch 2.11.0 on CUDA 13.0.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SkyRLRelease:
    """What one `skyrl` release on PyPI requires, and which environment variables its driver hands to Ray."""

    version: str
    ray: str
    torch: str
    vllm: str
    python_min: tuple[int, int]
    # The skyrl-gym release the drill and the offline validation install beside it.
    skyrl_gym: str
    # CUDA major version of PyPI's Linux torch wheel at `torch`.
    torch_cuda_major: int
    # `prepare_runtime_environment` and `initialize_ray` (skyrl/train/utils/utils.py) put these names, taken from
    # the driver's environment or set by SkyRL itself, into `ray.init(runtime_env={"env_vars": ...})`. Ray refuses
    # that call when the job's own runtime env (the RayJob's runtimeEnvYAML) sets one of them.
    runtime_env_names: frozenset[str]
    runtime_env_prefixes: tuple[str, ...]

    def passes_on(self, name: str) -> bool:
        """Whether SkyRL's driver may put `name` into the runtime env of the actors it starts."""
        return name in self.runtime_env_names or name.startswith(self.runtime_env_prefixes)


SKYRL_0_4_0 = SkyRLRelease(
    version="0.4.0",
    ray="2.57.0",
    torch="2.13.0",
    vllm="0.30.0",
    python_min=(3, 12),
    skyrl_gym="0.4.0",
    torch_cuda_major=13,
    runtime_env_names=frozenset(
        {
            # forwarded from the driver's environment when set
            "CUDA_HOME",
            "NVTE_DEBUG",
            "NVTE_DEBUG_LEVEL",
            "VLLM_DISABLE_COMPILE_CACHE",
            "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS",
            "RAY_CGRAPH_get_timeout",
            "NCCL_NET_PLUGIN",
            "WANDB_API_KEY",
            "MLFLOW_TRACKING_URI",
            "MLFLOW_TRACKING_TOKEN",
            "DAYTONA_API_KEY",
            "MODAL_TOKEN_ID",
            "MODAL_TOKEN_SECRET",
            "LD_LIBRARY_PATH",
            "PYTHONPATH",
            "UV_PROJECT_ENVIRONMENT",
            "UV_CACHE_DIR",
            "UV_LINK_MODE",
            "UV_PYTHON",
            "UV_OFFLINE",
            "HF_HOME",
            "HF_TOKEN",
            "HF_HUB_OFFLINE",
            "HF_ENDPOINT",
            "PYTORCH_CUDA_ALLOC_CONF",
            "CUDA_LAUNCH_BLOCKING",
            "PYTHONFAULTHANDLER",
            "TORCH_SHOW_CPP_STACKTRACES",
            "TORCH_USE_CUDA_DSA",
            "NCCL_DEBUG",
            "NVTE_FP8_BLOCK_SCALING_FP32_SCALES",
            "VLLM_USE_DEEP_GEMM_E8M0",
            # set by SkyRL itself, from the configuration or the hardware it finds
            "NCCL_CUMEM_ENABLE",
            "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO",
            "CUDA_DEVICE_MAX_CONNECTIONS",
            "FLA_TILELANG",
            "NVTE_FUSED_ATTN",
            "VLLM_ALLOW_RUNTIME_LORA_UPDATING",
            "VLLM_ALLOW_INSECURE_SERIALIZATION",
            "VLLM_USE_V1",
            "VLLM_ENABLE_V1_MULTIPROCESSING",
            "NCCL_P2P_DISABLE",
            "NCCL_SHM_DISABLE",
        }
    ),  # fmt: skip
    # every SKYRL_* variable of the driver's environment, and SKYRL_LOG_FILE, which SkyRL sets
    runtime_env_prefixes=("SKYRL_",),
)
SKYRL_RELEASES: dict[str, SkyRLRelease] = {SKYRL_0_4_0.version: SKYRL_0_4_0}
DEFAULT_SKYRL_VERSION = SKYRL_0_4_0.version
# SkyRL tags each release `skyrl-v<version>` (https://github.com/NovaSky-AI/SkyRL/tags: skyrl-v0.1.0 ... v0.3.0).
SKYRL_RELEASE_TAG = "skyrl-v{version}"


@dataclass(frozen=True)
class ServingImage:
    """What a known serving image carries."""

    ray: str
    vllm: str
    torch: str
    cuda_major: int


SERVING_IMAGES: dict[str, ServingImage] = {
    "public.ecr.aws/deep-learning-containers/ray:serve-llm-cuda-v1.0": ServingImage(
        ray="2.58.0", vllm="0.26.0", torch="2.11.0", cuda_major=13
    ),
}
DEFAULT_SERVING_IMAGE = "public.ecr.aws/deep-learning-containers/ray:serve-llm-cuda-v1.0"


def dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))
