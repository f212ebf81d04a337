"""Versions of the tools behind every number, read from package metadata (no heavy imports)."""

from __future__ import annotations

import functools
from importlib import metadata

__all__ = ["tool_version", "np_version"]


@functools.cache
def tool_version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def np_version() -> str:
    from np_optimizer import __version__

    return __version__
