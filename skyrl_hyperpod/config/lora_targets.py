"""Which modules the LoRA adapter trains: only those every engine that runs the adapter applies.

FSDP trains what PEFT's `target_modules` selects. The vLLM engines that run the adapter (SkyRL's rollout and
evaluation engines, the RayService) apply LoRA to Qwen3-VL's language-model projections only: its vision tower and
mergers take an adapter only with vLLM's experimental `enable_tower_connector_lora` (vllm/config/lora.py, default
off); without it vLLM logs "will be ignored" for each and serves the adapter without them
(https://github.com/vllm-project/vllm/issues/32541). An adapter with tower modules would therefore be trained as one
policy and rolled out and served as another. SkyRL's default, PEFT's "all-linear" (skyrl/train/config/config.py
`LoraConfig.target_modules`), takes the tower too, so the default here is the language model's projections, as a
list.

The list form matters: SkyRL passes `target_modules` to PEFT as it parsed it, and PEFT reads a string as one regular
expression (peft/tuners/tuners_utils.py `check_target_module_exists`): `q_proj,k_proj` matches no module and FSDP's
workers fail at start (`Target modules q_proj,k_proj not found`), while SkyRL's override parser turns `[q_proj,k_proj]`
into a list of names, each matched as a module-name suffix.
"""

from __future__ import annotations

from typing import Any

# Qwen3-VL's language-model projections: Qwen3VLTextAttention (q/k/v/o_proj) and Qwen3VLTextMLP (gate/up/down_proj),
# transformers' models/qwen3_vl/modeling_qwen3_vl.py; vLLM applies LoRA to each.
LANGUAGE_MODEL_LORA_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# The linear modules of its vision tower and mergers: Qwen3VLVisionAttention (qkv, proj), Qwen3VLVisionMLP and
# Qwen3VLVisionPatchMerger (linear_fc1, linear_fc2), the same file. None of these names occurs in the language model.
VISION_TOWER_LORA_MODULES = ("qkv", "proj", "linear_fc1", "linear_fc2")
# PEFT's keyword for every linear layer (vision tower included).
ALL_LINEAR = "all-linear"
TARGET_MODULES_KEY = "trainer.policy.model.lora.target_modules"
TOWER_FLAG = "enable_tower_connector_lora"


def _list_form(names: list[str] | tuple[str, ...]) -> str:
    return "[" + ",".join(names) + "]"


def parse_target_modules(value: Any) -> Any:
    """The list of module names a configuration value means: a YAML list, or SkyRL's bracket form `[a,b]` (what an
    experiment's override holds); one name alone is a list of one. PEFT's all-linear and a comma-separated string are
    refused, each with what to write instead."""
    if isinstance(value, (list, tuple)):
        return tuple(value)
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        return tuple(name.strip().strip("'\"") for name in text[1:-1].split(",") if name.strip())
    if text == ALL_LINEAR:
        raise ValueError(
            f"{ALL_LINEAR} also adapts Qwen3-VL's vision tower ({', '.join(VISION_TOWER_LORA_MODULES)}), which vLLM "
            f"does not apply without {TOWER_FLAG}: the policy rolled out and served would not be the one trained; "
            f"write the language model's projections, {_list_form(LANGUAGE_MODEL_LORA_MODULES)} (the default)"
        )
    if "," in text:
        names = [name.strip() for name in text.split(",") if name.strip()]
        raise ValueError(
            f"{text!r} is one regular expression to PEFT, which would find no such module when the FSDP workers start: "
            f"write the list, {_list_form(names)}"
        )
    return (text,)


def target_modules_problem(modules: tuple[str, ...]) -> str | None:
    """Why an adapter on `modules` would not be the policy vLLM rolls out and serves (one line), or None."""
    tower = [name for name in modules if name in VISION_TOWER_LORA_MODULES]
    if tower:
        return (
            f"{', '.join(tower)} {'is' if len(tower) == 1 else 'are'} in Qwen3-VL's vision tower, which FSDP would "
            f"train and vLLM (SkyRL's rollout engines and the RayService) ignores without {TOWER_FLAG}: the policy "
            f"rolled out and served would not be the one trained; adapt only the language model's projections, "
            f"{', '.join(LANGUAGE_MODEL_LORA_MODULES)}"
        )
    unknown = [name for name in modules if name not in LANGUAGE_MODEL_LORA_MODULES]
    if unknown or not modules:
        return (
            f"vLLM applies LoRA to {', '.join(LANGUAGE_MODEL_LORA_MODULES)}; "
            f"{', '.join(unknown) or 'an empty list'} would not be applied"
        )
    return None


def skyrl_value(modules: tuple[str, ...]) -> str:
    """The override's value SkyRL parses into a list (`[q_proj,k_proj]`)."""
    return _list_form(modules)
