"""Drill stand-in for VisGym's 2-D maze environment (VisGym is not on PyPI; the job's `environment.env_class`
names it). The drill's stand-in SkyRL checkout registers this class under that name, as SkyRL's VisGym example
registers VisGym's.

It follows the interface SkyRL's generators drive (skyrl_gym's BaseTextEnv: `init(prompt)` -> the first
conversation, `step(text)` -> observations, reward, done, metadata; skyrl/train/generators/skyrl_gym_generator.py
and skyrl_vlm_generator.py): multi-turn, one move per turn, the episode ends at the goal or after `max_turns`
(the generator passes it in `extras`). Each observation shows the maze as text, and as an image when the env
entrypoint registers it for a VLM (`images`). The reward has variance on purpose: a random-weight model earns nothing from a
sparse goal reward, every sample of a group would score the same and GRPO's advantages (and so the update) would
be zero. So every step is rewarded by how much closer it got to the goal, plus 1 at the goal.

Standard library, numpy-free; Pillow only for images. It imports skyrl_gym, so it is loaded only inside the
training environment.
"""

from __future__ import annotations

import base64
import io
import random
import re
from typing import Any

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
SIZE = 4
_WORD = re.compile(r"up|down|left|right")


class DrillMazeEnv(BaseTextEnv):  # type: ignore[misc]  # skyrl_gym is untyped
    """Stand-in for VisGym's maze_2d: a 4 x 4 grid, the agent at one cell, the goal at another."""

    def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None, images: bool = False) -> None:
        super().__init__()
        extras = dict(extras or {})
        self.max_turns = int(extras.get("max_turns") or 1)
        self.images = images
        seed = extras.get("seed")
        rng = random.Random(int(seed) if seed is not None else None)
        cells = [(row, col) for row in range(SIZE) for col in range(SIZE)]
        self.position, self.goal = rng.sample(cells, 2)
        self.start = self.position
        self.invalid = 0

    def _distance(self) -> int:
        return abs(self.position[0] - self.goal[0]) + abs(self.position[1] - self.goal[1])

    def _grid(self) -> str:
        rows = []
        for row in range(SIZE):
            rows.append(
                " ".join(
                    "you" if (row, col) == self.position else "goal" if (row, col) == self.goal else "free"
                    for col in range(SIZE)
                )
            )
        return " ".join(rows)

    def _png(self) -> str:
        from PIL import Image

        cell = 8
        image = Image.new("RGB", (SIZE * cell, SIZE * cell), "white")
        for (row, col), colour in ((self.goal, (0, 160, 0)), (self.position, (200, 0, 0))):
            for y in range(row * cell, (row + 1) * cell):
                for x in range(col * cell, (col + 1) * cell):
                    image.putpixel((x, y), colour)
        out = io.BytesIO()
        image.save(out, format="PNG")
        return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode("ascii")

    def _observation(self, text: str) -> dict[str, Any]:
        words = f"{text} maze {self._grid()} move up down left right"
        if not self.images:
            return {"role": "user", "content": words}
        return {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": self._png()}}, {"type": "text", "text": words}],
        }

    def init(self, prompt: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        # VisGym renders the first observation itself: the dataset's prompt is a placeholder.
        return [self._observation("start")], {}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        found = _WORD.search(action.lower())
        before = self._distance()
        if found is None:
            self.invalid += 1
            reward = -0.5
        else:
            d_row, d_col = MOVES[found.group(0)]
            row, col = self.position[0] + d_row, self.position[1] + d_col
            if 0 <= row < SIZE and 0 <= col < SIZE:
                self.position = (row, col)
            reward = float(before - self._distance())
        at_goal = self.position == self.goal
        if at_goal:
            reward += 1.0
        done = at_goal or self.turns >= self.max_turns
        observations = [] if done else [self._observation("goal reached" if at_goal else "step")]
        return BaseTextEnvStepOutput(observations=observations, reward=reward, done=done, metadata={"at_goal": at_goal})

    def get_metrics(self) -> dict[str, Any]:
        return {"solved": float(self.position == self.goal), "invalid_actions": float(self.invalid)}
