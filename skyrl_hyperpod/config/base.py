"""Base types every configuration section shares: the strict model and the validated string types."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

COMMIT = re.compile(r"^[0-9a-f]{40}$")
# A repository the git Helm installer can download a commit of (GitHub's archive URL).
GITHUB_REPOSITORY_PATTERN = r"^https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"


class StrictModel(BaseModel):
    """Base for every configuration model: immutable, unknown keys rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)


def commit_id(value: str) -> str:
    if not COMMIT.fullmatch(value):
        raise ValueError("must be a full 40-character lowercase git commit id (never a branch or tag)")
    return value


CommitId = Annotated[str, AfterValidator(commit_id)]


def cidr(value: str) -> str:
    try:
        return str(ipaddress.IPv4Network(value))
    except ValueError as exc:
        raise ValueError(f"must be an IPv4 CIDR such as 10.0.0.0/16 ({exc})") from None


Cidr = Annotated[str, AfterValidator(cidr)]
