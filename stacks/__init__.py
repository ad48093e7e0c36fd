"""The CDK app's stacks. `build_platform` is the one place that composes them and wires references."""

from .compose import PlatformStacks, build_platform

__all__ = ["PlatformStacks", "build_platform"]
