"""The trainer's progress, from its callbacks to the attempt's progress file, where the driver's watchdog reads it."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .attempts import Attempt
from .errors import log
from .files import write_atomically


def write_progress(attempt: Attempt, event: str, step: int) -> None:
    record = {
        "generation": attempt.generation,
        "event": event,
        "step": step,
        "at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    try:
        write_atomically(attempt.progress_path, json.dumps(record, sort_keys=True) + "\n")
    except OSError as exc:  # the watchdog ends the attempt if progress stays unrecorded
        log(f"note: cannot record the trainer's progress in {attempt.progress_path}: {exc}")


def read_progress(path: Path) -> tuple[str, int] | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        return str(record["event"]), int(record["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _ignore_event(*args: Any) -> None:
    return None


# The attempt's first finished step, said once in the driver log: `skyrl-hp train timeline` reads its time there
# (skyrl_hyperpod/ops/start_timeline.py), as SkyRL prints its own `Step N:` line only with trainer.logger=console.
FIRST_STEP_DONE = "first step of this attempt done: global step "


class ProgressCallback:
    """A SkyRL TrainingCallback by shape (SkyRL's CallbackHandler calls every on_* event on each callback): records
    the trainer's start, each finished step and its end in the attempt's progress file, for the driver's watchdog,
    and says when the attempt's first step finished."""

    def __init__(self, attempt: Attempt) -> None:
        self.attempt = attempt
        self.stepped = False

    def on_train_start(self, trainer: Any, callback_input: Any, control: Any) -> None:
        write_progress(self.attempt, "train_start", int(callback_input.global_step))

    def on_step_end(self, trainer: Any, callback_input: Any, control: Any) -> None:
        step = int(callback_input.global_step)
        write_progress(self.attempt, "step_end", step)
        if not self.stepped:
            self.stepped = True
            log(f"{FIRST_STEP_DONE}{step}")

    def on_train_end(self, trainer: Any, callback_input: Any, control: Any) -> None:
        write_progress(self.attempt, "train_end", int(callback_input.global_step))

    def __getattr__(self, name: str) -> Callable[..., None]:
        if name.startswith("on_"):
            return _ignore_event
        raise AttributeError(name)
