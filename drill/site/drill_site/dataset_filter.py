"""A size cut of `train-on-cpu`, not a stand-in: SkyRL's PromptDataset with its prompt-length filter in this process
(`get_train_dataset` asks for 8 spawned processes, each importing datasets and transformers: a minute of two cores per
attempt). The rows it keeps are the same; the drill lists this with the sizes it cuts (cpu_training.py SHRUNK_SITE)."""

from __future__ import annotations

from typing import Any


def in_process_filter(prompt_dataset: Any) -> Any:
    """`prompt_dataset` with its filter's worker count set to 1 (in this process); every other argument is kept."""

    class PromptDataset(prompt_dataset):  # type: ignore[misc]  # SkyRL's classes are untyped (Any)
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["num_workers"] = 1
            super().__init__(*args, **kwargs)

    return PromptDataset
