"""The checkpoint interval follows from the failure budget, and the failure cost follows SkyRL's save rule."""

from __future__ import annotations

from importlib import util
from pathlib import Path

import pytest

from skyrl_hyperpod.config import ConfigError, validate_config
from skyrl_hyperpod.config.training import REFERENCE_CKPT_INTERVAL, REFERENCE_STEP_SECONDS
from skyrl_hyperpod.config.training_runs import FailureCost, checkpoint_steps


def run_of(data: dict):
    (run,) = validate_config(data).derived.runs
    return run


def jobs(**values) -> dict:
    return {"training": {"jobs": values}}


def test_the_default_budget_reproduces_the_reference_interval(default_config):
    (run,) = default_config.derived.runs
    assert run.knobs.ckpt_interval == run.knobs.hf_save_interval == REFERENCE_CKPT_INTERVAL == 20
    # 20 steps x 6 GPUs x (24 h / 160 steps) = 18 GPU-hours.
    assert default_config.training.jobs.failure_budget_gpu_hours == pytest.approx(18.0)
    assert REFERENCE_STEP_SECONDS == 540


@pytest.mark.parametrize(
    ("data", "interval"),
    [
        (jobs(failure_budget_gpu_hours=9), 10),  # half the budget, half the steps
        (jobs(failure_budget_gpu_hours=0.5), 1),  # never below one step
        (jobs(estimated_step_seconds=1080), 10),  # steps twice as long
        (jobs(failure_budget_gpu_hours=1000), 160),  # never beyond the run
        # Two GPU nodes instead of three: each step holds 4 GPUs, so 30 steps fit 18 GPU-hours; rounded down
        # to 20, a divisor of the 160 target steps, so that step 160 is saved and exported.
        ({"hyperpod": {"worker_group": {"instance_count": 2}}}, 20),
        (jobs(failure_budget_gpu_hours=12.6), 10),  # 14 steps fit: 10 divides 160
        # Five nodes: the derived batch gives 7-step epochs and a 161-step run; 12 steps fit, 10 divides 160.
        ({"hyperpod": {"worker_group": {"instance_count": 5}}}, 10),
    ],
)
def test_the_interval_is_the_most_steps_the_budget_allows(data, interval):
    run = run_of(data)
    assert run.knobs.ckpt_interval == run.knobs.hf_save_interval == interval


def test_an_explicit_interval_wins_over_the_budget():
    run = run_of({"training": {"jobs": {"failure_budget_gpu_hours": 1}, "knobs": {"trainer.ckpt_interval": 40}}})
    assert run.knobs.ckpt_interval == 40 and run.knobs.hf_save_interval == 40
    assert run.overrides()["trainer.ckpt_interval"] == "40"


def test_bad_budget_values_are_one_line_each():
    with pytest.raises(ConfigError) as error:
        validate_config(jobs(failure_budget_gpu_hours=0, estimated_step_seconds=-1))
    assert error.value.problems == [
        "config error: training.jobs.failure_budget_gpu_hours = 0: Input should be greater than 0",
        "config error: training.jobs.estimated_step_seconds = -1: Input should be greater than 0",
    ]


def test_skyrl_saves_at_interval_multiples_epoch_ends_and_the_last_step():
    # The rule FailureCost restates, as SkyRL 0.3.0 (installed) writes it.
    package = util.find_spec("skyrl.train")
    assert package is not None and package.submodule_search_locations
    source = Path(package.submodule_search_locations[0], "trainer.py").read_text(encoding="utf-8")
    assert "is_epoch_end = self.global_step % len(self.train_dataloader) == 0" in source
    assert "is_epoch_end or self.global_step % self.cfg.trainer.ckpt_interval == 0" in source
    assert "Safety net: always save final checkpoint at end of training." in source
    assert checkpoint_steps(20, 8, 40) == (8, 16, 20, 24, 32, 40)


def test_the_reference_run_loses_at_most_one_epoch(default_config):
    (run,) = default_config.derived.runs
    cost = run.failure_cost
    # Epoch ends (every 8 steps) come before the interval's 20: the longest gap is 8 steps.
    assert cost.worst_case_steps == 8
    assert cost.gpu_hours(cost.worst_case_steps) == pytest.approx(8 * 6 * 540 / 3600)
    assert cost.mean_steps == pytest.approx(sum(g * g for g in cost.gaps) / (2 * 160))


def test_a_long_epoch_makes_the_interval_the_bound():
    cost = FailureCost(interval=20, steps_per_epoch=160, total_steps=160, gpus=6, step_seconds=540)
    assert cost.checkpoint_steps == (20, 40, 60, 80, 100, 120, 140, 160)
    assert cost.worst_case_steps == 20 and cost.mean_steps == 10


def test_serving_accepts_every_step_skyrl_exports():
    # An explicit 30-step interval: SkyRL still exports at every epoch end and at the last step.
    knobs = {"trainer.ckpt_interval": 30, "trainer.hf_save_interval": 30}
    config = validate_config({"training": {"knobs": knobs}})
    (run,) = config.derived.runs
    assert {8, 30, 160} <= set(run.export_steps) and 20 not in run.export_steps
    with pytest.raises(ConfigError, match="publish.step = 31"):
        validate_config({"training": {"knobs": knobs}, "serving": {"publish": {"step": 31}}})
