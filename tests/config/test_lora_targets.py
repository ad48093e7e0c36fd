"""The LoRA adapter trains only modules every vLLM engine applies (skyrl_hyperpod/config/lora_targets.py).

The configuration checks run here on their own; the facts they rest on run on the real code: SkyRL's override
parser (`SkyRLTrainConfig.from_cli_overrides`) on the override the manifest carries, and PEFT's module matching
(`get_peft_model` with the LoraConfig SkyRL's FSDP workers build, workers/model_wrapper.py) on a tiny Qwen3-VL that
transformers builds from the drill's stand-in configuration (drill/tiny_model.py), in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from drill.tiny_model import TEXT_SIZES
from skyrl_hyperpod.config import ConfigError, validate_config
from skyrl_hyperpod.config.lora_targets import (
    LANGUAGE_MODEL_LORA_MODULES,
    TARGET_MODULES_KEY,
    VISION_TOWER_LORA_MODULES,
)

REPO_ROOT = Path(__file__).resolve().parents[2]

# Run in its own process: torch, transformers and peft stay out of the test worker.
PEFT_ON_QWEN3_VL = """
import json, sys
import torch, transformers
from peft import LoraConfig, TaskType, get_peft_model
from drill.tiny_model import ACTIONS, SPECIAL_TOKENS, model_config
from skyrl_hyperpod.validation.skyrl_overrides import parse_skyrl_overrides

ids = {token: index for index, token in enumerate((*SPECIAL_TOKENS, *ACTIONS))}
config = model_config(transformers, 64, ids)
linear = {}
for name, module in transformers.Qwen3VLForConditionalGeneration(config).named_modules():
    if isinstance(module, torch.nn.Linear):
        part = "vision" if ".visual." in f".{name}." else "language" if ".language_model." in f".{name}." else "other"
        linear.setdefault(part, set()).add(name.rsplit(".", 1)[-1])
report = {"linear": {part: sorted(names) for part, names in linear.items()}, "cases": {}}
for label, value in json.loads(sys.argv[1]).items():
    parsed = parse_skyrl_overrides([f"{sys.argv[2]}={value}"]).trainer.policy.model.lora.target_modules
    model = transformers.Qwen3VLForConditionalGeneration(config)
    lora = LoraConfig(task_type=TaskType.CAUSAL_LM, r=8, lora_alpha=8, target_modules=parsed, bias="none")
    try:
        adapted = sorted(name for name, module in get_peft_model(model, lora).named_modules() if hasattr(module, "lora_A"))
        report["cases"][label] = {"parsed": parsed, "adapted": adapted}
    except ValueError as error:
        report["cases"][label] = {"parsed": parsed, "error": str(error)}
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def peft_report() -> dict:
    default = validate_config({}).derived.runs[0].overrides()[TARGET_MODULES_KEY]
    cases = {"default": default, "comma string": "q_proj,k_proj", "all-linear": "all-linear"}
    result = subprocess.run(
        [sys.executable, "-c", PEFT_ON_QWEN3_VL, json.dumps(cases), TARGET_MODULES_KEY],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report: dict = json.loads(result.stdout.strip().splitlines()[-1])
    return report


@pytest.mark.long_running
def test_the_module_names_are_qwen3_vls_own(peft_report):
    # What lora_targets.py names as the language model's and the tower's linear modules is what transformers builds.
    linear = peft_report["linear"]
    assert set(linear["language"]) == set(LANGUAGE_MODEL_LORA_MODULES)
    assert set(linear["vision"]) == set(VISION_TOWER_LORA_MODULES)
    assert not set(linear["language"]) & set(linear["vision"])


@pytest.mark.long_running
def test_the_default_adapts_every_language_model_projection_and_no_tower_module(peft_report):
    case = peft_report["cases"]["default"]
    assert case["parsed"] == list(LANGUAGE_MODEL_LORA_MODULES)  # SkyRL turned the override into a list
    adapted = case["adapted"]
    assert adapted and not [name for name in adapted if ".visual." in name]
    for projection in LANGUAGE_MODEL_LORA_MODULES:  # every projection of every layer
        assert len([name for name in adapted if name.endswith(f".{projection}")]) == TEXT_SIZES["num_hidden_layers"]


@pytest.mark.long_running
def test_what_the_configuration_refuses_fails_or_diverges_on_the_real_code(peft_report):
    # A comma string stays a string in SkyRL, and PEFT reads it as one pattern: the FSDP workers would not start.
    comma = peft_report["cases"]["comma string"]
    assert comma["parsed"] == "q_proj,k_proj" and "not found" in comma["error"]
    # all-linear, SkyRL's default, puts LoRA on the vision tower, which vLLM does not apply.
    tower = [name for name in peft_report["cases"]["all-linear"]["adapted"] if ".visual." in name]
    assert {name.rsplit(".", 1)[-1] for name in tower} == set(VISION_TOWER_LORA_MODULES)
    for value in ("q_proj,k_proj", "all-linear"):
        with pytest.raises(ConfigError):
            validate_config({"training": {"knobs": {TARGET_MODULES_KEY: value}}})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("q_proj,k_proj", "'q_proj,k_proj' is one regular expression to PEFT, which would find no such module when the "
                          "FSDP workers start: write the list, [q_proj,k_proj]"),
        ("all-linear", "all-linear also adapts Qwen3-VL's vision tower (qkv, proj, linear_fc1, linear_fc2), which vLLM "
                       "does not apply without enable_tower_connector_lora"),
        (["q_proj", "qkv"], "qkv is in Qwen3-VL's vision tower, which FSDP would train and vLLM (SkyRL's rollout "
                            "engines and the RayService) ignores without enable_tower_connector_lora"),
        (["q_proj", "lm_head"], "lm_head would not be applied"),
    ],
)  # fmt: skip
def test_an_adapter_vllm_would_not_apply_as_trained_is_refused_in_one_line(value, message):
    with pytest.raises(ConfigError) as error:
        validate_config({"training": {"knobs": {TARGET_MODULES_KEY: value}}})
    [line] = error.value.problems
    assert TARGET_MODULES_KEY in line and message in line


def test_an_experiment_takes_skyrls_list_form_and_refuses_the_comma_form():
    def run_with(value):
        experiment = {"name": "attention", "overrides": {TARGET_MODULES_KEY: value}}
        return validate_config({"training": {"experiments": [experiment]}}).derived.runs[0]

    assert run_with("[q_proj,v_proj]").overrides()[TARGET_MODULES_KEY] == "[q_proj,v_proj]"
    with pytest.raises(ConfigError, match=r"write the list, \[q_proj,v_proj\]"):
        run_with("q_proj,v_proj")
    with pytest.raises(ConfigError, match="qkv is in Qwen3-VL's vision tower"):
        run_with("[q_proj,qkv]")
