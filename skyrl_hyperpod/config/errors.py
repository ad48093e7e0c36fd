"""The configuration's error: what the loader, the sections and the stacks raise for a bad configuration value.

A problem with any other input (the training script, the KubeRay CRDs, the stack outputs file, the image's build
context) is an `InputError` (skyrl_hyperpod/errors.py): the configuration is fine, a file it points to is not.
"""

from __future__ import annotations

from ..errors import ProblemsError


class ConfigError(ProblemsError):
    """Invalid configuration. `problems` holds one human-readable line per problem."""
