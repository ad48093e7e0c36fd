"""Download the HyperPod dependencies chart at a commit, once, and verify every file's sha256.

    skyrl-hp fetch hyperpod-chart --dest ~/.cache/hyperpod-helm-chart
    export HYPERPOD_CHARTS_DIR=~/.cache/hyperpod-helm-chart

Reads GitHub's archive of the commit (aws/sagemaker-hyperpod-cli), keeps helm_chart/HyperPodHelmChart
and writes it to DEST/<commit>/ only when every file matches the sha256 list this project ships for
that commit (chart_sums/<commit>.sha256) and no file is missing or extra. Anything else is
refused and nothing is written, so a moved or tampered archive is never used.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
import urllib.request
from pathlib import Path
from typing import Literal

from ..plumbing.upstream import HYPERPOD_CHART_PATH
from .hyperpod_chart import commit_dir, sums_for

ARCHIVE_URL = "https://codeload.github.com/aws/sagemaker-hyperpod-cli/tar.gz/{commit}"
TIMEOUT_S = 120

# Tests replace this with an opener that serves a local archive.
opener: urllib.request.OpenerDirector = urllib.request.build_opener()


def chart_files(archive: bytes) -> dict[str, bytes]:
    """{path below the repository root: content} of every regular file under HYPERPOD_CHART_PATH."""
    files = {}
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar.getmembers():
            # GitHub archives hold one top folder, <repository>-<commit>/.
            _, _, inside = member.name.partition("/")
            if not inside.startswith(f"{HYPERPOD_CHART_PATH}/"):
                continue
            if member.issym() or member.islnk():
                raise ValueError(f"fetch_hyperpod_chart: {inside} is a link in the archive: refused")
            if member.isfile():
                extracted = tar.extractfile(member)
                files[inside] = extracted.read() if extracted else b""
    return files


def fetch_chart(commit: str, dest: Path) -> Path:
    """DEST/<commit> after a verified download; ValueError (one line per problem) otherwise."""
    sums = sums_for(commit)
    if sums is None:
        raise ValueError(
            f"fetch_hyperpod_chart: no sha256 list for commit {commit} in this project "
            "(skyrl_hyperpod/validation/chart_sums/): refused"
        )
    url = ARCHIVE_URL.format(commit=commit)
    try:
        with opener.open(url, timeout=TIMEOUT_S) as response:
            archive = response.read()
    except OSError as exc:  # URLError and HTTPError are OSErrors
        raise ValueError(f"fetch_hyperpod_chart: cannot download {url}: {getattr(exc, 'reason', exc)}") from None
    try:
        files = chart_files(archive)
    except tarfile.TarError as exc:
        raise ValueError(f"fetch_hyperpod_chart: {url} is not a gzip tar archive ({exc}): refused") from None
    problems = [
        f"fetch_hyperpod_chart: {name} has sha256 {hashlib.sha256(data).hexdigest()}, expected {sums[name]}: refused"
        for name, data in sorted(files.items())
        if name in sums and hashlib.sha256(data).hexdigest() != sums[name]
    ]
    problems += [
        f"fetch_hyperpod_chart: {name} is missing from {url}: refused" for name in sorted(set(sums) - set(files))
    ]
    problems += [
        f"fetch_hyperpod_chart: {name} is not in the sha256 list: refused" for name in sorted(set(files) - set(sums))
    ]
    if problems:
        raise ValueError("\n".join(problems))
    target = dest / commit
    dest.mkdir(parents=True, exist_ok=True)
    # Written beside the target and renamed: a reader never sees half a chart.
    staging = Path(tempfile.mkdtemp(prefix=f".{commit}-", dir=dest))
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


def ensure_chart(commit: str, dest: Path, *, if_missing: bool = False) -> tuple[Literal["present", "fetched"], Path]:
    """Fetch and verify the chart at `commit` into `dest/<commit>`; with `if_missing`, a copy already there
    is verified instead. Raises InputError (a copy that fails its sums), ValueError (a refused download)
    or OSError (an unwritable `dest`)."""
    if if_missing and (dest / commit / HYPERPOD_CHART_PATH / "Chart.yaml").is_file():
        commit_dir(commit, dest)
        return "present", dest / commit
    return "fetched", fetch_chart(commit, dest)
