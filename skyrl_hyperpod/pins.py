"""Pins the Makefile reads from the configuration (it cannot import it): `python -m skyrl_hyperpod.pins skyrl`
prints the pip requirements of the configured SkyRL release, which it installs with --no-deps (the offline
override check and the drill)."""

from __future__ import annotations

import sys

from .config import ConfigError, load_config


def main(argv: list[str]) -> int:
    if argv != ["skyrl"]:
        print("usage: python -m skyrl_hyperpod.pins skyrl", file=sys.stderr)
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
