"""SkyRL's dotted `key=value` overrides checked by SkyRL's own config dataclasses.

SkyRL publishes its trainer as the PyPI package `skyrl`; the version checked is the release the training
image builds (`training_image.skyrl_version`, config/versions.py), which the Makefile installs with --no-deps.
Its config module (skyrl.train.config) imports without torch next to omegaconf, skyrl-gym (also --no-deps),
pandas, loguru, func_timeout and requests. skyrl 0.4.0 declares Python >= 3.12 and this project's tooling runs
on 3.11: the config module imports there (the Makefile installs it with --ignore-requires-python); the training
code that needs 3.12 runs in the drill (`make drill`). Parsing goes through
`SkyRLTrainConfig.from_cli_overrides`, which rejects unknown keys, the `+` prefix and removed keys. One step
cannot run here: the top-level `__post_init__` ends by importing the training backends (torch) for a runtime
tweak (forcing enforce_eager off with LoRA), so that import failure alone is tolerated.

SkyRL's batch-size rule (`validate_batch_sizes` in skyrl/train/utils/utils.py) lives in a module
that imports torch and Ray at the top, so it is not imported: its own source is read from the
installed package and executed (it needs only `math`).
"""

from __future__ import annotations

import ast
import dataclasses
import math
from collections.abc import Callable
from functools import lru_cache
from importlib import metadata, util
from pathlib import Path
from typing import Protocol

from ..config.versions import DEFAULT_SKYRL_VERSION, SKYRL_RELEASES

CHECK_NAME = "SkyRL override check with SkyRL's config classes"
SKYRL_VERSION = DEFAULT_SKYRL_VERSION
_INSTALL = f"pip install --no-deps --ignore-requires-python skyrl=={SKYRL_VERSION} skyrl-gym=={SKYRL_RELEASES[SKYRL_VERSION].skyrl_gym}"
_BACKENDS_MODULE = "skyrl.backends"
_BATCH_RULE_MODULE = "skyrl.train.utils.utils"
_BATCH_RULE_FUNCTION = "validate_batch_sizes"

# SkyRL ships no type information (pyproject's mypy overrides): what this module calls on it, typed here.
BatchSizeRule = Callable[[object], object]


class OverridesParser(Protocol):
    def from_cli_overrides(self, overrides: list[str], /) -> object: ...


def unavailable_reason() -> str | None:
    try:
        installed = metadata.version("skyrl")
    except metadata.PackageNotFoundError:
        return f"skyrl=={SKYRL_VERSION} is not installed ({_INSTALL})"
    if installed != SKYRL_VERSION:
        return f"skyrl {installed} is installed, the training image builds {SKYRL_VERSION} ({_INSTALL})"
    try:
        _offline_config_class()
        skyrl_batch_size_rule()
    except (ImportError, OSError, ValueError) as exc:
        return f"skyrl {installed} is installed but skyrl.train.config does not import here ({exc})"
    return None


@lru_cache(maxsize=1)
def _offline_config_class() -> OverridesParser:
    from skyrl.train.config import SkyRLTrainConfig

    @dataclasses.dataclass
    class OfflineSkyRLTrainConfig(SkyRLTrainConfig):  # type: ignore[misc]  # SkyRL's classes are untyped (Any)
        def __post_init__(self) -> None:
            try:
                super().__post_init__()
            except Exception as exc:
                if not _raised_importing_backends(exc):
                    raise

    return OfflineSkyRLTrainConfig


@lru_cache(maxsize=1)
def skyrl_batch_size_rule() -> BatchSizeRule:
    """SkyRL's own `validate_batch_sizes(cfg)`, compiled from the installed package's source."""
    from skyrl.train.config import SkyRLTrainConfig

    # Located without importing its package (skyrl.train.utils imports torch in __init__).
    package = util.find_spec("skyrl.train")
    if package is None or not package.submodule_search_locations:
        raise ImportError("skyrl.train is not installed")
    path = Path(package.submodule_search_locations[0], *_BATCH_RULE_MODULE.split(".")[2:]).with_suffix(".py")
    source = path.read_text(encoding="utf-8")
    (function,) = [
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef) and node.name == _BATCH_RULE_FUNCTION
    ]
    namespace: dict[str, object] = {"math": math, "SkyRLTrainConfig": SkyRLTrainConfig}
    exec(compile(ast.Module(body=[function], type_ignores=[]), str(path), "exec"), namespace)
    rule = namespace[_BATCH_RULE_FUNCTION]
    if not callable(rule):
        raise ImportError(f"{path}: {_BATCH_RULE_FUNCTION} is not a function")
    return rule


def _raised_importing_backends(exc: BaseException) -> bool:
    traceback = exc.__traceback__
    while traceback is not None:
        module = traceback.tb_frame.f_globals.get("__name__", "")
        if module == _BACKENDS_MODULE or module.startswith(_BACKENDS_MODULE + "."):
            return True
        traceback = traceback.tb_next
    return isinstance(exc, ImportError) and (exc.name or "").startswith(_BACKENDS_MODULE)


def skyrl_override_problems(overrides: list[str]) -> tuple[list[str], str | None]:
    """(problems, reason the check was skipped or None)."""
    malformed = [o for o in overrides if "=" not in o]
    if malformed:
        return [f"override {o!r}: expected key=value" for o in malformed], None
    reason = unavailable_reason()
    if reason is not None:
        return [], reason
    try:
        config = _offline_config_class().from_cli_overrides(list(overrides))
    except Exception as exc:  # SkyRL reports every rule as ValueError/TypeError/omegaconf errors
        message = " ".join(str(exc).split())
        return [f"SkyRL overrides: {type(exc).__name__}: {message}"], None
    try:
        skyrl_batch_size_rule()(config)
    except AssertionError as exc:
        message = " ".join(str(exc).split())
        return [f"SkyRL batch sizes ({_BATCH_RULE_FUNCTION}): {message}"], None
    return [], None
