#!/usr/bin/env python3
"""Entry point of the SkyRL VisGym GRPO RayJob (runs on the Ray head, inside the training image): what it does is the
skyrl_hp_job package beside this script (its docstring has the steps)."""

from __future__ import annotations

import sys

from skyrl_hp_job.main import main

if __name__ == "__main__":
    sys.exit(main())
