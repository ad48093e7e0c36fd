#!/usr/bin/env python3
"""CDK app entry point: `cdk synth` / `cdk deploy`.

Configuration: $SKYRL_HP_CONFIG, else ./skyrl-hp.yaml: the one way the CDK app, the cdk8s app and the CLI all read, so the
manifests can never be built from a different file than the stacks.
"""

import json
import os
import sys
from pathlib import Path
from typing import Any

from skyrl_hyperpod.config import ConfigError
from skyrl_hyperpod.config.loader import load_config_with_source, read_lock
from skyrl_hyperpod.config.upstream_lock import lock_status
from skyrl_hyperpod.ops.summary import platform_summary
from skyrl_hyperpod.ops.synth_lookups import credentials_configured, lookup_problem
from skyrl_hyperpod.plumbing.errors import ProblemsError
from skyrl_hyperpod.plumbing.runtime import exit_after_synth, fail, prefer_venv_node
from skyrl_hyperpod.values.stack_outputs import OperatorOutputKey
from skyrl_hyperpod.values.synthesized_manifests import config_fingerprint


def cli_context() -> dict:
    """The context the CDK CLI passes the app (`-c key=value`, cdk.json, cdk.context.json), read where
    aws-cdk-lib's App reads it: $CDK_CONTEXT_JSON, plus the JSON file named by
    $CONTEXT_OVERFLOW_LOCATION_ENV when the context is too large for the environment."""
    overflow = os.environ.get("CONTEXT_OVERFLOW_LOCATION_ENV")
    try:
        context = json.loads(os.environ.get("CDK_CONTEXT_JSON") or "{}")
        if overflow:
            context.update(json.loads(Path(overflow).read_text(encoding="utf-8")))
    except (OSError, ValueError) as error:
        source = f"CDK_CONTEXT_JSON or {overflow}" if overflow else "CDK_CONTEXT_JSON"
        raise ConfigError([f"config error: the CDK context ({source}) is not readable JSON: {error}"]) from None
    if not isinstance(context, dict):
        raise ConfigError(
            [f"config error: the CDK context (CDK_CONTEXT_JSON) is {type(context).__name__}, not an object"]
        )
    return context


def remove_previous_assembly() -> None:
    """The previous cloud assembly's manifest.json, before anything can fail: a synth that fails leaves no cdk.out
    the CDK CLI (`cdk deploy --app cdk.out`) or `skyrl-hp review` would take for this configuration's. The CDK CLI
    names the directory in $CDK_OUTDIR; without it aws-cdk-lib writes to a fresh temporary directory."""
    outdir = os.environ.get("CDK_OUTDIR")
    if outdir:
        (Path(outdir) / "manifest.json").unlink(missing_ok=True)


def add_config_fingerprint_output(platform: Any, config: Any) -> None:
    """Which configuration this deploy is: `cdk deploy --outputs-file` and `skyrl-hp outputs` carry it into
    outputs.json, and the cdk8s app stamps it on the manifests it synthesizes from that file. On the network
    stack: every deploy has it, and it changes nothing else there."""
    import aws_cdk as cdk

    cdk.CfnOutput(
        platform.network,
        OperatorOutputKey.CONFIG_FINGERPRINT.value,
        value=config_fingerprint(config),
        description="Fingerprint of the skyrl-hp configuration this platform was deployed from",
    )


def main() -> None:
    remove_previous_assembly()
    # Both checks run before aws-cdk-lib and its Node process start: bad input fails in a fraction of a second.
    try:
        if "config" in cli_context():
            raise ConfigError(
                [
                    "config error: -c config=FILE is not supported; set SKYRL_HP_CONFIG=FILE (the cdk8s app and the CLI read only that)"
                ]
            )
        config, source = load_config_with_source(None)
        for line in platform_summary(config, source):
            print(line, file=sys.stderr)
        if lock_warning := lock_status(config, read_lock()).synth_warning():
            print(lock_warning, file=sys.stderr)
        problem = lookup_problem(config, cli_context(), config.env.account is None or credentials_configured())
        if problem:
            raise ConfigError([problem])
    except ProblemsError as error:  # the configuration, or the image build context its tag is computed from
        fail(error.problems)
    prefer_venv_node()
    import aws_cdk as cdk

    from stacks import build_platform

    app = cdk.App()
    try:
        # Constructs re-check what only exists once CDK has allocated it (e.g. subnet CIDRs).
        platform = build_platform(app, config)
    except ProblemsError as error:
        fail(error.problems)
    add_config_fingerprint_output(platform, config)
    app.synth()
    exit_after_synth()


if __name__ == "__main__":
    main()
