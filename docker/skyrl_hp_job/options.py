"""The job's command line: options, `--` overrides (dotted key=value) and the SkyRL keys the job reads or sets."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError

ENTRYPOINT = "examples/train/visgym/entrypoint.py"
ENV_VARIANT = "sft"
LOCK_FILE = ".locks/train-job-prepare.lock"
TRAIN_FILE = "train.parquet"
EVAL_FILE = "eval.parquet"
MODEL_PATH_KEY = "trainer.policy.model.path"
CKPT_PATH_KEY = "trainer.ckpt_path"
RUN_NAME_KEY = "trainer.run_name"
TRAIN_DATA_KEY = "data.train_data"
VAL_DATA_KEY = "data.val_data"
MAX_GENERATE_KEY = "generator.sampling_params.max_generate_length"
TEMPERATURE_KEY = "generator.sampling_params.temperature"
DEFAULT_LOCK_TIMEOUT_SECONDS = 7200

# Experiment tracking (step 5 of the package docstring). SkyRL's MLflow logger (skyrl/train/utils/tracking.py,
# _MlflowLoggingAdapter) calls mlflow.set_experiment(trainer.project_name) and mlflow.start_run(run_name=
# trainer.run_name); MLflow's start_run resumes the run MLFLOW_RUN_ID names instead of creating one
# (https://mlflow.org/docs/latest/api_reference/python_api/mlflow.html#mlflow.start_run).
LOGGER_KEY = "trainer.logger"
PROJECT_NAME_KEY = "trainer.project_name"
MLFLOW_LOGGER = "mlflow"
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


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
