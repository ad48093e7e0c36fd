#!/usr/bin/env python3
"""Benchmark of the edit-synth-test loop, measured against a one-bucket CDK app in the same run.

    .venv/bin/python bench/run.py                 # everything, 5 interleaved rounds
    .venv/bin/python bench/run.py --repeat 3 --skip tests

Every figure is the median wall time of fresh processes started the way a user starts them
(`cdk synth`, `cdk8s synth`, `pytest`), with the project's own pinned toolchain (the venv's Node 24
started through skyrl_hyperpod/bin/jsii-node, node_modules' CLIs) for the baseline and the project
alike; the baseline on Node's default flags is printed for reference. The commands run in rounds (each
once per round, after one warm-up run each), and every ratio is the median of the ratios measured within
a round, so that a drift of the machine's speed during the run does not end up in a ratio. Peak memory
is the largest resident set of the whole process tree (Python, the jsii Node runtime, the CLIs, the
test workers), sampled every 20 ms in one extra run per command (not in the timed runs: sampling takes
CPU from the command it watches). Ratios are what the targets are about; absolute seconds vary between
machines.

Each timed run also records the CPU time of its process tree (user + system of every process it started and
waited for). A test target's CPU divided by the machine's cores is the wall time it cannot beat however well its
workers are scheduled: the floor printed beside its ratio. A target below its floor needs less work, not more
parallelism.

The manifest validation remembers on disk which serveConfigV2 passed Ray's Serve schemas, so a warm
synth skips importing Ray (see skyrl_hyperpod/validation/cache.py). `cdk8s synth` and the scaling runs are
measured both cold (SKYRL_HP_VALIDATION_CACHE=off: a fresh checkout, CI without a cache) and warm
(a cache private to this run, filled by the warm-up run); the 1.2 x target is judged on the cold figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import yaml

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
NODE_BIN = REPO / "node_modules" / ".bin"
sys.path.insert(0, str(REPO))
from skyrl_hyperpod.plumbing.runtime import JSII_NODE_WRAPPER  # noqa: E402

BASELINE_APP = """
import aws_cdk as cdk
from aws_cdk import aws_s3 as s3

app = cdk.App()
stack = cdk.Stack(app, "Baseline")
s3.Bucket(stack, "Bucket")
app.synth()
"""

BASELINE = "baseline: one-bucket cdk synth"
STOCK_BASELINE = "baseline on Node's default flags"
CDK8S_COLD = "cdk8s synth + validation (cold cache)"
CDK8S_WARM = "cdk8s synth + validation (warm cache)"
LINT = "make lint: ruff + mypy (no mypy cache)"
# The suite without its `long_running` modules (tests/conftest.py: the real Ray cluster, the Helm installer's
# handler, checkov, the chart renders, the lifecycle scripts, the PR review): the loop a change to the rest can
# run. For reference: the suite target is judged on the whole suite, which `make test` and CI run.
SHORT_SUITE = "make test-fast: suite without long_running modules"
# The test targets are lines not to cross (their figures on an unloaded 2-core machine, docs/performance.md, with room
# for the machine's spread): both run at their CPU floor, and the loop after an edit is `make test-changed`.
TARGETS = {  # ratio to the baseline, median against median
    "cdk synth (whole app)": 1.5,
    CDK8S_COLD: 1.2,
    SHORT_SUITE: 20.0,
    "test suite": 36.0,
}
# Shown for reference, not judged. `make test` runs the lint before the suite, so a clean checkout's
# `make test` pays both figures.
REPORTED_RATIOS = [*TARGETS, LINT, CDK8S_WARM, STOCK_BASELINE]
MARGINAL_EXPERIMENT_TARGET_MS = 20.0
# Peak memory of the whole process tree, MiB: the whole suite and `make test-fast`.
MEMORY_TARGETS_MIB = {"test suite": 3072, SHORT_SUITE: 2048}
# The parallel commands, whose CPU floor is printed beside their ratio.
TESTS_JUDGED = list(MEMORY_TARGETS_MIB)


@dataclass
class Measurement:
    name: str
    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)
    peak_rss_mib: float = 0.0

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def median_cpu(self) -> float:
        return statistics.median(self.cpu_seconds)


def tree_rss(process: psutil.Process) -> int:
    total = 0
    for proc in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):  # a child may exit between listing and reading
            total += proc.memory_info().rss
    return total


def children_cpu_seconds() -> float:
    """User + system time of every child process this one has waited for (and of theirs they waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(
    command: list[str], cwd: Path, env: dict[str, str], sample_memory: bool = False
) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the process tree, peak resident set of the process tree in bytes, 0 unless
    sample_memory).

    Sampling costs ~1-2 ms of CPU per sample: every 20 ms that is 5-10 % of a core taken from the command
    it watches, which slows the two-worker test suite (both cores busy) and not the one-core baseline.
    The timed runs therefore do not sample; one separate run per command measures the memory."""
    # The output goes to a file, not a pipe: a full pipe would stop the command while the memory is sampled,
    # and a failed pytest reports its failures on stdout.
    with tempfile.TemporaryFile() as output:
        cpu_before = children_cpu_seconds()
        start = time.perf_counter()
        popen = subprocess.Popen(command, cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT)
        peak = 0
        if sample_memory:
            watched = psutil.Process(popen.pid)
            while popen.poll() is None:
                peak = max(peak, tree_rss(watched))
                time.sleep(0.02)
        popen.wait()
        elapsed = time.perf_counter() - start
        cpu = children_cpu_seconds() - cpu_before
        if popen.returncode != 0:
            output.seek(0)
            message = output.read().decode(errors="replace")
            raise SystemExit(f"benchmark command failed ({popen.returncode}): {' '.join(command)}\n{message[-4000:]}")
    return elapsed, cpu, peak


@dataclass(frozen=True)
class Job:
    command: list[str]
    cwd: Path
    env: dict[str, str]


def measure_interleaved(jobs: dict[str, Job], repeat: int) -> dict[str, Measurement]:
    """Each job once as a warm-up (file-system caches, __pycache__, npm's first start, the validation
    cache), then `repeat` timed rounds that run every job once, in the same order, then one more run of
    each that samples memory. Interleaving keeps a slow drift of the machine's speed (other tenants,
    thermal state) out of the ratios: within a round, the baseline and the project run seconds apart."""
    results = {name: Measurement(name) for name in jobs}
    for job in jobs.values():
        run_once(job.command, job.cwd, job.env)
    for _ in range(repeat):
        for name, job in jobs.items():
            seconds, cpu, _ = run_once(job.command, job.cwd, job.env)
            results[name].seconds.append(seconds)
            results[name].cpu_seconds.append(cpu)
    for name, job in jobs.items():
        _, _, peak = run_once(job.command, job.cwd, job.env, sample_memory=True)
        results[name].peak_rss_mib = peak / 2**20
    for name, result in results.items():
        print(
            f"  {name:<40} median {result.median:6.2f} s  CPU {result.median_cpu:6.2f} s  "
            f"peak {result.peak_rss_mib:6.0f} MiB",
            flush=True,
        )
    return results


def paired_ratio(figure: Measurement, baseline: Measurement) -> float:
    """Median over the rounds of (figure / baseline) measured in the same round."""
    return statistics.median(f / b for f, b in zip(figure.seconds, baseline.seconds, strict=True))


def floor_ratio(figure: Measurement, baseline: Measurement, cores: int) -> float:
    """Median over the rounds of (figure's CPU seconds / cores) / baseline's wall seconds in the same round: the
    ratio the figure could reach if every core were busy with its work from start to end."""
    return statistics.median(c / cores / b for c, b in zip(figure.cpu_seconds, baseline.seconds, strict=True))


# `make test-changed` after a representative one-module edit of each kind: (kind, file, the text edited, an edit
# that keeps the behaviour, a mutation the selected tests must catch). Each is applied to a copy of the checkout.
CHANGED_TARGET = 6.0
TEST_CHANGED_EDITS = [
    (
        "a configuration section",
        "skyrl_hyperpod/config/fsx.py",
        "        if value not in (1200, 2400) and (value <= 0 or value % 2400):\n",
        "        if value not in (1200, 2400) and (value % 2400 or value <= 0):\n",
        "        if value not in (1200, 2400, 3000) and (value <= 0 or value % 2400):\n",
    ),
    (
        "a stack component",
        "stacks/components/storage.py",
        '        "enforce_ssl": True,\n',
        '        "enforce_ssl": bool(1),\n',
        '        "enforce_ssl": False,\n',
    ),
    (
        "a chart",
        "charts/rayjob.py",
        '        "--train-rows", str(training.data.train_rows),\n',
        '        "--train-rows", f"{training.data.train_rows}",\n',
        '        "--train-rows", str(training.data.train_rows + 1),\n',
    ),
    (
        "a CLI command",
        "skyrl_hyperpod/cli/train.py",
        "        sys.exit(EXIT_FINDINGS)\n",
        "        sys.exit(int(EXIT_FINDINGS))\n",
        "        sys.exit(0)\n",
    ),
]
# What a checkout copy shares with this one instead of copying: the environments and the downloads (gitignored).
SHARED_DIRS = (".venv", ".venv-scan", "node_modules", ".build")


def checkout_copy(target: Path) -> Path:
    """The files git tracks or would track, copied; the environments linked; a git index of its own (the tool asks
    git which files exist)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    subprocess.run(["git", "init", "-q"], cwd=target, check=True)
    subprocess.run(["git", "add", "-A"], cwd=target, check=True)
    # After the index: .gitignore's `.venv/` matches a directory, not a link to one.
    for name in SHARED_DIRS:
        if (REPO / name).exists():
            (target / name).symlink_to(REPO / name)
    return target


def run_checked(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, float, str]:
    """(exit code, wall seconds, what it ran and pytest's summary line): for runs whose failure is the expected
    result. An unexpected failure's FAILED and ERROR lines are printed."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    lines = done.stdout.strip().splitlines()
    chosen = done.stderr.strip().splitlines()[-1:] if done.stderr.strip() else []
    summary = "; ".join([*chosen, *lines[-1:]]).replace("=", "").strip()
    return done.returncode, seconds, summary


def failures(command: list[str], cwd: Path, env: dict[str, str]) -> str:
    """The FAILED and ERROR lines of a run that should have passed (run again, with -rfE)."""
    done = subprocess.run([*command, "-rfE"], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    return "\n".join(line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR")))


def replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if text.count(old) != 1:
        raise SystemExit(f"bench: {path.name} no longer holds the edited line once: {old.strip()!r}")
    path.write_text(text.replace(old, new))


def measure_test_changed(args: argparse.Namespace, work: Path, baseline: Job) -> dict:
    """Per kind of edit: `make test-changed` timed after the edit and after undoing it (each a change of that
    module), every run paired with a baseline run; then the mutation, which the selected tests must fail."""
    copy = checkout_copy(work / "checkout")
    # Tests that clear KUBERAY_CRDS_DIR read the copies beside the checkout (../shared), as the Makefile does.
    if (REPO.parent / "shared").is_dir():
        (work / "shared").symlink_to(REPO.parent / "shared")
    env = base_env(True, work / "validation-cache")
    # Not `-p no:cacheprovider`: testmon's selection reads pytest's --lf option, which that plugin adds.
    command = [str(BIN / "python"), "-m", "tools.test_changed"]
    print("\nmake test-changed after a one-module edit (a copy of the checkout)", flush=True)
    code, seconds, last = run_checked(command, copy, env)
    print(f"  first run, no data (the whole loop, recording): {seconds:6.2f} s, {last}", flush=True)
    if code != 0:
        raise SystemExit(
            f"bench: make test-changed failed in the copy before any edit: {last}\n{failures(command, copy, env)}"
        )
    results: dict = {"recording_run_s": seconds}
    for kind, name, old, neutral, mutant in TEST_CHANGED_EDITS:
        path = copy / name
        original = path.read_text()
        ratios, runs = [], []
        for round_index in range(args.repeat):
            replace_once(path, *((old, neutral) if round_index % 2 == 0 else (neutral, old)))
            base_seconds, _, _ = run_once(baseline.command, baseline.cwd, baseline.env)
            code, seconds, last = run_checked(command, copy, env)
            if code != 0:
                raise SystemExit(
                    f"bench: make test-changed failed after a neutral edit of {name}: {last}\n"
                    + failures(command, copy, env)
                )
            runs.append(seconds)
            ratios.append(seconds / base_seconds)
        path.write_text(original.replace(old, mutant))
        mutant_code, _, mutant_last = run_checked(command, copy, env)
        path.write_text(original)
        code, _, _ = run_checked(command, copy, env)  # back to the recorded state
        caught = mutant_code not in (0, 5)
        ratio = statistics.median(ratios)
        verdict = "meets" if ratio <= CHANGED_TARGET else "MISSES"
        print(
            f"  {kind:<26} {name:<32} median {statistics.median(runs):6.2f} s  {ratio:5.2f} x   "
            f"target <= {CHANGED_TARGET} x: {verdict}; mutation {'caught' if caught else 'NOT CAUGHT'} ({mutant_last})",
            flush=True,
        )
        results[kind] = {"file": name, "runs_s": runs, "ratio": ratio, "mutation_caught": caught,
                         "mutation_result": mutant_last}  # fmt: skip
    return results


def base_env(
    validation: bool,
    validation_cache: Path | None,
    config_file: Path | None = None,
    jsii_node: str = str(JSII_NODE_WRAPPER),
) -> dict[str, str]:
    """validation_cache: a directory for the manifest validation's cache, or None for no cache (cold).
    jsii_node: the Node jsii starts, for the baseline and the project alike (the project's entry points
    default to the same wrapper)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(BIN), str(NODE_BIN), env.get("PATH", "")])
    env["JSII_NODE"] = jsii_node
    env["CDK_DISABLE_CLI_TELEMETRY"] = "true"
    env["CDK_VALIDATION"] = "true" if validation else "false"
    env["SKYRL_HP_VALIDATION_CACHE"] = str(validation_cache) if validation_cache is not None else "off"
    env.pop("SKYRL_HP_CONFIG", None)
    if config_file is not None:
        env["SKYRL_HP_CONFIG"] = str(config_file)
    return env


def experiments_config(count: int, directory: Path) -> Path:
    """A configuration with `count` RayJob experiments (a learning-rate sweep)."""
    experiments = [
        {"name": f"lr-sweep-{index:03d}", "overrides": {"trainer.policy.optimizer_config.lr": 1e-6 * (index + 1)}}
        for index in range(count)
    ]
    file = directory / f"experiments-{count}.yaml"
    file.write_text(yaml.safe_dump({"training": {"experiments": experiments}}))
    return file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds (default 5)")
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=["synth", "tests", "scaling", "validation-off", "test-changed"],
        help="leave a group of measurements out",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="skyrl-hp-bench."))
    try:
        measure(args, work)
    finally:  # a failed command ends the run with SystemExit: its files go too
        shutil.rmtree(work, ignore_errors=True)


def measure(args: argparse.Namespace, work: Path) -> None:
    baseline_dir = work / "baseline"
    baseline_dir.mkdir()
    (baseline_dir / "app.py").write_text(BASELINE_APP)
    (baseline_dir / "cdk.json").write_text(json.dumps({"app": f"{sys.executable} app.py"}))
    cdk = [str(NODE_BIN / "cdk"), "synth", "--quiet", "--no-notices"]
    # --no-check-upgrade: no npm registry call inside the measurement.
    cdk8s = [str(NODE_BIN / "cdk8s"), "synth", "--no-check-upgrade"]

    warm_cache = work / "validation-cache"  # private to this run: filled by the first warm-up run
    results: dict[str, dict] = {}
    modes = [] if "synth" in args.skip else [True] + ([] if "validation-off" in args.skip else [False])
    for validation in modes:
        label = f"CDK_VALIDATION={'on' if validation else 'off'}"
        print(f"\n{label} (medians of {args.repeat} interleaved rounds, after one warm-up run each)")
        env = base_env(validation, warm_cache)
        jobs = {
            BASELINE: Job([*cdk, "-o", str(work / "base.out")], baseline_dir, env),
            # For reference: the same baseline on Node's default flags (not the wrapper's).
            STOCK_BASELINE: Job(
                [*cdk, "-o", str(work / "base.out")],
                baseline_dir,
                base_env(validation, warm_cache, jsii_node=str(BIN / "node")),
            ),
            "cdk synth (whole app)": Job([*cdk, "-o", str(work / "cdk.out")], REPO, env),
            CDK8S_COLD: Job(cdk8s, REPO, base_env(validation, None)),
            CDK8S_WARM: Job(cdk8s, REPO, env),
        }
        if "tests" not in args.skip:
            pytest = [str(BIN / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
            jobs["test suite"] = Job(pytest, REPO, env)
            if validation:
                jobs[SHORT_SUITE] = Job([*pytest, "-m", "not long_running"], REPO, env)
            if validation:  # the lint does not synthesize: once is enough
                lint = f"{BIN}/ruff check -q . && {BIN}/ruff format -q --check . && {BIN}/mypy --cache-dir=/dev/null"
                jobs[LINT] = Job(["sh", "-c", lint], REPO, env)
        figures = measure_interleaved(jobs, args.repeat)
        baseline = figures[BASELINE]
        ratios = {name: paired_ratio(figures[name], baseline) for name in REPORTED_RATIOS if name in figures}
        cores = os.cpu_count() or 1
        floors = {name: floor_ratio(figures[name], baseline, cores) for name in TESTS_JUDGED if name in figures}
        print(f"\n  ratios to the baseline (median {baseline.median:.2f} s; median of the per-round ratios):")
        for name, ratio in ratios.items():
            if name in TARGETS:
                verdict = "meets" if ratio <= TARGETS[name] else "MISSES"
                floor = f"   floor on {cores} cores {floors[name]:5.2f} x" if name in floors else ""
                print(f"    {name:<42} {ratio:5.2f} x   target <= {TARGETS[name]} x: {verdict}{floor}")
            else:
                print(f"    {name:<42} {ratio:5.2f} x   (reference)")
        for name, target_mib in MEMORY_TARGETS_MIB.items():
            if name in figures:
                peak = figures[name].peak_rss_mib
                verdict = "meets" if peak <= target_mib else "MISSES"
                print(f"    {name + ' peak memory':<42} {peak:5.0f} MiB target <= {target_mib}: {verdict}")
        results[label] = {
            name: {
                "median_s": m.median,
                "runs_s": m.seconds,
                "median_cpu_s": m.median_cpu,
                "runs_cpu_s": m.cpu_seconds,
                "peak_rss_mib": m.peak_rss_mib,
            }
            for name, m in figures.items()
        }
        results[label]["ratios"] = ratios
        results[label]["floor_ratios"] = floors | {"cores": cores}

    if "scaling" not in args.skip:
        results["scaling"] = {}
        for cache_label, cache in (("cold cache", None), ("warm cache", warm_cache)):
            print(f"\nscaling: cdk8s synth with N RayJob experiments ({cache_label}, CDK_VALIDATION=on)")
            by_name = measure_interleaved(
                {f"{count:>3} experiment(s)": Job(cdk8s, REPO, base_env(True, cache, experiments_config(count, work)))
                 for count in (1, 10, 100)},
                args.repeat,
            )  # fmt: skip
            scaling = {count: by_name[f"{count:>3} experiment(s)"] for count in (1, 10, 100)}
            marginal_ms = (
                statistics.median(
                    hundred - one for hundred, one in zip(scaling[100].seconds, scaling[1].seconds, strict=True)
                )
                / 99
                * 1000
            )
            verdict = "meets" if marginal_ms <= MARGINAL_EXPERIMENT_TARGET_MS else "MISSES"
            print(
                f"  marginal cost per experiment: {marginal_ms:.1f} ms   "
                f"target <= {MARGINAL_EXPERIMENT_TARGET_MS} ms: {verdict}"
            )
            results["scaling"][cache_label] = {str(n): m.median for n, m in scaling.items()} | {
                "marginal_ms": marginal_ms
            }

    if "test-changed" not in args.skip:
        base_job = Job([*cdk, "-o", str(work / "base.out")], baseline_dir, base_env(True, warm_cache))
        run_once(base_job.command, base_job.cwd, base_job.env)  # warm-up
        results["test-changed"] = measure_test_changed(args, work, base_job)

    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
