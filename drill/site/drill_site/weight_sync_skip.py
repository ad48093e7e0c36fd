"""BEHAVIOUR CHANGE of `train-on-cpu`, not a hardware stand-in: the weight-sync engine's NCCL rendezvous with the vLLM
workers is skipped. With LoRA SkyRL sends the adapter through files in lora_sync_path and loads it into vLLM by name;
the NCCL engine built here carries full weights only, which the LoRA path does not send. CPU_FORCED
(drill/cpu_training.py) lists it."""

from __future__ import annotations

from typing import Any

WEIGHT_SENDERS = "skyrl.backends.skyrl_train.weight_sync.weight_senders"


def patch_weight_senders(module: Any) -> None:
    original = module.build_trainer_engine

    def build_trainer_engine(*args: Any, **kwargs: Any) -> Any:
        return None

    build_trainer_engine.__wrapped__ = original  # type: ignore[attr-defined]
    module.build_trainer_engine = build_trainer_engine
