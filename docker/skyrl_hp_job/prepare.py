"""First-run preparation of shared storage (step 1 of the package docstring): the SFT checkpoint and the
datasets, each behind a completion marker, serialised across pods by an exclusive flock."""

from __future__ import annotations

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
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from .errors import PrepareError, log
from .files import staging_path, write_atomically
from .options import ENTRYPOINT, TRAIN_FILE, Options

DATASET_SCRIPT = "examples/train/visgym/dataset.py"
MARKER = ".prepared.json"
LOCK_POLL_SECONDS = 5.0

# argparse prints a value-taking option as `--seed SEED` and a switch as `--seed`.
_SEED_TAKES_VALUE = re.compile(r"--seed[ =][A-Z_]+")

# download(repo_id, subfolder, destination[, revision=commit]): revision only when the manifests pin one.
Downloader = Callable[..., None]


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
    write_atomically(directory / MARKER, json.dumps(record, indent=2, sort_keys=True) + "\n")


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


def download_from_hugging_face(repo_id: str, subfolder: str, destination: Path, revision: str | None = None) -> None:
    """Download `repo_id`'s `subfolder` (at commit `revision`, else the default branch) to destination/subfolder."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise PrepareError(
            "huggingface_hub is not installed: run this script with the training image's python"
        ) from None
    snapshot_download(repo_id=repo_id, revision=revision, allow_patterns=[f"{subfolder}/*"], local_dir=str(destination))


def prepare_model(options: Options, download: Downloader) -> None:
    target = options.model_dir
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = staging_path(target, "download")
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
    previous = staging_path(target, "previous")
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
    staging = staging_path(destination, "generate")
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
