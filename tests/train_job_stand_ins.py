"""Stand-ins for the job's tests (tests/test_train_job*.py): a fake SkyRL checkout whose dataset.py and entrypoint.py
record their calls, a fake hub that writes a small checkpoint, a recording executor, and the command line the charts
give the job, over a temporary directory standing in for /shared."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from skyrl_hp_job.main import main

FAKE_DATASET = """
import argparse, json, os
from pathlib import Path
parser = argparse.ArgumentParser()
parser.add_argument("--output_dir")
parser.add_argument("--env_id")
parser.add_argument("--num_rows", type=int)
{seed_option}
args = parser.parse_args()
os.makedirs(args.output_dir, exist_ok=True)
(Path(args.output_dir) / "train.parquet").write_text(json.dumps(vars(args)))
with open(Path(__file__).with_name("dataset_calls.jsonl"), "a") as log:
    log.write(json.dumps(vars(args)) + "\\n")
"""

FAKE_ENTRYPOINT = """
import json, os, sys
from pathlib import Path
with open(Path(__file__).with_name("entrypoint_calls.jsonl"), "a") as log:
    log.write(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd()}) + "\\n")
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
"""

SWITCH_SEED = 'parser.add_argument("--seed", action="store_true")'
VALUE_SEED = 'parser.add_argument("--seed", type=int)'


def make_skyrl(root: Path, seed_option: str = SWITCH_SEED) -> Path:
    scripts = root / "examples" / "train" / "visgym"
    scripts.mkdir(parents=True)
    (scripts / "dataset.py").write_text(FAKE_DATASET.format(seed_option=seed_option))
    (scripts / "entrypoint.py").write_text(FAKE_ENTRYPOINT)
    return root


def calls(skyrl: Path, name: str) -> list[dict]:
    log = skyrl / "examples" / "train" / "visgym" / f"{name}_calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


class FakeHub:
    """Writes a small checkpoint where snapshot_download would put it and counts downloads."""

    def __init__(self, fail: bool = False):
        self.downloads: list[tuple[str, str]] = []
        self.revisions: list[str | None] = []
        self.fail = fail

    def __call__(self, repo_id: str, subfolder: str, destination: Path, revision: str | None = None) -> None:
        self.downloads.append((repo_id, subfolder))
        self.revisions.append(revision)
        if self.fail:
            raise ConnectionError("hub unreachable")
        folder = destination / subfolder
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")


class FakeExec:
    def __init__(self):
        self.calls: list[tuple[list[str], Path]] = []
        self.guards: list = []

    def __call__(self, command, directory, guard=None):
        self.calls.append((list(command), directory))
        self.guards.append(guard)


def shared_dir(tmp_path: Path) -> Path:
    path = tmp_path / "shared"
    path.mkdir()
    return path


def argv_for(shared: Path, skyrl: Path, *extra: str, overrides: tuple[str, ...] = ()) -> list[str]:
    argv = [
        "--shared-dir", str(shared),
        "--model-repo", "VisGym/visgym_model",
        "--model-subfolder", "mixed_qwen3vl",
        "--model-dir", str(shared / "models" / "visgym-sft"),
        "--data-dir", str(shared / "datasets" / "visgym-maze"),
        "--env-id", "maze_2d/easy",
        "--train-rows", "8",
        "--eval-rows", "4",
        "--eval-seed", "42",
        "--skyrl-dir", str(skyrl),
        *extra,
    ]  # fmt: skip
    return [*argv, "--", *overrides] if overrides else argv


def run(argv, hub=None, execute=None, check=None) -> int:
    return main(
        argv,
        download=hub or FakeHub(),
        execute=execute or FakeExec(),
        python=sys.executable,
        check=check or (lambda options: None),
    )
