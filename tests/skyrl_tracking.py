"""SkyRL's tracking module (skyrl/train/utils/tracking.py: Tracking and its MLflow logger), loaded by its file: its
package's __init__ imports the training backends (cloudpathlib, torch distributed, ...), which the test environment
does not carry; the module itself needs only its config classes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import skyrl

_spec = importlib.util.spec_from_file_location(
    "skyrl_tracking", Path(skyrl.__file__).parent / "train" / "utils" / "tracking.py"
)
assert _spec is not None and _spec.loader is not None
tracking = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tracking)
