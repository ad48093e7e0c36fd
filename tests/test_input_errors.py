"""ConfigError is for the configuration; a file the project reads besides it is an InputError, and the CLI prints
either as its lines (exit 2), never a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from skyrl_hyperpod.cli import cli
from skyrl_hyperpod.config import ConfigError
from skyrl_hyperpod.config import images as images_module
from skyrl_hyperpod.errors import InputError

REPO_ROOT = images_module.DOCKER_CONTEXT_DIR.parent


def test_a_missing_training_script_is_an_input_error_not_a_config_error(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO_ROOT))
    try:
        import k8s_app
    finally:
        sys.path.remove(str(REPO_ROOT))
    with pytest.raises(InputError) as raised:
        k8s_app.read_job_script(tmp_path / "train_job.py")
    assert not isinstance(raised.value, ConfigError)
    [line] = raised.value.problems
    assert "train_job.py" in line and "missing" in line


def test_an_input_error_no_command_catches_is_one_line_from_the_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def missing(*_args: object, **_kwargs: object) -> str:
        raise InputError(["image error: docker/Dockerfile is missing; the training image tag is computed from it"])

    # The tag property looks the function up when it runs: `skyrl-hp image tag` has no except of its own.
    monkeypatch.setattr(images_module, "training_image_tag", missing)
    with pytest.raises(SystemExit) as exited:
        cli.main(args=["image", "tag"], prog_name="skyrl-hp", standalone_mode=True)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "image error: docker/Dockerfile is missing; the training image tag is computed from it"
    )
