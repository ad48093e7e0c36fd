"""docker/train_job.py end to end (docker/skyrl_hp_job/main.py, runner.py): SkyRL's exit code is the job's, and the
run's checkpoint directory is claimed before SkyRL starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

from train_job_stand_ins import FakeExec, argv_for, calls, run

from skyrl_hp_job.resume import RUN_MARKER

TRAIN_JOB = Path(__file__).resolve().parent.parent / "docker" / "train_job.py"


# --- the job end to end ---------------------------------------------------------------------------------------


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
