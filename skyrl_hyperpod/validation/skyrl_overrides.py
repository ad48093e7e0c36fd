"""SkyRL's dotted `key=value` overrides checked by SkyRL's own config dataclasses.

SkyRL publishes its trainer as the PyPI package `skyrl`; the version checked is the release the training
image builds (`training_image.skyrl_version`, config/version_lock.py), which the Makefile installs with --no-deps.
Its config module (skyrl.train.config) imports without torch next to omegaconf, skyrl-gym (also --no-deps),
pandas, loguru, func_timeout and requests. skyrl 0.4.0 declares Python >= 3.12 and this project's tooling runs
on 3.11: the config module imports there (the Makefile installs it with --ignore-requires-python); the training
code that needs 3.12 runs in the drill (`make drill`). Parsing goes through
`SkyRLTrainConfig.from_cli_overrides`, which rejects unknown keys, the `+` prefix and removed keys. One step
cannot run here: the top-level `__post_init__` ends by importing the training backends (torch) for a runtime
tweak (forcing enforce_eager off with LoRA), so that import failure alone is tolerated.

SkyRL's batch-size rule (`validate_batch_sizes` in skyrl/train/utils/utils.py) lives in a module
that imports torch and Ray at the top, so it is not imported: its own source is read from the
installed package and executed (it needs only `math`). The same goes for the rule SkyRL applies at every
step, which `validate_batch_sizes` does not cover: `RayPPOTrainer._remove_tail_data` (skyrl/train/trainer.py)
trims the step's `train_batch_size` prompts to a multiple of its data-parallel stride, and
`compute_prompt_mini_batch_boundaries` (skyrl/train/dataset/preprocess.py) asserts that `train_batch_size`
remain; both run here on the prompt ids of one step.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import typing
from collections.abc import Callable
from functools import lru_cache
from importlib import metadata, util
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Protocol

from ..config.version_lock import DEFAULT_SKYRL_VERSION, SKYRL_RELEASES

CHECK_NAME = "SkyRL override check with SkyRL's config classes"
SKYRL_VERSION = DEFAULT_SKYRL_VERSION
_INSTALL = f"pip install --no-deps --ignore-requires-python skyrl=={SKYRL_VERSION} skyrl-gym=={SKYRL_RELEASES[SKYRL_VERSION].skyrl_gym}"
_BACKENDS_MODULE = "skyrl.backends"
_BATCH_RULE_MODULE = "skyrl.train.utils.utils"
_BATCH_RULE_FUNCTION = "validate_batch_sizes"
_TRAINER_MODULE = "skyrl.train.trainer"
_TRAINER_CLASS = "RayPPOTrainer"
_TAIL_TRIM_METHOD = "_remove_tail_data"
_PREPROCESS_MODULE = "skyrl.train.dataset.preprocess"
_MINI_BATCH_BOUNDARIES_FUNCTION = "compute_prompt_mini_batch_boundaries"

# SkyRL ships no type information (pyproject's mypy overrides): what this module calls on it, typed here.
BatchSizeRule = Callable[[object], object]
TailTrim = Callable[[object, list[Any]], list[Any]]
MiniBatchBoundaries = Callable[[list[str], int, int, bool, int], object]


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
        skyrl_step_rule_functions()
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


def _function_from_source(
    module: str, name: str, namespace: dict[str, object], *, in_class: str | None = None
) -> Callable[..., Any]:
    """SkyRL's function (or a method's plain function) `name` of `module`, compiled from the installed source
    into `namespace`, without importing the module (SkyRL's training modules import torch and Ray)."""
    package = util.find_spec("skyrl.train")
    if package is None or not package.submodule_search_locations:
        raise ImportError("skyrl.train is not installed")
    path = Path(package.submodule_search_locations[0], *module.split(".")[2:]).with_suffix(".py")
    body = ast.parse(path.read_text(encoding="utf-8")).body
    if in_class is not None:
        body = [n for c in body if isinstance(c, ast.ClassDef) and c.name == in_class for n in c.body]
    found: list[ast.stmt] = [node for node in body if isinstance(node, ast.FunctionDef) and node.name == name]
    if len(found) != 1:
        raise ImportError(f"{path}: no single function {name}")
    exec(compile(ast.Module(body=found, type_ignores=[]), str(path), "exec"), namespace)
    function = namespace[name]
    if not callable(function):
        raise ImportError(f"{path}: {name} is not a function")
    return function


@lru_cache(maxsize=1)
def skyrl_batch_size_rule() -> BatchSizeRule:
    """SkyRL's own `validate_batch_sizes(cfg)`, compiled from the installed package's source."""
    from skyrl.train.config import SkyRLTrainConfig

    namespace: dict[str, object] = {"math": math, "SkyRLTrainConfig": SkyRLTrainConfig}
    return _function_from_source(_BATCH_RULE_MODULE, _BATCH_RULE_FUNCTION, namespace)


@lru_cache(maxsize=1)
def skyrl_step_rule_functions() -> tuple[TailTrim, MiniBatchBoundaries]:
    """SkyRL's own `RayPPOTrainer._remove_tail_data(self, entries)` and
    `compute_prompt_mini_batch_boundaries(uids, mini, train, is_stepwise, n)`, compiled from the installed source."""
    typing_names = {name: getattr(typing, name) for name in ("Any", "Dict", "List", "Optional", "Tuple", "Union")}
    trim = _function_from_source(
        _TRAINER_MODULE, _TAIL_TRIM_METHOD, {"math": math, **typing_names}, in_class=_TRAINER_CLASS
    )
    boundaries = _function_from_source(_PREPROCESS_MODULE, _MINI_BATCH_BOUNDARIES_FUNCTION, dict(typing_names))
    return trim, boundaries


def _lcm_data_parallel(config: Any) -> int:
    """The data-parallel size `WorkerDispatch.get_lcm_dp_size` returns for an FSDP run (policy, and the
    reference model when the KL loss or KL reward uses it), from the placement as `validate_batch_sizes`
    derives it."""
    trainer, placement = config.trainer, config.trainer.placement
    dp = placement.policy_num_nodes * placement.policy_num_gpus_per_node // trainer.policy.sequence_parallel_size
    if trainer.algorithm.use_kl_loss or trainer.algorithm.use_kl_in_reward:
        ref = placement.ref_num_nodes * placement.ref_num_gpus_per_node // trainer.ref.sequence_parallel_size
        dp = math.lcm(dp, ref)
    return int(dp)


def run_skyrl_first_step_rule(config: Any) -> None:
    """One training step's prompt bookkeeping through SkyRL's own functions: the dataloader's
    `train_batch_size` prompts (drop_last), trimmed by `_remove_tail_data`, split into mini-batches by
    `compute_prompt_mini_batch_boundaries`. Raises SkyRL's AssertionError where a real step would."""
    trim, boundaries = skyrl_step_rule_functions()
    lcm = _lcm_data_parallel(config)
    trainer = SimpleNamespace(cfg=config, dispatch=SimpleNamespace(get_lcm_dp_size=lambda: lcm))
    train, n = config.trainer.train_batch_size, config.generator.n_samples_per_prompt
    kept = trim(trainer, [f"prompt-{i}" for i in range(train)])
    uids = [prompt for prompt in kept for _ in range(n)]
    try:
        boundaries(uids, config.trainer.policy_mini_batch_size, train, False, n)
    # Trimmed to no prompt at all, SkyRL's function fails on the empty list (IndexError) rather than its assertion.
    except (AssertionError, IndexError) as exc:
        detail = " ".join(str(exc).split())
        raise AssertionError(
            f"train_batch_size {train} prompts trimmed to {len(kept)} on {lcm} data-parallel ranks with "
            f"n_samples_per_prompt {n}, then {type(exc).__name__}{': ' + detail if detail else ''}"
        ) from exc


def _raised_importing_backends(exc: BaseException) -> bool:
    traceback = exc.__traceback__
    while traceback is not None:
        module = traceback.tb_frame.f_globals.get("__name__", "")
        if module == _BACKENDS_MODULE or module.startswith(_BACKENDS_MODULE + "."):
            return True
        traceback = traceback.tb_next
    return isinstance(exc, ImportError) and (exc.name or "").startswith(_BACKENDS_MODULE)


def parse_skyrl_overrides(overrides: list[str]) -> Any:
    """SkyRL's typed configuration from `key=value` overrides, as SkyRL's own entry point builds it
    (`SkyRLTrainConfig.from_cli_overrides`); SkyRL's errors propagate."""
    return _offline_config_class().from_cli_overrides(list(overrides))


def skyrl_override_problems(overrides: list[str]) -> tuple[list[str], str | None]:
    """(problems, reason the check was skipped or None)."""
    malformed = [o for o in overrides if "=" not in o]
    if malformed:
        return [f"override {o!r}: expected key=value" for o in malformed], None
    reason = unavailable_reason()
    if reason is not None:
        return [], reason
    try:
        config = parse_skyrl_overrides(overrides)
    except Exception as exc:  # SkyRL reports every rule as ValueError/TypeError/omegaconf errors
        message = " ".join(str(exc).split())
        return [f"SkyRL overrides: {type(exc).__name__}: {message}"], None
    try:
        skyrl_batch_size_rule()(config)
    except AssertionError as exc:
        message = " ".join(str(exc).split())
        return [f"SkyRL batch sizes ({_BATCH_RULE_FUNCTION}): {message}"], None
    try:
        run_skyrl_first_step_rule(config)
    except AssertionError as exc:
        message = " ".join(str(exc).split())
        return [
            f"SkyRL batch sizes at step 1 ({_TAIL_TRIM_METHOD}, {_MINI_BATCH_BOUNDARIES_FUNCTION}): {message}"
        ], None
    return [], None
