"""The training command, and SkyRL's entry point run in this process under the attempt's guard (step 6 of the package
docstring)."""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from .attempts import superseded_by, superseded_message
from .errors import PrepareError, log
from .monitor import AttemptMonitor, Guard
from .options import ENTRYPOINT, ENV_VARIANT, MODEL_PATH_KEY, TRAIN_DATA_KEY, VAL_DATA_KEY, Options
from .trainer_guard import route_guard_to_workers, worker_setup_hook

# execute(command, skyrl_dir, guard=Guard | None): runs SkyRL; tests pass a recorder.
Executor = Callable[..., None]


def effective_overrides(options: Options) -> list[str]:
    """The caller's overrides plus the paths this script prepared (explicit values win)."""
    given = dict(options.overrides)
    prepared = {
        MODEL_PATH_KEY: str(options.model_dir),
        TRAIN_DATA_KEY: f"['{options.train_data}']",
        VAL_DATA_KEY: f"['{options.eval_data}']",
    }
    for key, value in prepared.items():
        if key in given and given[key] != value:
            log(f"note: {key}={given[key]} overrides the prepared {value}")
    return [f"{key}={value}" for key, value in options.overrides] + [
        f"{key}={value}" for key, value in prepared.items() if key not in given
    ]


def training_command(options: Options, python: str) -> list[str]:
    return [python, ENTRYPOINT, "--env_variant", ENV_VARIANT, *effective_overrides(options)]


def run_in_process(command: Sequence[str], directory: Path, *, guard: Guard | None = None) -> None:
    """Run SkyRL's entry point script in this process, from `directory`, as `python SCRIPT ARGS` would (sys.argv,
    sys.path[0] = the script's directory, `__main__`): its exit code or exception is the job's, Ray's signals to the
    driver reach it. In-process rather than exec, because the guard lives here: the watchdog thread must share the
    driver's fate (it ends the driver, and with it the Ray job, when the trainer stalls), and the trainer's progress
    callback and checkpoint fence reach the trainer's Ray worker only as the runtime env of the driver's ray.init.
    Not a sitecustomize on PYTHONPATH: the ConfigMap is mounted on the head only and the trainer runs on any node
    (and the drill already ships a sitecustomize of its own)."""
    script = os.path.realpath(os.path.join(directory, command[1]))
    os.chdir(directory)
    sys.argv = list(command[1:])
    sys.path[0] = os.path.dirname(script)
    monitor = None
    if guard is not None:
        try:
            import ray
        except ImportError:
            log("note: ray is not importable here: the trainer's progress and checkpoint writes are not watched")
        else:
            route_guard_to_workers(ray, worker_setup_hook(guard.attempt, guard.mlflow_run_id))
        if guard.first_step_s:
            monitor = AttemptMonitor(guard)
            monitor.start()
            log(
                f"stall watchdog: the first step within {guard.first_step_s:g} s, each later one within "
                f"{guard.step_s:g} s of the previous (0: unbounded)"
            )
    try:
        runpy.run_path(script, run_name="__main__")
    except Exception as exc:
        # The trainer refused a checkpoint write (AttemptSuperseded, raised in its Ray task and re-raised here by
        # ray.get as a RayTaskError whose text ends with the trainer's line): say so in one line, not a traceback.
        newer = superseded_by(guard.attempt) if guard is not None else None
        if guard is not None and newer is not None:
            said = [
                line for line in str(exc).splitlines() if f"attempt generation {guard.attempt.generation} (" in line
            ]
            message = said[-1] if said else superseded_message(guard.attempt, newer, "as the trainer ran")
            raise PrepareError(message[message.index("attempt generation") :]) from None
        raise
    finally:
        if monitor is not None:
            monitor.stop()
