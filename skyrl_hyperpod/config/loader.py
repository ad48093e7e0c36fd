"""Load the configuration from defaults + an optional YAML file, and report errors in one line each."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import ProblemsError
from .project import ProjectConfig

CONFIG_ENV_VAR = "SKYRL_HP_CONFIG"


class ConfigError(ProblemsError):
    """Invalid configuration. `problems` holds one human-readable line per problem."""


def _location(loc: tuple[Any, ...]) -> str:
    # pydantic appends the validator kind ("function-after[...]") to some locations; drop it.
    parts = [str(p) for p in loc if not (isinstance(p, str) and "[" in p and p.endswith("]"))]
    return ".".join(parts) or "(top level)"


def _describe(error: dict[str, Any], model: type = ProjectConfig) -> str:
    loc = _location(error["loc"])
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return f"config error: {loc}: unknown field (check the spelling; see README 'Configuration reference')"
    if error["type"] == "missing":
        return f"config error: {loc}: required field is missing"
    value = error.get("input")
    # A section-level rule (its input is the whole section, a mapping or an already-built model) names
    # the field and value in its own message.
    if isinstance(value, (dict, BaseModel)):
        return f"config error: {loc}: {message}"
    return f"config error: {loc} = {value!r}: {message}"


def merge_onto_defaults(model: type[BaseModel], data: Any, default: BaseModel | None = None) -> Any:
    """`data` with every nested section completed from its default, so a YAML file names only what it changes.

    pydantic builds a nested section from the given mapping alone: `hyperpod.worker_group: {instance_type: X}`
    would lose the default group's name and count. Here a mapping given for a section whose default is a
    model is laid over that default (recursively); what the default itself was built with is kept unless
    the file overrides it. Lists and scalars replace the default whole. Unknown keys pass through, so
    pydantic still reports them.
    """
    if not isinstance(data, dict):
        return data
    merged: dict[str, Any] = {}
    if default is not None:
        merged = {name: getattr(default, name) for name in default.model_fields_set}
    for name, value in data.items():
        field = model.model_fields.get(name) if isinstance(name, str) else None
        if field is None:
            merged[name] = value
            continue
        base = getattr(default, name) if default is not None else field.get_default(call_default_factory=True)
        if isinstance(base, BaseModel) and isinstance(value, dict):
            value = merge_onto_defaults(type(base), value, base)
        merged[name] = value
    return merged


def validate_config(data: dict[str, Any]) -> ProjectConfig:
    """Build the typed configuration (`data` laid over the defaults) or raise ConfigError listing every problem."""
    try:
        return ProjectConfig.model_validate(merge_onto_defaults(ProjectConfig, data))
    except ValidationError as exc:
        raise ConfigError([_describe(dict(e)) for e in exc.errors(include_url=False)]) from None


def read_yaml(path: str | os.PathLike[str]) -> dict[str, Any]:
    file = Path(path)
    if not file.is_file():
        raise ConfigError([f"config error: file {str(file)!r} does not exist"])
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [f"config error: {file} is not UTF-8 text (byte {exc.start} cannot be decoded): save it as UTF-8 YAML"]
        ) from None
    except OSError as exc:
        raise ConfigError([f"config error: cannot read {file}: {exc.strerror or exc}"]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError([f"config error: {file} is not valid YAML{where}"]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError([f"config error: {file} must hold a mapping at the top level, not {type(data).__name__}"])
    return data


def load_config(path: str | os.PathLike[str] | None = None) -> ProjectConfig:
    """Defaults, overridden by the YAML file at `path` (or $SKYRL_HP_CONFIG when `path` is None)."""
    chosen = path if path is not None else os.environ.get(CONFIG_ENV_VAR) or None
    return validate_config(read_yaml(chosen) if chosen else {})
