"""`python -m skyrl_hyperpod.cli`: the same as `skyrl-hp`."""

from .main import main

main()
