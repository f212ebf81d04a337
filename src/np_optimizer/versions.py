"""Versions of the tools behind every number, read from package metadata (no heavy imports).

np's own version is a constant, so `np --version` (and every command) starts without importlib.metadata (about 30 ms
of imports): the metadata is read by `tool_version`, the first time a record names a tool's version."""

from __future__ import annotations

import functools

__all__ = ["NP_VERSION", "tool_version", "np_version"]

NP_VERSION = "0.1.0"  # pyproject.toml's version; np_optimizer.__version__


@functools.cache
def tool_version(distribution: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def np_version() -> str:
    return NP_VERSION
