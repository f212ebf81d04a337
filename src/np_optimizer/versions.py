"""Versions of the tools behind every number, read from package metadata (no heavy imports)."""

from __future__ import annotations

import functools
from importlib import metadata

__all__ = ["NP_VERSION", "tool_version", "np_version"]

NP_VERSION = "0.1.0"  # pyproject.toml's version; np_optimizer.__version__


@functools.cache
def tool_version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def np_version() -> str:
    return NP_VERSION
