#!/usr/bin/env python3
"""Regenerate the pages built from the code (`make docs`): docs/cli.md from the click command tree, and the failure
cost blocks of docs/failures.md and README.md from the configured training runs and the price book.

    .venv/bin/python -m tools.generate_docs      # from the checkout root

tests/test_docs.py and tests/test_failure_docs.py fail while one of them is stale. (docs/configuration.md comes from
`skyrl-hp config reference`, the same text a user prints.)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from skyrl_hyperpod.ops import failure_cost
from skyrl_hyperpod.plumbing.locations import CHECKOUT_ROOT
from tools import cli_reference


def replace_block(text: str, begin: str, end: str, block: str) -> str:
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(text):
        raise ValueError(f"no {begin!r} ... {end!r} block")
    return pattern.sub(lambda _: block, text)


def write_failure_costs(paths: list[Path]) -> None:
    costs = failure_cost.default_costs()
    for path in paths:
        text = path.read_text(encoding="utf-8")
        if failure_cost.BEGIN in text:
            text = replace_block(text, failure_cost.BEGIN, failure_cost.END, failure_cost.render_table(costs))
        if failure_cost.README_BEGIN in text:
            text = replace_block(
                text, failure_cost.README_BEGIN, failure_cost.README_END, failure_cost.render_summary(costs)
            )
        path.write_text(text, encoding="utf-8")


def main() -> int:
    (CHECKOUT_ROOT / "docs" / "cli.md").write_text(cli_reference.render(), encoding="utf-8")
    write_failure_costs([CHECKOUT_ROOT / "docs" / "failures.md", CHECKOUT_ROOT / "README.md"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
