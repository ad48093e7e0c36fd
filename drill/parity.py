"""The parity gate: the policy the RayService serves is the policy FSDP trained.

For one served answer (greedy, the run's query example: VisGym's first eval observation), the trained policy (the
base checkpoint and the adapter SkyRL exported, through transformers + PEFT, float32) scores the very tokens the
RayService generated, teacher-forced on the same prompt; the gate passes when every token's log-probability agrees
with the one vLLM returned within TOLERANCE. An adapter part that vLLM does not apply (a vision-tower module without
`enable_tower_connector_lora`) moves the trained policy's log-probabilities and not the served ones: the gate fails
(`tower_mutant` makes such an adapter, and the drill requires that failure).

TOLERANCE: vLLM's CPU backend runs the float32 checkpoint in bfloat16 ("Downcasting torch.float32 to torch.bfloat16",
8 significant bits, a relative error of 2^-9 per rounding), the reference in float32, with different attention
kernels; on the drill's tiny Qwen3-VL the base model's own gap between the two is about 0.01 and a trained
language-model adapter's about 0.02 (max over 12 tokens), while an ignored vision-tower adapter's is above 0.1. The
drill prints the base model's gap of the same run next to the adapter's, so the margin is visible.

The scoring runs in the drill environment's interpreter (torch, transformers, peft), in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOLERANCE = 0.05
# The vision-tower module the mutant adapter adds, and how far its LoRA moves that module's output.
MUTANT_MODULE = "visual.blocks.0.attn.qkv"
MUTANT_SCALE = 30.0

_SCORE = """
import json, sys
import torch, transformers
from peft import PeftModel

request = json.load(open(sys.argv[1]))
processor = transformers.AutoProcessor.from_pretrained(request["model_dir"])
inputs = processor.apply_chat_template(request["messages"], add_generation_prompt=True, tokenize=True,
                                       return_dict=True, return_tensors="pt")
prompt = inputs["input_ids"][0].tolist()
model = transformers.AutoModelForImageTextToText.from_pretrained(request["model_dir"], dtype=torch.float32)
if request.get("adapter_dir"):
    model = PeftModel.from_pretrained(model, request["adapter_dir"])
model.eval()
generated = request["generated"]
ids = torch.tensor([prompt + generated])
kinds = torch.cat([inputs["mm_token_type_ids"][0], torch.zeros(len(generated), dtype=inputs["mm_token_type_ids"].dtype)])
with torch.no_grad():
    logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), mm_token_type_ids=kinds[None],
                   pixel_values=inputs["pixel_values"], image_grid_thw=inputs["image_grid_thw"]).logits.float()
scores = torch.log_softmax(logits[0, len(prompt) - 1 : -1], dim=-1)
picked = scores.gather(1, torch.tensor(generated)[:, None])[:, 0].tolist()
print(json.dumps({"prompt": prompt, "logprobs": picked}))
"""

_MUTANT = """
import json, shutil, sys
import torch
from safetensors.torch import load_file, save_file

source, target, module, scale = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
shutil.copytree(source, target)
weights = load_file(f"{source}/adapter_model.safetensors")
config = json.load(open(f"{source}/adapter_config.json"))
# PEFT's key layout of the exported adapter: <prefix><module path>.lora_A.weight; the tower module takes the same prefix.
sample = next(key for key in weights if key.endswith(".lora_A.weight"))
prefix = sample[: sample.index("model.language_model.") + len("model.")]
rank = weights[sample].shape[0]
hidden = json.load(open(sys.argv[5]))["vision_config"]["hidden_size"]
torch.manual_seed(7)
weights[f"{prefix}{module}.lora_A.weight"] = torch.randn(rank, hidden) / hidden ** 0.5
weights[f"{prefix}{module}.lora_B.weight"] = torch.randn(3 * hidden, rank) * scale
save_file(weights, f"{target}/adapter_model.safetensors")
config["target_modules"] = sorted(set(config["target_modules"]) | {module.rsplit(".", 1)[-1]})
json.dump(config, open(f"{target}/adapter_config.json", "w"))
print(json.dumps({"module": module, "tensors": len(weights)}))
"""


@dataclass(frozen=True)
class Served:
    """One greedy answer of the RayService with what vLLM reported of it."""

    text: str
    prompt: tuple[int, ...]
    generated: tuple[int, ...]
    logprobs: tuple[float, ...]

    @classmethod
    def from_response(cls, response: dict[str, Any]) -> Served:
        """From an OpenAI chat completion asked with `logprobs` and vLLM's `return_token_ids`."""
        choice = (response.get("choices") or [{}])[0]
        content = (choice.get("logprobs") or {}).get("content") or []
        return cls(
            text=str((choice.get("message") or {}).get("content") or ""),
            prompt=tuple(response.get("prompt_token_ids") or ()),
            generated=tuple(choice.get("token_ids") or ()),
            logprobs=tuple(float(item["logprob"]) for item in content),
        )


@dataclass(frozen=True)
class Parity:
    gap: float  # max |dlogp| over the served tokens
    tokens: int
    problem: str | None = None  # why the two could not be compared

    @property
    def agrees(self) -> bool:
        return self.problem is None and self.gap <= TOLERANCE


def compare(served: Served, trained: dict[str, Any]) -> Parity:
    """The served answer's log-probabilities against the trained policy's scores of the same tokens."""
    if not served.generated or len(served.generated) != len(served.logprobs):
        return Parity(0.0, 0, "the RayService returned no token ids and log-probabilities to compare")
    if tuple(trained["prompt"]) != served.prompt:
        return Parity(0.0, 0, f"the served prompt ({len(served.prompt)} tokens) is not the trained policy's rendering "
                              f"({len(trained['prompt'])} tokens)")  # fmt: skip
    gaps = [abs(a - b) for a, b in zip(served.logprobs, trained["logprobs"], strict=True)]
    return Parity(max(gaps), len(gaps))


def score(
    python: Path, model_dir: Path, adapter_dir: Path | None, messages: list[Any], served: Served
) -> dict[str, Any]:
    """The trained policy's log-probabilities of the served tokens (the drill environment's transformers + PEFT)."""
    request = {
        "model_dir": str(model_dir),
        "adapter_dir": str(adapter_dir) if adapter_dir else None,
        "messages": messages,
        "generated": list(served.generated),
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(request, handle)
    result = subprocess.run([str(python), "-c", _SCORE, handle.name], capture_output=True, text=True, check=False)
    Path(handle.name).unlink(missing_ok=True)
    if result.returncode != 0:
        raise RuntimeError(f"scoring with transformers + PEFT: {(result.stderr.strip().splitlines() or ['?'])[-1]}")
    scored: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return scored


def tower_mutant(python: Path, adapter_dir: Path, target: Path, model_dir: Path) -> str:
    """A copy of the adapter with LoRA on one vision-tower module (MUTANT_MODULE) as well: what an adapter trained with
    PEFT's all-linear holds, which vLLM loads and serves without that module."""
    result = subprocess.run(
        [str(python), "-c", _MUTANT, str(adapter_dir), str(target), MUTANT_MODULE, str(MUTANT_SCALE),
         str(model_dir / "config.json")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"the tower mutant: {(result.stderr.strip().splitlines() or ['?'])[-1]}")
    return MUTANT_MODULE
