"""bench/run.py's CPU accounting: the floor it prints beside the test targets is only as good as the CPU time it
reads for each command's process tree."""

from __future__ import annotations

import sys

from bench import run as bench

# A child that burns CPU in a grandchild it waits for, and one that only sleeps.
BURN_IN_GRANDCHILD = (
    "import subprocess, sys; subprocess.run([sys.executable, '-c', "
    "'import time\\nend = time.process_time() + 0.4\\nwhile time.process_time() < end: pass'], check=True)"
)


def test_a_run_counts_the_cpu_of_the_whole_tree_and_not_its_waiting(tmp_path):
    _, busy_cpu, _ = bench.run_once([sys.executable, "-c", BURN_IN_GRANDCHILD], tmp_path, {})
    idle_wall, idle_cpu, _ = bench.run_once([sys.executable, "-c", "import time; time.sleep(0.4)"], tmp_path, {})
    assert busy_cpu >= 0.4
    assert idle_wall >= 0.4 and idle_cpu < 0.3


def test_the_floor_is_the_cpu_spread_over_the_cores_against_the_same_rounds_baseline():
    baseline = bench.Measurement("baseline", seconds=[2.0, 4.0, 3.0])
    suite = bench.Measurement("suite", seconds=[30.0, 50.0, 40.0], cpu_seconds=[40.0, 72.0, 66.0])
    # Rounds: 40/2/2 = 10, 72/2/4 = 9, 66/2/3 = 11; the median of the rounds, not a ratio of medians (11.0).
    assert bench.floor_ratio(suite, baseline, cores=2) == 10.0
    assert bench.floor_ratio(suite, baseline, cores=1) == 20.0
