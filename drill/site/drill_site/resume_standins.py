"""The `resume` stop point (the resume scenarios). SkyRL's `_setup_trainer` builds its own `RayPPOTrainer` (its
tracker, datasets, dataloader, placement group) and `run` goes on into SkyRL's `train()`, which calls
`load_checkpoints` for resume_mode=latest, restores the dataloader state and computes the first step to train.
Stand-ins replace only what needs the GPUs: the FSDP workers behind `trainer.dispatch` (their model/optimizer state is
a small file, written and read where SkyRL hands them a checkpoint folder), the vLLM engines (no inference client, no
generator) and the evaluation they run before training. At SkyRL's first `on_step_start` callback the trainer reports
the step it is about to train and what it loaded. With a `resume-plan.json` asking for it, the trainer then plays the
rest of a run that a node loss ends: SkyRL's own `save_checkpoints` writes its first `complete_saves` checkpoints, then
starts the next one and hangs in the policy save until the drill kills the job's driver. Without one it stops
(DrillStop)."""

from __future__ import annotations

import os
from typing import Any

from .stop_points import RESUME, RESUME_PLAN, DrillStop, common, marker_line, plan

STANDIN_STATE = "standin-model-state.txt"
# How long the stand-in policy save hangs waiting for the drill to kill the driver before it gives up.
HANG_SECONDS = 600
STANDINS = "FSDP workers (model/optimizer state), vLLM engines, the evaluation before training"


class StandInDispatch:
    """The FSDP workers' side of SkyRL's WorkerDispatch, for the calls `train()`, `save_checkpoints` and
    `load_checkpoints` make before the first step's GPU work: model/optimizer state is one small file per model."""

    def __init__(self, hang_in_save: bool = False) -> None:
        self.loaded: list[dict[str, Any]] = []
        self.hang_in_save = hang_in_save

    def init_weight_sync_state(self, client: Any) -> None:
        return None

    async def save_weights_for_sampler(self) -> None:
        return None

    def get_node_ids(self) -> list[str]:
        return []

    def save_checkpoint(self, model: str, ckpt_dir: str, tokenizer: Any = None) -> None:
        os.makedirs(ckpt_dir, exist_ok=True)
        if self.hang_in_save:
            # Half of a model's shards on disk, then the node is lost.
            with open(os.path.join(ckpt_dir, STANDIN_STATE + ".partial"), "w", encoding="utf-8") as handle:
                handle.write("stand-in shard 0 of 2\n")
            import time

            time.sleep(HANG_SECONDS)
            raise DrillStop(f"the drill did not kill the driver within {HANG_SECONDS} s")
        with open(os.path.join(ckpt_dir, STANDIN_STATE), "w", encoding="utf-8") as handle:
            handle.write(f"stand-in {model} model and optimizer state\n")

    def load_checkpoint(self, model: str, ckpt_dir: str, **kwargs: Any) -> None:
        self.loaded.append(
            {"model": model, "dir": ckpt_dir, "state": os.path.isfile(os.path.join(ckpt_dir, STANDIN_STATE))}
        )


def resume_trainer(experiment: Any) -> Any:
    """SkyRL's `_setup_trainer` up to `build_models` (upstream skyrl/train/entrypoints/main_base.py), with the
    stand-ins for what needs the GPUs."""
    from skyrl.train.utils.callbacks import TrainingCallback

    os.makedirs(experiment.cfg.trainer.export_path, exist_ok=True)
    os.makedirs(experiment.cfg.trainer.ckpt_path, exist_ok=True)
    trainer = experiment.get_trainer(
        cfg=experiment.cfg,
        tracker=experiment.get_tracker(),
        tokenizer=experiment.tokenizer,
        train_dataset=experiment.train_dataset,
        eval_dataset=experiment.eval_dataset,
        inference_engine_client=None,
        generator=None,
        colocate_pg=experiment.colocate_pg,
    )
    trainer.trajectory_logger = experiment.get_trajectory_logger()
    experiment.trainer = trainer
    dispatch = StandInDispatch()
    trainer.dispatch = dispatch

    async def no_eval(*args: Any, **kwargs: Any) -> dict[str, float]:
        return {}

    trainer.eval = no_eval
    resume_plan = plan(RESUME_PLAN)

    class FirstStep(TrainingCallback):  # type: ignore[misc]  # SkyRL's classes are untyped (Any)
        def on_step_start(self, trainer: Any, callback_input: Any, control: Any) -> None:
            report = common(trainer.cfg, RESUME)
            report.update(
                {
                    "first_step": trainer.global_step,
                    "epoch": callback_input.epoch,
                    "steps_per_epoch": callback_input.steps_per_epoch,
                    "resume_mode": trainer.resume_mode.value,
                    "ckpt_path": trainer.cfg.trainer.ckpt_path,
                    "ckpt_interval": trainer.cfg.trainer.ckpt_interval,
                    "loaded": dispatch.loaded,
                    "standins": STANDINS,
                }
            )
            if complete := int(resume_plan.get("complete_saves", 0)):
                # The steps SkyRL saves after (trainer.py `train`: every ckpt_interval steps and at each epoch's
                # end). The steps in between are GPU work; SkyRL's own save_checkpoints writes each checkpoint.
                per_epoch, interval = callback_input.steps_per_epoch, trainer.cfg.trainer.ckpt_interval
                steps = [s for s in range(1, 100 * per_epoch) if s % per_epoch == 0 or s % interval == 0]
                saves, dying = steps[:complete], steps[complete]
                for step in saves:
                    trainer.global_step = step
                    trainer.save_checkpoints()
                report["saved"] = saves
                report["dying_in_save_of"] = trainer.global_step = dying
                dispatch.hang_in_save = True
                print(marker_line(report), flush=True)
                trainer.save_checkpoints()
            print(marker_line(report), flush=True)
            raise DrillStop("the scenario stops at the first training step")

    trainer.add_callback(FirstStep())
    return trainer
