"""Load the configuration from defaults + an optional YAML file, and report errors in one line each."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .project import ProjectConfig

CONFIG_ENV_VAR = "SKYRL_HP_CONFIG"


class ConfigError(Exception):
    """Invalid configuration. `problems` holds one human-readable line per problem."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


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
    if isinstance(value, dict):
        return f"config error: {loc}: {message}"
    return f"config error: {loc} = {value!r}: {message}"


def validate_config(data: dict[str, Any]) -> ProjectConfig:
    """Build the typed configuration or raise ConfigError listing every problem."""
    try:
        return ProjectConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError([_describe(e) for e in exc.errors(include_url=False)]) from None


def read_yaml(path: str | os.PathLike[str]) -> dict[str, Any]:
    file = Path(path)
    if not file.is_file():
        raise ConfigError([f"config error: file {str(file)!r} does not exist"])
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
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
