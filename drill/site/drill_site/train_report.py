"""The `train-on-cpu` stop point's observer of SkyRL's real training (it changes nothing): what SkyRL runs with as
`train()` starts, then one STEP_MARKER line per step (drill/cpu_training.py reads both)."""

from __future__ import annotations

import json
from typing import Any

from .stop_points import STEP_MARKER, TRAIN_ON_CPU, common, marker_line


def train_report_callback() -> Any:
    """One report line as `train()` starts (what SkyRL runs with), then a STEP_MARKER line per step with its reward
    and loss from the metrics SkyRL logs."""
    from skyrl.train.utils.callbacks import TrainingCallback

    class TrainReport(TrainingCallback):  # type: ignore[misc]  # SkyRL's classes are untyped (Any)
        def on_log(self, trainer: Any, callback_input: Any, control: Any) -> None:
            logs = callback_input.logs or {}
            wanted = {
                key: float(value)
                for key, value in logs.items()
                if isinstance(value, (int, float))
                and (key.startswith("reward/") or key.startswith("policy/") or key.startswith("loss/"))
            }
            if "trainer/global_step" in logs:
                step = {"step": int(logs["trainer/global_step"]), **wanted}
                # One line per step as it ends: an attempt that hangs or is fenced later has printed its steps.
                print(f"{STEP_MARKER} {json.dumps(step, sort_keys=True)}", flush=True)

        def on_train_start(self, trainer: Any, callback_input: Any, control: Any) -> None:
            # At the start, not the end: an attempt that hangs or is fenced never reaches on_train_end.
            report = common(trainer.cfg, TRAIN_ON_CPU)
            report.update(
                {
                    "global_step": trainer.global_step,
                    "export_path": trainer.cfg.trainer.export_path,
                    "ckpt_path": trainer.cfg.trainer.ckpt_path,
                    "lora_sync_path": trainer.cfg.trainer.policy.model.lora.lora_sync_path,
                    "train_batch_size": trainer.cfg.trainer.train_batch_size,
                    "policy_mini_batch_size": trainer.cfg.trainer.policy_mini_batch_size,
                    "n_samples_per_prompt": trainer.cfg.generator.n_samples_per_prompt,
                    "vision_language_generator": trainer.cfg.generator.vision_language_generator,
                    "generator": type(trainer.generator).__name__,
                }
            )
            print(marker_line(report), flush=True)

    return TrainReport()
