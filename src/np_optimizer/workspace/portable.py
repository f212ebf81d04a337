"""Exported records without this machine's folders: `np export --level result` hands report.json, jobs.json, the
configs and the logs to someone else, and they must not name the user's home, workspace, caches or virtual
environment (issue 36). Each such folder becomes a placeholder (`<workspace>`, `<venv>`, ...); the experiment's own
files keep their relative paths, which already say where they are. The records in the experiment itself keep the
real paths: they serve the user on this machine (a cache entry to open, a vela.ini to read).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["MachinePaths", "machine_paths", "portable_stack_trace"]

_FILE_IN_TRACE = re.compile(r'File "([^"]+)"')
# what may follow a folder's path inside a longer text: a separator or anything that cannot be part of a name
_AFTER = r"(?=[/\\\s\"'`:,;()\[\]{}<>|=]|$)"


class MachinePaths:
    """Folders of this machine, each with its placeholder, matched longest first (the experiment before the
    workspace before $HOME) and only as whole path components (/tmp/ab is not /tmp/a + b)."""

    def __init__(self, folders: Iterable[tuple[str | Path, str]]) -> None:
        spelled: dict[str, str] = {}
        for folder, placeholder in folders:
            for text in {str(folder), os.path.realpath(folder)}:  # as given and with its links resolved
                text = text.rstrip("/\\")
                if len(text) > 1 and text not in spelled:  # "/" is every path's start: never a placeholder
                    spelled[text] = placeholder
        self.placeholders = dict(sorted(spelled.items(), key=lambda kv: -len(kv[0])))
        self._pattern = re.compile("|".join(f"({re.escape(text)}){_AFTER}" for text in self.placeholders)) \
            if spelled else None

    def text(self, value: str) -> str:
        if self._pattern is None:
            return value
        return self._pattern.sub(lambda m: self.placeholders[m.group(0)], value)

    def json(self, value: Any) -> Any:
        """A JSON value with every string (keys too) made portable."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.json(v) for v in value]
        if isinstance(value, dict):
            return {self.text(k): self.json(v) for k, v in value.items()}
        return value


def machine_paths(*, experiment: Path, workspace: Path | None, extra: Iterable[tuple[str | Path, str]] = ()) -> MachinePaths:
    """The folders an experiment's records and logs may name: its own, its workspace's, np's caches, the Python
    environment and its interpreter, the temp folder and $HOME (last: the others are often inside it)."""
    from np_optimizer.files import cache_root

    folders: list[tuple[str | Path, str]] = [(experiment, "<experiment>")]
    if workspace is not None:
        folders.append((workspace, "<workspace>"))
    folders += [*extra, (cache_root(), "<np-cache>")]
    if os.environ.get("NP_COMPILE_CACHE_DIR"):
        folders.append((os.environ["NP_COMPILE_CACHE_DIR"], "<np-compile-cache>"))
    folders += [(sys.prefix, "<venv>"), (sys.base_prefix, "<python>"), (sys.exec_prefix, "<venv>"),
                (tempfile.gettempdir(), "<tmp>"), (Path.home(), "~")]
    return MachinePaths(folders)


def portable_stack_trace(paths: MachinePaths, trace: str) -> str:
    """A Python stack trace (a graph node's `stack_trace`, which torch.export keeps and an ETRecord stores) naming no
    folder of this machine: an installed package's file by its path inside site-packages (torch/nn/modules/conv.py),
    a file of the experiment or workspace by its placeholder, any other by its name alone (the model's source may be
    anywhere on the machine, a checkout or a temporary folder)."""
    def portable(match: re.Match[str]) -> str:
        path = match.group(1)
        if not os.path.isabs(path):
            return match.group(0)
        if "site-packages" in Path(path).parts:
            parts = Path(path).parts
            return f'File "{Path(*parts[len(parts) - parts[::-1].index("site-packages"):])}"'
        placed = paths.text(path)
        if placed.startswith(("<experiment>", "<workspace>")):
            return f'File "{placed}"'
        return f'File "{Path(path).name}"'

    return _FILE_IN_TRACE.sub(portable, trace)
