"""Where the pods' paths live on the drill machine, and the prepared state a job finds there.

A pod sees its volumes at their mount paths (/shared, /opt/skyrl-job) and the image's files at image paths
(/home/ray/SkyRL). The drill's Ray nodes are processes on one machine, so each such path is a directory of the
drill's run directory, and every path in what the manifests hand to Ray (the entrypoint, container env values,
the init container's command) is rewritten through `PathMap`: one pass, a prefix only where a path starts.

The job's first step downloads the SFT checkpoint from the Hugging Face hub, which needs the network. The drill makes
its stand-in instead, a tiny random Qwen3-VL (tiny_model.py), where the job's --model-dir maps, and marks it prepared
with train_job.py's own marker, so train_job.py checks it as it checks the real one and goes on. Everything else is
the real thing: the image's SkyRL checkout holds SkyRL's own VisGym example (entrypoint.py, env_sft.py, dataset.py,
from the verified copy `skyrl-hp fetch visgym` writes), with which train_job.py generates the datasets itself, and
VisGym is installed in the drill's environment (the Makefile, from the verified copy) as the image installs it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from skyrl_hyperpod.plumbing.upstream import SKYRL_VISGYM_EXAMPLE_PATH

from .manifests import Manifests

# Makes the SFT checkpoint's stand-in: (model directory, the job's VisGym environment id).
ModelMaker = Callable[[Path, str], None]


@dataclass(frozen=True)
class PathMap:
    """Container path -> drill directory."""

    mounts: dict[str, Path]

    def __post_init__(self) -> None:
        for prefix in self.mounts:
            if not prefix.startswith("/") or prefix.endswith("/"):
                raise ValueError(f"{prefix!r}: a mount path is absolute, without a trailing '/'")

    @property
    def _pattern(self) -> re.Pattern[str]:
        alternatives = "|".join(re.escape(prefix) for prefix in sorted(self.mounts, key=len, reverse=True))
        # A path starts at the beginning, after whitespace or after = ' " [ , ( and ends at / or a non-name character.
        return re.compile(rf"(?<![\w./-])({alternatives})(?![\w.-])")

    def text(self, text: str) -> str:
        if not self.mounts:
            return text
        return self._pattern.sub(lambda match: str(self.mounts[match.group(1)]), text)

    def path(self, container_path: str) -> Path:
        mapped = self.text(container_path)
        if mapped == container_path:
            raise ValueError(f"{container_path!r} is under no mount of the drill ({', '.join(sorted(self.mounts))})")
        return Path(mapped)


def pod_mounts(template: dict[str, Any], run_dir: Path, manifests: Manifests) -> dict[str, Path]:
    """The Ray container's volume mounts as drill directories: a PersistentVolumeClaim is one directory shared by
    every node (ReadWriteMany), a ConfigMap is written out with its keys as files, and /dev/shm stays the machine's
    (Ray's object store)."""
    spec = template.get("spec", {})
    volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
    container = spec["containers"][0]
    mounts: dict[str, Path] = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        if mount["mountPath"] == "/dev/shm":
            continue
        if "persistentVolumeClaim" in volume:
            local = run_dir / "volumes" / "pvc" / volume["persistentVolumeClaim"]["claimName"]
            local.mkdir(parents=True, exist_ok=True)
        elif "configMap" in volume:
            name = volume["configMap"]["name"]
            local = run_dir / "volumes" / "configmap" / name
            write_config_map(manifests.config_map(name), local, volume["configMap"].get("items"))
        elif "emptyDir" in volume:
            local = run_dir / "volumes" / "emptydir" / mount["name"]
            local.mkdir(parents=True, exist_ok=True)
        else:
            raise ValueError(f"volume {mount['name']!r}: the drill maps PVCs, ConfigMaps and emptyDirs only")
        mounts[mount["mountPath"].rstrip("/")] = local
    return mounts


def write_config_map(config_map: dict[str, Any], directory: Path, items: list[dict[str, str]] | None = None) -> None:
    """The ConfigMap's keys as files, or, when the volume lists items, each listed key at its path (as the kubelet
    projects them: https://kubernetes.io/docs/concepts/storage/volumes/#configmap)."""
    directory.mkdir(parents=True, exist_ok=True)
    data = config_map.get("data", {})
    paths = {key: key for key in data} if items is None else {item["key"]: item["path"] for item in items}
    for key, path in paths.items():
        target = directory / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(data[key], encoding="utf-8")


def load_job_package(package: Path) -> ModuleType:
    """The RayJob's job package (the one beside train_job.py), as the ConfigMap holds it, with all its modules: its
    parser and its markers decide what is prepared. Under a name of its own per directory, so the copy in a mount
    and the one in docker/ load side by side (its modules import each other relatively)."""
    name = f"drill_job_{hashlib.sha256(str(package.resolve()).encode()).hexdigest()[:12]}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, package / "__init__.py", submodule_search_locations=[str(package)]
        )
        if spec is None or spec.loader is None:
            raise ValueError(f"{package} is not a Python package")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the class body runs
        spec.loader.exec_module(module)
        for path in sorted(package.glob("*.py")):
            if path.stem != "__init__":
                importlib.import_module(f"{name}.{path.stem}")
    return sys.modules[name]


@dataclass(frozen=True)
class Entrypoint:
    """A RayJob entrypoint, `[env NAME=VALUE ...] python SCRIPT ARGS`."""

    env: dict[str, str]
    script: str
    args: list[str]

    @classmethod
    def parse(cls, text: str) -> Entrypoint:
        words = shlex.split(text)
        env: dict[str, str] = {}
        if words and words[0] == "env":
            words = words[1:]
            while words and "=" in words[0] and not words[0].startswith("-"):
                name, _, value = words.pop(0).partition("=")
                env[name] = value
        if len(words) < 2 or words[0] != "python":
            raise ValueError(f"entrypoint {text[:80]!r}...: expected `[env NAME=VALUE ...] python SCRIPT ...`")
        return cls(env=env, script=words[1], args=words[2:])


def prepare_job_state(
    entrypoint: Entrypoint, train_job: ModuleType, skyrl_dir: Path, example_dir: Path, make_model: ModelMaker
) -> dict[str, Any]:
    """The image's SkyRL checkout at --skyrl-dir with SkyRL's VisGym example (from `example_dir`, the verified copy)
    and the SFT checkpoint's stand-in, made once and marked prepared with train_job.py's own marker; train_job.py
    generates the datasets. Returns what was prepared."""
    options = train_job.options.parse_args(entrypoint.args)
    if Path(options.skyrl_dir) != skyrl_dir:
        raise ValueError(f"--skyrl-dir {options.skyrl_dir} is not the drill's SkyRL checkout {skyrl_dir}")
    write_example_checkout(example_dir, skyrl_dir)
    made = not train_job.prepare.model_ready(options)
    if made:
        shutil.rmtree(options.model_dir, ignore_errors=True)
        make_model(Path(options.model_dir), options.env_id)
        train_job.prepare._write_marker(options.model_dir, options.model_inputs)
    if not train_job.prepare.model_ready(options):
        raise RuntimeError("train_job.py does not see the drill's checkpoint stand-in as prepared")
    return {"model_dir": str(options.model_dir), "made": made, "env_id": options.env_id}


def write_example_checkout(example_dir: Path, skyrl_dir: Path) -> None:
    """SkyRL's examples/train/visgym, as the image's checkout holds it (the modules import each other as
    `examples.train.visgym.*`, from the checkout on PYTHONPATH)."""
    target = skyrl_dir / SKYRL_VISGYM_EXAMPLE_PATH
    if target.is_dir():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(example_dir / SKYRL_VISGYM_EXAMPLE_PATH, target)


def image_env(
    dockerfile: Path, build_args: dict[str, str], skip: Iterable[str] = ("PATH", "VIRTUAL_ENV")
) -> dict[str, str]:
    """The training image's final ENV (docker/Dockerfile's ENV instructions, ${NAME} from the build arguments and
    earlier ENV), without the names the drill's own environment provides."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text(encoding="utf-8"))
    values = dict(build_args)
    env: dict[str, str] = {}
    for line in text.splitlines():
        keyword, _, rest = line.strip().partition(" ")
        if keyword.upper() != "ENV":
            continue
        for item in shlex.split(rest):
            name, _, value = item.partition("=")
            value = re.sub(r"\$\{(\w+)\}", lambda match: values.get(match.group(1), ""), value)
            values[name] = env[name] = value
    return {name: value for name, value in env.items() if name not in set(skip)}
