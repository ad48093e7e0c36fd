"""What `cdk synth` asks AWS for once `env.account` is set, and the one line it needs when it cannot.

With a concrete account the VPC's availability zones come from a CDK context lookup (`availability-zones` provider,
cached in cdk.context.json), which the CDK CLI makes with the account's credentials; without credentials the synth
ends in the CDK's generic "Need to perform AWS calls ... but no credentials have been configured". Without
`env.account` the stacks are environment-agnostic and synthesize offline.
"""

from __future__ import annotations

from typing import Any

from skyrl_hyperpod.config import ProjectConfig

AZ_LOOKUP_PREFIX = "availability-zones:account="


def credentials_configured() -> bool:
    """Whether botocore finds credentials (environment, profile files, SSO, instance metadata): what the CDK CLI's
    lookup would use."""
    import botocore.session

    return botocore.session.get_session().get_credentials() is not None


def lookup_problem(config: ProjectConfig, context: dict[str, Any], has_credentials: bool) -> str | None:
    account = config.env.account
    if not account or has_credentials:
        return None
    if any(str(key).startswith(f"{AZ_LOOKUP_PREFIX}{account}:") for key in context):
        return None  # cdk.context.json already holds the answer: no AWS call
    return (
        f'config error: env.account = "{account}": with an account set, cdk synth asks AWS for its availability '
        "zones (a CDK context lookup) and no AWS credentials are configured: to synthesize offline leave "
        "env.account unset (the stacks then take the deploying credentials' account), or synthesize once with "
        "credentials (cdk.context.json keeps the answer)"
    )
