"""A content-addressed store of folders: what the compile cache and the step cache both keep, with their rules once.

An entry is a folder `<root>/<kk>/<key>/` holding files and `entry.json` (the owner's record and the sha256 of every
file). It is filled in a temporary folder and renamed into place, so a reader sees a whole entry or none; when two
writers race, the first rename wins and the other's copy is dropped. A hit is used only when every file's sha256
matches (and the owner's own check passes); anything else (a damaged manifest, a missing or changed file, random
bytes) is removed and treated as a miss, with a warning that names the entry. A store that cannot be written costs
the reuse only: warned, never a failed command.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from np_optimizer.files import CorruptFileError, read_json, remove_path, sha256_file, write_json

__all__ = ["ContentStore", "StoreWords", "StoredEntry", "ENTRY_FILE"]

ENTRY_FILE = "entry.json"
ENTRY_SCHEMA = 1


@dataclass(frozen=True)
class StoreWords:
    """How the owner's warnings name things: 'compile cache', 'compiled program', 'compiling again', ..."""

    store: str  # "compile cache"
    item: str  # "compiled program"
    redo: str  # "compiling again"
    without: str  # "compiling without the cache"
    next_time: str  # "compiled"
    record: str  # "compile record": what a manifest without its record lacks


@dataclass(frozen=True)
class StoredEntry:
    """A verified entry: the owner's record (as stored), where its files are, and their names."""

    key: str
    folder: Path
    record: dict[str, Any]
    files: tuple[str, ...]


@dataclass(frozen=True)
class EntryManifest:
    """One readable entry as a listing sees it (not verified: damaged ones are left for get() to discard)."""

    key: str
    folder: Path
    record: dict[str, Any]
    size_bytes: int
    created_at: float
    last_used_at: float


class ContentStore:
    def __init__(self, root: Path, words: StoreWords, log: logging.Logger,
                 check: Callable[[dict[str, Any], dict[str, str]], str | None] | None = None) -> None:
        """`check(record, files)`: the owner's own reason an intact entry is still not what its record says."""
        self.root, self.words, self._log, self._check = root, words, log, check

    def folder(self, key: str) -> Path:
        return self.root / key[:2] / key

    def get(self, key: str) -> tuple[StoredEntry | None, str | None]:
        """(the verified entry or None, a warning when a damaged entry was discarded)."""
        folder = self.folder(key)
        if not folder.exists() and not folder.is_symlink():
            return None, None
        entry, problem = self._read(folder, key)
        if problem:
            return None, self.discard(key, problem)
        try:
            os.utime(folder / ENTRY_FILE)  # last use, for `np cache prune --older-than`
        except OSError:
            pass
        return StoredEntry(key, folder, dict(entry["record"]), tuple(sorted(entry["files"]))), None

    def put(self, key: str, fill: Callable[[Path], None], record: dict[str, Any],
            known: Mapping[str, str] | None = None) -> Path | None:
        """Store under `key` the files `fill(staging)` copies into an empty folder, with `record`. `known`: the sha256
        of files the caller just wrote and hashed (a checkpoint, a .pte), not read again here; a wrong one makes the
        entry damaged at its first read (a warned miss)."""
        known = known or {}
        final = self.folder(key)
        staging = self.root / f".tmp-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            staging.mkdir(parents=True)
            fill(staging)
            files = {name: known.get(name) or sha256_file(p) for p in sorted(staging.rglob("*"))
                     if p.is_file() and (name := str(p.relative_to(staging)))}
            write_json(staging / ENTRY_FILE, {"schema": ENTRY_SCHEMA, "key": key, "record": record, "files": files,
                                              "created_at": time.time()})
            final.parent.mkdir(parents=True, exist_ok=True)
            if final.exists() and self._read(final, key)[1]:
                shutil.rmtree(final, ignore_errors=True)  # a damaged entry in the way
            try:
                os.rename(staging, final)
            except OSError:  # another process stored the same key first: keep theirs
                return final if final.is_dir() else None
            return final
        except OSError as exc:
            self._log.warning(f"The {self.words.item} could not be stored in the {self.words.store} ({final}: "
                              f"{exc.strerror or exc}); it will be {self.words.next_time} again next time. "
                              f"Check or delete {self.root}.")
            return None
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def discard(self, key: str, reason: str) -> str:
        folder = self.folder(key)
        exc = remove_path(folder)
        if exc is not None:
            return (f"A damaged {self.words.store} entry ({folder}: {reason}) could not be removed "
                    f"({exc.strerror or exc}); {self.words.without}. Delete it by hand.")
        return f"A damaged {self.words.store} entry ({folder}) was discarded ({reason}); {self.words.redo}."

    def manifests(self) -> Iterator[EntryManifest]:
        """Every entry whose manifest reads, in key order."""
        for folder in sorted(self.root.glob("??/*")):
            try:
                entry = read_json(folder / ENTRY_FILE)
                record = entry.get("record") or {}
                if not isinstance(record, dict):
                    continue
                size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
                yield EntryManifest(folder.name, folder, record, size, float(entry.get("created_at") or 0),
                                    (folder / ENTRY_FILE).stat().st_mtime)
            except (CorruptFileError, OSError, TypeError, ValueError):
                continue

    def _read(self, folder: Path, key: str) -> tuple[dict[str, Any], str | None]:
        """The folder's manifest, and why the folder is not a whole, intact entry of `key` (None when it is)."""
        if folder.is_symlink() or not folder.is_dir():
            return {}, "not a folder"
        try:
            entry = read_json(folder / ENTRY_FILE)
        except CorruptFileError as exc:
            return {}, exc.reason
        except OSError as exc:
            return {}, f"{ENTRY_FILE} cannot be read: {exc.strerror or exc}"
        if entry.get("schema") != ENTRY_SCHEMA or entry.get("key") != key:
            return entry, "its manifest is of another schema or key"
        files, record = entry.get("files"), entry.get("record")
        if not isinstance(files, dict) or not isinstance(record, dict) or not files:
            return entry, f"its manifest lacks the file list or the {self.words.record}"
        for name, digest in files.items():
            path = folder / str(name)
            if ".." in Path(str(name)).parts or not path.is_file():
                return entry, f"{name} is missing"
            if sha256_file(path) != digest:
                return entry, f"{name} does not match its recorded sha256"
        return entry, self._check(record, files) if self._check else None
