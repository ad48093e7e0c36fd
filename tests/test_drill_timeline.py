"""The drill's time-to-first-step check: the submitter's output stamped as `kubectl logs --timestamps` shows it
(drill/log_stamps.py), and `skyrl-hp train timeline --log` run on it (drill/first_step_timeline.py). The log lines
are in the formats their writers use (docker/train_job.py's `train_job: ...`, Ray's process prefix, SkyRL's loguru
lines), as in tests/fixtures/start_timeline/driver.log."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from drill import first_step_timeline
from drill.log_stamps import StampedLog, stamp
from drill.training_cluster import JobRun
from skyrl_hyperpod.ops import start_timeline

LAUNCHED = datetime(2026, 12, 4, 15, 0, 0, tzinfo=UTC)
START = [
    (2.0, "train_job: checkpoint /shared/models/visgym-sft already prepared"),
    (3.5, "train_job: generating /shared/datasets/visgym-maze/train.parquet: python dataset.py"),
    (31.0, "train_job: starting SkyRL from /home/ray/SkyRL: python examples/train/visgym/entrypoint.py"),
    (
        95.25,
        # the drill's engine is not colocated (a GPU bundle of its own): SkyRL logs the router's start, no sleep
        "(skyrl_entrypoint pid=1234) 2026-12-04 15:01:35.250 | INFO | setup:build_new_inference_client:254 - "
        "HTTP Inference: proxy_url=http://127.0.0.1:8080, server_urls=['http://127.0.0.1:8000'], colocated=False",
    ),  # fmt: skip
    (
        140.0,
        "(skyrl_entrypoint pid=1234) 2026-12-04 15:02:20.000 | INFO | trainer:init:10 - "
        "init policy/ref/critic models done",
    ),  # fmt: skip
    (180.0, "(skyrl_entrypoint pid=1234) 2026-12-04 15:03:00.000 | INFO | tracking:log:1 - Step 0: "),
    (231.0, "(skyrl_entrypoint pid=1234) 2026-12-04 15:03:51.000 | INFO | tracking:log:1 - Step 1: "),
]


def stamped(lines: list[tuple[float, str]]) -> str:
    return "".join(f"{stamp(LAUNCHED + timedelta(seconds=after))} {line}\n" for after, line in lines)


def attempt(lines: list[tuple[float, str]]) -> JobRun:
    plain = "".join(f"{line}\n" for _, line in lines)
    return JobRun("skyrl-visgym-maze-grpo", "skyrl-visgym-maze-grpo-bcdfg", "FAILED", "", plain, {}, None,
                  stamped(lines), LAUNCHED)  # fmt: skip


def drill_in(run_dir: Path) -> Any:
    """What the check reads of the drill: its run directory."""
    return types.SimpleNamespace(run_dir=run_dir)


def check(tmp_path: Path, lines: list[tuple[float, str]]):
    return first_step_timeline.check(drill_in(tmp_path), (attempt(lines), attempt([])))


def test_the_stamp_is_the_prefix_kubectl_logs_timestamps_prints_and_the_timeline_reads():
    at = datetime(2026, 12, 4, 15, 0, 1, 250000, tzinfo=UTC)
    assert stamp(at) == "2026-12-04T15:00:01.250000Z"
    assert start_timeline.parse_time(stamp(at)) == at


def test_the_submitters_output_is_kept_as_it_came_and_stamped_as_it_was_read(tmp_path):
    script = "import sys, time\nfor i in range(3):\n    print(f'line {i}', flush=True)\n    time.sleep(0.2)\n"
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    before = datetime.now(UTC)
    assert process.stdout is not None
    output = StampedLog(process.stdout, tmp_path / "job.log", tmp_path / "job.timestamps.log")
    process.wait()
    output.join(30)
    after = datetime.now(UTC)
    assert (tmp_path / "job.log").read_text() == "line 0\nline 1\nline 2\n"
    rows = [row.split(" ", 1) for row in (tmp_path / "job.timestamps.log").read_text().splitlines()]
    assert [line for _, line in rows] == ["line 0", "line 1", "line 2"]
    times = [start_timeline.parse_time(text) for text, _ in rows]
    assert before <= times[0] <= times[1] <= times[2] <= after
    assert (times[2] - times[0]).total_seconds() >= 0.3  # read as the lines came, not at the end


def test_a_start_with_every_log_milestone_in_order_passes_with_the_timeline_cli(tmp_path):
    [outcome] = check(tmp_path, START)
    assert outcome.ok, outcome.line
    # t = 0 is the first milestone (the checkpoint found at +2 s); the first step is step 1's line, not step 0's.
    assert "time to first step 0:03:49 from the first milestone (0:03:51 after the submitter started)" in outcome.line
    assert "vLLM engines ready +0:01:33" in outcome.line
    assert (tmp_path / "skyrl-visgym-maze-grpo-bcdfg.timestamps.log").read_text() == stamped(START)


def test_a_start_that_never_reached_its_first_step_fails(tmp_path):
    [outcome] = check(tmp_path, START[:-1])
    assert not outcome.ok
    assert "first step: not found in the log" in outcome.line


def test_milestones_out_of_order_fail():
    timeline = {
        "milestones": [
            {"name": name, "seconds": seconds}
            for name, seconds in zip(first_step_timeline.LOG_MILESTONES, [0, 1, 1, 50, 40, 60], strict=True)
        ]
    }
    assert first_step_timeline.problems_of(timeline) == [
        f"{start_timeline.MODELS_READY} (+40.0 s) before {start_timeline.ENGINES_READY} (+50.0 s)"
    ]


def test_a_log_without_timestamps_fails_with_the_commands_own_line(tmp_path):
    unstamped = JobRun("rj", "rj-bcdfg", "FAILED", "", "x\n", {}, None, "train_job: no stamp\n", LAUNCHED)
    [outcome] = first_step_timeline.check(drill_in(tmp_path), (unstamped,))
    assert not outcome.ok
    assert "skyrl-hp train timeline failed" in outcome.line and "no Kubernetes timestamps" in outcome.line


@pytest.mark.parametrize("missing", first_step_timeline.LOG_MILESTONES)
def test_each_log_milestone_is_required(missing):
    timeline = {
        "milestones": [
            {"name": name, "seconds": None if name == missing else float(index)}
            for index, name in enumerate(first_step_timeline.LOG_MILESTONES)
        ]
    }
    assert f"{missing}: not found in the log" in first_step_timeline.problems_of(timeline)


def test_both_logs_exist_once_the_copy_is_set_up_even_before_its_thread_runs(tmp_path, monkeypatch):
    """A scenario reads the plain log right after launching the submitter; the copying thread may not have run yet."""
    monkeypatch.setattr("drill.log_stamps.threading.Thread.start", lambda thread: None)
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as source:
        StampedLog(source, tmp_path / "job.log", tmp_path / "job.timestamps.log")
        os.close(write_end)
        assert (tmp_path / "job.log").read_text() == ""
        assert (tmp_path / "job.timestamps.log").read_text() == ""
