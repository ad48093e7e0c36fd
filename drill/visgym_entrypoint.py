"""Drill stand-in for SkyRL's examples/train/visgym/entrypoint.py (the image runs the one of its SkyRL checkout).

The `skyrl` release on PyPI ships the library, not the repository's examples/, so the drill's stand-in SkyRL
checkout holds this file at that path. It makes the example's calls on the same arguments: `--env_variant` picks
the environment class, `SkyRLTrainConfig.from_cli_overrides`, `validate_cfg`, `initialize_ray`, then a `num_cpus=1`
Ray task registers the environment class under the name `visgym` and runs SkyRL's `BasePPOExp`. The one difference
is the class: VisGym is not installable offline, so both variants register the drill's maze stand-in
(`drill_maze_env.DrillMazeEnv` beside this file, from drill/maze_env.py). The checkout is on every
node's PYTHONPATH, as the image's is (docker/Dockerfile), so the task imports it by its module path.
"""

from __future__ import annotations

import sys

ENV_VARIANTS = ("sft", "instruct")
ENV_NAME = "visgym"
STANDIN_ENV = "examples.train.visgym.drill_maze_env:DrillMazeEnv"


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


def main() -> None:
    import ray
    from skyrl.train.config import SkyRLTrainConfig
    from skyrl.train.entrypoints.main_base import BasePPOExp
    from skyrl.train.utils import validate_cfg
    from skyrl.train.utils.utils import initialize_ray
    from skyrl_gym.envs import register

    _, overrides = split_env_variant(sys.argv[1:])

    @ray.remote(num_cpus=1)
    def visgym_entrypoint(cfg: SkyRLTrainConfig) -> None:
        images = bool(cfg.generator.vision_language_generator)
        register(id=ENV_NAME, entry_point=STANDIN_ENV, kwargs={"images": images})
        BasePPOExp(cfg).run()

    cfg = SkyRLTrainConfig.from_cli_overrides(overrides)
    validate_cfg(cfg)
    initialize_ray(cfg)
    ray.get(visgym_entrypoint.remote(cfg))


if __name__ == "__main__":
    main()
