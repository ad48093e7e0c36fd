"""Where the pods' paths live on the drill machine, and the prepared state a job finds there.

A pod sees its volumes at their mount paths (/shared, /opt/skyrl-job) and the image's files at image paths
(/home/ray/SkyRL). The drill's Ray nodes are processes on one machine, so each such path is a directory of the
drill's run directory, and every path in what the manifests hand to Ray (the entrypoint, container env values,
the init container's command) is rewritten through `PathMap`: one pass, a prefix only where a path starts.

The job's first step downloads the SFT checkpoint from the Hugging Face hub and generates the VisGym datasets,
which needs the network and VisGym. The drill prepares their stand-ins instead, in the format the job expects,
and marks them prepared with train_job.py's own markers, so train_job.py (the ConfigMap's copy) skips to
`exec`-ing SkyRL: a tokenizer-only model directory (SkyRL loads only the tokenizer before the GPU boundary) and
parquet files with the rows SkyRL's examples/train/visgym/dataset.py writes (placeholder prompts: VisGym renders
the real ones while stepping the environment).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import shutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .manifests import Manifests

STANDIN_ENTRYPOINT = Path(__file__).with_name("visgym_entrypoint.py")
VISGYM_ENTRYPOINT = "examples/train/visgym/entrypoint.py"
# The maze environment stand-in, where the stand-in entrypoint registers it from (visgym_entrypoint.STANDIN_ENV).
STANDIN_ENV = Path(__file__).with_name("maze_env.py")
STANDIN_ENV_MODULE = "examples/train/visgym/drill_maze_env.py"


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
            write_config_map(manifests.config_map(name), local)
        elif "emptyDir" in volume:
            local = run_dir / "volumes" / "emptydir" / mount["name"]
            local.mkdir(parents=True, exist_ok=True)
        else:
            raise ValueError(f"volume {mount['name']!r}: the drill maps PVCs, ConfigMaps and emptyDirs only")
        mounts[mount["mountPath"].rstrip("/")] = local
    return mounts


def write_config_map(config_map: dict[str, Any], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for key, value in config_map.get("data", {}).items():
        (directory / key).write_text(value, encoding="utf-8")


def load_train_job(script: Path) -> ModuleType:
    """The RayJob's entry script, as the ConfigMap holds it: its parser and its markers decide what is prepared."""
    spec = importlib.util.spec_from_file_location("drill_train_job", script)
    if spec is None or spec.loader is None:
        raise ValueError(f"{script} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class body runs
    spec.loader.exec_module(module)
    return module


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


def prepare_job_state(entrypoint: Entrypoint, train_job: ModuleType, standin_skyrl_dir: Path) -> dict[str, Any]:
    """Stand-ins for what the job's preparation step would download and generate, marked prepared with
    train_job.py's own markers; the stand-in SkyRL checkout at --skyrl-dir. Returns what was prepared."""
    options = train_job.parse_args(entrypoint.args)
    if Path(options.skyrl_dir) != standin_skyrl_dir:
        raise ValueError(f"--skyrl-dir {options.skyrl_dir} is not the drill's SkyRL checkout {standin_skyrl_dir}")
    write_standin_checkout(standin_skyrl_dir)
    write_standin_tokenizer(Path(options.model_dir))
    train_job._write_marker(options.model_dir, options.model_inputs)
    options.data_dir.mkdir(parents=True, exist_ok=True)
    write_visgym_rows(options.train_data, options.env_id, options.train_rows, seeded=False)
    write_visgym_rows(options.eval_data, options.env_id, options.eval_rows, seeded=True)
    train_job._write_marker(options.data_dir, options.dataset_inputs)
    if not (train_job.model_ready(options) and train_job.datasets_ready(options)):
        raise RuntimeError("train_job.py does not see the drill's stand-ins as prepared")
    return {"model_dir": str(options.model_dir), "train_rows": options.train_rows, "eval_rows": options.eval_rows}


def write_standin_checkout(skyrl_dir: Path) -> None:
    target = skyrl_dir / VISGYM_ENTRYPOINT
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(STANDIN_ENTRYPOINT, target)
    shutil.copyfile(STANDIN_ENV, skyrl_dir / STANDIN_ENV_MODULE)


# The tokenizer stand-in: a word-level tokenizer in the Hugging Face `tokenizers` JSON format with a ChatML
# template (Qwen's turn markers), which AutoTokenizer loads from a directory.
_SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# The maze stand-in's words (maze_env.py): its observations and the four moves a sampled answer is read for.
_MAZE_WORDS = ("start", "step", "goal", "reached", "maze", "you", "free", "move", "up", "down", "left", "right")
_WORDS = ("[UNK]", "system", "user", "assistant", "placeholder", *_MAZE_WORDS)
_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def write_standin_tokenizer(model_dir: Path) -> None:
    model_dir.mkdir(parents=True, exist_ok=True)
    vocab = {token: index for index, token in enumerate((*_SPECIAL_TOKENS, *_WORDS))}
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": vocab[token],
                "content": token,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for token in _SPECIAL_TOKENS
        ],  # fmt: skip
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": "[UNK]",
        "chat_template": _CHAT_TEMPLATE,
    }
    (model_dir / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    (model_dir / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")


def visgym_rows(env_id: str, count: int, *, seeded: bool) -> list[dict[str, Any]]:
    """The rows of SkyRL's VisGym dataset.py: one placeholder prompt per environment episode, seeded for eval."""
    rows: list[dict[str, Any]] = []
    for index in range(count):
        row: dict[str, Any] = {
            "prompt": [{"role": "user", "content": "placeholder"}],
            "env_class": "visgym",
            "visgym_env_id": env_id,
        }
        if seeded:
            row["seed"] = index
        rows.append(row)
    return rows


def write_visgym_rows(path: Path, env_id: str, count: int, *, seeded: bool) -> None:
    pq.write_table(pa.Table.from_pylist(visgym_rows(env_id, count, seeded=seeded)), path)


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
