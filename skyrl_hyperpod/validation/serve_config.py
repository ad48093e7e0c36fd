"""RayService `serveConfigV2` checked with Ray's own schema classes at the serving Ray version.

Ray Serve's deploy schema (ray.serve.schema.ServeDeploySchema) and Ray Serve LLM's LLMConfig
(ray.llm._internal.serve.core.configs.llm_config.LLMConfig, which ray.serve.llm.LLMConfig
subclasses without changes; the public module also imports vLLM, which this check does not need).
Ray is imported lazily, only when a RayService is validated. Ray's deploy schema ignores unknown
keys for forward compatibility, so, like KubeRay's pruning, unknown keys are reported from the
fields Ray's own models declare. A config that passed is remembered on disk (keyed by its text
and the Ray, pydantic and checker versions), so repeated synths skip the Ray import.
"""

from __future__ import annotations

import hashlib
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args, get_origin

from ..plumbing.json_types import JsonObject, JsonPath
from . import cache
from .report import did_you_mean, json_path, show

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

# Ray ships no type information for these (pyproject's mypy overrides); each is a pydantic model class.
RayModels = tuple["type[BaseModel]", "type[BaseModel]", "type[BaseModel]"]
# (model class, (value, JSON path)) for each value a field typed as a model holds.
NestedModels = list[tuple["type[BaseModel]", tuple[Any, JsonPath]]]

CHECK_NAME = "serveConfigV2 check with Ray's schema classes"
LLM_APP_IMPORT_PATHS = ("ray.serve.llm:build_openai_app",)
_CHECKER_VERSION = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def installed_version(distribution: str) -> str | None:
    """The installed version of a distribution, None when it is not installed."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def unavailable_reason(ray_version: str) -> str | None:
    """Why the check cannot run here (None when it can)."""
    installed = installed_version("ray")
    if installed is None:
        return f"ray[serve]=={ray_version} is not installed (pip install -r requirements-dev.txt)"
    if installed != ray_version:
        return f"installed Ray {installed} differs from the serving image's Ray {ray_version}"
    try:
        _ray_models()
    except ImportError as exc:
        return f"Ray {installed} is installed but its Serve schema does not import here ({exc})"
    return None


# Ray LLM imports these when they are installed (`try_import` in ray/llm/_internal/common/utils/download_utils.py
# and serve/core/configs/llm_config.py), for downloads and model configs; the schema classes use neither. With
# the dev requirements' torch installed, importing them costs seconds: most of a cold `cdk8s synth`.
_UNUSED_BY_THE_SCHEMAS = ("torch", "transformers")


@contextmanager
def hidden_unless_loaded(names: tuple[str, ...]) -> Iterator[None]:
    """Imports of these modules fail inside the block (a None entry in sys.modules), unless the process has
    already imported them. Modules imported inside keep what they got: Ray's `try_import` keeps None."""
    hidden = [name for name in names if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # the import system's own "not importable" mark
    try:
        yield
    finally:
        for name in hidden:
            if sys.modules.get(name, "") is None:
                del sys.modules[name]


def _ray_models() -> RayModels:
    import logging

    # Ray LLM logs "Could not import torch/transformers" at import; the schema classes need neither.
    logging.getLogger("ray.llm._internal.common.utils.import_utils").setLevel(logging.ERROR)
    with warnings.catch_warnings(), hidden_unless_loaded(_UNUSED_BY_THE_SCHEMAS):
        warnings.simplefilter("ignore", DeprecationWarning)  # Ray's own pydantic-v1-style Field usage
        from ray.llm._internal.serve.core.configs.llm_config import LLMConfig
        from ray.serve._private.config import DeploymentConfig
        from ray.serve.schema import ServeDeploySchema

    return ServeDeploySchema, LLMConfig, DeploymentConfig


def serve_config_problems(text: Any, ray_version: str) -> tuple[list[str], str | None]:
    """(problems as "<path in serveConfigV2>: <message>", reason the check was skipped or None)."""
    if not isinstance(text, str):
        return [f".: must be a YAML string, got {show(text)}"], None
    key = cache.digest(
        text, ray_version, installed_version("ray") or "", installed_version("pydantic") or "", _CHECKER_VERSION
    )
    if cache.load("serve-config-ok", key) is not None:
        return [], None
    import yaml

    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        return [f".: not valid YAML{where}: {getattr(exc, 'problem', exc)}"], None
    if not isinstance(config, dict):
        return [f".: must be a mapping with 'applications', got {show(config)}"], None
    reason = unavailable_reason(ray_version)
    if reason is not None:
        return [], reason
    problems = _check(config)
    if not problems:
        cache.store("serve-config-ok", key, True)
    return problems, None


def _check(config: JsonObject) -> list[str]:
    from pydantic import ValidationError

    ServeDeploySchema, LLMConfig, DeploymentConfig = _ray_models()
    problems = _unknown_keys(ServeDeploySchema, config, [])
    try:
        ServeDeploySchema.model_validate(config)
    except ValidationError as exc:
        problems += _pydantic_problems(exc, [])
    for app_index, app in enumerate(config.get("applications") or []):
        if not isinstance(app, dict) or app.get("import_path") not in LLM_APP_IMPORT_PATHS:
            continue
        args = app["args"] if isinstance(app.get("args"), dict) else {}
        base: JsonPath = ["applications", app_index, "args", "llm_configs"]
        llm_configs = args.get("llm_configs")
        if not isinstance(llm_configs, list) or not llm_configs:
            problems.append(f"{json_path(base)}: {app['import_path']} needs a non-empty list of LLM configs")
            continue
        for index, llm_config in enumerate(llm_configs):
            where = [*base, index]
            if not isinstance(llm_config, dict):
                problems.append(f"{json_path(where)}: expected an LLMConfig mapping, got {show(llm_config)}")
                continue
            try:
                LLMConfig.model_validate(llm_config)
            except ValidationError as exc:
                problems += _pydantic_problems(exc, where)
            # LLMConfig keeps deployment_config as a dict and checks it with Serve's DeploymentConfig,
            # which ignores unknown keys (a misspelt autoscaling key would be lost).
            deployment = llm_config.get("deployment_config")
            if isinstance(deployment, dict):
                problems += _unknown_keys(DeploymentConfig, deployment, [*where, "deployment_config"])
    return list(dict.fromkeys(problems))


def _pydantic_problems(exc: ValidationError, prefix: JsonPath) -> list[str]:
    lines = []
    for error in exc.errors():
        message = error["msg"]
        cause = (error.get("ctx") or {}).get("error")
        # Ray wraps nested validation failures in "Invalid ...: {value}"; show the underlying reason.
        inner = getattr(cause, "__cause__", None)
        if inner is not None and hasattr(inner, "errors"):
            lines += _pydantic_problems(inner, [*prefix, *error["loc"]])
            continue
        if error["type"] == "extra_forbidden":
            message = "unknown key (Ray's model forbids it)"
        lines.append(f"{json_path([*prefix, *error['loc']])}: {message}")
    return lines


def _unknown_keys(model: type[BaseModel], data: Any, path: JsonPath) -> list[str]:
    """Keys Ray would silently ignore: not declared by a model that does not explicitly allow extras."""
    from pydantic import BaseModel

    if not isinstance(data, dict):
        return []
    extra = model.model_config.get("extra")
    fields = model.model_fields
    names = dict(fields)
    names.update({field.alias: field for field in fields.values() if field.alias})
    problems = []
    for key, value in data.items():
        field = names.get(key)
        if field is None:
            if extra not in ("allow", "forbid"):  # "forbid" is reported by model_validate itself
                problems.append(
                    f"{json_path([*path, key])}: unknown key, Ray would ignore it{did_you_mean(key, fields)}"
                )
            continue
        for nested, item_path in _nested_values(field.annotation, value, [*path, key]):
            if isinstance(nested, type) and issubclass(nested, BaseModel):
                problems += _unknown_keys(nested, item_path[0], item_path[1])
    return problems


def _nested_values(annotation: object, value: Any, path: JsonPath) -> NestedModels:
    """(model class, (value, path)) pairs for fields typed as a model, a list of models or Optional."""
    from pydantic import BaseModel

    origin = get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, (value, path))]
    if origin in (list, tuple) and isinstance(value, list):
        pairs = []
        for arg in get_args(annotation)[:1]:
            for index, item in enumerate(value):
                pairs += _nested_values(arg, item, [*path, index])
        return pairs
    if origin is not None:  # Union / Optional: the first model class among the arguments
        for arg in get_args(annotation):
            pairs = _nested_values(arg, value, path)
            if pairs:
                return pairs
    return []
