"""What the `skyrl-hp` subcommands do, as plain functions with typed results.

The click package (`skyrl_hyperpod.cli`) only parses arguments, calls these and prints; these modules
never print, exit or import click.
"""
