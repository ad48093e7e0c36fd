"""Download the HyperPod dependencies chart at a commit, once, and verify every file's sha256.

    skyrl-hp fetch hyperpod-chart --dest ~/.cache/hyperpod-helm-chart
    export HYPERPOD_CHARTS_DIR=~/.cache/hyperpod-helm-chart

Reads GitHub's archive of the commit (aws/sagemaker-hyperpod-cli), keeps helm_chart/HyperPodHelmChart
and writes it to DEST/<commit>/ only when every file matches the sha256 list this project ships for
that commit (chart_sums/<commit>.sha256) and no file is missing or extra (verified_archive.py). Anything
else is refused and nothing is written, so a moved or tampered archive is never used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ..plumbing.upstream import HYPERPOD_CHART_PATH
from . import verified_archive
from .hyperpod_chart import chart_archive, commit_dir


def fetch_chart(commit: str, dest: Path) -> Path:
    """DEST/<commit> after a verified download; ValueError (one line per problem) otherwise."""
    spec = chart_archive(commit)
    if spec is None:
        raise ValueError(
            f"fetch_hyperpod_chart: no sha256 list for commit {commit} in this project "
            "(skyrl_hyperpod/validation/chart_sums/): refused"
        )
    return verified_archive.fetch(spec, dest)


def ensure_chart(commit: str, dest: Path, *, if_missing: bool = False) -> tuple[Literal["present", "fetched"], Path]:
    """Fetch and verify the chart at `commit` into `dest/<commit>`; with `if_missing`, a copy already there
    is verified instead. Raises InputError (a copy that fails its sums), ValueError (a refused download)
    or OSError (an unwritable `dest`)."""
    if if_missing and (dest / commit / HYPERPOD_CHART_PATH / "Chart.yaml").is_file():
        commit_dir(commit, dest)
        return "present", dest / commit
    return "fetched", fetch_chart(commit, dest)
