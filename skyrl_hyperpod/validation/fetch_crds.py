"""Download the KubeRay v1.7.0 CRDs (and Karpenter's NodePool CRD) that validation reads, and verify their sha256 sums.

    skyrl-hp fetch crds --dest ~/.cache/kuberay-crds/v1.7.0
    export KUBERAY_CRDS_DIR=~/.cache/kuberay-crds/v1.7.0

Files come from the pinned release tag on GitHub; a file whose checksum differs is deleted and the
command fails, so a moved tag or a tampered download is never used.
"""

from __future__ import annotations

import hashlib
import os
import urllib.request
from pathlib import Path

from ..plumbing.upstream import KARPENTER_TAG, KUBERAY_TAG
from . import karpenter
from .crds import KUBERAY_KINDS

RAW_URL = "https://raw.githubusercontent.com/ray-project/kuberay/{tag}/ray-operator/config/crd/bases/{file}"
TIMEOUT_S = 60

# Tests replace this with an opener that serves local files.
opener: urllib.request.OpenerDirector = urllib.request.build_opener()


def fetch_crds(dest: Path) -> list[Path]:
    """Download every CRD into `dest`; raises ValueError (one line per problem) on any mismatch."""
    files = [(RAW_URL.format(tag=KUBERAY_TAG, file=k.file_name), k.file_name, k.sha256) for k in KUBERAY_KINDS.values()]
    return _fetch_verified(dest, files, f"KubeRay {KUBERAY_TAG}")


def fetch_karpenter_crds(dest: Path) -> list[Path]:
    """Download Karpenter's NodePool CRD at the pinned release into `dest`, the same way."""
    files = [
        (karpenter.RAW_URL.format(tag=KARPENTER_TAG, file=k.file_name), k.file_name, k.sha256)
        for k in karpenter.KARPENTER_KINDS.values()
    ]
    return _fetch_verified(dest, files, f"Karpenter {KARPENTER_TAG}")


def _fetch_verified(dest: Path, files: list[tuple[str, str, str]], release: str) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    written, problems = [], []
    for url, file_name, sha256 in files:
        target = dest / file_name
        try:
            with opener.open(url, timeout=TIMEOUT_S) as response:
                data = response.read()
        except OSError as exc:  # URLError and HTTPError are OSErrors
            problems.append(f"fetch_crds: cannot download {url}: {getattr(exc, 'reason', exc)}")
            continue
        actual = hashlib.sha256(data).hexdigest()
        if actual != sha256:
            target.unlink(missing_ok=True)
            problems.append(
                f"fetch_crds: {url} has sha256 {actual}, expected {sha256} ({release}); "
                f"refused, {target.name} not written"
            )
            continue
        partial = target.with_suffix(target.suffix + ".part")
        partial.write_bytes(data)
        os.replace(partial, target)
        written.append(target)
    if problems:
        raise ValueError("\n".join(problems))
    return written
