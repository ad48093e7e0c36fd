"""BEHAVIOUR CHANGE of `train-on-cpu`, not a hardware stand-in: the shaping stand-in on SkyRL's VisGym environment of
the SFT recipe (examples/train/visgym/env_sft.py, which the entry point registers). Each step of its VisGymEnv also
earns SHAPING_PER_CELL for every cell it brings the agent closer to the goal (and loses it for every cell away). The
recipe's reward (0.8 x reaching the goal + 0.2 x answers in the SFT format, at the episode's end) is 0 for every sample
of a random-weight model, so GRPO's advantages, and the update, would be 0; this gives the samples of a group different
rewards."""

from __future__ import annotations

from typing import Any

VISGYM_ENV_MODULE = "examples.train.visgym.env_sft"
# The shaping stand-in's reward per cell a step brings the agent closer to the goal (away: the same, negative).
SHAPING_PER_CELL = 0.5


def distance_to_goal(env: Any) -> int:
    """The agent's distance to the goal in VisGym's maze, in cells (Manhattan), from the environment's own state
    (maze_2d's get_init_state: the current agent and target locations)."""
    state = env.visgym_env.unwrapped.get_init_state()
    agent, target = state["agent_location"], state["target_location"]
    return int(abs(agent[0] - target[0]) + abs(agent[1] - target[1]))


def patch_visgym_env(module: Any) -> None:
    environment = module.VisGymEnv
    original_step = environment.step

    def step(self: Any, action: str) -> Any:
        before = distance_to_goal(self)
        output = original_step(self, action)
        shaping = SHAPING_PER_CELL * (before - distance_to_goal(self))
        output["reward"] = float(output["reward"]) + shaping
        output["metadata"] = {**(output.get("metadata") or {}), "drill_reward_shaping": shaping}
        return output

    environment.step = step
