"""The drill's GPU boundary and CPU stand-ins, loaded by every Python process of the drill's Ray nodes: the nodes'
PYTHONPATH holds this directory (drill/training_cluster.py SITE_DIR), so Python's `site` imports this module at
start-up, and the package beside it, `drill_site`, is importable in the driver, the Ray workers and the vLLM engine
processes alike. Outside the drill (no HP_DRILL_BOUNDARY) it does nothing. In the drill it installs one import hook
(drill_site.import_hook) that patches SkyRL's modules as they are imported; what each patch stands in for is in its
module of drill_site (its __init__ lists them)."""

from __future__ import annotations

import os
import sys

if os.environ.get("HP_DRILL_BOUNDARY") == "1":
    from drill_site.import_hook import PatchOnImport

    sys.meta_path.insert(0, PatchOnImport())
