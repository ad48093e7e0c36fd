"""The upstream lock (`upstream-lock.yaml` at the repository root): what each third-party input the deployment pulls
by a movable name resolved to, the first time a maintainer with registry access ran `skyrl-hp image lock`.

A tag, a branch or a git tag can be moved by whoever controls the upstream; a digest or a commit cannot. So the
configuration keeps readable names (`serving_image.image: ...:serve-llm-cuda-v1.0`) and this file records, once, what
each name meant: images by manifest digest (the OCI distribution spec's `Docker-Content-Digest`), SkyRL's release tag
by commit, the SFT checkpoint's Hugging Face repository by the commit of its default branch. The loader fills the
configuration's pin fields from it (`apply_lock`), so the manifests run `name:tag@sha256:...` (the digest decides what
is pulled, https://github.com/opencontainers/image-spec/blob/main/descriptor.md#digests), the image builds FROM the
base's digest and fetches SkyRL by commit, and train_job.py downloads the checkpoint at the recorded revision.
A value the configuration pins itself (a `@sha256:` image, base_image_digest, skyrl_ref, model_revision) wins.

An entry may exist unresolved (`null`): the name is known to be used but nobody with registry access has resolved
it yet. Synthesis then keeps the name, says so in one warning line, and preflight fails; a name with no entry at all
is refused at synthesis with the command that adds it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, cast

import yaml
from pydantic import BaseModel, Field

from ..plumbing.errors import ConfigError
from ..plumbing.locations import CHECKOUT_ROOT
from .base import CommitId, StrictModel

if TYPE_CHECKING:
    from .project import ProjectConfig

LOCK_FILE = CHECKOUT_ROOT / "upstream-lock.yaml"
LOCK_COMMAND = "skyrl-hp image lock"
Digest = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]
LockSection = Literal["images", "git_tags", "huggingface"]


class UpstreamLock(StrictModel):
    """Reference -> what it resolved to (null: known, not resolved yet)."""

    images: dict[str, Digest | None] = Field(
        default_factory=dict, description="Image reference (name[:tag]) -> manifest digest."
    )
    git_tags: dict[str, CommitId | None] = Field(
        default_factory=dict, description="`<repository URL>@<tag>` -> the commit the tag points at."
    )
    huggingface: dict[str, CommitId | None] = Field(
        default_factory=dict, description="Hugging Face model repository -> the commit of its default branch."
    )

    def entries(self) -> dict[tuple[LockSection, str], str | None]:
        return {
            **{("images", key): value for key, value in self.images.items()},
            **{("git_tags", key): value for key, value in self.git_tags.items()},
            **{("huggingface", key): value for key, value in self.huggingface.items()},
        }


@dataclass(frozen=True)
class Pin:
    """One movable name the configuration uses and does not pin itself, and the field a resolved value goes into."""

    section: LockSection
    key: str
    field: str  # the configuration field that names it, for messages
    target: str = ""  # the field the resolved value pins (dotted path); the image's own field when empty
    as_image: bool = False  # the value is the image reference with `@<digest>` appended

    def describe(self) -> str:
        return f"{self.field} {self.key}"

    def pinned(self, value: str) -> tuple[str, str]:
        """(dotted field, value) that pins this name in the configuration."""
        return (self.field, f"{self.key}@{value}") if self.as_image else (self.target, value)


def git_tag_key(repository: str, tag: str) -> str:
    return f"{repository}@{tag}"


def required_pins(config: ProjectConfig) -> list[Pin]:
    """The movable names this configuration pulls and does not pin itself, in a stable order."""
    pins: list[Pin] = []
    for field, image in (
        ("serving_image.image", config.serving_image.image),
        ("serving.publish.image", config.serving.publish.image),
    ):
        if "@" not in image:
            pins.append(Pin("images", image, field, as_image=True))
    training_image = config.training_image
    if training_image.base_image_digest is None:
        base = training_image.base_image
        pins.append(Pin("images", base, "training_image.base_image", "training_image.base_image_digest"))
    if training_image.skyrl_ref is None:
        key = git_tag_key(training_image.skyrl_repository, training_image.skyrl_tag)
        pins.append(Pin("git_tags", key, "training_image.skyrl_version", "training_image.skyrl_ref"))
    if config.training.data.model_revision is None:
        repo = config.training.data.model_repo
        pins.append(Pin("huggingface", repo, "training.data.model_repo", "training.data.model_revision"))
    return pins


@dataclass(frozen=True)
class LockStatus:
    """Which of a configuration's movable names the lock leaves open."""

    path: Path
    missing: tuple[Pin, ...]
    unresolved: tuple[Pin, ...]

    def refusals(self) -> list[str]:
        """One line per name with no entry: synthesis refuses these."""
        return [
            f"lock error: {pin.describe()} is not in {self.path.name}: run `{LOCK_COMMAND}` with registry access "
            "and commit the file (or pin it in the configuration)"
            for pin in self.missing
        ]

    def synth_warning(self) -> str | None:
        """For the synthesizing apps: ConfigError naming every name without an entry, else the warning line."""
        if self.missing:
            raise ConfigError(self.refusals())
        return self.warning()

    def warning(self) -> str | None:
        """The one line synthesis prints while entries are unresolved."""
        if not self.unresolved:
            return None
        return (
            f"warning: {len(self.unresolved)} upstream name(s) unresolved in {self.path.name}, pulled by name "
            f"(`{LOCK_COMMAND}`; preflight fails and lists them)"
        )


def lock_status(config: ProjectConfig, lock: UpstreamLock, path: Path = LOCK_FILE) -> LockStatus:
    entries = lock.entries()
    pins = required_pins(config)
    missing = tuple(pin for pin in pins if (pin.section, pin.key) not in entries)
    unresolved = tuple(
        pin for pin in pins if (pin.section, pin.key) in entries and entries[pin.section, pin.key] is None
    )
    return LockStatus(path, missing, unresolved)


LOCK_HEADER = f"""\
# Written by `{LOCK_COMMAND}` (registry access needed); checked by `{LOCK_COMMAND} --check`. What each movable
# upstream name the deployment pulls resolved to; null = known, not resolved yet (synth warns, preflight fails).
# skyrl_hyperpod/config/upstream_lock.py explains the file.
"""


def render_lock(lock: UpstreamLock) -> str:
    body = yaml.safe_dump(lock.model_dump(), sort_keys=True, default_flow_style=False, width=1000)
    return LOCK_HEADER + body


def write_lock(lock: UpstreamLock, path: Path = LOCK_FILE) -> None:
    """Whole or not at all: a temporary file beside it, renamed over it."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(render_lock(lock), encoding="utf-8")
    os.replace(temporary, path)


def merged(lock: UpstreamLock, resolved: Iterable[tuple[Pin, str | None]]) -> UpstreamLock:
    """`lock` with each pin's entry set; an entry resolved before is not replaced by null."""
    sections: dict[LockSection, dict[str, str | None]] = {
        "images": dict(lock.images),
        "git_tags": dict(lock.git_tags),
        "huggingface": dict(lock.huggingface),
    }
    for pin, value in resolved:
        if value is not None or sections[pin.section].get(pin.key) is None:
            sections[pin.section][pin.key] = value
    return UpstreamLock.model_validate(sections)


def _with_field(model: BaseModel, path: list[str], value: str) -> BaseModel:
    head, *rest = path
    return model.model_copy(update={head: _with_field(getattr(model, head), rest, value) if rest else value})


def apply_lock(config: ProjectConfig, lock: UpstreamLock) -> ProjectConfig:
    """`config` with every resolved entry in its pin field; names without one stay as configured. For a configuration
    fresh from validation (the loader's): model_copy keeps values a cached property already computed."""
    entries = lock.entries()
    for pin in required_pins(config):
        value = entries.get((pin.section, pin.key))
        if value is not None:
            field, pinned = pin.pinned(value)
            config = cast("ProjectConfig", _with_field(config, field.split("."), pinned))
    return config
