"""The job's steps in order, and its exit codes: 0, 1 (a step failed, in one line), 2 (bad command line)."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .attempts import claim_run_checkpoints
from .checkpoint_check import CheckpointCheck, check_checkpoint
from .errors import PrepareError, UsageError, log
from .monitor import Guard
from .options import parse_args
from .prepare import Downloader, datasets_ready, download_from_hugging_face, model_ready, prepare
from .runner import Executor, run_in_process, training_command
from .tracking import mlflow_client, start_mlflow_run


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
