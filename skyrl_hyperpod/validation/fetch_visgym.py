"""VisGym's environments and SkyRL's VisGym example at the commits `make drill` runs, downloaded once and verified.

    skyrl-hp fetch visgym --dest DIR       # DIR/visgym/<commit>/ and DIR/skyrl-visgym-example/<commit>/
    export UPSTREAM_SOURCES_DIR=DIR

The layout is the one of the `../shared` folder beside a checkout, which is used when it holds the same files
(the Makefile's UPSTREAM_SOURCES_DIR). Each copy is GitHub's archive of the commit, kept only when every file
matches this project's sha256 list (upstream_sums/<name>-<commit>.sha256, verified_archive.py); VisGym's copy is
its installable package (setup.py, pyproject.toml, the `gymnasium` folder but its notebooks), SkyRL's the
example's folder and the repository's LICENSE.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..plumbing.errors import InputError
from ..plumbing.locations import default_upstream_dir
from ..plumbing.upstream import (
    SKYRL_REPOSITORY,
    SKYRL_VISGYM_EXAMPLE_COMMIT,
    SKYRL_VISGYM_EXAMPLE_PATH,
    VISGYM_COMMIT,
    VISGYM_REPOSITORY,
)
from . import verified_archive

SOURCES_DIR_ENV_VAR = "UPSTREAM_SOURCES_DIR"
SUMS_DIR = Path(__file__).with_name("upstream_sums")
FETCH_COMMAND = "skyrl-hp fetch visgym --dest DIR"


@dataclass(frozen=True)
class UpstreamCopy:
    """One verified copy: <sources dir>/<name>/<commit>/."""

    name: str
    repository: str
    commit: str
    closed_prefixes: tuple[str, ...] = ()

    def archive(self) -> verified_archive.ArchiveFiles:
        sums = verified_archive.read_sums(SUMS_DIR / f"{self.name}-{self.commit}.sha256")
        if sums is None:
            raise ValueError(f"fetch_visgym: no sha256 list for {self.name} at {self.commit} in this project: refused")
        return verified_archive.ArchiveFiles(
            label="fetch_visgym",
            repository=self.repository,
            commit=self.commit,
            sums=sums,
            closed_prefixes=self.closed_prefixes,
        )

    def directory(self, sources_dir: Path | None = None) -> Path:
        return resolve_sources_dir(sources_dir) / self.name / self.commit


VISGYM = UpstreamCopy("visgym", VISGYM_REPOSITORY, VISGYM_COMMIT)
SKYRL_VISGYM_EXAMPLE = UpstreamCopy(
    "skyrl-visgym-example",
    SKYRL_REPOSITORY,
    SKYRL_VISGYM_EXAMPLE_COMMIT,
    closed_prefixes=(f"{SKYRL_VISGYM_EXAMPLE_PATH}/",),
)
COPIES = (VISGYM, SKYRL_VISGYM_EXAMPLE)


def resolve_sources_dir(sources_dir: Path | None = None) -> Path:
    if sources_dir is not None:
        return sources_dir
    if os.environ.get(SOURCES_DIR_ENV_VAR):
        return Path(os.environ[SOURCES_DIR_ENV_VAR])
    return default_upstream_dir(VISGYM.name).parent


def verified_copy(copy: UpstreamCopy, sources_dir: Path | None = None) -> Path:
    """<sources dir>/<name>/<commit>, every listed file present and unchanged; a one-line InputError otherwise."""
    root = copy.directory(sources_dir)
    if not root.is_dir():
        raise InputError(
            [
                f"no copy of {copy.repository} at {copy.commit} in {root.parent} (set ${SOURCES_DIR_ENV_VAR} or run "
                f"`{FETCH_COMMAND}`)"
            ]
        )
    if problem := verified_archive.copy_problem(copy.archive(), root):
        raise InputError([problem])
    return root


def ensure(copy: UpstreamCopy, dest: Path, *, if_missing: bool = False) -> tuple[Literal["present", "fetched"], Path]:
    """The verified copy in dest/<name>/<commit>, downloaded unless `if_missing` finds one there (then verified).
    Raises InputError (a copy that fails its sums), ValueError (a refused download) or OSError (unwritable)."""
    if if_missing and copy.directory(dest).is_dir():
        return "present", verified_copy(copy, dest)
    return "fetched", verified_archive.fetch(copy.archive(), dest / copy.name)
