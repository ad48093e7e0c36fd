#!/usr/bin/env python3
"""The pip requirements of the configured SkyRL release, for the Makefile (which cannot import the configuration).

    .venv/bin/python -m tools.skyrl_pins            # from the checkout root
    .venv/bin/python -m tools.skyrl_pins --visgym   # what the image installs beside VisGym

prints `skyrl==X skyrl-gym==Y` (training_image.skyrl_release), which the Makefile installs with --no-deps into the
validation venv (the offline override check) and the drill's environment; with --visgym, `pygame==Z`
(training_image.pygame_version), which the drill's environment installs with VisGym as the image does.
"""

from __future__ import annotations

import sys

from skyrl_hyperpod.config import ConfigError, load_config


def main(argv: list[str]) -> int:
    if argv not in ([], ["--visgym"]):
        print("usage: python -m tools.skyrl_pins [--visgym]", file=sys.stderr)
        return 2
    try:
        image = load_config(None).training_image
    except ConfigError as error:
        print("\n".join(error.problems), file=sys.stderr)
        return 2
    if argv:
        print(f"pygame=={image.pygame_version}")
    else:
        print(f"skyrl=={image.skyrl_release.version} skyrl-gym=={image.skyrl_release.skyrl_gym}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
