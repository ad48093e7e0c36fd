"""Attempt generations of a run's checkpoint directory (step 4 of the package docstring): the newest attempt owns
the checkpoints.

Each attempt takes generation <n> = the newest + 1 by creating .skyrl-hp-attempts/generation-<n>, and before
every checkpoint write it checks that no generation newer than its own exists. The name is created with
link(2): the record is written and synced under a private name first, and link() makes it appear under the
generation's name complete, or fails with EEXIST when another attempt took that number first (it then takes
the next one); POSIX makes both link() and rename() atomic, and a Lustre client "provides a full POSIX-compliant
interface" across the nodes that mount it (mount.lustre(8), https://man7.org/linux/man-pages/man8/mount.lustre.8.html;
link() to a lock file is open(2)'s portable exclusive create). No flock: the charts mount FSx with `flock`, which
that page describes as coherent across all client nodes (`localflock`: this node only), but a lock held by a
client that died stays held until the servers evict that client (https://wiki.lustre.org/Lustre_Recovery_Overview),
and an attempt must never wait on a dead one. Nothing here waits or locks.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import PrepareError, UsageError, log
from .files import write_synced
from .options import CKPT_PATH_KEY, RUN_NAME_KEY, Options
from .resume import accept_run_marker, resume_point

# The attempts of a run (the package docstring, step 4), under its checkpoint directory.
ATTEMPTS_DIR = ".skyrl-hp-attempts"
GENERATION_PREFIX = "generation-"
PROGRESS_PREFIX = "progress-"
MAX_GENERATION_TRIES = 1000

# Where the driver of a submitted Ray job finds its submission id: the job supervisor sets this variable to the
# job config, whose metadata holds `job_submission_id` (ray dashboard/modules/job/job_supervisor.py,
# `_get_driver_env_vars`; dashboard/modules/job/common.py, JOB_ID_METADATA_KEY). KubeRay submits each attempt
# of a RayJob under a new submission id, `<RayJob name>-<random suffix>`.
RAY_JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"
SUBMISSION_ID_KEY = "job_submission_id"


class AttemptSuperseded(RuntimeError):
    """A newer attempt holds the run's checkpoints: one line, raised before a checkpoint write."""


@dataclass(frozen=True)
class Attempt:
    ckpt_dir: str
    generation: int
    label: str

    @property
    def attempts_dir(self) -> Path:
        return Path(self.ckpt_dir) / ATTEMPTS_DIR

    @property
    def progress_path(self) -> Path:
        return self.attempts_dir / f"{PROGRESS_PREFIX}{self.generation}.json"


def attempt_identity(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Who this attempt is, for the generation record and the lines that name it: the Ray job submission id
    (KubeRay's per-attempt id), the RayCluster KubeRay created for the attempt (RAY_CLUSTER_NAME, set in the Ray
    containers of KubeRay's pods, when present), the host (pod) and the process. The RayJob's own uid is not
    exposed to the driver (neither KubeRay nor Ray passes it on); the submission id starts with the RayJob's name."""
    environ = os.environ if environ is None else environ
    submission = None
    try:
        job_config = json.loads(environ.get(RAY_JOB_CONFIG_ENV) or "{}")
        submission = (job_config.get("metadata") or {}).get(SUBMISSION_ID_KEY)
    except (ValueError, AttributeError):
        pass
    return {
        "submission_id": submission,
        "ray_cluster": environ.get("RAY_CLUSTER_NAME"),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "taken_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def describe_attempt(record: Mapping[str, Any]) -> str:
    submission = record.get("submission_id")
    who = f"submission {submission}" if submission else "no Ray job submission id"
    where = f"host {record.get('host', '?')} pid {record.get('pid', '?')}"
    return f"{who}, {where}, since {record.get('taken_at', '?')}"


def generations(attempts_dir: Path) -> list[int]:
    try:
        names = os.listdir(attempts_dir)
    except FileNotFoundError:
        return []
    numbers = (name.removeprefix(GENERATION_PREFIX) for name in names if name.startswith(GENERATION_PREFIX))
    return sorted(int(number) for number in numbers if number.isdigit())


def take_generation(ckpt_dir: Path, identity: Mapping[str, Any]) -> Attempt:
    """Create generation-<newest + 1> exclusively, with this attempt's record; never waits."""
    directory = ckpt_dir / ATTEMPTS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    staging = directory / f".{GENERATION_PREFIX}{socket.gethostname()}.{os.getpid()}.tmp"
    for _ in range(MAX_GENERATION_TRIES):
        generation = max(generations(directory), default=0) + 1
        record = {**identity, "generation": generation}
        write_synced(staging, json.dumps(record, indent=2, sort_keys=True) + "\n")
        try:
            os.link(staging, directory / f"{GENERATION_PREFIX}{generation}")
        except FileExistsError:
            continue  # another attempt took this number a moment ago: the next one is ours
        except OSError as exc:
            raise PrepareError(
                f"cannot create {directory / f'{GENERATION_PREFIX}{generation}'}: {exc.strerror}"
            ) from None
        finally:
            staging.unlink(missing_ok=True)
        attempt = Attempt(ckpt_dir=str(ckpt_dir), generation=generation, label=describe_attempt(record))
        log(f"attempt generation {generation} ({attempt.label}) holds {ckpt_dir}")
        return attempt
    raise PrepareError(f"could not take an attempt generation in {directory} in {MAX_GENERATION_TRIES} tries")


def superseded_by(attempt: Attempt) -> str | None:
    """The newer generation that holds the run's checkpoints, described; None while this attempt is the newest."""
    newest = max(generations(attempt.attempts_dir), default=0)
    if newest <= attempt.generation:
        return None
    try:
        record = json.loads((attempt.attempts_dir / f"{GENERATION_PREFIX}{newest}").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {}
    return f"generation {newest} ({describe_attempt(record if isinstance(record, dict) else {})})"


def superseded_message(attempt: Attempt, newer: str, what: str) -> str:
    return (
        f"attempt generation {attempt.generation} ({attempt.label}) of {attempt.ckpt_dir} is superseded by {newer}: "
        f"stopped {what}; the newest attempt owns the run's checkpoints"
    )


def check_fence(attempt: Attempt, what: str) -> None:
    """Raise AttemptSuperseded (one line, also logged) when a newer attempt took a generation."""
    newer = superseded_by(attempt)
    if newer is not None:
        message = superseded_message(attempt, newer, what)
        log(f"error: {message}")
        raise AttemptSuperseded(message)


def claim_run_checkpoints(options: Options) -> Attempt | None:
    overrides = dict(options.overrides)
    ckpt_path, run_name = overrides.get(CKPT_PATH_KEY), overrides.get(RUN_NAME_KEY)
    if not ckpt_path or not run_name:
        log(
            f"note: no {CKPT_PATH_KEY} and {RUN_NAME_KEY} override: the checkpoint directory is not checked, "
            "attempts are not fenced and no stall watchdog runs"
        )
        return None
    if not Path(ckpt_path).is_absolute():
        raise UsageError(f"override {CKPT_PATH_KEY}={ckpt_path!r} must be an absolute path")
    ckpt_dir = Path(ckpt_path)
    accept_run_marker(ckpt_dir, run_name)
    # The generation comes before the step-file repair, so an older attempt still alive is fenced off first.
    attempt = take_generation(ckpt_dir, attempt_identity())
    resume_point(ckpt_dir, run_name)
    return attempt
