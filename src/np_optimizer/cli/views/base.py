"""The registry of renderers: every way np prints or writes a view record, keyed `<view>/<format>`.

    @renderer("report", "plain")
    def plain(record: ReportRecord, target: Path | None) -> Path | None: ...

Views: `report` (ReportRecord: table, json, plain, html, junit), `layers` (LayersRecord: np report --layers) and
`compare` (CompareRecord: np compare). A renderer prints to stdout (target None) or writes the file `target` and
returns its path. A new format is one decorated function in a module of this package (found by package discovery).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from np_optimizer.errors import UsageError
from np_optimizer.registry import Registry

__all__ = ["Renderer", "RENDERERS", "renderer"]

Renderer = Callable[[Any, "Path | None"], "Path | None"]
# Unknown formats fail with NP-RPT-400 (exit 2), as before the registry was generic.
RENDERERS: Registry[Renderer] = Registry("output format", package="np_optimizer.cli.views", code="NP-RPT-400",
                                         error=UsageError)


def renderer(view: str, fmt: str) -> Callable[[Renderer], Renderer]:
    def register(function: Renderer) -> Renderer:
        return RENDERERS.register(f"{view}/{fmt}", function)

    return register
