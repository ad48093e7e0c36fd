"""SkyRL's `BasePPOExp` (skyrl/train/entrypoints/main_base.py) routed to the stop point the run directory's `stop-at`
file names: `trainer-start` reports before `__init__` loads anything; `resume` builds the trainer around the stand-in
FSDP workers; `train-on-cpu` runs SkyRL's own `_setup_trainer` with the observer and the planned faults; anything else
(the default) stops at the GPU boundary. Nothing else of SkyRL is changed here."""

from __future__ import annotations

from typing import Any

from . import fault_standins, gpu_boundary, resume_standins, stop_points, train_report
from .dataset_filter import in_process_filter
from .stop_points import RESUME, TRAIN_ON_CPU, TRAINER_START, DrillStop

TARGET = "skyrl.train.entrypoints.main_base"


def patch(module: Any) -> None:
    experiment = module.BasePPOExp
    original_init = experiment.__init__

    def __init__(self: Any, cfg: Any) -> None:
        if stop_points.stop_at() == TRAINER_START:
            print(stop_points.marker_line(stop_points.common(cfg, TRAINER_START)), flush=True)
            raise DrillStop("the scenario stops at the trainer's start")
        original_init(self, cfg)

    original_setup = experiment._setup_trainer

    def _setup_trainer(self: Any) -> Any:
        if stop_points.stop_at() == RESUME:
            return resume_standins.resume_trainer(self)
        if stop_points.stop_at() == TRAIN_ON_CPU:
            plan = fault_standins.train_plan()
            trainer = original_setup(self)
            trainer.add_callback(train_report.train_report_callback())
            if plan.get("hang_at_step"):
                fault_standins.hang_in_generation(trainer, int(plan["hang_at_step"]))
            if plan.get("freeze_at_step"):
                trainer.add_callback(fault_standins.freeze_callback(int(plan["freeze_at_step"])))
            return trainer
        return gpu_boundary.boundary(self)

    experiment.__init__ = __init__
    experiment._setup_trainer = _setup_trainer
    if stop_points.stop_at() == TRAIN_ON_CPU:
        module.PromptDataset = in_process_filter(module.PromptDataset)
