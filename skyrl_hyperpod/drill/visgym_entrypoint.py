"""Drill stand-in for SkyRL's examples/train/visgym/entrypoint.py (the image runs the one of its SkyRL checkout).

The `skyrl` release on PyPI ships the library, not the repository's examples/, so the drill's stand-in SkyRL
checkout holds this file at that path. The VisGym example parses the overrides with
`SkyRLTrainConfig.from_cli_overrides`, runs `validate_cfg` and `initialize_ray`, then builds `BasePPOExp` in a
`num_cpus=1` Ray task after registering the VisGym environment class named by `--env_variant`. SkyRL's generic
entry point, `skyrl.train.entrypoints.main_base.main`, runs the same calls on the same arguments; the one step it
leaves out, the environment registration, matters only once the generator steps environments, past the GPU
boundary. So this stand-in checks `--env_variant` as the example does and hands the overrides to SkyRL's own
`main`.
"""

from __future__ import annotations

import sys

ENV_VARIANTS = ("sft", "instruct")


def split_env_variant(argv: list[str]) -> tuple[str, list[str]]:
    """(variant, the remaining SkyRL overrides), as the example's argparse would read `--env_variant V`."""
    rest: list[str] = []
    variant = None
    items = iter(argv)
    for item in items:
        if item == "--env_variant":
            variant = next(items, None)
        elif item.startswith("--env_variant="):
            variant = item.partition("=")[2]
        else:
            rest.append(item)
    if variant not in ENV_VARIANTS:
        raise SystemExit(f"entrypoint.py: --env_variant must be one of {', '.join(ENV_VARIANTS)}, got {variant!r}")
    return variant, rest


if __name__ == "__main__":
    _, overrides = split_env_variant(sys.argv[1:])
    from skyrl.train.entrypoints.main_base import main

    sys.argv = [sys.argv[0], *overrides]
    main()
