#!/usr/bin/env python3
"""Compile docker/requirements-image.in into docker/requirements-image.txt with hashes (`make image-requirements`;
needs PyPI). Run it when the .in, the configured Ray or pygame, or constraints-drill.txt change; commit the result.

Ray and pygame come from the configuration (training_image.ray_version, pygame_version) as extra constraints, the
rest of the training environment's pins from constraints-drill.txt; the target is the image's platform and Python
(x86_64 Linux, the base image's 3.12). The image installs the file with `uv pip install --require-hashes`
(https://docs.astral.sh/uv/pip/compile/#locking-requirements).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from skyrl_hyperpod.config import ConfigError, load_config
from skyrl_hyperpod.plumbing.locations import CHECKOUT_ROOT, DOCKER_DIR

SOURCE = DOCKER_DIR / "requirements-image.in"
TARGET = DOCKER_DIR / "requirements-image.txt"
CONSTRAINTS = CHECKOUT_ROOT / "constraints-drill.txt"
PYTHON_VERSION = "3.12"
PLATFORM = "x86_64-manylinux_2_28"


# mlflow-skinny caps cachetools (<8) and importlib_metadata (<10), and sagemaker-mlflow's botocore python-dateutil
# (<3): those three are resolved for the image, not taken from the drill's pins (the drill's environment, which has
# no sagemaker-mlflow, pins cachetools and importlib_metadata within mlflow-skinny's caps).
DRILL_PINS_RELAXED = ("cachetools", "importlib_metadata", "python-dateutil")


def configured_pins() -> list[str]:
    image = load_config(None).training_image
    return [
        f"ray=={image.ray_version}",
        f"pygame=={image.pygame_version}",
        f"mlflow-skinny=={image.mlflow_version}",
        f"sagemaker-mlflow=={image.sagemaker_mlflow_version}",
    ]


def image_constraints() -> list[str]:
    """constraints-drill.txt without the pins MLflow's packages cannot take."""
    lines = CONSTRAINTS.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.split("==")[0].strip() not in DRILL_PINS_RELAXED]


def main() -> int:
    try:
        pins = configured_pins()
    except ConfigError as error:
        print("\n".join(error.problems), file=sys.stderr)
        return 2
    # Relative paths, run from the checkout: uv names its inputs in the file's `# via` comments.
    configured = Path(".build/image-configured-pins.txt")
    (CHECKOUT_ROOT / configured).parent.mkdir(exist_ok=True)
    (CHECKOUT_ROOT / configured).write_text("\n".join(pins) + "\n", encoding="utf-8")
    drill = Path(".build/image-drill-constraints.txt")
    (CHECKOUT_ROOT / drill).write_text("\n".join(image_constraints()) + "\n", encoding="utf-8")
    command = [
        *(str(Path(sys.executable).with_name("uv")), "pip", "compile", "--quiet", "--generate-hashes"),
        *("--python-version", PYTHON_VERSION, "--python-platform", PLATFORM),
        *("--custom-compile-command", "make image-requirements", "--annotation-style", "line"),
        *("-c", str(drill), "-c", str(configured), relative(SOURCE), "-o", relative(TARGET)),
    ]
    return subprocess.run(command, cwd=CHECKOUT_ROOT, check=False).returncode


def relative(path: Path) -> str:
    return str(path.relative_to(CHECKOUT_ROOT))


if __name__ == "__main__":
    sys.exit(main())
