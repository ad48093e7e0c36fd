#!/usr/bin/env python3
"""CDK app entry point: `cdk synth` / `cdk deploy`.

Configuration: $SKYRL_HP_CONFIG, the one way the CDK app, the cdk8s app and the CLI all read, so the
manifests can never be built from a different file than the stacks.
"""

from skyrl_hyperpod.config import ConfigError, load_config
from skyrl_hyperpod.runtime import exit_after_synth, fail, prefer_venv_node


def main() -> None:
    # The configuration is checked before aws-cdk-lib and its Node process start: a bad file fails in a
    # fraction of a second.
    try:
        config = load_config(None)
    except ConfigError as error:
        fail(error.problems)
    prefer_venv_node()
    import aws_cdk as cdk

    from stacks import build_platform

    app = cdk.App()
    try:
        if app.node.try_get_context("config") is not None:
            raise ConfigError(
                ["config error: -c config=FILE is not supported; set SKYRL_HP_CONFIG=FILE (the cdk8s app and the CLI read only that)"]
            )
        # Constructs re-check what only exists once CDK has allocated it (e.g. subnet CIDRs).
        build_platform(app, config)
    except ConfigError as error:
        fail(error.problems)
    app.synth()
    exit_after_synth()


if __name__ == "__main__":
    main()
