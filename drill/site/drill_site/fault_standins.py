"""The faults the drill's attempt scenarios (drill/attempts.py) plan for one attempt of `train-on-cpu`'s real
training, in `train-plan.json` (read once as the trainer is built): `hang_at_step` (the hang stand-in) and
`freeze_at_step` (the freeze). Each writes an event file in the run directory and prints an EVENT_MARKER line."""

from __future__ import annotations

import json
import os
from typing import Any

from .stop_points import EVENT_MARKER, TRAIN_PLAN, drill_file, plan

HUNG = "hung"
FROZEN = "frozen"


def train_plan() -> dict[str, Any]:
    """What the drill asks of this attempt's real training: `hang_at_step`, `freeze_at_step`."""
    return plan(TRAIN_PLAN)


def event(name: str, step: int, **extra: Any) -> None:
    """An event of this attempt for the drill: `<name>.json` in the run directory (pid, step, wall time)."""
    import time

    record = {"pid": os.getpid(), "step": step, "at": time.time(), **extra}
    staging = drill_file(f".{name}.json.{os.getpid()}")
    with open(staging, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    os.replace(staging, drill_file(f"{name}.json"))
    print(f"{EVENT_MARKER} {name} {json.dumps(record, sort_keys=True)}", flush=True)


def hang_in_generation(trainer: Any, step: int) -> None:
    """The hang stand-in: step `step`'s rollout never returns, as when a vLLM engine stops answering while its process
    lives (the trainer awaits the generator's output forever). Only the drill's watchdog check ends it."""
    import asyncio

    original = trainer.generate

    async def generate(*args: Any, **kwargs: Any) -> Any:
        if trainer.global_step == step:
            event(HUNG, step)
            await asyncio.Event().wait()
        return await original(*args, **kwargs)

    trainer.generate = generate


def freeze_callback(step: int) -> Any:
    """At step `step`'s on_step_end, before SkyRL saves that step's checkpoint (trainer.py `train`), the process
    running the training loop stops itself with SIGSTOP, as a node that lost its kubelet keeps a stale attempt's
    processes; the drill freezes the job's driver too and later resumes both with SIGCONT."""
    import signal

    from skyrl.train.utils.callbacks import TrainingCallback

    class Freeze(TrainingCallback):  # type: ignore[misc]  # SkyRL's classes are untyped (Any)
        first_step: int | None = None

        def on_step_start(self, trainer: Any, callback_input: Any, control: Any) -> None:
            if self.first_step is None:
                self.first_step = int(trainer.global_step)

        def on_step_end(self, trainer: Any, callback_input: Any, control: Any) -> None:
            if trainer.global_step == step:
                event(FROZEN, step, first_step=self.first_step)
                os.kill(os.getpid(), signal.SIGSTOP)

    return Freeze()
