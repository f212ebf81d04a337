"""Reuse of earlier estimates: a content-addressed cache in the user's cache directory.

The key is the SHA-256 of sorted-key JSON of everything the estimate depends on: the compiled checkpoint's content
hash, the device, runtime and backend, the method, the tool versions, the target profile and the options. Only
estimates are stored (measurements are never reused). An entry that does not parse, or whose stored key does not
match its name, is deleted and treated as a miss, with a warning.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from np_optimizer.workspace.files import CorruptFileError, read_json, write_json

__all__ = ["cache_root", "cache_key", "EstimateCache", "CacheLookup"]

CACHE_SCHEMA = 1


def cache_root() -> Path:
    """$NP_CACHE_DIR, else $XDG_CACHE_HOME/np, else ~/.cache/np."""
    if os.environ.get("NP_CACHE_DIR"):
        return Path(os.environ["NP_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "np"


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
        if not path.is_file():
            return CacheLookup(None)
        try:
            entry = read_json(path)
            if entry.get("key") != key or entry.get("schema") != CACHE_SCHEMA or "output" not in entry:
                raise CorruptFileError("entry does not match its key or schema")
        except (CorruptFileError, OSError, AttributeError) as exc:
            return CacheLookup(None, self.discard(key, str(exc)))
        return CacheLookup(entry)

    def discard(self, key: str, reason: str) -> str:
        """Delete a corrupt entry (the next estimate replaces it); returns the warning that says so."""
        path = self.path(key)
        path.unlink(missing_ok=True)
        return f"A corrupt cached estimate ({path}) was discarded ({reason}); estimating again."

    def put(self, key: str, fields: dict[str, Any], output: dict[str, Any], files: dict[str, str]) -> Path:
        """Store an estimate with the text of its artifact files, so a reuse can restore them."""
        path = self.path(key)
        write_json(path, {"schema": CACHE_SCHEMA, "key": key, "fields": fields, "output": output, "files": files})
        return path
