"""Generate the configuration reference (docs/configuration.md) from the typed model itself.

`skyrl-hp config reference > docs/configuration.md`; a test keeps the file in sync.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any

from pydantic import BaseModel

from .project import ProjectConfig


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " \\| ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(_type_name(a) for a in args)}]"
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation))


def _default(model: BaseModel, name: str) -> str:
    value = getattr(model, name)
    if isinstance(value, BaseModel):
        return ""
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        return f"{len(value)} item(s), see below"
    return json.dumps(value if not isinstance(value, tuple) else list(value))


def _submodel(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _submodel(arg)
        if found:
            return found
    return None


def _rows(model: BaseModel, prefix: str) -> list[str]:
    rows: list[str] = []
    nested: list[tuple[str, BaseModel]] = []
    for name, field in type(model).model_fields.items():
        path = f"{prefix}{name}"
        sub = _submodel(field.annotation)
        value = getattr(model, name)
        if sub is not None and isinstance(value, BaseModel):
            nested.append((path, value))
            continue
        description = (field.description or "").replace("|", "\\|")
        type_name = _type_name(field.annotation)
        default = _default(model, name).replace("|", "\\|")
        rows.append(f"| `{path}` | `{type_name}` | `{default}` | {description} |")
        if sub is not None and isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, BaseModel):
                    nested.append((f"{path}[{index}]", item))
    for path, value in nested:
        doc = (type(value).__doc__ or "").strip().splitlines()
        rows.append(f"| **`{path}`** | section | | {doc[0] if doc else ''} |")
        rows.extend(_rows(value, f"{path}."))
    return rows


TABLE_HEADER = ["| key | type | default | notes |", "|---|---|---|---|"]


def render() -> str:
    """The whole reference: top-level keys first, then one `## <section>` heading (the anchor the
    configuration errors point to) and table per section."""
    config = ProjectConfig()
    header = [
        "# Configuration reference",
        "",
        "Generated from `skyrl_hyperpod/config/` by `skyrl-hp config reference`; do not edit by hand.",
        "Every key is optional: a YAML file names only what it changes (see `config/example.yaml`).",
        "Unknown keys are errors. Defaults reproduce the reference deployment.",
        "",
    ]
    top_level: list[str] = []
    sections: list[str] = []
    for name, field in ProjectConfig.model_fields.items():
        value = getattr(config, name)
        if _submodel(field.annotation) is None or not isinstance(value, BaseModel):
            top_level += _rows_for_field(config, name)
            continue
        doc = (type(value).__doc__ or "").strip().splitlines()
        sections += ["", f"## {name}", ""]
        if doc:
            sections += [doc[0], ""]
        sections += TABLE_HEADER + _rows(value, f"{name}.")
    return "\n".join(header + TABLE_HEADER + top_level + sections) + "\n"


def _rows_for_field(model: BaseModel, name: str) -> list[str]:
    field = type(model).model_fields[name]
    description = (field.description or "").replace("|", "\\|")
    default = _default(model, name).replace("|", "\\|")
    return [f"| `{name}` | `{_type_name(field.annotation)}` | `{default}` | {description} |"]
