"""Does one `max_model_len` sequence fit a vLLM engine's GPU at its `gpu_memory_utilization`?

vLLM refuses to start when its KV cache cannot hold one full `max_model_len` sequence ("To serve at
least one request with the models's max seq len ... KV cache is needed, which is larger than the
available KV cache memory"), after a GPU job has waited for its nodes and downloaded the model. This
module does the same arithmetic offline, for the training engines (SkyRL's colocated vLLM, the
`generator.inference_engine.*` knobs) and for the serving replicas:

    budget   = GPU memory x gpu_memory_utilization
    weights  = parameters x 2 bytes (bf16) / tensor_parallel_size
    lora     = max_loras x max_lora_rank x layers x sum(in + out of each adapted projection) x 2 bytes
    reserve  = ACTIVATION_RESERVE_GIB (vLLM's profiling peak, vision encoder pass, CUDA graphs, context)
    kv/token = 2 (K and V) x layers x kv_heads x head_dim x 2 bytes / tensor_parallel_size
    refuse when budget - weights - lora - reserve < kv/token x max_model_len

GPU memory is the catalog's figure read as GB (10^9 bytes), below what the driver reports, and the
reserve is an estimate: a live engine prints the real figure ("Available KV cache memory: X GiB").
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3
BF16_BYTES = 2
# vLLM's memory beyond weights, adapters and KV cache; an estimate (see the module docstring).
ACTIVATION_RESERVE_GIB = 6.0


@dataclass(frozen=True)
class ModelShape:
    """The architecture figures the arithmetic needs."""

    name: str
    parameters: int
    layers: int
    kv_heads: int
    head_dim: int
    hidden: int
    q_heads: int
    intermediate: int
    max_position_embeddings: int

    def kv_bytes_per_token(self, tensor_parallel: int = 1) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * BF16_BYTES // min(tensor_parallel, self.kv_heads)

    def weight_bytes(self, tensor_parallel: int = 1) -> int:
        return self.parameters * BF16_BYTES // tensor_parallel

    def lora_slot_bytes(self, rank: int) -> int:
        """One adapter slot of `rank` on every language-model projection (A: in x r, B: r x out)."""
        q_out, kv_out = self.q_heads * self.head_dim, self.kv_heads * self.head_dim
        per_layer = (
            (self.hidden + q_out)  # q_proj
            + 2 * (self.hidden + kv_out)  # k_proj, v_proj
            + (q_out + self.hidden)  # o_proj
            + 2 * (self.hidden + self.intermediate)  # gate_proj, up_proj
            + (self.intermediate + self.hidden)  # down_proj
        )
        return rank * self.layers * per_layer * BF16_BYTES


# Qwen/Qwen3-VL-8B-Instruct, config.json (text_config), which the VisGym SFT checkpoint fine-tunes:
# https://huggingface.co/Qwen/Qwen3-VL-8B-Instruct/blob/main/config.json ; 8.77 B parameters in all.
QWEN3_VL_8B = ModelShape(
    name="Qwen3-VL-8B",
    parameters=8_770_000_000,
    layers=36,
    kv_heads=8,
    head_dim=128,
    hidden=4096,
    q_heads=32,
    intermediate=12288,
    max_position_embeddings=262144,
)


@dataclass(frozen=True)
class EngineMemory:
    """One vLLM engine's GPU memory plan, in bytes."""

    budget: int
    weights: int
    lora: int
    reserve: int
    kv_per_token: int

    @property
    def kv_available(self) -> int:
        return self.budget - self.weights - self.lora - self.reserve

    @property
    def max_tokens(self) -> int:
        return max(0, self.kv_available) // self.kv_per_token


def engine_memory(
    *,
    gpu_memory_gb: int,
    gpu_memory_utilization: float,
    tensor_parallel: int,
    max_loras: int,
    max_lora_rank: int,
    model: ModelShape = QWEN3_VL_8B,
) -> EngineMemory:
    return EngineMemory(
        budget=int(gpu_memory_gb * 10**9 * gpu_memory_utilization),
        weights=model.weight_bytes(tensor_parallel),
        lora=max_loras * model.lora_slot_bytes(max_lora_rank) // tensor_parallel,
        reserve=int(ACTIVATION_RESERVE_GIB * GIB),
        kv_per_token=model.kv_bytes_per_token(tensor_parallel),
    )


def max_model_len_problem(
    max_model_len: int, memory: EngineMemory, *, utilization: float, gpu: str, model: ModelShape = QWEN3_VL_8B
) -> str | None:
    """Why `max_model_len` does not fit (one line, without the key name), or None."""
    if max_model_len > model.max_position_embeddings:
        return f"{model.name} has {model.max_position_embeddings} positions (max_position_embeddings)"
    needed = max_model_len * memory.kv_per_token
    if needed <= memory.kv_available:
        return None
    return (
        f"one sequence needs {needed / GIB:.1f} GiB of KV cache ({memory.kv_per_token // 1024} KiB a token) but at "
        f"gpu_memory_utilization {utilization} a {gpu} leaves {max(0, memory.kv_available) / GIB:.1f} GiB after the "
        f"weights ({memory.weights / GIB:.1f} GiB), LoRA slots ({memory.lora / GIB:.1f} GiB) and vLLM's activation "
        f"reserve ({ACTIVATION_RESERVE_GIB:g} GiB): at most {memory.max_tokens} tokens; lower max_model_len or raise "
        "gpu_memory_utilization"
    )


# vLLM's items per prompt per modality (its engine argument limit_mm_per_prompt; 999 of each when unset,
# vllm/config/multimodal.py), which its start-up profiling and the scheduler's encoder budget assume. A VisGym
# conversation holds one maze frame per turn and no video.
MULTIMODAL_LIMITS_ARGUMENT = "limit_mm_per_prompt"


def multimodal_limits(max_turns: int) -> dict[str, int]:
    """limit_mm_per_prompt for a conversation of at most `max_turns` turns: one image each, no video."""
    return {"image": max_turns, "video": 0}
