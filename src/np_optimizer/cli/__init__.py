"""The `np` command line: parses arguments, calls np_optimizer.api, renders. No logic the API lacks."""

from np_optimizer.cli.main import main

__all__ = ["main"]
