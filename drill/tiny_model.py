"""Drill stand-in for the SFT checkpoint: a tiny random-weight Qwen3-VL made on the spot (no hub download), with what
vLLM, SkyRL and the training job need of a vision-language checkpoint: config, weights, a tokenizer carrying Qwen's
turn and vision tokens, Qwen3-VL's image and video processors and a chat template that puts each image part where
Qwen's does (`<|vision_start|><|image_pad|><|vision_end|>`) and loops over content parts (vLLM reads the OpenAI
content format from that).

Run with the drill environment's interpreter (torch, transformers, tokenizers), SkyRL's VisGym example on
PYTHONPATH: `python tiny_model.py MODEL_DIR ENV_ID`. It prints one JSON line: the family, the parameters, the vocabulary.

The tokenizer is a byte-level BPE trained here on the texts SkyRL's VisGym environment (env_sft.VisGymEnv) says in
a few episodes of ENV_ID, so VisGym's prompt is a few hundred tokens, with the five actions VisGym's maze takes
(`('move', 0)` ... `('stop', 'stop')`) as whole tokens. The weights are random but for three things a random model
would otherwise get wrong, all through one embedding dimension that every token carries (BIAS_DIMENSION):
- it never samples a vision or turn-opening token (a sampled `<|image_pad|>` or `<|vision_start|>` in a response
  breaks Qwen3-VL's image-token count and M-RoPE positions in the policy's forward pass);
- a response holds an action now and then (a random model over this vocabulary would almost never write one, and
  a policy that never acts earns no reward to learn from);
- it ends its answer now and then (`<|im_end|>`).
The rest of its output depends on its input, image included, through random weights.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# Qwen's special tokens (Qwen3-VL's tokenizer_config.json): the end of text, the turn markers, the vision markers.
ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD = "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END, VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD)
NEVER_SAMPLED = (ENDOFTEXT, IM_START, VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD)
# VisGym maze_2d's actions as the SFT recipe's environment parses them (examples/train/visgym/utils.py extract_action).
ACTIONS = ("('move', 0)", "('move', 1)", "('move', 2)", "('move', 3)", "('stop', 'stop')")
# Merges across spaces too (no word split before BPE): VisGym's task becomes about 75 tokens, not 390.
VOCAB_SIZE = 1000
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% elif part['type'] in ('image', 'image_url') %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] in ('video', 'video_url') %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Small enough that six FSDP ranks and a vLLM engine step in seconds on two cores. head_dim 64 is a head size vLLM's
# CPU attention supports; M-RoPE's sections (temporal, height, width) sum to half of it, as Qwen3-VL's do.
TEXT_SIZES = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "max_position_embeddings": 4096,
    "initializer_range": 0.1,
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 5000000.0,
        "mrope_section": [12, 10, 10],
        "mrope_interleaved": True,
    },
}
# Qwen3-VL's patch and merge sizes (16 x 16 pixels, 2 x 2 patches per image token). The image processor scales a frame
# to at most 128 x 128 pixels: VisGym's 225 x 225 maze is 64 patches, 16 image tokens (the real checkpoint's processor,
# with a 65,536-pixel minimum, makes it 64 tokens of 256 patches).
VISION_SIZES = {
    "depth": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_heads": 2,
    "patch_size": 16,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "out_hidden_size": TEXT_SIZES["hidden_size"],
    "deepstack_visual_indexes": [1],
}
IMAGE_PROCESSOR = {
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "size": {"shortest_edge": 4096, "longest_edge": 16384},
}
# The embedding dimension every token carries at BIAS_VALUE, and what the output layer reads from it per token.
BIAS_DIMENSION, BIAS_VALUE, BIAS_GAIN = 0, 2.0, 5.0
NEVER_SAMPLED_WEIGHT, ACTION_WEIGHT, END_WEIGHT = -5.0, 0.4, 0.7
EPISODES, SEED = 3, 0


def environment_texts(env_id: str) -> list[str]:
    """What SkyRL's VisGym environment says in a few episodes: the task, feedback on an unreadable and on valid
    actions."""
    import importlib

    # SkyRL's VisGym example, from the checkout on PYTHONPATH (it is no installed package).
    environment = importlib.import_module("examples.train.visgym.env_sft")
    texts = []
    for seed in range(EPISODES):
        env = environment.VisGymEnv(extras={"visgym_env_id": env_id, "seed": seed, "max_turns": 4})
        messages, _ = env.init([])
        texts.append(messages[0]["content"][0]["text"])
        for action in ("no action", ACTIONS[0], ACTIONS[1]):
            for message in env.step(action)["observations"]:
                texts += [part["text"] for part in message["content"] if part["type"] == "text"]
        env.close()
    return texts


def tokenizer(texts: list[str]) -> Any:
    import importlib

    tokenizers = importlib.import_module("tokenizers")
    transformers = importlib.import_module("transformers")
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator([*texts, "system", "user", "assistant"], trainer)
    bpe.add_tokens([tokenizers.AddedToken(action, normalized=False) for action in ACTIONS])
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=IM_END, pad_token=ENDOFTEXT)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def model_config(transformers: Any, vocabulary: int, ids: dict[str, int]) -> Any:
    """The tiny model's Qwen3VLConfig for a tokenizer of `vocabulary` tokens whose special tokens have `ids`."""
    return transformers.Qwen3VLConfig(
        text_config={
            **TEXT_SIZES,
            "vocab_size": vocabulary,
            "eos_token_id": ids[IM_END],
            "pad_token_id": ids[ENDOFTEXT],
            "bos_token_id": None,
        },
        vision_config=VISION_SIZES,
        image_token_id=ids[IMAGE_PAD],
        video_token_id=ids[VIDEO_PAD],
        vision_start_token_id=ids[VISION_START],
        vision_end_token_id=ids[VISION_END],
        tie_word_embeddings=False,
        dtype="float32",
    )


def write(model_dir: Path, env_id: str) -> dict[str, object]:
    import importlib

    import torch

    # transformers is in the drill's environment only (and ships no type information the project's mypy reads).
    transformers = importlib.import_module("transformers")
    model_dir.mkdir(parents=True, exist_ok=True)
    text_tokenizer = tokenizer(environment_texts(env_id))
    ids = {token: text_tokenizer.convert_tokens_to_ids(token) for token in (*SPECIAL_TOKENS, *ACTIONS)}
    processor = transformers.Qwen3VLProcessor(
        image_processor=transformers.Qwen2VLImageProcessorFast(**IMAGE_PROCESSOR),
        tokenizer=text_tokenizer,
        video_processor=transformers.Qwen3VLVideoProcessor(patch_size=16, temporal_patch_size=2, merge_size=2),
        chat_template=CHAT_TEMPLATE,
    )
    config = model_config(transformers, len(text_tokenizer), ids)
    torch.manual_seed(SEED)
    model = transformers.Qwen3VLForConditionalGeneration(config)
    with torch.no_grad():
        language_model = model.model.language_model
        # Every token carries BIAS_VALUE in BIAS_DIMENSION, and no layer writes to it: after the final norm (its gain
        # there BIAS_GAIN) it is a large positive entry at every text position, whatever the rest holds.
        language_model.embed_tokens.weight[:, BIAS_DIMENSION] = BIAS_VALUE
        for layer in language_model.layers:
            layer.self_attn.o_proj.weight[BIAS_DIMENSION, :] = 0.0
            layer.mlp.down_proj.weight[BIAS_DIMENSION, :] = 0.0
        language_model.norm.weight[BIAS_DIMENSION] = BIAS_GAIN
        output = model.lm_head.weight
        output[:, BIAS_DIMENSION] = 0.0
        for token in NEVER_SAMPLED:
            output[ids[token], BIAS_DIMENSION] = NEVER_SAMPLED_WEIGHT
        for action in ACTIONS:
            output[ids[action], BIAS_DIMENSION] = ACTION_WEIGHT
        output[ids[IM_END], BIAS_DIMENSION] = END_WEIGHT
    model.save_pretrained(model_dir)
    processor.save_pretrained(model_dir)
    transformers.GenerationConfig(eos_token_id=ids[IM_END], pad_token_id=ids[ENDOFTEXT]).save_pretrained(model_dir)
    return {
        "family": config.model_type,
        "parameters": sum(parameter.numel() for parameter in model.parameters()),
        "vocabulary": len(text_tokenizer),
    }


if __name__ == "__main__":
    print(json.dumps(write(Path(sys.argv[1]), sys.argv[2])))
