"""`skyrl-hp train metrics`: SkyRL's logged metrics, read back from the job's log into a table and a plot; several
experiments' runs side by side in one table and one plot.

The RayJobs run SkyRL with `trainer.logger=console`: SkyRL's ConsoleLogger (skyrl/train/utils/tracking.py)
logs every `tracker.log(data, step)` through loguru as `Step <N>: ` followed by `pprint.pformat` of the
metrics with each float formatted as a '%.4f' string. The driver runs inside the `skyrl_entrypoint` Ray
task (skyrl/train/entrypoints/main_base.py), so in the submitter's log Ray prefixes every line with
`(skyrl_entrypoint pid=N[, ip=A])`. The keys read here (skyrl/train/trainer.py, skyrl/train/evaluate.py):
`eval/all/pass_at_1` (eval before training at step 0, then every `trainer.eval_interval` steps),
`reward/avg_raw_reward` (each training step) and `timing/step` (seconds per step).

With `tracking.backend: mlflow` the same keys are read from the run's MLflow metric history instead: SkyRL's
_MlflowLoggingAdapter logs each `tracker.log(data, step)` with `mlflow.log_metrics(data, step=step)` ('@' in a key
becomes '_at_'), into the experiment `trainer.project_name`, the run named `trainer.run_name`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skyrl_hyperpod.plumbing.errors import ProjectError

# MLflow's system tag holding a run's name (mlflow/utils/mlflow_tags.py, MLFLOW_RUN_NAME).
MLFLOW_RUN_NAME_TAG = "mlflow.runName"

PASS_AT_1 = "eval/all/pass_at_1"
REWARD = "reward/avg_raw_reward"
STEP_TIME = "timing/step"

# The reference run: 28 of the 64 seeded eval mazes solved before training, 62 of 64 at step 160.
REFERENCE_START = 28 / 64
REFERENCE_END = 62 / 64
REFERENCE_END_STEP = 160

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RAY_PREFIX = re.compile(r"^\([^()]*pid=\d+[^()]*\)\s?")
_STEP = re.compile(r"(?:^|\s-\s)Step (\d+): ?$")


@dataclass
class StepMetrics:
    step: int
    values: dict[str, float] = field(default_factory=dict)

    @property
    def pass_at_1(self) -> float | None:
        return self.values.get(PASS_AT_1)

    @property
    def reward(self) -> float | None:
        return self.values.get(REWARD)

    @property
    def step_seconds(self) -> float | None:
        return self.values.get(STEP_TIME)


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def split_ray_prefix(line: str) -> tuple[str, str]:
    """(Ray's process prefix or "", the line without it)."""
    text = _ANSI.sub("", line.rstrip("\r\n"))
    match = _RAY_PREFIX.match(text)
    return (match.group(0).strip(), text[match.end() :]) if match else ("", text)


def parse_log(lines: Iterable[str]) -> list[StepMetrics]:
    """Every `Step N:` block in a log, merged per step (the eval-only block and the training block of one
    step become one entry), in step order. Lines that are not metrics are skipped, and so are other
    processes' lines between a block's lines."""
    by_step: dict[int, StepMetrics] = {}
    pending: int | None = None
    source = ""  # the process that logged the pending `Step N:`: other processes' lines may interleave
    block: list[str] = []
    depth = 0
    for raw in lines:
        prefix, line = split_ray_prefix(raw)
        if pending is None:
            match = _STEP.search(line)
            if match:
                pending, source, block, depth = int(match.group(1)), prefix, [], 0
            continue
        if prefix != source:
            continue
        if not block and not line.lstrip().startswith("{"):
            pending = None  # a `Step N:` line without a metrics dict after it
            continue
        block.append(line)
        depth += _depth_change(line)
        if depth <= 0:
            try:
                data = ast.literal_eval("\n".join(block))
            except (ValueError, SyntaxError):
                data = None
            if isinstance(data, dict):
                entry = by_step.setdefault(pending, StepMetrics(pending))
                for key, value in data.items():
                    number = _number(value)
                    if number is not None:
                        entry.values[str(key)] = number
            pending = None
    return [by_step[step] for step in sorted(by_step)]


class MlflowRunNotFound(ProjectError, LookupError):
    """No run of that name in that experiment: one line."""


def find_mlflow_run(client: Any, experiment_name: str, run_name: str) -> str:
    """The id of the live run named `run_name` in `experiment_name` (one per attempt chain: docker/train_job.py
    keeps it beside the checkpoints), the most recently started one when several carry the name."""
    experiment = client.get_experiment_by_name(experiment_name)
    if experiment is None:
        raise MlflowRunNotFound(f"no MLflow experiment {experiment_name!r} (trainer.project_name)")
    runs = client.search_runs(
        [experiment.experiment_id],
        filter_string=f"tags.`{MLFLOW_RUN_NAME_TAG}` = '{run_name}'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    if not runs:
        raise MlflowRunNotFound(f"no MLflow run {run_name!r} in experiment {experiment_name!r} yet")
    return str(runs[0].info.run_id)


def read_mlflow(client: Any, run_id: str, keys: Iterable[str] = (PASS_AT_1, REWARD, STEP_TIME)) -> list[StepMetrics]:
    """The run's metric histories as `parse_log` returns a log's: one entry per step, in step order. A step logged
    twice (an attempt's step re-run after a resume) keeps the later value, as the curves in MLflow's UI do."""
    by_step: dict[int, StepMetrics] = {}
    for key in keys:
        history = sorted(client.get_metric_history(run_id, key.replace("@", "_at_")), key=lambda m: m.timestamp)
        for metric in history:
            by_step.setdefault(int(metric.step), StepMetrics(int(metric.step))).values[key] = float(metric.value)
    return [by_step[step] for step in sorted(by_step)]


def _depth_change(line: str) -> int:
    """Brackets opened minus closed, outside quoted strings (pformat quotes keys and the stringified floats)."""
    depth, quote = 0, ""
    for char in line:
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "{[(":
            depth += 1
        elif char in "}])":
            depth -= 1
    return depth


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def render_table(steps: list[StepMetrics]) -> str:
    header = ("step", "eval pass@1", "reward", "step time")
    rows = [
        (
            str(s.step),
            "-" if s.pass_at_1 is None else f"{s.pass_at_1:.2%}",
            _cell(s.reward, ".4f"),
            "-" if s.step_seconds is None else f"{s.step_seconds:.1f} s",
        )
        for s in steps
        if s.pass_at_1 is not None or s.reward is not None or s.step_seconds is not None
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)) for row in (header, *rows)
    )


def render_side_by_side(runs: dict[str, list[StepMetrics]]) -> str:
    """Several experiments' runs in one table: per step (every step any of them logged), each experiment's eval
    pass@1 and reward, "-" where it logged none."""
    header = ("step", *(f"{name} {column}" for name in runs for column in ("pass@1", "reward")))
    by_step: dict[int, dict[str, StepMetrics]] = {}
    for name, steps in runs.items():
        for s in steps:
            by_step.setdefault(s.step, {})[name] = s
    rows = []
    for step in sorted(by_step):
        cells = [str(step)]
        for name in runs:
            logged = by_step[step].get(name)
            cells += [
                "-" if logged is None or logged.pass_at_1 is None else f"{logged.pass_at_1:.2%}",
                _cell(None if logged is None else logged.reward, ".4f"),
            ]
        if any(cell != "-" for cell in cells[1:]):
            rows.append(tuple(cells))
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)) for row in (header, *rows)
    )


def as_json(steps: list[StepMetrics]) -> list[dict[str, float | int | None]]:
    return [
        {"step": s.step, "eval_pass_at_1": s.pass_at_1, "reward": s.reward, "step_seconds": s.step_seconds}
        for s in steps
    ]


def summary(steps: list[StepMetrics]) -> str:
    evals = [s for s in steps if s.pass_at_1 is not None]
    if not evals:
        return "no eval/all/pass_at_1 in the log yet (SkyRL evaluates before training and every trainer.eval_interval steps)"
    first, last = evals[0], evals[-1]
    return (
        f"eval pass@1 {first.pass_at_1:.2%} at step {first.step} -> {last.pass_at_1:.2%} at step {last.step} "
        f"(reference run: {REFERENCE_START:.2%} -> {REFERENCE_END:.3%} at step {REFERENCE_END_STEP})"
    )


def figure(runs: dict[str, list[StepMetrics]], title: str) -> Any:
    """Two panels side by side: eval pass@1 over the steps with the reference run's start and end marked, and the
    training reward of each step (SkyRL's reward/avg_raw_reward, the share of rollouts that reached the goal)
    with the reference run's last step marked; pass@1 alone hides a run whose reward climbs while eval stalls.
    One line per experiment in `runs` (experiment name -> steps) on each panel."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display
    import matplotlib.pyplot as plt
    from matplotlib.ticker import PercentFormatter

    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 4.5), dpi=100)
    single = len(runs) == 1
    for name, steps in runs.items():
        evals = [(s.step, s.pass_at_1) for s in steps if s.pass_at_1 is not None]
        rewards = [(s.step, s.reward) for s in steps if s.reward is not None]
        left.plot([x for x, _ in evals], [y for _, y in evals], marker="o",
                  label="eval pass@1 (this run)" if single else name)  # fmt: skip
        # One run's reward in orange beside the blue pass@1; several take matplotlib's colour cycle, the same
        # colour per experiment on both panels.
        right.plot([x for x, _ in rewards], [y for _, y in rewards], linewidth=1,
                   **({"color": "tab:orange", "label": "reward (this run)"} if single else {"label": name}))  # fmt: skip
    left.axhline(REFERENCE_START, color="grey", linestyle="--", label=f"reference start {REFERENCE_START:.2%}")
    left.axhline(REFERENCE_END, color="green", linestyle="--", label=f"reference step 160 {REFERENCE_END:.3%}")
    left.set_ylabel(PASS_AT_1)
    left.set_ylim(0, 1.02)
    left.yaxis.set_major_formatter(PercentFormatter(1.0))
    left.set_title(f"{title}: eval pass@1")
    right.set_ylabel(REWARD)
    right.set_title(f"{title}: training reward")
    for axes in (left, right):
        axes.axvline(
            REFERENCE_END_STEP, color="green", linestyle=":", label=f"reference run's step {REFERENCE_END_STEP}"
        )
        axes.set_xlabel("training step")
        axes.grid(True, alpha=0.3)
        axes.legend(loc="lower right")
    return fig


def plot(runs: dict[str, list[StepMetrics]], path: Path, title: str) -> None:
    """A PNG of `figure`: eval pass@1 beside the training reward, one line per experiment."""
    import matplotlib.pyplot as plt

    fig = figure(runs, title)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png", bbox_inches="tight")
    finally:
        plt.close(fig)


# The console logger prints each float as '%.4f' (ConsoleLogger.stringify_floats): half its last digit.
CONSOLE_PRECISION = 0.5e-4


def tracked_matches_log(logged: list[StepMetrics], tracked: list[StepMetrics]) -> str | None:
    """None when MLflow holds the log's training steps with the same reward at each; else one line saying where
    they differ (the drill's check that SkyRL's MLflow logger and `read_mlflow` agree with the driver log)."""
    log_rewards = {s.step: s.reward for s in logged if s.reward is not None}
    tracked_rewards = {s.step: s.reward for s in tracked if s.reward is not None}
    if sorted(log_rewards) != sorted(tracked_rewards):
        return f"steps with a reward: the log has {sorted(log_rewards)}, MLflow {sorted(tracked_rewards)}"
    for step, reward in sorted(log_rewards.items()):
        other = tracked_rewards[step]
        if reward is None or other is None or abs(reward - other) > CONSOLE_PRECISION:
            return f"step {step}: {REWARD} {reward} in the log, {other} in MLflow"
    return None
