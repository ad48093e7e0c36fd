#!/usr/bin/env python3
"""Entry point of the SkyRL VisGym GRPO RayJob (runs on the Ray head, inside the training image).

1. Prepares shared storage once: downloads the SFT checkpoint subfolder to --model-dir and
   generates the train and eval datasets with SkyRL's examples/train/visgym/dataset.py into
   --data-dir (train.parquet, eval.parquet). Each artifact gets a completion marker
   (.prepared.json, written atomically after success) recording the inputs that produced it, so
   a rerun with the same inputs skips the work and a rerun with different inputs redoes it.
   An exclusive fcntl.flock lock under --shared-dir serialises pods that start at the same time
   (FSx for Lustre honours it when mounted with the `flock` option).
2. Checks the checkpoint is a vision-language checkpoint the engines can run, before any GPU work: its processor
   (image processor, tokenizer with the vision tokens, chat template) turns the first observation of SkyRL's VisGym
   environment (examples/train/visgym/env_sft.py: VisGym's task and a rendered maze frame) into a prompt with image
   tokens; a checkpoint that cannot is refused in one line naming what is missing. That observation, with the
   training's generation settings, is written to --query-example (the charts: the run's directory), where the publish
   Job takes it to S3 with the adapter and `skyrl-hp serve query` finds it.
3. Claims the run's checkpoint directory (trainer.ckpt_path) with a run marker (.skyrl-hp-run.json naming
   trainer.run_name): a retry of the same run finds its own marker and SkyRL resumes (resume_mode=latest);
   a directory that holds another run's checkpoints, or checkpoints without a marker, is refused in one
   line instead of being resumed from or overwritten. A latest_ckpt_global_step.txt left empty by a crash
   during SkyRL's write of it, or naming a checkpoint whose trainer state is missing or cut short, is pointed
   back at the newest complete checkpoint.
4. Takes the next attempt generation of that directory (.skyrl-hp-attempts/generation-<n>, created exclusively):
   the newest attempt owns the run's checkpoints. An older attempt that is still alive (a pod on a partitioned
   node, a second RayJob on the same run) is stopped, in one line, before its next checkpoint write; nothing waits
   on a lock, so a newer attempt never waits on a dead one.
5. With trainer.logger=mlflow: one MLflow run per attempt chain. The first attempt creates the run (in the
   experiment named trainer.project_name, named trainer.run_name, tagged with every --mlflow-tag) and keeps its id
   beside the checkpoints (.skyrl-hp-attempts/mlflow-run.json); a retry resumes that run (MLFLOW_RUN_ID in the
   trainer's process), so its steps continue the same curves. A superseded attempt logs nothing to it.
6. Runs `examples/train/visgym/entrypoint.py --env_variant sft <overrides>` from --skyrl-dir in this process
   (as `python` would run it: SkyRL's exit code, or its exception, is the job's), with a stall watchdog: when
   SkyRL's trainer finishes no step within --stall-timeout-first-step seconds of the start, or within
   --stall-timeout-step seconds of the previous step, the driver ends in one line with exit code 124, so the
   attempt fails and KubeRay retries it on a fresh cluster (it resumes from the newest checkpoint).

Overrides follow `--` as dotted `key=value` pairs. Unless given explicitly, the script adds
trainer.policy.model.path, data.train_data and data.val_data pointing at what it prepared.

The charts mount this file from a ConfigMap (a knob change never needs an image rebuild); it also
runs as `ray job submit --working-dir docker/ -- python train_job.py ...`. Standard library only at import;
huggingface_hub (in the image) is imported when a download is needed, transformers and SkyRL's VisGym environment for
the checkpoint check, ray when SkyRL starts.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import datetime
import errno
import fcntl
import importlib
import importlib.abc
import json
import os
import re
import runpy
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

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
MAX_GENERATE_KEY = "generator.sampling_params.max_generate_length"
TEMPERATURE_KEY = "generator.sampling_params.temperature"
# SkyRL's VisGym environment of the SFT recipe, as its entry point registers it (examples/train/visgym/entrypoint.py).
VISGYM_ENV_MODULE = "examples.train.visgym.env_sft"

DEFAULT_LOCK_TIMEOUT_SECONDS = 7200
LOCK_POLL_SECONDS = 5.0
# The attempts of a run (docstring, step 3), under its checkpoint directory.
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
# The module whose RayPPOTrainer runs the training loop, in the Ray task the entry point starts.
TRAINER_MODULE = "skyrl.train.trainer"
# The exit code of a stalled attempt, the one coreutils `timeout` uses for a command it ended.
STALL_EXIT_CODE = 124
SUPERSEDED_EXIT_CODE = 1
# How often the driver reads the trainer's progress and the attempt generations (a small fraction of a bound).
MAX_POLL_SECONDS = 15.0
# Experiment tracking (step 6 of the docstring). SkyRL's MLflow logger (skyrl/train/utils/tracking.py,
# _MlflowLoggingAdapter) calls mlflow.set_experiment(trainer.project_name) and mlflow.start_run(run_name=
# trainer.run_name); MLflow's start_run resumes the run MLFLOW_RUN_ID names instead of creating one
# (https://mlflow.org/docs/latest/api_reference/python_api/mlflow.html#mlflow.start_run).
LOGGER_KEY = "trainer.logger"
PROJECT_NAME_KEY = "trainer.project_name"
MLFLOW_LOGGER = "mlflow"
MLFLOW_RUN_ID_ENV = "MLFLOW_RUN_ID"
MLFLOW_RUN_FILE = "mlflow-run.json"

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# argparse prints a value-taking option as `--seed SEED` and a switch as `--seed`.
_SEED_TAKES_VALUE = re.compile(r"--seed[ =][A-Z_]+")

# download(repo_id, subfolder, destination[, revision=commit]): revision only when the manifests pin one.
Downloader = Callable[..., None]
# check(options): the checkpoint check (step 2 of the docstring); tests pass a stand-in.
CheckpointCheck = Callable[["Options"], object]
# execute(command, skyrl_dir, guard=Guard | None): runs SkyRL; tests pass a recorder.
Executor = Callable[..., None]


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
    stall_timeout_first_step: float = 0.0
    stall_timeout_step: float = 0.0
    query_example: Path | None = None
    model_revision: str | None = None
    mlflow_tags: tuple[tuple[str, str], ...] = ()

    @property
    def override(self) -> dict[str, str]:
        return dict(self.overrides)

    @property
    def tracks_with_mlflow(self) -> bool:
        return self.override.get(LOGGER_KEY) == MLFLOW_LOGGER

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
        inputs: dict[str, object] = {"model_repo": self.model_repo, "model_subfolder": self.model_subfolder}
        # Only when pinned: a checkpoint downloaded before pins existed stays valid for an unpinned run.
        return inputs | ({"model_revision": self.model_revision} if self.model_revision else {})

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


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a finite number of seconds, at least 0")
    return value


def _absolute_path(text: str) -> Path:
    path = Path(text)
    if not path.is_absolute():
        raise argparse.ArgumentTypeError(f"{text!r} must be an absolute path")
    return path


def _hub_name(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Hugging Face repository id such as owner/name")
    return text


def _commit(text: str) -> str:
    if not re.fullmatch(r"[0-9a-f]{40}", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a full 40-character commit id")
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
        "--model-revision",
        type=_commit,
        default=None,
        help="commit of that repository to download (upstream-lock.yaml records it); default: its main branch",
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
    parser.add_argument(
        "--stall-timeout-first-step",
        type=_seconds,
        default=0.0,
        metavar="SECONDS",
        help="end the attempt (exit code 124) when SkyRL has finished no training step this long after it started; "
        "0 (default) runs no watchdog. The charts pass training.jobs.stall_timeout_first_step_s",
    )
    parser.add_argument(
        "--stall-timeout-step",
        type=_seconds,
        default=0.0,
        metavar="SECONDS",
        help="end the attempt when no step finished this long after the previous one; 0 (default): no bound after "
        "the first step. The charts pass training.jobs.stall_timeout_step_s",
    )
    parser.add_argument(
        "--query-example",
        type=_absolute_path,
        default=None,
        metavar="PATH",
        help="where the checkpoint check writes the first VisGym observation and the generation settings (JSON) for "
        "serving queries; default: not written",
    )
    parser.add_argument(
        "--mlflow-tag",
        type=_tag,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a tag of the run's MLflow run (with trainer.logger=mlflow; repeatable). The charts pass the RayJob's "
        "name, the configuration fingerprint, the image tag and the SkyRL release",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the training command; prepare and run nothing")
    return parser


def _tag(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


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
        model_revision=args.model_revision,
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
        stall_timeout_first_step=args.stall_timeout_first_step,
        stall_timeout_step=args.stall_timeout_step,
        query_example=args.query_example,
        mlflow_tags=tuple(args.mlflow_tag),
    )


# ---------------------------------------------------------------------------------------------
# Completion markers and the lock
# ---------------------------------------------------------------------------------------------


def _write_synced(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def _write_atomically(path: Path, text: str) -> None:
    staging = path.with_name(f".{path.name}.{socket.gethostname()}.{os.getpid()}.tmp")
    _write_synced(staging, text)
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


def download_from_hugging_face(repo_id: str, subfolder: str, destination: Path, revision: str | None = None) -> None:
    """Download `repo_id`'s `subfolder` (at commit `revision`, else the default branch) to destination/subfolder."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise PrepareError(
            "huggingface_hub is not installed: run this script with the training image's python"
        ) from None
    snapshot_download(repo_id=repo_id, revision=revision, allow_patterns=[f"{subfolder}/*"], local_dir=str(destination))


def _staging_path(target: Path, purpose: str) -> Path:
    return target.with_name(f".{target.name}.{purpose}-{socket.gethostname()}-{os.getpid()}")


def prepare_model(options: Options, download: Downloader) -> None:
    target = options.model_dir
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = _staging_path(target, "download")
    shutil.rmtree(staging, ignore_errors=True)
    log(f"downloading {options.model_repo}/{options.model_subfolder} to {target}")
    try:
        pinned = {"revision": options.model_revision} if options.model_revision else {}
        download(options.model_repo, options.model_subfolder, staging, **pinned)
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
# The checkpoint as a vision-language model
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointReport:
    processor: str
    prompt_tokens: int
    image_tokens: int
    messages: list[dict[str, Any]]


def first_observation(options: Options) -> list[dict[str, Any]]:
    """The conversation SkyRL's VisGym environment opens an eval episode with (VisGym's task and a rendered frame)."""
    if str(options.skyrl_dir) not in sys.path:
        sys.path.append(str(options.skyrl_dir))
    try:
        environment = importlib.import_module(VISGYM_ENV_MODULE)
    except ImportError as exc:
        raise PrepareError(
            f"cannot import SkyRL's VisGym environment {VISGYM_ENV_MODULE} from {options.skyrl_dir}: {exc}"
        ) from None
    try:
        env = environment.VisGymEnv(extras={"visgym_env_id": options.env_id, "seed": options.eval_seed})
        messages, _ = env.init([])
        env.close()
    except Exception as exc:  # VisGym and pygame raise many types; report one line
        raise PrepareError(f"VisGym environment {options.env_id} did not render its first observation: {exc}") from None
    return list(messages)


def inspect_checkpoint(options: Options, messages: list[dict[str, Any]]) -> CheckpointReport:
    """The checkpoint's processor applied to `messages` (add_generation_prompt, as the engines render a turn)."""
    try:
        transformers = importlib.import_module("transformers")
    except ImportError:
        raise PrepareError("transformers is not installed: run this script with the training image's python") from None
    where = f"checkpoint {options.model_dir}"
    try:
        processor = transformers.AutoProcessor.from_pretrained(str(options.model_dir))
    except Exception as exc:  # transformers raises many types for a broken folder; report one line
        raise PrepareError(
            f"{where} has no processor transformers can load: {' '.join(str(exc).split())[:300]}"
        ) from None
    image_processor = getattr(processor, "image_processor", None)
    tokenizer = getattr(processor, "tokenizer", None)
    image_token_id = getattr(processor, "image_token_id", None)
    missing = [
        what
        for what, absent in (
            ("an image processor (preprocessor_config.json)", image_processor is None),
            ("a tokenizer", tokenizer is None),
            ("a chat template", tokenizer is not None and not (processor.chat_template or tokenizer.chat_template)),
            ("the image token in its tokenizer", tokenizer is not None
             and image_token_id in (None, getattr(tokenizer, "unk_token_id", None))),
        )
        if absent
    ]  # fmt: skip
    if missing:
        raise PrepareError(
            f"{where} is not a vision-language checkpoint the engines can run: it lacks {', '.join(missing)}"
        )
    try:
        # A copy: transformers rewrites the parts it loads in place (an image_url part becomes an "image" one), and the
        # query example keeps the OpenAI form the engines take.
        rendered = processor.apply_chat_template(
            copy.deepcopy(messages), add_generation_prompt=True, tokenize=True, return_dict=True
        )
    except Exception as exc:  # a template or processor that cannot take the observation
        raise PrepareError(
            f"{where}: its chat template and processor did not take a VisGym observation: {exc}"
        ) from None
    ids = list(rendered["input_ids"])
    if ids and isinstance(ids[0], list):  # one conversation, returned as a batch of one
        ids = ids[0]
    image_tokens = sum(1 for token in ids if token == image_token_id)
    if image_tokens == 0:
        raise PrepareError(f"{where}: its chat template renders VisGym's maze frame without image tokens")
    return CheckpointReport(type(processor).__name__, len(ids), image_tokens, messages)


def write_query_example(path: Path, options: Options, report: CheckpointReport) -> None:
    """The first observation and the training's generation settings, as JSON at `path` (--query-example)."""
    overrides = dict(options.overrides)
    example: dict[str, Any] = {
        "env_id": options.env_id,
        "seed": options.eval_seed,
        "messages": report.messages,
        "prompt_tokens": report.prompt_tokens,
        "image_tokens": report.image_tokens,
    }
    if MAX_GENERATE_KEY in overrides:
        example["max_tokens"] = int(overrides[MAX_GENERATE_KEY])
    if TEMPERATURE_KEY in overrides:
        example["temperature"] = float(overrides[TEMPERATURE_KEY])
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(path, json.dumps(example, sort_keys=True) + "\n")


def check_checkpoint(options: Options) -> CheckpointReport:
    """Step 2 of the docstring: the checkpoint takes a VisGym observation into image tokens; the example written."""
    report = inspect_checkpoint(options, first_observation(options))
    if options.query_example is not None:
        write_query_example(options.query_example, options, report)
    log(
        f"checkpoint {options.model_dir} is a vision-language checkpoint: {report.processor} renders {options.env_id} "
        f"(seed {options.eval_seed}) as {report.prompt_tokens} tokens, {report.image_tokens} of them the maze frame"
        + (f"; query example: {options.query_example}" if options.query_example else "")
    )
    return report


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
        _write_atomically(marker_path, json.dumps(record, indent=2, sort_keys=True) + "\n")
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


# ---------------------------------------------------------------------------------------------
# Attempt generations (fencing)
#
# Each attempt takes generation <n> = the newest + 1 by creating .skyrl-hp-attempts/generation-<n>, and before
# every checkpoint write it checks that no generation newer than its own exists. The name is created with
# link(2): the record is written and synced under a private name first, and link() makes it appear under the
# generation's name complete, or fails with EEXIST when another attempt took that number first (it then takes
# the next one); POSIX makes both link() and rename() atomic, and a Lustre client "provides a full POSIX-compliant
# interface" across the nodes that mount it (mount.lustre(8), https://man7.org/linux/man-pages/man8/mount.lustre.8.html;
# link() to a lock file is open(2)'s portable exclusive create). No flock: the charts mount FSx with `flock`, which
# that page describes as coherent across all client nodes (`localflock`: this node only), but a lock held by a
# client that died stays held until the servers evict that client (https://wiki.lustre.org/Lustre_Recovery_Overview),
# and an attempt must never wait on a dead one. Nothing here waits or locks.
# ---------------------------------------------------------------------------------------------


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
        _write_synced(staging, json.dumps(record, indent=2, sort_keys=True) + "\n")
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


def write_progress(attempt: Attempt, event: str, step: int) -> None:
    record = {
        "generation": attempt.generation,
        "event": event,
        "step": step,
        "at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    try:
        _write_atomically(attempt.progress_path, json.dumps(record, sort_keys=True) + "\n")
    except OSError as exc:  # the watchdog ends the attempt if progress stays unrecorded
        log(f"note: cannot record the trainer's progress in {attempt.progress_path}: {exc}")


def read_progress(path: Path) -> tuple[str, int] | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        return str(record["event"]), int(record["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


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


# ---------------------------------------------------------------------------------------------
# The MLflow run of the attempt chain (docstring, step 5)
# ---------------------------------------------------------------------------------------------


def mlflow_run_path(attempt: Attempt) -> Path:
    return attempt.attempts_dir / MLFLOW_RUN_FILE


def read_mlflow_run_id(path: Path) -> str | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    run_id = record.get("run_id") if isinstance(record, dict) else None
    return run_id if isinstance(run_id, str) and run_id else None


def keep_mlflow_run_id(path: Path, run_id: str) -> str:
    """Record `run_id` unless another attempt recorded one first (os.link fails on an existing name): the id kept."""
    staging = _staging_path(path, "mlflow-run")
    _write_synced(staging, json.dumps({"run_id": run_id}, sort_keys=True) + "\n")
    try:
        os.link(staging, path)
    except FileExistsError:
        kept = read_mlflow_run_id(path)
        return kept or run_id
    finally:
        staging.unlink(missing_ok=True)
    return run_id


def start_mlflow_run(options: Options, attempt: Attempt, client: Any) -> str:
    """The attempt chain's MLflow run id: the one kept beside the checkpoints when it still exists, else a new run
    in the experiment trainer.project_name, named trainer.run_name and tagged with --mlflow-tag. `client` is an
    mlflow.MlflowClient (it reads MLFLOW_TRACKING_URI; with an App's ARN, sagemaker-mlflow signs its requests)."""
    path = mlflow_run_path(attempt)
    tags = dict(options.mlflow_tags) | {"skyrl_hp.attempt_generation": str(attempt.generation)}
    kept = read_mlflow_run_id(path)
    if kept is not None:
        try:
            run = client.get_run(kept)
        except Exception as exc:  # MlflowException (RESOURCE_DOES_NOT_EXIST) or the server's refusal
            raise PrepareError(
                f"the MLflow run {kept} kept in {path} cannot be read ({str(exc).splitlines()[0] if str(exc) else exc}): "
                f"delete {path} to start a new run"
            ) from None
        if run.info.lifecycle_stage == "deleted":
            raise PrepareError(f"the MLflow run {kept} kept in {path} is deleted: restore it or delete {path}")
        for key, value in tags.items():
            client.set_tag(kept, key, value)
        log(f"MLflow: resuming run {kept} (kept in {path})")
        return kept
    experiment_name = options.override.get(PROJECT_NAME_KEY)
    run_name = options.override.get(RUN_NAME_KEY)
    if not experiment_name or not run_name:
        raise PrepareError(f"trainer.logger=mlflow needs {PROJECT_NAME_KEY} and {RUN_NAME_KEY} among the overrides")
    experiment = client.get_experiment_by_name(experiment_name)
    experiment_id = experiment.experiment_id if experiment is not None else client.create_experiment(experiment_name)
    created = client.create_run(experiment_id, run_name=run_name, tags=tags).info.run_id
    check_fence(attempt, "before keeping its MLflow run")
    kept = keep_mlflow_run_id(path, created)
    if kept != created:
        client.delete_run(created)  # another attempt of the run kept its own first: both log to that one
        log(f"MLflow: resuming run {kept} (kept in {path} by another attempt a moment ago)")
    else:
        log(f"MLflow: started run {kept} in experiment {experiment_name!r} (kept in {path})")
    return kept


def mlflow_client() -> Any:
    try:
        import mlflow
    except ImportError:
        raise PrepareError(
            "trainer.logger=mlflow, but mlflow is not importable in the training image (it pins mlflow-skinny)"
        ) from None
    return mlflow.MlflowClient()


def fence_tracker(tracker: Any, attempt: Attempt) -> None:
    """SkyRL's Tracking object with the fence checked before each log and before the run is ended: a superseded
    attempt logs nothing. Its main loop logs each step's metrics before the step's checkpoint, and on an exception
    BasePPOExp.run flushes the step in flight (trainer.flush_pending_metrics) and Tracking.__del__ ends the run
    (skyrl/train/entrypoints/main_base.py, skyrl/train/utils/tracking.py): unfenced, a stale attempt that dies would
    write its steps into the run after the newer attempt's, and mark the newer attempt's run finished. Instance
    attributes, so Tracking.__del__'s self.finish() sees the fenced one too."""
    original_log, original_finish = tracker.log, tracker.finish

    def log_metrics(data: Any, step: int, commit: bool = False) -> Any:
        check_fence(attempt, f"before logging step {step}'s metrics")
        return original_log(data, step=step, commit=commit)

    def finish() -> Any:
        newer = superseded_by(attempt)
        if newer is not None:
            log(superseded_message(attempt, newer, "before ending the tracking run"))
            return None
        return original_finish()

    tracker.log = log_metrics
    tracker.finish = finish


# ---------------------------------------------------------------------------------------------
# In the trainer's process: progress and the checkpoint fence
#
# SkyRL's entry point runs the training loop in a Ray task (`@ray.remote(num_cpus=1)` around BasePPOExp.run in
# examples/train/visgym/entrypoint.py and skyrl/train/entrypoints/main_base.py), a worker process on any node of
# the cluster, not in the driver. What runs there is SkyRL's own: its trainer's callbacks
# (skyrl/train/utils/callbacks.py; RayPPOTrainer.train fires on_train_start, on_step_end after each step and
# on_train_end) report progress, and RayPPOTrainer.save_checkpoints / save_models and the `io.open_file` that
# writes data.pt, trainer_state.pt and latest_ckpt_global_step.txt (skyrl/train/trainer.py) check the fence.
# ---------------------------------------------------------------------------------------------


def _ignore_event(*args: Any) -> None:
    return None


class ProgressCallback:
    """A SkyRL TrainingCallback by shape (SkyRL's CallbackHandler calls every on_* event on each callback): records
    the trainer's start, each finished step and its end in the attempt's progress file, for the driver's watchdog."""

    def __init__(self, attempt: Attempt) -> None:
        self.attempt = attempt

    def on_train_start(self, trainer: Any, callback_input: Any, control: Any) -> None:
        write_progress(self.attempt, "train_start", int(callback_input.global_step))

    def on_step_end(self, trainer: Any, callback_input: Any, control: Any) -> None:
        write_progress(self.attempt, "step_end", int(callback_input.global_step))

    def on_train_end(self, trainer: Any, callback_input: Any, control: Any) -> None:
        write_progress(self.attempt, "train_end", int(callback_input.global_step))

    def __getattr__(self, name: str) -> Callable[..., None]:
        if name.startswith("on_"):
            return _ignore_event
        raise AttributeError(name)


def _inside(path: str, directory: str) -> bool:
    path, directory = os.path.abspath(path), os.path.abspath(directory)
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


class FencedIO:
    """SkyRL's io module as the trainer module sees it, with the fence checked before a file under the checkpoint
    directory is opened for writing (data.pt, trainer_state.pt, latest_ckpt_global_step.txt)."""

    def __init__(self, io: Any, attempt: Attempt) -> None:
        self._io = io
        self._attempt = attempt

    def __getattr__(self, name: str) -> Any:
        return getattr(self._io, name)

    def open_file(self, path: Any, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        if any(flag in mode for flag in "wax+") and _inside(str(path), self._attempt.ckpt_dir):
            check_fence(self._attempt, f"before writing {path}")
        return self._io.open_file(path, mode, *args, **kwargs)


def guard_trainer(module: ModuleType, attempt: Attempt) -> None:
    """Install the progress callback and the fence on `module`'s RayPPOTrainer (once)."""
    trainer_class = module.RayPPOTrainer
    if getattr(trainer_class, "_skyrl_hp_guarded", False):
        return
    original_init = trainer_class.__init__
    original_save_checkpoints = trainer_class.save_checkpoints
    original_save_models = trainer_class.save_models

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self.add_callback(ProgressCallback(attempt))
        if getattr(self, "tracker", None) is not None:
            fence_tracker(self.tracker, attempt)

    def save_checkpoints(self: Any, *args: Any, **kwargs: Any) -> Any:
        check_fence(attempt, f"before writing checkpoint global_step_{self.global_step}")
        return original_save_checkpoints(self, *args, **kwargs)

    def save_models(self: Any, *args: Any, **kwargs: Any) -> Any:
        check_fence(attempt, f"before exporting global_step_{self.global_step}")
        return original_save_models(self, *args, **kwargs)

    trainer_class.__init__ = __init__
    trainer_class.save_checkpoints = save_checkpoints
    trainer_class.save_models = save_models
    trainer_class._skyrl_hp_guarded = True
    module.io = FencedIO(module.io, attempt)  # type: ignore[attr-defined]


class _GuardingLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, attempt: Attempt) -> None:
        self._loader = loader
        self._attempt = attempt

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        guard_trainer(module, self._attempt)


class GuardOnImport(importlib.abc.MetaPathFinder):
    """Guards TRAINER_MODULE as it is imported: finds it through the other finders, then guards it after it ran."""

    def __init__(self, attempt: Attempt) -> None:
        self.attempt = attempt

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != TRAINER_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is None:
                    return None
                spec.loader = _GuardingLoader(spec.loader, self.attempt)
                return spec
        return None


def arm_trainer_guard(fields: Mapping[str, Any], mlflow_run_id: str | None = None) -> None:
    """In a worker process of the job: guard RayPPOTrainer now if it is imported, else when it is. Only the process
    that runs the training loop constructs a trainer; in the others (FSDP workers, vLLM engines) this stays inert.
    With an MLflow run, MLFLOW_RUN_ID makes SkyRL's mlflow.start_run resume it in the trainer's process."""
    attempt = Attempt(**fields)
    if mlflow_run_id is not None:
        os.environ[MLFLOW_RUN_ID_ENV] = mlflow_run_id
    module = sys.modules.get(TRAINER_MODULE)
    if module is not None:
        guard_trainer(module, attempt)
    elif not any(isinstance(finder, GuardOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, GuardOnImport(attempt))


def worker_setup_hook(attempt: Attempt, mlflow_run_id: str | None = None) -> Callable[[], None]:
    """The job's Ray worker_process_setup_hook: Ray runs it in every worker process of the job before the process
    runs a task (https://docs.ray.io/en/latest/ray-core/api/doc/ray.runtime_env.RuntimeEnv.html). Ray pickles it
    with cloudpickle when the driver calls ray.init, by value (this script is not importable on the workers: the
    ConfigMap is mounted on the head only), together with the functions and classes above."""
    fields = dataclasses.asdict(attempt)

    def skyrl_hp_trainer_guard() -> None:
        arm_trainer_guard(fields, mlflow_run_id)

    return skyrl_hp_trainer_guard


def route_guard_to_workers(ray: Any, hook: Callable[[], None]) -> None:
    """Add `hook` as worker_process_setup_hook to the runtime env of SkyRL's own `ray.init` call
    (skyrl/train/utils/utils.py initialize_ray: `ray.init(runtime_env={"env_vars": ...})`), which makes it the job's:
    every task and actor of the job inherits it, wherever Ray places them."""
    module = sys.modules.get(__name__)
    if __name__ != "__main__" and module is not None:
        # Imported (tests, the drill's layout checks) rather than run: pickle it by value all the same.
        ray.cloudpickle.register_pickle_by_value(module)
    original = ray.init

    def init(*args: Any, **kwargs: Any) -> Any:
        runtime_env = dict(kwargs.get("runtime_env") or {})
        if runtime_env.get("worker_process_setup_hook") not in (None, hook):
            raise PrepareError(
                "ray.init already has a worker_process_setup_hook: the trainer's progress and checkpoint fence "
                "cannot be installed"
            )
        runtime_env["worker_process_setup_hook"] = hook
        kwargs["runtime_env"] = runtime_env
        return original(*args, **kwargs)

    ray.init = init


# ---------------------------------------------------------------------------------------------
# In the driver: the stall watchdog
# ---------------------------------------------------------------------------------------------


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


def main(
    argv: Sequence[str] | None = None,
    *,
    download: Downloader = download_from_hugging_face,
    execute: Executor = run_in_process,
    python: str = sys.executable,
    check: CheckpointCheck | None = None,
    tracking_client: Callable[[], Any] | None = None,
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
        (check or check_checkpoint)(options)
        attempt = claim_run_checkpoints(options)
        run_id = None
        if attempt is not None and options.tracks_with_mlflow:
            run_id = start_mlflow_run(options, attempt, (tracking_client or mlflow_client)())
        guard = (
            Guard(attempt, options.stall_timeout_first_step, options.stall_timeout_step, run_id)
            if attempt is not None
            else None
        )
        log(f"starting SkyRL from {options.skyrl_dir}: {shlex.join(command)}")
        sys.stdout.flush()
        sys.stderr.flush()
        execute(command, options.skyrl_dir, guard=guard)
        return 0
    except UsageError as error:
        print(f"train_job: error: {error}", file=sys.stderr)
        return 2
    except PrepareError as error:
        print(f"train_job: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
