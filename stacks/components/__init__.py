"""Reusable constructs that the stacks compose."""
