"""The values of config/example.yaml that stand for a user's own: addresses from the ranges reserved for
documentation (RFC 5737 for IPv4, RFC 3849 for IPv6) and the example account 111111111111. A configuration that
still holds one would deploy an API endpoint open to nobody's address and a cluster nobody can administer; the
synth apps print one line for each, and `skyrl-hp preflight` fails on them.
"""

from __future__ import annotations

import ipaddress

from .project import ProjectConfig

# https://www.rfc-editor.org/rfc/rfc5737 (TEST-NET-1, -2, -3) and https://www.rfc-editor.org/rfc/rfc3849.
DOCUMENTATION_NETWORKS = tuple(
    ipaddress.ip_network(cidr) for cidr in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
)
EXAMPLE_ACCOUNT = "111111111111"


def _is_documentation_range(cidr: str) -> bool:
    network = ipaddress.ip_network(cidr, strict=False)
    return any(network.version == doc.version and network.overlaps(doc) for doc in DOCUMENTATION_NETWORKS)


def _account_of(arn: str) -> str | None:
    parts = arn.split(":")
    return parts[4] if len(parts) > 5 else None


def placeholder_findings(config: ProjectConfig) -> list[str]:
    """One line per value that is still the example's placeholder, naming the key, the value and what to put."""
    findings = [
        f"eks.public_access_cidrs: {cidr} is in a range reserved for documentation (RFC 5737/3849), the example's "
        "placeholder: put your own egress CIDR, or remove the key for a private endpoint"
        for cidr in config.eks.public_access_cidrs
        if _is_documentation_range(str(cidr))
    ]
    findings += [
        f"eks.admin_principal_arns: {arn} is in the example account {EXAMPLE_ACCOUNT}, a placeholder: put your own "
        "IAM role or user ARN (aws sts get-caller-identity)"
        for arn in config.eks.admin_principal_arns
        if _account_of(arn) == EXAMPLE_ACCOUNT
    ]
    if config.env.account == EXAMPLE_ACCOUNT:
        findings.append(
            f"env.account: {EXAMPLE_ACCOUNT} is the example account, a placeholder: put your own account id or remove "
            "the key"
        )
    return findings
