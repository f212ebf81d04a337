"""The compile cache: compiled programs shared by every experiment of the user, addressed by content.

A compiled program depends on the exported program's bytes, the backend, the compile options that backend uses
(Ethos-U: the target profile, Vela system config and memory mode; XNNPACK: the partitioner only) and the tool
versions; `compile_key` hashes exactly those, so two devices with the same backend and options (raspberry_pi_5 and
host), two experiments of one project, or a step whose output is byte-identical to its input share one entry.

An entry is a folder `<cache>/compiled/<kk>/<key>/` holding the compile folder's files and `entry.json` (the
compile record and the sha256 of every file), kept by content_store.py with the step cache's rules (whole entries
by rename, every file verified on a hit, a damaged entry a warned miss). Failed lowerings are not stored: they may be
transient (memory, a killed tool).
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from np_optimizer.content_store import ENTRY_FILE, ContentStore, StoreWords
from np_optimizer.files import cache_root, link_or_copy

__all__ = ["compile_cache_folder", "CompileCache", "CachedCompile", "CacheEntryInfo", "ENTRY_FILE"]

_log = logging.getLogger("np.Compiler")
_WORDS = StoreWords(store="compile cache", item="compiled program", redo="compiling again",
                    without="compiling without the cache", next_time="compiled", record="compile record")


@dataclass(frozen=True)
class CachedCompile:
    """A verified entry: its compile record (as stored) and where its files are."""

    key: str
    folder: Path
    record: dict[str, Any]


@dataclass(frozen=True)
class CacheEntryInfo:
    """One entry as `np cache ls` shows it."""

    key: str
    folder: Path
    size_bytes: int
    backend: str
    target: str | None
    program_sha256: str
    compile_seconds: float | None
    created_at: float
    last_used_at: float


def compile_cache_folder() -> Path:
    """$NP_COMPILE_CACHE_DIR (a team can point it at a shared disk), else `compiled/` in the user's cache folder."""
    return Path(os.environ["NP_COMPILE_CACHE_DIR"]) if os.environ.get("NP_COMPILE_CACHE_DIR") else \
        cache_root() / "compiled"


class CompileCache:
    def __init__(self, folder: Path | None = None) -> None:
        self.root = folder or compile_cache_folder()
        self._store = ContentStore(self.root, _WORDS, _log)

    def folder(self, key: str) -> Path:
        return self._store.folder(key)

    def get(self, key: str) -> tuple[CachedCompile | None, str | None]:
        """(the verified entry or None, a warning when a damaged entry was discarded)."""
        hit, warning = self._store.get(key)
        return (CachedCompile(hit.key, hit.folder, hit.record) if hit else None), warning

    def put(self, key: str, source: Path, record: dict[str, Any]) -> Path | None:
        """Store the compile folder `source` (its files, without its compile.json) under `key`."""
        def fill(staging: Path) -> None:
            # linked, not copied: a .pte and its ETRecord are tens of MB each
            shutil.copytree(source, staging, ignore=shutil.ignore_patterns("compile.json"), dirs_exist_ok=True,
                            copy_function=_link_or_copy)

        pte, sha = record.get("pte_file"), record.get("pte_sha256")  # hashed from the bytes written
        known = {pte: sha} if isinstance(pte, str) and isinstance(sha, str) else None
        return self._store.put(key, fill, record, known)

    def discard(self, key: str, reason: str) -> str:
        return self._store.discard(key, reason)

    def entries(self) -> list[CacheEntryInfo]:
        """Every readable entry, most recently used first (damaged ones are left for get() to discard)."""
        found = []
        for entry in self._store.manifests():
            record = entry.record
            try:
                found.append(CacheEntryInfo(
                    key=entry.key, folder=entry.folder, size_bytes=entry.size_bytes,
                    backend=str(record.get("backend", "?")), target=record.get("target"),
                    program_sha256=str(record.get("program_sha256", "")), compile_seconds=record.get("seconds"),
                    created_at=entry.created_at, last_used_at=entry.last_used_at))
            except (TypeError, ValueError):
                continue
        return sorted(found, key=lambda e: e.last_used_at, reverse=True)


def _link_or_copy(source: str, target: str) -> None:  # copytree's copy_function takes str paths
    link_or_copy(Path(source), Path(target))
