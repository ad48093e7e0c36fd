#!/usr/bin/env python3
"""CDK app entry point: `cdk synth` / `cdk deploy`. Configuration: `-c config=FILE` or $SKYRL_HP_CONFIG."""

from skyrl_hyperpod.runtime import fail, prefer_venv_node

prefer_venv_node()

import aws_cdk as cdk  # noqa: E402

from skyrl_hyperpod.config import ConfigError, load_config  # noqa: E402
from stacks import build_platform  # noqa: E402


def main() -> None:
    app = cdk.App()
    try:
        config = load_config(app.node.try_get_context("config"))
        # Constructs re-check what only exists once CDK has allocated it (e.g. subnet CIDRs).
        build_platform(app, config)
    except ConfigError as error:
        fail(error.problems)
    app.synth()


if __name__ == "__main__":
    main()
