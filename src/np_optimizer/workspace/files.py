"""Atomic, locked JSON files: a crash or two concurrent np processes never leave a half-written or lost record."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["write_json", "write_text", "read_json", "update_json", "file_lock", "CorruptFileError"]


class CorruptFileError(ValueError):
    """A JSON file exists but cannot be parsed."""


def write_text(path: Path, text: str) -> None:
    """Write to a temporary file beside `path`, fsync it, then rename it over `path` (atomic on POSIX)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(path: Path, data: Any) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def read_json(path: Path) -> Any:
    """Read a JSON file; a file that is not valid JSON raises CorruptFileError (never returns half a record)."""
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorruptFileError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno})") from exc


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on `<path>.lock`, shared by every process of the user."""
    lock_path = path.with_name(f".{path.name}.lock")  # hidden: a lock is not a result
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def update_json(path: Path, change: Callable[[Any], Any], *, default: Callable[[], Any] = dict) -> Any:
    """Read-modify-write `path` under its lock; `change` returns the new document, which is written atomically."""
    with file_lock(path):
        current = read_json(path) if path.exists() else default()
        updated = change(current)
        write_json(path, updated)
        return updated
