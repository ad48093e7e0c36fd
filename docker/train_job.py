#!/usr/bin/env python3
"""Entry point of the SkyRL VisGym GRPO RayJob (runs on the Ray head, inside the training image).

1. Prepares shared storage once: downloads the SFT checkpoint subfolder to --model-dir and
   generates the train and eval datasets with SkyRL's examples/train/visgym/dataset.py into
   --data-dir (train.parquet, eval.parquet). Each artifact gets a completion marker
   (.prepared.json, written atomically after success) recording the inputs that produced it, so
   a rerun with the same inputs skips the work and a rerun with different inputs redoes it.
   An exclusive fcntl.flock lock under --shared-dir serialises pods that start at the same time
   (FSx for Lustre honours it when mounted with the `flock` option).
2. Claims the run's checkpoint directory (trainer.ckpt_path) with a run marker (.skyrl-hp-run.json naming
   trainer.run_name): a retry of the same run finds its own marker and SkyRL resumes (resume_mode=latest);
   a directory that holds another run's checkpoints, or checkpoints without a marker, is refused in one
   line instead of being resumed from or overwritten. A latest_ckpt_global_step.txt left empty by a crash
   during SkyRL's write of it, or naming a checkpoint whose trainer state is missing or cut short, is pointed
   back at the newest complete checkpoint.
3. Replaces itself with `python examples/train/visgym/entrypoint.py --env_variant sft <overrides>`
   run from --skyrl-dir, so SkyRL's exit code is the job's exit code.

Overrides follow `--` as dotted `key=value` pairs. Unless given explicitly, the script adds
trainer.policy.model.path, data.train_data and data.val_data pointing at what it prepared.

The charts mount this file from a ConfigMap (a knob change never needs an image rebuild); it also
runs as `ray job submit --working-dir docker/ -- python train_job.py ...`. Standard library only;
huggingface_hub (in the image) is imported when a download is needed.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import errno
import fcntl
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ENTRYPOINT = "examples/train/visgym/entrypoint.py"
DATASET_SCRIPT = "examples/train/visgym/dataset.py"
ENV_VARIANT = "sft"
MARKER = ".prepared.json"
LOCK_FILE = ".locks/train-job-prepare.lock"
TRAIN_FILE = "train.parquet"
EVAL_FILE = "eval.parquet"
MODEL_PATH_KEY = "trainer.policy.model.path"
CKPT_PATH_KEY = "trainer.ckpt_path"
RUN_NAME_KEY = "trainer.run_name"
RUN_MARKER = ".skyrl-hp-run.json"
# SkyRL's checkpoint layout (skyrl/train/trainer.py save_checkpoints/load_checkpoints): <ckpt_path>/
# global_step_<N>/ holds policy/, data.pt and trainer_state.pt (written in that order); only then is
# latest_ckpt_global_step.txt rewritten with N, and resume_mode=latest reads that file.
LATEST_STEP_FILE = "latest_ckpt_global_step.txt"
STEP_DIR_PREFIX = "global_step_"
TRAINER_STATE_FILE = "trainer_state.pt"
TRAIN_DATA_KEY = "data.train_data"
VAL_DATA_KEY = "data.val_data"
DEFAULT_LOCK_TIMEOUT_SECONDS = 7200
LOCK_POLL_SECONDS = 5.0

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# argparse prints a value-taking option as `--seed SEED` and a switch as `--seed`.
_SEED_TAKES_VALUE = re.compile(r"--seed[ =][A-Z_]+")

Downloader = Callable[[str, str, Path], None]
Executor = Callable[[Sequence[str], Path], None]


class UsageError(Exception):
    """Bad command line: reported in one line, exit code 2."""


class PrepareError(Exception):
    """Preparation failed: reported in one line, exit code 1."""


def log(message: str) -> None:
    print(f"train_job: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Options:
    shared_dir: Path
    model_repo: str
    model_subfolder: str
    model_dir: Path
    data_dir: Path
    env_id: str
    train_rows: int
    eval_rows: int
    eval_seed: int
    skyrl_dir: Path
    dry_run: bool
    lock_timeout: float
    overrides: tuple[tuple[str, str], ...]

    @property
    def lock_path(self) -> Path:
        return self.shared_dir / LOCK_FILE

    @property
    def train_data(self) -> Path:
        return self.data_dir / TRAIN_FILE

    @property
    def eval_data(self) -> Path:
        return self.data_dir / EVAL_FILE

    @property
    def model_inputs(self) -> dict[str, object]:
        return {"model_repo": self.model_repo, "model_subfolder": self.model_subfolder}

    @property
    def dataset_inputs(self) -> dict[str, object]:
        return {
            "env_id": self.env_id,
            "train_rows": self.train_rows,
            "eval_rows": self.eval_rows,
            "eval_seed": self.eval_seed,
        }


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line instead of usage + message
        raise UsageError(f"{message} (see --help)")


def _int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= minimum, with a one-line message otherwise."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} must be at least {minimum}")
        return value

    return parse


_positive_int = _int_at_least(1)
_non_negative_int = _int_at_least(0)


def _absolute_path(text: str) -> Path:
    path = Path(text)
    if not path.is_absolute():
        raise argparse.ArgumentTypeError(f"{text!r} must be an absolute path")
    return path


def _hub_name(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Hugging Face repository id such as owner/name")
    return text


def _subfolder(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*", text) or ".." in text.split("/"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a relative folder of the repository such as mixed_qwen3vl")
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="train_job.py",
        description="Prepare the SFT checkpoint and VisGym datasets on shared storage, "
        "then run SkyRL's VisGym GRPO entry point.",
        epilog="SkyRL overrides follow `--` as dotted key=value pairs: -- trainer.epochs=20 generator.max_turns=15",
    )
    parser.add_argument(
        "--shared-dir", type=_absolute_path, required=True, help="shared file system root (holds the lock)"
    )
    parser.add_argument(
        "--model-repo", type=_hub_name, required=True, help="Hugging Face repository of the SFT checkpoint"
    )
    parser.add_argument(
        "--model-subfolder", type=_subfolder, required=True, help="folder of that repository to download"
    )
    parser.add_argument("--model-dir", type=_absolute_path, required=True, help="where the checkpoint folder lands")
    parser.add_argument(
        "--data-dir", type=_absolute_path, required=True, help=f"where {TRAIN_FILE} and {EVAL_FILE} land"
    )
    parser.add_argument("--env-id", required=True, help="VisGym environment id, e.g. maze_2d/easy")
    parser.add_argument("--train-rows", type=_positive_int, required=True, help="rows of the training set")
    parser.add_argument("--eval-rows", type=_positive_int, required=True, help="rows of the (seeded) eval set")
    parser.add_argument(
        "--eval-seed",
        type=_non_negative_int,
        required=True,
        help="seed of the eval set; when dataset.py only has a --seed switch (rows seeded 0..N-1) the switch is used",
    )
    parser.add_argument("--skyrl-dir", type=_absolute_path, required=True, help="SkyRL checkout inside the image")
    parser.add_argument(
        "--lock-timeout",
        type=_non_negative_int,
        default=DEFAULT_LOCK_TIMEOUT_SECONDS,
        help="seconds to wait for another pod's preparation (default %(default)s)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the training command; prepare and run nothing")
    return parser


def parse_overrides(items: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """Validate `dotted.key=value` pairs the way SkyRL will read them; one clear line per mistake."""
    seen: dict[str, str] = {}
    for item in items:
        if item.startswith("+"):
            raise UsageError(
                f"override {item!r}: SkyRL rejects the '+' prefix (it accepts only keys of its config); drop the '+'"
            )
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"override {item!r} is not key=value (for example trainer.epochs=20)")
        if not _KEY.fullmatch(key):
            raise UsageError(
                f"override {item!r}: key {key!r} must be dot-separated identifiers such as trainer.policy.model.path"
            )
        if value == "":
            raise UsageError(f"override {item!r} has an empty value (write null for None)")
        if key in seen:
            raise UsageError(f"override key {key!r} is given twice ({seen[key]!r} and {value!r})")
        seen[key] = value
    return tuple(seen.items())


def parse_args(argv: Sequence[str]) -> Options:
    argv = list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    head, overrides = argv[:split], argv[split + 1 :]
    stray = [item for item in head if "=" in item and not item.startswith("-")]
    if stray:
        raise UsageError(f"{stray[0]!r} looks like an override: put SkyRL overrides after `--`")
    args = build_parser().parse_args(head)
    return Options(
        shared_dir=args.shared_dir,
        model_repo=args.model_repo,
        model_subfolder=args.model_subfolder,
        model_dir=args.model_dir,
        data_dir=args.data_dir,
        env_id=args.env_id,
        train_rows=args.train_rows,
        eval_rows=args.eval_rows,
        eval_seed=args.eval_seed,
        skyrl_dir=args.skyrl_dir,
        dry_run=args.dry_run,
        lock_timeout=float(args.lock_timeout),
        overrides=parse_overrides(overrides),
    )


# ---------------------------------------------------------------------------------------------
# Completion markers and the lock
# ---------------------------------------------------------------------------------------------


def _write_atomically(path: Path, text: str) -> None:
    staging = path.with_name(f".{path.name}.{socket.gethostname()}.{os.getpid()}.tmp")
    with open(staging, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(staging, path)


def _read_marker(directory: Path) -> dict | None:
    try:
        return json.loads((directory / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write_marker(directory: Path, inputs: dict[str, object]) -> None:
    record = {
        "inputs": inputs,
        "prepared_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "prepared_by": f"{socket.gethostname()} pid {os.getpid()}",
    }
    _write_atomically(directory / MARKER, json.dumps(record, indent=2, sort_keys=True) + "\n")


def model_ready(options: Options) -> bool:
    marker = _read_marker(options.model_dir)
    return bool(marker) and marker.get("inputs") == options.model_inputs


def datasets_ready(options: Options) -> bool:
    marker = _read_marker(options.data_dir)
    return (
        bool(marker)
        and marker.get("inputs") == options.dataset_inputs
        and options.train_data.is_file()
        and options.eval_data.is_file()
    )


@contextlib.contextmanager
def exclusive_lock(path: Path, timeout_seconds: float, poll_seconds: float = LOCK_POLL_SECONDS) -> Iterator[None]:
    """Hold an exclusive flock on `path`; wait up to `timeout_seconds` for another holder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o664)
    try:
        deadline = time.monotonic() + timeout_seconds
        announced = False
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                    raise PrepareError(
                        f"cannot lock {path}: {exc.strerror} (mount the shared file system with the flock option)"
                    ) from None
            holder = path.read_text(encoding="utf-8", errors="replace").strip() or "unknown holder"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PrepareError(
                    f"timed out after {timeout_seconds:.0f} s waiting for the preparation lock {path} "
                    f"(held by {holder}); raise --lock-timeout if that preparation is still running"
                )
            if not announced:
                log(f"waiting for the preparation lock {path} held by {holder}")
                announced = True
            time.sleep(min(poll_seconds, remaining))
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{socket.gethostname()} pid {os.getpid()} since {time.ctime()}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(descriptor, 0)
            fcntl.flock(descriptor, fcntl.LOCK_UN)
    finally:
        os.close(descriptor)


# ---------------------------------------------------------------------------------------------
# Preparation
# ---------------------------------------------------------------------------------------------


def download_from_hugging_face(repo_id: str, subfolder: str, destination: Path) -> None:
    """Download `repo_id`'s `subfolder` so that it lands at destination/subfolder."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise PrepareError(
            "huggingface_hub is not installed: run this script with the training image's python"
        ) from None
    snapshot_download(repo_id=repo_id, allow_patterns=[f"{subfolder}/*"], local_dir=str(destination))


def _staging_path(target: Path, purpose: str) -> Path:
    return target.with_name(f".{target.name}.{purpose}-{socket.gethostname()}-{os.getpid()}")


def prepare_model(options: Options, download: Downloader) -> None:
    target = options.model_dir
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = _staging_path(target, "download")
    shutil.rmtree(staging, ignore_errors=True)
    log(f"downloading {options.model_repo}/{options.model_subfolder} to {target}")
    try:
        download(options.model_repo, options.model_subfolder, staging)
    except PrepareError:
        raise
    except Exception as exc:  # the hub client raises many types; report one line
        raise PrepareError(f"download of {options.model_repo}/{options.model_subfolder} failed: {exc}") from None
    downloaded = staging / options.model_subfolder
    if not downloaded.is_dir() or not any(downloaded.iterdir()):
        shutil.rmtree(staging, ignore_errors=True)
        raise PrepareError(f"{options.model_repo} has no files under {options.model_subfolder}/")
    # Swap the complete folder in; whatever was there (a partial or older copy) goes away after.
    previous = _staging_path(target, "previous")
    if target.exists():
        os.replace(target, previous)
    os.replace(downloaded, target)
    shutil.rmtree(previous, ignore_errors=True)
    shutil.rmtree(staging, ignore_errors=True)
    _write_marker(target, options.model_inputs)


def seed_arguments(options: Options, python: str) -> list[str]:
    """dataset.py's --seed is a switch at the pinned SkyRL ref (rows get seeds 0..N-1); newer
    versions may take a value. Ask its --help which one it is."""
    help_text = subprocess.run(
        [python, DATASET_SCRIPT, "--help"], cwd=options.skyrl_dir, capture_output=True, text=True, check=False
    )
    if help_text.returncode != 0:
        raise PrepareError(
            f"{DATASET_SCRIPT} --help failed with exit code {help_text.returncode}: {help_text.stderr.strip()[-300:]}"
        )
    if _SEED_TAKES_VALUE.search(help_text.stdout):
        return ["--seed", str(options.eval_seed)]
    if "--seed" in help_text.stdout:
        log(
            f"{DATASET_SCRIPT} seeds eval rows 0..{options.eval_rows - 1} itself; "
            f"--eval-seed {options.eval_seed} is recorded only"
        )
        return ["--seed"]
    raise PrepareError(f"{DATASET_SCRIPT} has no --seed option: cannot build a seeded eval set")


def _generate(options: Options, python: str, rows: int, extra: list[str], destination: Path) -> None:
    staging = _staging_path(destination, "generate")
    shutil.rmtree(staging, ignore_errors=True)
    command = [
        python,
        DATASET_SCRIPT,
        "--output_dir",
        str(staging),
        "--env_id",
        options.env_id,
        "--num_rows",
        str(rows),
        *extra,
    ]
    log(f"generating {destination}: {shlex.join(command)}")
    result = subprocess.run(command, cwd=options.skyrl_dir, check=False)
    produced = staging / TRAIN_FILE  # dataset.py always names its output train.parquet
    if result.returncode != 0 or not produced.is_file():
        shutil.rmtree(staging, ignore_errors=True)
        raise PrepareError(f"{DATASET_SCRIPT} failed for {destination} (exit code {result.returncode})")
    os.replace(produced, destination)
    shutil.rmtree(staging, ignore_errors=True)


def prepare_datasets(options: Options, python: str) -> None:
    options.data_dir.mkdir(parents=True, exist_ok=True)
    (options.data_dir / MARKER).unlink(missing_ok=True)
    _generate(options, python, options.train_rows, [], options.train_data)
    _generate(options, python, options.eval_rows, seed_arguments(options, python), options.eval_data)
    _write_marker(options.data_dir, options.dataset_inputs)


def prepare(options: Options, *, download: Downloader, python: str) -> None:
    """Make the checkpoint and datasets exist exactly once, whoever gets there first."""
    if model_ready(options) and datasets_ready(options):
        log(f"checkpoint {options.model_dir} and datasets {options.data_dir} already prepared")
        return
    for script in (ENTRYPOINT, DATASET_SCRIPT):
        if not (options.skyrl_dir / script).is_file():
            raise PrepareError(
                f"{options.skyrl_dir / script} does not exist: is --skyrl-dir the image's SkyRL checkout?"
            )
    with exclusive_lock(options.lock_path, options.lock_timeout):
        # Re-check under the lock: another pod may have finished while this one waited.
        if model_ready(options):
            log(f"checkpoint {options.model_dir} already prepared")
        else:
            prepare_model(options, download)
        if datasets_ready(options):
            log(f"datasets {options.data_dir} already prepared")
        else:
            prepare_datasets(options, python)


# ---------------------------------------------------------------------------------------------
# The run's checkpoint directory
# ---------------------------------------------------------------------------------------------


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
    _write_atomically(path, str(complete[-1]))
    log(f"{path} {what}: set to {complete[-1]}, the newest complete checkpoint")
    return complete[-1]


def claim_checkpoint_dir(ckpt_dir: Path, run_name: str) -> int | None:
    """Make ckpt_dir this run's: create it with a run marker, or accept it when its marker names this run.
    Returns the step a resume starts after (None: no complete checkpoint yet). Raises PrepareError when the
    directory holds another run's checkpoints, or checkpoints of an unknown run (no marker)."""
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
        _write_atomically(marker_path, json.dumps(record, indent=2, sort_keys=True) + "\n")
        log(f"checkpoint directory {ckpt_dir} claimed for run {run_name!r}")
        return None
    owner = marker.get("run_name") if isinstance(marker, dict) else None
    if owner != run_name:
        raise PrepareError(
            f"checkpoint directory {ckpt_dir} belongs to run {owner!r} ({RUN_MARKER}), not {run_name!r}: "
            "give this experiment its own run_id, or move that run's checkpoints away"
        )
    repair_latest_step_file(ckpt_dir)
    step = latest_complete_step(ckpt_dir)
    if step is None:
        log(f"run {run_name!r} has no complete checkpoint in {ckpt_dir}: training starts from step 1")
    else:
        log(f"run {run_name!r} resumes after its newest complete checkpoint, global_step_{step}")
    return step


def claim_run_checkpoints(options: Options) -> None:
    overrides = dict(options.overrides)
    ckpt_path, run_name = overrides.get(CKPT_PATH_KEY), overrides.get(RUN_NAME_KEY)
    if not ckpt_path or not run_name:
        log(f"note: no {CKPT_PATH_KEY} and {RUN_NAME_KEY} override: the checkpoint directory is not checked")
        return
    if not Path(ckpt_path).is_absolute():
        raise UsageError(f"override {CKPT_PATH_KEY}={ckpt_path!r} must be an absolute path")
    claim_checkpoint_dir(Path(ckpt_path), run_name)


# ---------------------------------------------------------------------------------------------
# Training command
# ---------------------------------------------------------------------------------------------


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


def exec_in_directory(command: Sequence[str], directory: Path) -> None:
    """Become the training process: signals from Ray reach SkyRL and its exit code is the job's."""
    os.chdir(directory)
    os.execv(command[0], list(command))


def main(
    argv: Sequence[str] | None = None,
    *,
    download: Downloader = download_from_hugging_face,
    execute: Executor = exec_in_directory,
    python: str = sys.executable,
) -> int:
    try:
        options = parse_args(sys.argv[1:] if argv is None else argv)
        command = training_command(options, python)
        if options.dry_run:
            model_state = "ready" if model_ready(options) else "would be downloaded"
            data_state = "ready" if datasets_ready(options) else "would be generated"
            log(f"dry run: checkpoint {options.model_dir} {model_state}; datasets {options.data_dir} {data_state}")
            log(f"dry run: would run from {options.skyrl_dir}:")
            print(shlex.join(command), flush=True)
            return 0
        prepare(options, download=download, python=python)
        claim_run_checkpoints(options)
        log(f"starting SkyRL from {options.skyrl_dir}: {shlex.join(command)}")
        sys.stdout.flush()
        sys.stderr.flush()
        execute(command, options.skyrl_dir)
        return 0
    except UsageError as error:
        print(f"train_job: error: {error}", file=sys.stderr)
        return 2
    except PrepareError as error:
        print(f"train_job: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
