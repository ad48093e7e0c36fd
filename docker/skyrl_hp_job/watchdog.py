"""The stall watchdog's decision (step 6 of the package docstring): has the trainer finished no step within its
bound?"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StallWatchdog:
    """Decides, from the trainer's progress as the driver saw it, whether the attempt has stalled."""

    first_step_s: float
    step_s: float
    started: float
    last_step: int | None = None
    last_step_at: float | None = None
    trainer_start_step: int | None = None
    finished: bool = False

    def observe(self, event: str, step: int, now: float) -> None:
        if event == "train_start":
            self.trainer_start_step = step
        elif event == "step_end" and step != self.last_step:
            self.last_step, self.last_step_at = step, now
        elif event == "train_end":
            self.finished = True

    def overdue(self, now: float) -> str | None:
        """One line saying how the attempt stalled, or None."""
        if self.finished or not self.first_step_s:
            return None
        if self.last_step is None or self.last_step_at is None:
            if now - self.started <= self.first_step_s:
                return None
            if self.trainer_start_step is None:
                where = "the trainer never reported its start"
            else:
                resumed = f"after global_step_{self.trainer_start_step}" if self.trainer_start_step else "at step 1"
                where = f"the trainer started {resumed}"
            return (
                f"stalled: no training step finished within {self.first_step_s:g} s of SkyRL's start ({where}; "
                "training.jobs.stall_timeout_first_step_s)"
            )
        if self.step_s and now - self.last_step_at > self.step_s:
            return (
                f"stalled: no training step finished within {self.step_s:g} s after step {self.last_step} "
                "(training.jobs.stall_timeout_step_s)"
            )
        return None
