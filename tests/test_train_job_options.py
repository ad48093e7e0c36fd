"""docker/skyrl_hp_job/options.py: the command-line contract, override validation and the dry run."""

from __future__ import annotations

import sys

import pytest
from train_job_stand_ins import FakeHub, argv_for, calls, run

from skyrl_hp_job.options import ENTRYPOINT, parse_args
from skyrl_hyperpod.config import load_config

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
