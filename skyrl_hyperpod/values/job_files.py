"""The files the RayJob runs: docker/train_job.py and the package beside it (docker/skyrl_hp_job), read at synth time
and shipped in one ConfigMap that the Ray head mounts as a directory, so a knob change never needs an image rebuild.
No cdk8s here: k8s_app.py reads them before it starts cdk8s's Node process."""

from __future__ import annotations

from pathlib import Path

from ..plumbing.errors import InputError
from ..plumbing.locations import DOCKER_DIR

# The RayJob's entry script; the package it imports sits beside it (sys.path[0] is the script's directory).
JOB_SCRIPT_NAME = "train_job.py"
JOB_PACKAGE = "skyrl_hp_job"


def read_job_files(docker_dir: Path = DOCKER_DIR) -> dict[str, str]:
    """{path in the mount: text}: the entry script, then the package's modules, at the paths they have under
    docker/. A missing script or package is an input error, not a manifest without them."""
    script, package = docker_dir / JOB_SCRIPT_NAME, docker_dir / JOB_PACKAGE
    for path, what in ((script, "training script"), (package / "__init__.py", "training package")):
        if not path.is_file():
            raise InputError([f"charts error: {what} {str(path)!r} is missing (the RayJob runs it)"])
    paths = [script, *sorted(package.glob("*.py"))]
    return {path.relative_to(docker_dir).as_posix(): path.read_text(encoding="utf-8") for path in paths}


def config_map_key(path: str) -> str:
    """The ConfigMap key of the file at `path` in the mount: keys cannot hold '/'
    (https://kubernetes.io/docs/concepts/configuration/configmap/), the volume's items map each key back to its path."""
    return path.replace("/", ".")
