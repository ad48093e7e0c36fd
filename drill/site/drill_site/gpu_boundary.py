"""The default stop point. SkyRL's trainer runs everything up to its placement group on a CPU: it parses and
validates the overrides, starts Ray with its runtime env, loads the tokenizer and the datasets and waits for the
placement group of the configured layout (`BasePPOExp.__init__`). The next step, `BasePPOExp._setup_trainer`, imports
the FSDP workers (flash-attn, a CUDA build) and starts the vLLM engines on the placement group's GPUs: the first step
that needs a CUDA device. `boundary` replaces that method with a report of what ran, printed as one marker line,
followed by `GPUBoundaryReached`."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .stop_points import GPU_BOUNDARY, common, marker_line

NEXT_STEP = "trainer setup: FSDP workers (flash-attn) and vLLM engines on the placement group's GPUs need CUDA"


class GPUBoundaryReached(RuntimeError):
    """Raised where the first step needing a CUDA device would run."""


def report(experiment: Any) -> dict[str, Any]:
    from ray.util import placement_group_table

    found = common(experiment.cfg, GPU_BOUNDARY)
    found.update(
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
        found["placement_group"] = {
            "state": table["state"],
            "strategy": table["strategy"],
            "bundles": [dict(bundle) for bundle in pg.pg.bundle_specs],
            "bundles_per_node": sorted(per_node.values(), reverse=True),
        }
    return found


def boundary(experiment: Any) -> Any:
    print(marker_line(report(experiment)), flush=True)
    raise GPUBoundaryReached(NEXT_STEP)
