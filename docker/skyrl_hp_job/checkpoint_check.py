"""The checkpoint as a vision-language model (step 2 of the package docstring): its processor must turn the first
VisGym observation into a prompt with image tokens; that observation and the generation settings become the run's
query example."""

from __future__ import annotations

import copy
import importlib
import importlib.abc
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import PrepareError, log
from .files import write_atomically
from .options import MAX_GENERATE_KEY, TEMPERATURE_KEY, Options

# SkyRL's VisGym environment of the SFT recipe, as its entry point registers it (examples/train/visgym/entrypoint.py).
VISGYM_ENV_MODULE = "examples.train.visgym.env_sft"

# check(options): the checkpoint check (step 2 of the package docstring); tests pass a stand-in.
CheckpointCheck = Callable[["Options"], object]


@dataclass(frozen=True)
class CheckpointReport:
    processor: str
    prompt_tokens: int
    image_tokens: int
    messages: list[dict[str, Any]]


def first_observation(options: Options) -> list[dict[str, Any]]:
    """The conversation SkyRL's VisGym environment opens an eval episode with (VisGym's task and a rendered frame)."""
    if str(options.skyrl_dir) not in sys.path:
        sys.path.append(str(options.skyrl_dir))
    try:
        environment = importlib.import_module(VISGYM_ENV_MODULE)
    except ImportError as exc:
        raise PrepareError(
            f"cannot import SkyRL's VisGym environment {VISGYM_ENV_MODULE} from {options.skyrl_dir}: {exc}"
        ) from None
    try:
        env = environment.VisGymEnv(extras={"visgym_env_id": options.env_id, "seed": options.eval_seed})
        messages, _ = env.init([])
        env.close()
    except Exception as exc:  # VisGym and pygame raise many types; report one line
        raise PrepareError(f"VisGym environment {options.env_id} did not render its first observation: {exc}") from None
    return list(messages)


def inspect_checkpoint(options: Options, messages: list[dict[str, Any]]) -> CheckpointReport:
    """The checkpoint's processor applied to `messages` (add_generation_prompt, as the engines render a turn)."""
    try:
        transformers = importlib.import_module("transformers")
    except ImportError:
        raise PrepareError("transformers is not installed: run this script with the training image's python") from None
    where = f"checkpoint {options.model_dir}"
    try:
        processor = transformers.AutoProcessor.from_pretrained(str(options.model_dir))
    except Exception as exc:  # transformers raises many types for a broken folder; report one line
        raise PrepareError(
            f"{where} has no processor transformers can load: {' '.join(str(exc).split())[:300]}"
        ) from None
    image_processor = getattr(processor, "image_processor", None)
    tokenizer = getattr(processor, "tokenizer", None)
    image_token_id = getattr(processor, "image_token_id", None)
    missing = [
        what
        for what, absent in (
            ("an image processor (preprocessor_config.json)", image_processor is None),
            ("a tokenizer", tokenizer is None),
            ("a chat template", tokenizer is not None and not (processor.chat_template or tokenizer.chat_template)),
            ("the image token in its tokenizer", tokenizer is not None
             and image_token_id in (None, getattr(tokenizer, "unk_token_id", None))),
        )
        if absent
    ]  # fmt: skip
    if missing:
        raise PrepareError(
            f"{where} is not a vision-language checkpoint the engines can run: it lacks {', '.join(missing)}"
        )
    try:
        # A copy: transformers rewrites the parts it loads in place (an image_url part becomes an "image" one), and the
        # query example keeps the OpenAI form the engines take.
        rendered = processor.apply_chat_template(
            copy.deepcopy(messages), add_generation_prompt=True, tokenize=True, return_dict=True
        )
    except Exception as exc:  # a template or processor that cannot take the observation
        raise PrepareError(
            f"{where}: its chat template and processor did not take a VisGym observation: {exc}"
        ) from None
    ids = list(rendered["input_ids"])
    if ids and isinstance(ids[0], list):  # one conversation, returned as a batch of one
        ids = ids[0]
    image_tokens = sum(1 for token in ids if token == image_token_id)
    if image_tokens == 0:
        raise PrepareError(f"{where}: its chat template renders VisGym's maze frame without image tokens")
    return CheckpointReport(type(processor).__name__, len(ids), image_tokens, messages)


def write_query_example(path: Path, options: Options, report: CheckpointReport) -> None:
    """The first observation and the training's generation settings, as JSON at `path` (--query-example)."""
    overrides = dict(options.overrides)
    example: dict[str, Any] = {
        "env_id": options.env_id,
        "seed": options.eval_seed,
        "messages": report.messages,
        "prompt_tokens": report.prompt_tokens,
        "image_tokens": report.image_tokens,
    }
    if MAX_GENERATE_KEY in overrides:
        example["max_tokens"] = int(overrides[MAX_GENERATE_KEY])
    if TEMPERATURE_KEY in overrides:
        example["temperature"] = float(overrides[TEMPERATURE_KEY])
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(example, sort_keys=True) + "\n")


def check_checkpoint(options: Options) -> CheckpointReport:
    """Step 2: the checkpoint takes a VisGym observation into image tokens; the example written."""
    report = inspect_checkpoint(options, first_observation(options))
    if options.query_example is not None:
        write_query_example(options.query_example, options, report)
    log(
        f"checkpoint {options.model_dir} is a vision-language checkpoint: {report.processor} renders {options.env_id} "
        f"(seed {options.eval_seed}) as {report.prompt_tokens} tokens, {report.image_tokens} of them the maze frame"
        + (f"; query example: {options.query_example}" if options.query_example else "")
    )
    return report
