"""Files of a GitHub repository at a commit, downloaded once and kept only when every file matches the sha256 list
this project ships for that commit; anything else is refused and nothing is written.

Used for the upstream files the project reads but never commits: the HyperPod dependencies chart
(fetch_hyperpod_chart.py) and VisGym with SkyRL's VisGym example (fetch_visgym.py). A copy already on disk (the
`../shared` folder beside a checkout, or an earlier download) is checked against the same list.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ARCHIVE_URL = "https://codeload.github.com/{repository}/tar.gz/{commit}"
TIMEOUT_S = 120

# Tests replace this with an opener that serves a local archive.
opener: urllib.request.OpenerDirector = urllib.request.build_opener()


def read_sums(listing: Path) -> dict[str, str] | None:
    """{relative path: sha256} of a `sha256sum`-style list, None when the file does not exist."""
    if not listing.is_file():
        return None
    sums = {}
    for line in listing.read_text(encoding="utf-8").splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            sums[name.strip()] = digest
    return sums


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class ArchiveFiles:
    """What to keep of a repository's archive: the files of `sums` (paths below the repository root). A file of the
    archive under one of `closed_prefixes` that the list does not name is refused too (a folder copied whole)."""

    label: str  # starts every message, e.g. "fetch_hyperpod_chart"
    repository: str  # owner/name on GitHub
    commit: str
    sums: dict[str, str]
    closed_prefixes: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return ARCHIVE_URL.format(repository=self.repository, commit=self.commit)

    def wanted(self, name: str) -> bool:
        return name in self.sums or any(name.startswith(prefix) for prefix in self.closed_prefixes)


def archive_members(archive: bytes, wanted: Callable[[str], bool], label: str) -> dict[str, bytes]:
    """{path below the repository root: content} of every regular file `wanted` keeps; a link there is refused."""
    files = {}
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar.getmembers():
            # GitHub archives hold one top folder, <repository>-<commit>/.
            _, _, inside = member.name.partition("/")
            if not inside or not wanted(inside):
                continue
            if member.issym() or member.islnk():
                raise ValueError(f"{label}: {inside} is a link in the archive: refused")
            if member.isfile():
                extracted = tar.extractfile(member)
                files[inside] = extracted.read() if extracted else b""
    return files


def problems_of(files: dict[str, bytes], spec: ArchiveFiles) -> list[str]:
    """One line per file that differs from the list, is missing from the archive or is not in the list."""
    label, sums = spec.label, spec.sums
    problems = [
        f"{label}: {name} has sha256 {hashlib.sha256(data).hexdigest()}, expected {sums[name]}: refused"
        for name, data in sorted(files.items())
        if name in sums and hashlib.sha256(data).hexdigest() != sums[name]
    ]
    problems += [f"{label}: {name} is missing from {spec.url}: refused" for name in sorted(set(sums) - set(files))]
    problems += [f"{label}: {name} is not in the sha256 list: refused" for name in sorted(set(files) - set(sums))]
    return problems


def fetch(spec: ArchiveFiles, dest: Path) -> Path:
    """DEST/<commit> after a verified download; ValueError (one line per problem) otherwise."""
    try:
        with opener.open(spec.url, timeout=TIMEOUT_S) as response:
            archive = response.read()
    except OSError as exc:  # URLError and HTTPError are OSErrors
        raise ValueError(f"{spec.label}: cannot download {spec.url}: {getattr(exc, 'reason', exc)}") from None
    try:
        files = archive_members(archive, spec.wanted, spec.label)
    except tarfile.TarError as exc:
        raise ValueError(f"{spec.label}: {spec.url} is not a gzip tar archive ({exc}): refused") from None
    if problems := problems_of(files, spec):
        raise ValueError("\n".join(problems))
    target = dest / spec.commit
    dest.mkdir(parents=True, exist_ok=True)
    # Written beside the target and renamed: a reader never sees half a copy.
    staging = Path(tempfile.mkdtemp(prefix=f".{spec.commit}-", dir=dest))
    try:
        for name, data in files.items():
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def copy_problem(spec: ArchiveFiles, root: Path) -> str | None:
    """The first file of the list that is missing from the copy at `root` or differs from it, as one line."""
    for name, digest in sorted(spec.sums.items()):
        path = root / name
        if not path.is_file() or sha256_of(path) != digest:
            return f"{path} is missing or its sha256 differs from the list for commit {spec.commit}: refused"
    return None
