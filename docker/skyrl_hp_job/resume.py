"""The run's checkpoint directory (step 3 of the package docstring): the run marker, and the step file SkyRL resumes
from pointed back at the newest complete checkpoint."""

from __future__ import annotations

import datetime
import json
import zipfile
from pathlib import Path

from .errors import PrepareError, log
from .files import write_atomically

RUN_MARKER = ".skyrl-hp-run.json"

# SkyRL's checkpoint layout (skyrl/train/trainer.py save_checkpoints/load_checkpoints): <ckpt_path>/
# global_step_<N>/ holds policy/, data.pt and trainer_state.pt (written in that order); only then is
# latest_ckpt_global_step.txt rewritten with N, and resume_mode=latest reads that file.
LATEST_STEP_FILE = "latest_ckpt_global_step.txt"
STEP_DIR_PREFIX = "global_step_"
TRAINER_STATE_FILE = "trainer_state.pt"


def checkpoint_steps(ckpt_dir: Path) -> list[int]:
    """Steps of the global_step_<N> directories under ckpt_dir (complete or not), ascending."""
    if not ckpt_dir.is_dir():
        return []
    steps = []
    for entry in ckpt_dir.iterdir():
        suffix = entry.name.removeprefix(STEP_DIR_PREFIX)
        if entry.is_dir() and entry.name.startswith(STEP_DIR_PREFIX) and suffix.isdigit():
            steps.append(int(suffix))
    return sorted(steps)


def latest_complete_step(ckpt_dir: Path) -> int | None:
    """The step SkyRL's resume_mode=latest resumes from: latest_ckpt_global_step.txt, which SkyRL writes
    only after the whole checkpoint is on disk; None when it does not exist or is not a step number."""
    try:
        text = (ckpt_dir / LATEST_STEP_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def checkpoint_complete(ckpt_dir: Path, step: int) -> bool:
    """Whether global_step_<step> holds a whole trainer_state.pt, the file SkyRL writes last in a checkpoint folder
    and reads first on resume. torch.save writes a zip archive (PyTorch's default format since 1.6), whose
    directory sits at its end: a file cut short by a crash, or never flushed by a lost node, is not one."""
    return zipfile.is_zipfile(ckpt_dir / f"{STEP_DIR_PREFIX}{step}" / TRAINER_STATE_FILE)


def repair_latest_step_file(ckpt_dir: Path) -> int | None:
    """Point latest_ckpt_global_step.txt back at the newest complete checkpoint when it is not a step number
    (SkyRL opens it with "w", so a crash during that write truncates it, and SkyRL's int() of it then fails
    every retry) or names a checkpoint that is not complete (written files a lost node never flushed to the
    shared file system: SkyRL's load_checkpoints would fail on it every retry). Returns the step written, or
    None when there was nothing to repair."""
    path = ckpt_dir / LATEST_STEP_FILE
    if not path.exists():
        return None
    named = latest_complete_step(ckpt_dir)
    if named is not None and checkpoint_complete(ckpt_dir, named):
        return None
    what = "was not a step number" if named is None else f"names global_step_{named}, which is not complete"
    complete = [step for step in checkpoint_steps(ckpt_dir) if checkpoint_complete(ckpt_dir, step)]
    if not complete:
        path.unlink()
        log(f"{path} {what} and no checkpoint is complete: removed, training starts from step 1")
        return None
    write_atomically(path, str(complete[-1]))
    log(f"{path} {what}: set to {complete[-1]}, the newest complete checkpoint")
    return complete[-1]


def accept_run_marker(ckpt_dir: Path, run_name: str) -> None:
    """Make ckpt_dir this run's: create it with a run marker, or accept it when its marker names this run. Raises
    PrepareError when the directory holds another run's checkpoints, or checkpoints of an unknown run (no marker);
    the directory is then left untouched."""
    marker_path = ckpt_dir / RUN_MARKER
    try:
        marker = json.loads(marker_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        marker = None
    except (OSError, ValueError) as exc:
        raise PrepareError(f"run marker {marker_path} is unreadable ({exc}); fix or remove it") from None
    if marker is None:
        found = checkpoint_steps(ckpt_dir)
        if found or (ckpt_dir / LATEST_STEP_FILE).exists():
            raise PrepareError(
                f"checkpoint directory {ckpt_dir} holds checkpoints (global_step_{found[-1] if found else '?'}) of a "
                f"run it does not name ({RUN_MARKER} is missing): move them away, or give this experiment another run_id"
            )
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        record = {"run_name": run_name, "claimed_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
        write_atomically(marker_path, json.dumps(record, indent=2, sort_keys=True) + "\n")
        log(f"checkpoint directory {ckpt_dir} claimed for run {run_name!r}")
        return
    owner = marker.get("run_name") if isinstance(marker, dict) else None
    if owner != run_name:
        raise PrepareError(
            f"checkpoint directory {ckpt_dir} belongs to run {owner!r} ({RUN_MARKER}), not {run_name!r}: "
            "give this experiment its own run_id, or move that run's checkpoints away"
        )


def resume_point(ckpt_dir: Path, run_name: str) -> int | None:
    """Repair the step file if needed; the step a resume starts after (None: no complete checkpoint yet)."""
    repair_latest_step_file(ckpt_dir)
    step = latest_complete_step(ckpt_dir)
    if step is None:
        log(f"run {run_name!r} has no complete checkpoint in {ckpt_dir}: training starts from step 1")
    else:
        log(f"run {run_name!r} resumes after its newest complete checkpoint, global_step_{step}")
    return step


def claim_checkpoint_dir(ckpt_dir: Path, run_name: str) -> int | None:
    """accept_run_marker, then resume_point: the step a resume starts after (None: no complete checkpoint yet)."""
    accept_run_marker(ckpt_dir, run_name)
    return resume_point(ckpt_dir, run_name)
