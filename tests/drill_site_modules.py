"""The drill's site package (drill/site/drill_site) as the drill's processes import it: drill/site/ on sys.path (their
PYTHONPATH), the package as `drill_site`. Tests of the stand-ins load them through `site_module`."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

from drill.training_cluster import SITE_DIR


def site_module(name: str) -> ModuleType:
    """`drill_site.<name>`, the package found through drill/site/ on sys.path as in the drill's processes (only while
    it is imported: its modules are then found through the package, and sys.path stays the tests')."""
    if "drill_site" not in sys.modules:
        sys.path.insert(0, str(SITE_DIR))
        try:
            importlib.import_module("drill_site")
        finally:
            sys.path.remove(str(SITE_DIR))
    return importlib.import_module(f"drill_site.{name}")


def load_sitecustomize() -> ModuleType:
    """drill/site/sitecustomize.py run once more in this process (as `site` runs it at a process's start), with
    drill_site imported first: drill/site/ is not on this process's sys.path."""
    site_module("import_hook")
    spec = importlib.util.spec_from_file_location("drill_sitecustomize", SITE_DIR / "sitecustomize.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
