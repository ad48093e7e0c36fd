"""`python -m skyrl_hyperpod.validation [DIR] [--deployable]`: validate synthesized manifests.

Reads every *.yaml / *.yml / *.json under DIR (default dist/, what `cdk8s synth` writes), prints
one line per problem and exits 1 if there is any (0 otherwise). Skipped checks are printed as
SKIPPED lines. With --deployable, placeholder stack outputs are problems too.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from typing import Any

from ..config import ConfigError, load_config
from ..errors import ProblemsError
from ..manifests import read_manifest_documents
from ..runtime import fail

def read_manifests(directory: Path) -> list[Any]:
    """All documents of the manifest files under `directory`, in file-name order."""
    try:
        return [document.content for document in read_manifest_documents(directory, prefix="validation error")]
    except ProblemsError as error:
        raise ConfigError(error.problems) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m skyrl_hyperpod.validation", description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", default="dist", type=Path, help="synthesized manifests (default: dist)")
    parser.add_argument("--config", type=Path, default=None, help="project configuration file (default: as load_config)")
    parser.add_argument("--crds-dir", type=Path, default=None, help="KubeRay v1.7.0 CRDs (default: $KUBERAY_CRDS_DIR)")
    parser.add_argument("--deployable", action="store_true", help="also fail on placeholder stack outputs")
    args = parser.parse_args(argv)

    from . import deployability_problems, validation_report

    try:
        config = load_config(args.config)
        docs = read_manifests(args.directory)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # skipped checks are printed below, once
            problems, skipped = validation_report(docs, config=config, crds_dir=args.crds_dir)
    except ConfigError as exc:
        fail(exc.problems, code=1)
    if args.deployable:
        problems += deployability_problems(docs)
    for line in skipped:
        print(line, file=sys.stderr)
    for line in problems:
        print(line)
    if problems:
        return 1
    print(f"{len(docs)} manifests in {args.directory} are valid{' and deployable' if args.deployable else ''}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
