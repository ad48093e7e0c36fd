"""The drill's GPU boundary, loaded by every Python process of the drill's Ray nodes (their PYTHONPATH).

SkyRL's trainer runs everything up to its placement group on a CPU: it parses and validates the
overrides, starts Ray with its runtime env, loads the tokenizer and the datasets and waits for the
placement group of the configured layout (`BasePPOExp.__init__`). The next step,
`BasePPOExp._setup_trainer`, imports the FSDP workers (flash-attn, a CUDA build) and starts the vLLM
engines on the placement group's GPUs: the first step that needs a CUDA device. This module replaces
that method, in the drill only, with a report of what ran, printed as one marker line, followed by
`GPUBoundaryReached`. Nothing else is changed; outside the drill (no HP_DRILL_BOUNDARY) it does nothing.

A scenario that only needs to see the trainer process start (which variables reached it) can stop there
instead: the run directory's `stop-at` file then says `trainer-start`, and `BasePPOExp.__init__` reports
before it loads anything. A scenario that needs another stop point adds it here the same way: a name for the
`stop-at` file, a patch in `_patch`, and a report printed after MARKER.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
from collections import Counter
from typing import Any

MARKER = "SKYRL_HP_DRILL_STOP"
TARGET = "skyrl.train.entrypoints.main_base"
GPU_BOUNDARY = "gpu-boundary"
TRAINER_START = "trainer-start"
NEXT_STEP = "trainer setup: FSDP workers (flash-attn) and vLLM engines on the placement group's GPUs need CUDA"


class GPUBoundaryReached(RuntimeError):
    """Raised where the first step needing a CUDA device would run."""


class DrillStop(RuntimeError):
    """Raised where a scenario asked the trainer to stop."""


def _drill_file(name: str) -> str:
    return os.path.join(os.environ.get("HP_DRILL_DIR", ""), name)


def _stop_at() -> str:
    try:
        with open(_drill_file("stop-at"), encoding="utf-8") as handle:
            return handle.read().strip() or GPU_BOUNDARY
    except OSError:
        return GPU_BOUNDARY


def _common(cfg: Any, at: str) -> dict[str, Any]:
    import ray
    import skyrl
    import skyrl.env_vars
    import torch

    report: dict[str, Any] = {
        "at": at,
        "skyrl": skyrl.__version__,
        "ray": ray.__version__,
        "torch": torch.__version__,
        "python": ".".join(map(str, sys.version_info[:3])),
        "cuda_available": torch.cuda.is_available(),
        "pg_timeout_s": skyrl.env_vars.SKYRL_RAY_PG_TIMEOUT_IN_S,
        "placement": {
            "policy_num_nodes": cfg.trainer.placement.policy_num_nodes,
            "policy_num_gpus_per_node": cfg.trainer.placement.policy_num_gpus_per_node,
            "num_engines": cfg.generator.inference_engine.num_engines,
        },
    }
    if os.path.isfile(_drill_file("report-env-names")):
        with open(_drill_file("report-env-names"), encoding="utf-8") as handle:
            names = [line.strip() for line in handle if line.strip()]
        report["env"] = {name: os.environ.get(name) for name in names}
    return report


def _report(experiment: Any) -> dict[str, Any]:
    from ray.util import placement_group_table

    report = _common(experiment.cfg, GPU_BOUNDARY)
    report.update(
        {
            "train_rows": len(experiment.train_dataset),
            "eval_rows": len(experiment.eval_dataset) if experiment.eval_dataset is not None else 0,
            "tokenizer": type(experiment.tokenizer).__name__,
            "next": NEXT_STEP,
        }
    )
    pg = experiment.colocate_pg
    if pg is not None:
        table = placement_group_table(pg.pg)
        per_node = Counter(table["bundles_to_node_id"].values())
        report["placement_group"] = {
            "state": table["state"],
            "strategy": table["strategy"],
            "bundles": [dict(bundle) for bundle in pg.pg.bundle_specs],
            "bundles_per_node": sorted(per_node.values(), reverse=True),
        }
    return report


def _boundary(self: Any) -> Any:
    print(f"{MARKER} {json.dumps(_report(self), sort_keys=True)}", flush=True)
    raise GPUBoundaryReached(NEXT_STEP)


def _patch(module: Any) -> None:
    experiment = module.BasePPOExp
    original_init = experiment.__init__

    def __init__(self: Any, cfg: Any) -> None:
        if _stop_at() == TRAINER_START:
            print(f"{MARKER} {json.dumps(_common(cfg, TRAINER_START), sort_keys=True)}", flush=True)
            raise DrillStop("the scenario stops at the trainer's start")
        original_init(self, cfg)

    experiment.__init__ = __init__
    experiment._setup_trainer = _boundary


class _PatchOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds TARGET through the other finders, then patches it right after it executes."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        _patch(module)


if os.environ.get("HP_DRILL_BOUNDARY") == "1":
    sys.meta_path.insert(0, _PatchOnImport())
