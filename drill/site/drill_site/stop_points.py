"""The stop points a scenario names in the run directory's `stop-at` file, and what the drill reads back: the marker
lines this package prints and the files it writes (their names agree with drill/cpu_training.py and drill/resume.py,
which tests/test_drill*.py check). A scenario that needs another stop point adds it the same way: a name for the
`stop-at` file, a branch in main_base_patch, and a report printed after MARKER."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

MARKER = "SKYRL_HP_DRILL_STOP"
STEP_MARKER = "SKYRL_HP_DRILL_STEP"
EVENT_MARKER = "SKYRL_HP_DRILL_EVENT"
GPU_BOUNDARY = "gpu-boundary"
TRAINER_START = "trainer-start"
RESUME = "resume"
TRAIN_ON_CPU = "train-on-cpu"
RESUME_PLAN = "resume-plan.json"
TRAIN_PLAN = "train-plan.json"


class DrillStop(RuntimeError):
    """Raised where a scenario asked the trainer to stop."""


def drill_file(name: str) -> str:
    return os.path.join(os.environ.get("HP_DRILL_DIR", ""), name)


def stop_at() -> str:
    try:
        with open(drill_file("stop-at"), encoding="utf-8") as handle:
            return handle.read().strip() or GPU_BOUNDARY
    except OSError:
        return GPU_BOUNDARY


def plan(name: str) -> dict[str, Any]:
    """A plan file the drill wrote in the run directory, {} when there is none."""
    try:
        with open(drill_file(name), encoding="utf-8") as handle:
            found: dict[str, Any] = json.load(handle)
            return found
    except OSError:
        return {}


def marker_line(report: dict[str, Any]) -> str:
    return f"{MARKER} {json.dumps(report, sort_keys=True)}"


def common(cfg: Any, at: str) -> dict[str, Any]:
    """What every stop point reports: the versions, the placement SkyRL was given, and the variables the drill asked
    about (`report-env-names`) as this process sees them."""
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
    if os.path.isfile(drill_file("report-env-names")):
        with open(drill_file("report-env-names"), encoding="utf-8") as handle:
            names = [line.strip() for line in handle if line.strip()]
        report["env"] = {name: os.environ.get(name) for name in names}
    return report
