"""Stand-in flash-attn modules for SkyRL's model wrapper, in `train-on-cpu` only. SkyRL imports flash-attn's padding
helpers at the top of its model wrapper (workers/model_wrapper.py); they run only with
trainer.remove_microbatch_padding=true, which the manifests set to false, so the stand-ins refuse to run."""

from __future__ import annotations

import sys
import types
from typing import Any

MODEL_WRAPPER = "skyrl.backends.skyrl_train.workers.model_wrapper"


class StandInUsed(RuntimeError):
    """A stand-in that must never run was called."""


def standin_flash_attn() -> dict[str, Any]:
    """flash_attn and flash_attn.bert_padding as stand-in modules whose functions refuse to run."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise StandInUsed("flash-attn stand-in called: the drill runs with trainer.remove_microbatch_padding=false")

    package = types.ModuleType("flash_attn")
    package.__path__ = []
    padding = types.ModuleType("flash_attn.bert_padding")
    padding.pad_input = refuse  # type: ignore[attr-defined]
    padding.unpad_input = refuse  # type: ignore[attr-defined]
    package.bert_padding = padding  # type: ignore[attr-defined]
    return {"flash_attn": package, "flash_attn.bert_padding": padding}


def exec_with_standin(loader: Any, module: Any) -> None:
    """Runs `loader.exec_module(module)` with the stand-ins in sys.modules, and only then: transformers must not see a
    flash_attn."""
    standins = standin_flash_attn()
    saved = {key: sys.modules.get(key) for key in standins}
    sys.modules.update(standins)
    try:
        loader.exec_module(module)
    finally:
        for key, value in saved.items():
            if value is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = value
