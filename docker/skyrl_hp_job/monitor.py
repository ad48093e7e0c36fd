"""In the driver: the attempt monitor, which ends the driver when the attempt stalled or a newer one took over."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .attempts import Attempt, superseded_by, superseded_message
from .errors import log
from .progress import read_progress
from .watchdog import StallWatchdog

# The exit code of a stalled attempt, the one coreutils `timeout` uses for a command it ended.
STALL_EXIT_CODE = 124
SUPERSEDED_EXIT_CODE = 1

# How often the driver reads the trainer's progress and the attempt generations (a small fraction of a bound).
MAX_POLL_SECONDS = 15.0


def end_driver(message: str, code: int) -> None:
    """End the job's driver at once: Ray's job supervisor reports the attempt FAILED with this exit code and KubeRay
    retries it. os._exit, because the thread running SkyRL is the one that is stuck (in ray.get)."""
    print(f"train_job: error: {message}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(code)


@dataclass
class Guard:
    """What the in-process run of SkyRL is given: the attempt and the watchdog's bounds (0 = off)."""

    attempt: Attempt
    first_step_s: float
    step_s: float
    mlflow_run_id: str | None = None


class AttemptMonitor:
    """The driver's watch over its attempt: a reader thread reads the trainer's progress and the generations on
    the shared file system (a blocked read never holds up the deadline), a second thread ends the driver when the
    watchdog says the attempt stalled or a newer attempt took over."""

    def __init__(
        self,
        guard: Guard,
        *,
        clock: Callable[[], float] = time.monotonic,
        end: Callable[[str, int], None] = end_driver,
        poll_s: float | None = None,
    ) -> None:
        self.guard = guard
        self.clock = clock
        self.end = end
        bounds = [bound for bound in (guard.first_step_s, guard.step_s) if bound]
        self.poll_s = poll_s if poll_s is not None else min([MAX_POLL_SECONDS, *(bound / 10 for bound in bounds)])
        self.watchdog = StallWatchdog(first_step_s=guard.first_step_s, step_s=guard.step_s, started=clock())
        self._lock = threading.Lock()
        self._progress: tuple[str, int] | None = None
        self._seen: tuple[str, int] | None = None
        self._newer: str | None = None
        self._stop = threading.Event()

    def refresh(self) -> None:
        """Read the trainer's progress and the generations once."""
        progress = read_progress(self.guard.attempt.progress_path)
        try:
            newer = superseded_by(self.guard.attempt)
        except OSError:
            newer = None
        with self._lock:
            self._progress = progress or self._progress
            self._newer = newer

    def decide(self, now: float) -> tuple[str, int] | None:
        """(line, exit code) when the attempt must end now, else None."""
        with self._lock:
            progress, newer = self._progress, self._newer
        if newer is not None:
            what = "as the trainer runs"
            return superseded_message(self.guard.attempt, newer, what), SUPERSEDED_EXIT_CODE
        if progress is not None and progress != self._seen:
            self._seen = progress
            self.watchdog.observe(*progress, now)
        stalled = self.watchdog.overdue(now)
        if stalled is None:
            return None
        return (
            f"{stalled}; ending attempt generation {self.guard.attempt.generation}: a self-contained RayJob retries it "
            "on a fresh cluster, which resumes from the newest checkpoint",
            STALL_EXIT_CODE,
        )

    def start(self) -> None:
        for target in (self._read_loop, self._watch_loop):
            threading.Thread(target=target, name=f"skyrl-hp-{target.__name__.strip('_')}", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _read_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.refresh()
            except Exception as exc:  # keep watching: the deadline does not depend on a read succeeding
                log(f"note: cannot read the attempt's progress: {exc}")
            self._stop.wait(self.poll_s)

    def _watch_loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            verdict = self.decide(self.clock())
            if verdict is not None and not self._stop.is_set():
                self.end(*verdict)
                return
