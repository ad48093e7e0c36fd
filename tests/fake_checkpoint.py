"""Stand-ins for what docker/train_job.py's checkpoint check imports, for tests that run the job end to end against a
stand-in SkyRL: a `transformers` whose processor renders any conversation as two image tokens, and SkyRL's VisGym
environment module whose first observation is a text and an image part. tests/test_vision_language.py runs the check
on real ones (a tiny Qwen3-VL, VisGym, SkyRL's VisGymEnv)."""

from __future__ import annotations

from pathlib import Path

FAKE_TRANSFORMERS = """
class _Tokenizer:
    chat_template = "stand-in"
    unk_token_id = 0


class _Processor:
    image_processor = object()
    tokenizer = _Tokenizer()
    chat_template = "stand-in"
    image_token_id = 5

    def apply_chat_template(self, messages, **kwargs):
        return {"input_ids": [[1, 5, 5, 2]]}


class AutoProcessor:
    @staticmethod
    def from_pretrained(path):
        return _Processor()
"""

FAKE_ENV_SFT = """
class VisGymEnv:
    def __init__(self, env_config=None, extras=None):
        self.extras = extras

    def init(self, prompt):
        image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}
        return [{"role": "user", "content": [{"type": "text", "text": "stand-in task"}, image]}], {}

    def close(self):
        pass
"""


def write_fake_vision_language(packages: Path, checkout: Path) -> None:
    """`transformers` under `packages` (put it first on PYTHONPATH) and examples/train/visgym/env_sft.py in the
    SkyRL checkout."""
    (packages / "transformers").mkdir(parents=True, exist_ok=True)
    (packages / "transformers" / "__init__.py").write_text(FAKE_TRANSFORMERS)
    scripts = checkout / "examples" / "train" / "visgym"
    scripts.mkdir(parents=True, exist_ok=True)
    (scripts / "env_sft.py").write_text(FAKE_ENV_SFT)
