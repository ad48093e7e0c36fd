"""Base types every configuration section shares: the strict model and the validated string types."""

from __future__ import annotations

import ipaddress
import math
import re
import types
import typing
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationInfo, field_validator

COMMIT = re.compile(r"^[0-9a-f]{40}$")
# A repository the git Helm installer can download a commit of (GitHub's archive URL).
GITHUB_REPOSITORY_PATTERN = r"^https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"


class StrictModel(BaseModel):
    """Base for every configuration model: immutable, unknown keys rejected, numbers taken only as written.

    pydantic's lax mode turns `true` into 1 for a whole number and 3.0 or "3" into 3, and accepts YAML's `.inf` and
    `.nan` for a decimal: here a whole number must be written as one, true/false is never a number, and a decimal
    must be finite (`allow_inf_nan`; a literal beyond 1.8e308 reads as infinity). Each number field also has an
    upper bound of its own."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _numbers_as_written(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        problem = number_problem(field.annotation, value) if field is not None else None
        if problem:
            raise ValueError(problem)
        return value


def _scalar_kinds(annotation: Any) -> set[type]:
    """The scalar types `annotation` accepts directly (not inside a list or mapping)."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _scalar_kinds(typing.get_args(annotation)[0])
    if origin is typing.Literal:
        return {type(choice) for choice in typing.get_args(annotation)}
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_scalar_kinds(arg) for arg in typing.get_args(annotation)))
    return {annotation} if annotation in (bool, int, float, str) else set()


def _item_annotation(annotation: Any, value: Any) -> Any:
    """The annotation of `value`'s items when `annotation` is a list, tuple or mapping of scalars, else None."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _item_annotation(typing.get_args(annotation)[0], value)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            item = _item_annotation(arg, value)
            if item is not None:
                return item
        return None
    args = typing.get_args(annotation)
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        return args[1]
    if origin in (list, tuple, set, frozenset) and isinstance(value, (list, tuple)) and args:
        return args[0]
    return None


def number_problem(annotation: Any, value: Any) -> str | None:
    """Why `value` is no number `annotation` takes as written (None: it is, or it is no number): true/false for a
    number, a decimal, or quoted digits for a whole number, and an infinite or NaN decimal anywhere in it."""
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number (YAML reads .inf, .nan and literals beyond 1.8e308 as infinite or NaN)"
    kinds = _scalar_kinds(annotation)
    numeric = kinds & {int, float}
    if isinstance(value, bool) and numeric and bool not in kinds:
        return f"must be {'a number' if float in kinds else 'a whole number'}, not true/false"
    if int in kinds and float not in kinds and str not in kinds and isinstance(value, (float, str)):
        return "must be a whole number written as one (no decimal point, no quotes)"
    item = _item_annotation(annotation, value)
    if item is not None:
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, entry in items:
            problem = number_problem(item, entry)
            if problem:
                return f"{key}: {problem}" if isinstance(value, dict) else f"item {key}: {problem}"
    return None


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


# The tag an image reference gets when it names none; a moving one: the same reference pulls another image tomorrow.
MOVING_IMAGE_TAG = "latest"


def pinned_image(value: str) -> str:
    """An image reference with a tag other than `latest`, or a digest: `registry[:port]/path:tag` or `...@sha256:`."""
    name, at, digest = value.partition("@")
    if at:
        if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest) or not name or re.search(r"\s", name):
            raise ValueError("must end in @sha256: and 64 lowercase hex characters after the image name")
        return value
    last = value.rsplit("/", 1)[-1]  # a registry's port is before the last '/', a tag after it
    tag = last.partition(":")[2]
    if not value or re.search(r"\s", value) or ":" not in last:
        raise ValueError(
            "must name a tag or a digest (repository:tag or repository@sha256:...): without one the image is "
            f"{MOVING_IMAGE_TAG!r}, which moves"
        )
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", tag):
        raise ValueError(f"tag {tag!r} is not a valid image tag (letters, digits, '_', '.', '-'; at most 128)")
    if tag == MOVING_IMAGE_TAG:
        raise ValueError(
            f"must not use the moving {MOVING_IMAGE_TAG!r} tag: name a release tag or pin a digest (@sha256:...)"
        )
    return value


PinnedImage = Annotated[str, AfterValidator(pinned_image)]
