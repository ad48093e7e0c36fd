"""docker/skyrl_hp_job/prepare.py: the idempotent first run and two pods starting together under the flock.

A temporary directory stands in for /shared, a fake SkyRL checkout supplies dataset.py and
entrypoint.py, and a fake downloader replaces the Hugging Face hub: no GPU, no network.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from train_job_stand_ins import VALUE_SEED, FakeExec, FakeHub, argv_for, calls, make_skyrl, run

from skyrl_hp_job.errors import UsageError
from skyrl_hp_job.options import ENTRYPOINT, LOCK_FILE, parse_args

TRAIN_JOB = Path(__file__).resolve().parent.parent / "docker" / "train_job.py"


# --- first run and reruns --------------------------------------------------------------------------


def test_first_run_prepares_then_execs_skyrl_with_the_prepared_paths(shared, skyrl):
    hub, execute = FakeHub(), FakeExec()
    assert run(argv_for(shared, skyrl, overrides=("trainer.epochs=20",)), hub=hub, execute=execute) == 0

    assert hub.downloads == [("VisGym/visgym_model", "mixed_qwen3vl")]
    model_dir = shared / "models" / "visgym-sft"
    assert (model_dir / "config.json").is_file()
    data_dir = shared / "datasets" / "visgym-maze"
    train = json.loads((data_dir / "train.parquet").read_text())
    evaluation = json.loads((data_dir / "eval.parquet").read_text())
    assert (train["num_rows"], train["env_id"], train["seed"]) == (8, "maze_2d/easy", False)
    assert (evaluation["num_rows"], evaluation["seed"]) == (4, True)  # the pinned dataset.py has a --seed switch
    assert json.loads((data_dir / ".prepared.json").read_text())["inputs"]["eval_seed"] == 42
    assert not [p for p in data_dir.iterdir() if p.name.startswith(".") and p.name != ".prepared.json"]

    [(command, directory)] = execute.calls
    assert directory == skyrl
    assert command[:4] == [sys.executable, ENTRYPOINT, "--env_variant", "sft"]
    assert command[4:] == [
        "trainer.epochs=20",
        f"trainer.policy.model.path={model_dir}",
        f"data.train_data=['{data_dir / 'train.parquet'}']",
        f"data.val_data=['{data_dir / 'eval.parquet'}']",
    ]


def test_second_run_skips_downloads_and_generation(shared, skyrl):
    assert run(argv_for(shared, skyrl)) == 0
    dataset_calls = len(calls(skyrl, "dataset"))
    hub, execute = FakeHub(), FakeExec()
    assert run(argv_for(shared, skyrl), hub=hub, execute=execute) == 0
    assert hub.downloads == []
    assert len(calls(skyrl, "dataset")) == dataset_calls
    assert len(execute.calls) == 1


def test_a_pinned_revision_is_downloaded_by_commit_and_a_new_pin_downloads_again(shared, skyrl):
    hub = FakeHub()
    assert run(argv_for(shared, skyrl), hub=hub) == 0
    assert hub.revisions == [None]  # unpinned: the hub's default branch
    pinned = "0123456789abcdef0123456789abcdef01234567"
    assert run(argv_for(shared, skyrl, "--model-revision", pinned), hub=hub) == 0
    assert hub.revisions == [None, pinned]  # the unpinned copy is not taken for the pinned commit
    assert run(argv_for(shared, skyrl, "--model-revision", pinned), hub=hub) == 0
    assert hub.revisions == [None, pinned]
    with pytest.raises(UsageError, match="'main' is not a full 40-character commit id"):
        parse_args(argv_for(shared, skyrl, "--model-revision", "main"))


def test_changed_dataset_inputs_regenerate_only_the_datasets(shared, skyrl):
    assert run(argv_for(shared, skyrl)) == 0
    hub = FakeHub()
    argv = argv_for(shared, skyrl)
    argv[argv.index("--train-rows") + 1] = "16"
    assert run(argv, hub=hub) == 0
    assert hub.downloads == []
    train = json.loads((shared / "datasets" / "visgym-maze" / "train.parquet").read_text())
    assert train["num_rows"] == 16


def test_partial_checkpoint_without_marker_is_replaced(shared, skyrl):
    leftover = shared / "models" / "visgym-sft"
    leftover.mkdir(parents=True)
    (leftover / "model-00001-of-00004.safetensors.incomplete").write_text("x")
    hub = FakeHub()
    assert run(argv_for(shared, skyrl), hub=hub) == 0
    assert len(hub.downloads) == 1
    assert sorted(p.name for p in leftover.iterdir()) == [".prepared.json", "config.json"]


def test_failed_download_leaves_no_marker_and_reports_one_line(shared, skyrl, capsys):
    execute = FakeExec()
    assert run(argv_for(shared, skyrl), hub=FakeHub(fail=True), execute=execute) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "train_job: error: download of VisGym/visgym_model/mixed_qwen3vl failed: hub unreachable"
    assert execute.calls == []
    assert not (shared / "models" / "visgym-sft").exists()
    # A rerun tries again.
    hub = FakeHub()
    assert run(argv_for(shared, skyrl), hub=hub) == 0
    assert len(hub.downloads) == 1


def test_seed_value_is_passed_when_dataset_py_accepts_one(tmp_path, shared):
    skyrl = make_skyrl(tmp_path / "SkyRLNewer", seed_option=VALUE_SEED)
    assert run(argv_for(shared, skyrl)) == 0
    [train, evaluation] = calls(skyrl, "dataset")[-2:]
    assert (train["seed"], evaluation["seed"]) == (None, 42)


def test_missing_skyrl_checkout_is_reported(shared, tmp_path, capsys):
    assert run(argv_for(shared, tmp_path / "nowhere")) == 1
    assert "is --skyrl-dir the image's SkyRL checkout?" in capsys.readouterr().err


def test_lock_held_elsewhere_times_out_with_a_clear_error(shared, skyrl, capsys):
    lock = shared / LOCK_FILE
    lock.parent.mkdir(parents=True)
    lock.write_text("other-pod pid 7 since earlier\n")
    with open(lock, "r+") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert run(argv_for(shared, skyrl, "--lock-timeout", "0")) == 1
    err = capsys.readouterr().err
    assert "timed out after 0 s waiting for the preparation lock" in err
    assert "other-pod pid 7" in err
    assert not (shared / "models").exists()


# --- two pods at once ---------------------------------------------------------------------------------

RUNNER = """
import functools, os, sys, time
from pathlib import Path
sys.path.insert(0, {job_dir!r})
from skyrl_hp_job import main, prepare
# The same flock, re-tried every 0.1 s instead of every LOCK_POLL_SECONDS (5 s): the waiting process
# must still see the lock held, wait, and find the preparation done once it gets the lock.
prepare.exclusive_lock = functools.partial(prepare.exclusive_lock, poll_seconds=0.1)
control = Path({control!r})

def slow_download(repo_id, subfolder, destination):
    with open(control / "downloads", "a") as log:
        log.write(f"{{os.getpid()}}\\n")
    (control / "download-started").touch()
    for _ in range(600):  # the test releases it once the other process waits for the lock
        if (control / "release").exists():
            break
        time.sleep(0.1)
    (destination / subfolder).mkdir(parents=True)
    (destination / subfolder / "config.json").write_text("{{}}")

sys.exit(main.main(sys.argv[1:], download=slow_download, check=lambda options: None))
"""


def test_two_processes_starting_together_prepare_once(shared, skyrl, tmp_path):
    control = tmp_path / "control"
    control.mkdir()
    runner = tmp_path / "runner.py"
    runner.write_text(RUNNER.format(job_dir=str(TRAIN_JOB.parent), control=str(control)))
    argv = [sys.executable, str(runner), *argv_for(shared, skyrl, "--lock-timeout", "120")]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    first = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
    for line in first.stderr:  # the first process holds the lock once its download starts
        if "downloading" in line:
            break
    second = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
    waiting = ""
    for line in second.stderr:
        if "waiting for the preparation lock" in line:
            waiting = line
            break
    (control / "release").touch()
    first_err = first.stderr.read()
    second_err = second.stderr.read()
    assert first.wait() == 0, first_err
    assert second.wait() == 0, second_err

    assert "pid" in waiting  # the second process saw who held the lock
    assert len((control / "downloads").read_text().splitlines()) == 1
    assert len(calls(skyrl, "dataset")) == 2  # one train set and one eval set, generated once
    assert "already prepared" in second_err
    assert len(calls(skyrl, "entrypoint")) == 2  # both went on to exec SkyRL
