"""Shared code of the SkyRL-on-HyperPod project: configuration, stack outputs, helpers."""
