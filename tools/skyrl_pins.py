#!/usr/bin/env python3
"""The pip requirements of the configured SkyRL release, for the Makefile (which cannot import the configuration).

    .venv/bin/python -m tools.skyrl_pins      # from the checkout root

prints `skyrl==X skyrl-gym==Y` (training_image.skyrl_release), which the Makefile installs with --no-deps into the
validation venv (the offline override check) and the drill's environment.
"""

from __future__ import annotations

import sys

from skyrl_hyperpod.config import ConfigError, load_config


def main(argv: list[str]) -> int:
    if argv:
        print("usage: python -m tools.skyrl_pins (no arguments)", file=sys.stderr)
        return 2
    try:
        release = load_config(None).training_image.skyrl_release
    except ConfigError as error:
        print("\n".join(error.problems), file=sys.stderr)
        return 2
    print(f"skyrl=={release.version} skyrl-gym=={release.skyrl_gym}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
