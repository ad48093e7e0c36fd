"""Drill stand-in for the SFT checkpoint: a tiny random-weight model of the configured family, made from a config on
the spot (no hub download), beside the stand-in tokenizer the drill already writes (layout.py).

Run with the drill environment's interpreter (it needs torch and transformers):
`python tiny_model.py MODEL_DIR`. The model directory must already hold the tokenizer; the model's vocabulary is
exactly the tokenizer's, so every id the model samples decodes.

The family: Qwen3 (text). The job's model is Qwen3-VL; docs/drill.md says why the drill trains the text model of
the same family and what that leaves unproven.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# Small enough that six FSDP ranks and a vLLM engine step in seconds on two cores; head_dim 64 is one of the
# head sizes vLLM's CPU attention supports.
SIZES = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "max_position_embeddings": 1024,
}
SEED = 0


def write(model_dir: Path) -> dict[str, object]:
    import importlib

    import torch

    # transformers is in the drill's environment only (and ships no type information the project's mypy reads).
    transformers = importlib.import_module("transformers")
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    config = transformers.Qwen3Config(
        vocab_size=len(tokenizer),
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
        torch_dtype="bfloat16",
        **SIZES,
    )
    torch.manual_seed(SEED)
    model = transformers.Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(model_dir)
    transformers.GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    ).save_pretrained(model_dir)
    return {"family": config.model_type, "parameters": sum(p.numel() for p in model.parameters())}


if __name__ == "__main__":
    print(json.dumps(write(Path(sys.argv[1]))))
