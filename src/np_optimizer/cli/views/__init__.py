"""How np shows a view record: one registry of renderers (base.py), one module per kind of view (report.py,
layers.py), found by package discovery. Commands pick a renderer by view and format and call `render`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from np_optimizer.cli.views.base import RENDERERS, renderer

__all__ = ["render", "renderer"]


def render(view: str, fmt: str, record: Any, target: Path | None = None) -> Path | None:
    """Print `record` in `fmt` (table, json, plain), or write it to `target` (html, junit) and return the path."""
    return RENDERERS.get(f"{view}/{fmt}")(record, target)

