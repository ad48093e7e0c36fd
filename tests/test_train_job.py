"""docker/train_job.py: argument contract, override validation, idempotent and concurrent first run.

A temporary directory stands in for /shared, a fake SkyRL checkout supplies dataset.py and
entrypoint.py, and a fake downloader replaces the Hugging Face hub: no GPU, no network.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from fake_checkpoint import write_fake_vision_language

from skyrl_hp_job.checkpoint_check import CheckpointReport, check_checkpoint, write_query_example
from skyrl_hp_job.errors import PrepareError, UsageError
from skyrl_hp_job.main import main
from skyrl_hp_job.options import ENTRYPOINT, LOCK_FILE, parse_args
from skyrl_hp_job.resume import RUN_MARKER
from skyrl_hyperpod.config import load_config

TRAIN_JOB = Path(__file__).resolve().parent.parent / "docker" / "train_job.py"

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


@pytest.fixture
def shared(tmp_path) -> Path:
    path = tmp_path / "shared"
    path.mkdir()
    return path


@pytest.fixture
def skyrl(tmp_path) -> Path:
    return make_skyrl(tmp_path / "SkyRL")


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


# --- the command-line contract ------------------------------------------------------------------


def test_contract_command_line_parses(shared, skyrl):
    options = parse_args(argv_for(shared, skyrl, overrides=("trainer.epochs=20", "generator.max_turns=15")))
    assert options.shared_dir == shared
    assert options.model_repo == "VisGym/visgym_model"
    assert options.model_subfolder == "mixed_qwen3vl"
    assert (options.train_rows, options.eval_rows, options.eval_seed) == (8, 4, 42)
    assert options.overrides == (("trainer.epochs", "20"), ("generator.max_turns", "15"))
    assert options.dry_run is False


def test_skyrl_dir_matches_the_image_configuration():
    # The charts pass config.training_image.skyrl_dir; the image clones SkyRL there (Dockerfile ARG).
    assert load_config(None).training_image.build_args["SKYRL_DIR"] == load_config(None).training_image.skyrl_dir


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("--train-rows", "0"), "--train-rows: 0 must be at least 1"),
        (("--eval-seed", "-1"), "--eval-seed: -1 must be at least 0"),
        (("--model-dir", "models/x"), "must be an absolute path"),
        (("--model-repo", "not a repo"), "is not a Hugging Face repository id"),
        (("--model-subfolder", "../escape"), "is not a relative folder"),
    ],
)
def test_bad_arguments_fail_in_one_line(shared, skyrl, change, message, capsys):
    argv = argv_for(shared, skyrl)
    index = argv.index(change[0])
    argv[index + 1] = change[1]
    assert run(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_missing_required_argument_is_named(shared, skyrl, capsys):
    argv = argv_for(shared, skyrl)
    index = argv.index("--env-id")
    del argv[index : index + 2]
    assert run(argv) == 2
    assert "--env-id" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("+trainer.new_key=1", "rejects the '+' prefix"),
        ("trainer.epochs", "is not key=value"),
        ("trainer..epochs=1", "must be dot-separated identifiers"),
        ("=5", "must be dot-separated identifiers"),
        ("trainer.run_name=", "has an empty value"),
    ],
)
def test_malformed_overrides_are_rejected_in_one_line(shared, skyrl, override, message, capsys):
    assert run(argv_for(shared, skyrl, overrides=(override,))) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and override in err
    assert len(err.splitlines()) == 1
    assert not (shared / "models").exists()  # nothing prepared after a usage error


def test_duplicate_override_key_is_rejected(shared, skyrl, capsys):
    assert run(argv_for(shared, skyrl, overrides=("trainer.epochs=1", "trainer.epochs=2"))) == 2
    assert "given twice" in capsys.readouterr().err


def test_override_before_separator_gets_a_hint(shared, skyrl, capsys):
    assert run([*argv_for(shared, skyrl), "trainer.epochs=1"]) == 2
    assert "after `--`" in capsys.readouterr().err


def test_override_values_may_contain_equals_and_lists(shared, skyrl):
    options = parse_args(argv_for(shared, skyrl, overrides=("trainer.run_name=a=b", "data.x=['/p']")))
    assert dict(options.overrides) == {"trainer.run_name": "a=b", "data.x": "['/p']"}


def test_dry_run_prints_the_command_and_touches_nothing(shared, skyrl, capsys):
    hub = FakeHub()
    assert run(argv_for(shared, skyrl, "--dry-run", overrides=("trainer.epochs=20",)), hub=hub) == 0
    out = capsys.readouterr().out.strip()
    assert out.split()[:4] == [sys.executable, ENTRYPOINT, "--env_variant", "sft"]
    assert "trainer.epochs=20" in out
    assert f"trainer.policy.model.path={shared}/models/visgym-sft" in out
    assert hub.downloads == [] and calls(skyrl, "dataset") == []
    assert list(shared.iterdir()) == []  # not even the lock file


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


def test_exit_code_of_skyrl_is_the_exit_code_of_the_job(shared, skyrl, tmp_path):
    runner = tmp_path / "runner.py"
    runner.write_text(
        textwrap.dedent(
            f"""
            import sys
            from pathlib import Path
            sys.path.insert(0, {str(TRAIN_JOB.parent)!r})
            from skyrl_hp_job.main import main
            def download(repo_id, subfolder, destination):
                (destination / subfolder).mkdir(parents=True)
                (destination / subfolder / "config.json").write_text("{{}}")
            sys.exit(main(sys.argv[1:], download=download, check=lambda options: None))
            """
        )
    )
    result = subprocess.run(
        [sys.executable, str(runner), *argv_for(shared, skyrl, overrides=("trainer.epochs=3",))],
        env={**os.environ, "FAKE_EXIT": "3"},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 3, result.stderr
    [entry] = calls(skyrl, "entrypoint")
    assert entry["cwd"] == str(skyrl)
    assert entry["argv"][:3] == ["--env_variant", "sft", "trainer.epochs=3"]


def test_another_runs_checkpoints_stop_the_job_before_skyrl_starts(shared, skyrl, capsys):
    ckpt = shared / "runs" / "maze-grpo" / "ckpt"
    (ckpt / "global_step_40").mkdir(parents=True)
    (ckpt / RUN_MARKER).write_text(json.dumps({"run_name": "other-run"}))
    execute = FakeExec()
    overrides = (f"trainer.ckpt_path={ckpt}", "trainer.run_name=maze-grpo")
    assert run(argv_for(shared, skyrl, overrides=overrides), execute=execute) == 1
    assert execute.calls == []
    (line,) = capsys.readouterr().err.strip().splitlines()[-1:]
    assert line.startswith(f"train_job: error: checkpoint directory {ckpt} belongs to run 'other-run'")


def test_the_runs_own_directory_is_claimed_then_resumed(shared, skyrl, capsys):
    ckpt = shared / "runs" / "maze-grpo" / "ckpt"
    overrides = (f"trainer.ckpt_path={ckpt}", "trainer.run_name=maze-grpo")
    execute = FakeExec()
    assert run(argv_for(shared, skyrl, overrides=overrides), execute=execute) == 0
    assert json.loads((ckpt / RUN_MARKER).read_text())["run_name"] == "maze-grpo"
    (ckpt / "global_step_8").mkdir()
    with zipfile.ZipFile(ckpt / "global_step_8" / "trainer_state.pt", "w") as state:  # torch.save's format
        state.writestr("archive/data.pkl", b"")
    (ckpt / "latest_ckpt_global_step.txt").write_text("8")
    assert run(argv_for(shared, skyrl, "--stall-timeout-first-step", "9360", overrides=overrides), execute=execute) == 0
    assert len(execute.calls) == 2
    assert "resumes after its newest complete checkpoint, global_step_8" in capsys.readouterr().err
    # Each attempt runs SkyRL under its own generation of the directory, with the watchdog's bounds.
    first, second = execute.guards
    assert (first.attempt.generation, second.attempt.generation) == (1, 2)
    assert (first.first_step_s, second.first_step_s, second.step_s) == (0, 9360, 0)
    assert second.attempt.ckpt_dir == str(ckpt)


def test_without_a_checkpoint_directory_nothing_is_fenced_or_watched(shared, skyrl):
    execute = FakeExec()
    assert run(argv_for(shared, skyrl, "--stall-timeout-first-step", "60"), execute=execute) == 0
    assert execute.guards == [None]


# --- the checkpoint check ------------------------------------------------------------------------------------------


def test_a_checkpoint_that_fails_its_check_stops_the_job_before_the_run_is_claimed(shared, skyrl, capsys):
    seen = []

    def broken(options):
        seen.append(options.model_dir)
        raise PrepareError(f"checkpoint {options.model_dir} is not a vision-language checkpoint: it lacks x")

    execute = FakeExec()
    ckpt = shared / "runs" / "maze-grpo" / "ckpt"
    argv = argv_for(shared, skyrl, overrides=(f"trainer.ckpt_path={ckpt}", "trainer.run_name=maze-grpo"))
    assert run(argv, execute=execute, check=broken) == 1
    [line] = capsys.readouterr().err.strip().splitlines()[-1:]
    assert (
        line
        == f"train_job: error: checkpoint {shared / 'models' / 'visgym-sft'} is not a vision-language checkpoint: it lacks x"
    )
    assert seen == [shared / "models" / "visgym-sft"]  # after preparation: the downloaded checkpoint
    assert execute.calls == [] and not ckpt.exists()  # SkyRL never started; the run's directory is not claimed


def test_the_query_example_holds_the_observation_and_the_runs_generation_settings(shared, skyrl, tmp_path):
    example = tmp_path / "runs" / "maze-grpo" / "query-example.json"
    options = parse_args(
        argv_for(
            shared, skyrl, "--query-example", str(example),
            overrides=("generator.sampling_params.max_generate_length=1024", "generator.sampling_params.temperature=0.7"),
        )
    )  # fmt: skip
    messages = [{"role": "user", "content": [{"type": "text", "text": "task"}]}]
    write_query_example(example, options, CheckpointReport("P", 452, 64, messages))
    assert json.loads(example.read_text()) == {
        "env_id": "maze_2d/easy",
        "seed": 42,
        "messages": messages,
        "prompt_tokens": 452,
        "image_tokens": 64,
        "max_tokens": 1024,
        "temperature": 0.7,
    }


def test_the_query_example_path_must_be_absolute(shared, skyrl, capsys):
    assert run(argv_for(shared, skyrl, "--query-example", "relative.json")) == 2
    assert "--query-example: 'relative.json' must be an absolute path" in capsys.readouterr().err


def test_the_check_leaves_the_observation_in_the_openai_form_the_engines_take(shared, skyrl, tmp_path, monkeypatch):
    packages = tmp_path / "site"
    write_fake_vision_language(packages, skyrl)
    spec = importlib.util.spec_from_file_location("transformers", packages / "transformers" / "__init__.py")
    transformers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(transformers)

    def rewriting(self, messages, **kwargs):  # what transformers does to the parts it loads
        messages[0]["content"][1] = {"type": "image", "url": "loaded"}
        return {"input_ids": [[1, 5, 2]]}

    transformers._Processor.apply_chat_template = rewriting
    # The stand-ins only for this test: the module table and the path the check extends are restored after it.
    monkeypatch.setitem(sys.modules, "transformers", transformers)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in ("examples", "examples.train", "examples.train.visgym", "examples.train.visgym.env_sft"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    example = tmp_path / "query-example.json"
    options = parse_args(argv_for(shared, skyrl, "--query-example", str(example)))
    report = check_checkpoint(options)
    assert report.image_tokens == 1 and report.prompt_tokens == 3
    [message] = json.loads(example.read_text())["messages"]
    assert [part["type"] for part in message["content"]] == ["text", "image_url"]
