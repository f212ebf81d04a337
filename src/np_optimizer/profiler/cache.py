"""Reuse of earlier estimates: a content-addressed cache in the user's cache directory.

The key is the SHA-256 of sorted-key JSON of everything the estimate depends on: the compiled checkpoint's content
hash, the device, runtime and backend, the method, the tool versions, the target profile and the options. Only
estimates are stored (measurements are never reused).

An entry is used only when it reads back as a whole record: UTF-8 JSON, an object whose stored key and schema match,
whose `output` has the shape of a method's output (workspace/shapes.py) and whose artifact files are plain names in
the measurement's folder. Anything else (random bytes, a truncated file, a list, missing or mistyped fields, a folder
in its place) is deleted and treated as a miss, with a warning that names the file and the reason; the next estimate
replaces it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from np_optimizer.files import CorruptFileError, cache_root, read_json, remove_path, write_json
from np_optimizer.workspace.shapes import json_kind, shape_problem

__all__ = ["cache_root", "cache_key", "EstimateCache", "CacheLookup"]

CACHE_SCHEMA = 1
_log = logging.getLogger("np.Profiler")


def cache_key(fields: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps({"schema": CACHE_SCHEMA, **fields}, sort_keys=True).encode()).hexdigest()


@dataclass
class CacheLookup:
    payload: dict[str, Any] | None
    warning: str | None = None


class EstimateCache:
    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or cache_root()) / "estimates"

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> CacheLookup:
        path = self.path(key)
        if not path.exists() and not path.is_symlink():
            return CacheLookup(None)
        try:
            entry = read_json(path)
        except CorruptFileError as exc:
            return CacheLookup(None, self.discard(key, exc.reason))
        except OSError as exc:  # unreadable, a dangling link, a loop of links
            return CacheLookup(None, self.discard(key, f"cannot be read: {exc.strerror or exc}"))
        problem = entry_problem(entry, key)
        if problem:
            return CacheLookup(None, self.discard(key, problem))
        return CacheLookup(entry)

    def discard(self, key: str, reason: str) -> str:
        """Delete a corrupt entry (the next estimate replaces it); returns the warning that says so."""
        path = self.path(key)
        exc = remove_path(path)
        if exc is not None:  # the next put() fails on it too; say so instead of failing the round
            return (f"A corrupt cached estimate ({path}: {reason}) could not be removed ({exc.strerror or exc}); "
                    "estimating again without the cache. Delete it by hand.")
        return f"A corrupt cached estimate ({path}) was discarded ({reason}); estimating again."

    def put(self, key: str, fields: dict[str, Any], output: dict[str, Any], files: dict[str, str]) -> Path | None:
        """Store an estimate with the text of its artifact files, so a reuse can restore them. A cache that cannot be
        written (a file or folder in the way, a full disk) costs the reuse only: warned, never a failed round."""
        path = self.path(key)
        try:
            for folder in (self.root, path.parent):  # a damaged cache: a file where a folder belongs
                if folder.exists() and not folder.is_dir():
                    folder.unlink()
            if path.is_dir() and not path.is_symlink():  # or a folder where the entry belongs
                shutil.rmtree(path)
            write_json(path, {"schema": CACHE_SCHEMA, "key": key, "fields": fields, "output": output, "files": files})
        except OSError as exc:
            _log.warning(f"The estimate could not be stored in the cache ({path}: {exc.strerror or exc}); it will be "
                         f"estimated again next time. Check or delete {self.root}.")
            return None
        return path

def _output_fields() -> tuple[type, frozenset[str]]:
    from np_optimizer.profiler.request import MethodOutput

    # cached_at: when it was stored; status and error: entries written before np 0.2
    return MethodOutput, frozenset(f.name for f in dataclasses.fields(MethodOutput)) | {"cached_at", "status", "error"}


def entry_problem(entry: dict[str, Any], key: str) -> str | None:
    """Why a parsed entry cannot be reused as the estimate of `key`, or None."""
    if entry.get("schema") != CACHE_SCHEMA:
        return f"schema {entry.get('schema')!r}, this np reads {CACHE_SCHEMA}"
    if entry.get("key") != key:
        return "its stored key does not match its file name"
    output = entry.get("output")
    if not isinstance(output, dict):
        return f"output is {json_kind(output)}, not a mapping"
    record, known = _output_fields()
    unknown = sorted(set(output) - known)
    if unknown:
        return f"output has unknown field(s) {', '.join(map(str, unknown))}"
    problem = shape_problem(record, output, "output")
    if problem:
        return problem
    files = entry.get("files", {})
    problem = shape_problem(dict[str, str], files, "files")
    if problem:
        return problem
    for name in output.get("artifacts", {}).values():
        if Path(name).name != name or name in ("", ".", ".."):
            return f"artifact file '{name}' is not a plain file name"
    return None
