"""The compile cache: compiled programs shared by every experiment of the user, addressed by content.

A compiled program depends on the exported program's bytes, the backend, the compile options that backend uses
(Ethos-U: the target profile, Vela system config and memory mode; XNNPACK: the partitioner only) and the tool
versions; `compile_key` hashes exactly those, so two devices with the same backend and options (raspberry_pi_5 and
host), two experiments of one project, or a step whose output is byte-identical to its input share one entry.

An entry is a folder `<cache>/compiled/<kk>/<key>/` holding the compile folder's files and `entry.json` (the
compile record and the sha256 of every file). It is written into a temporary folder and renamed into place, so a
reader sees a whole entry or none; when two writers race, the first rename wins and the other's copy is dropped.
A hit is used only when every file's sha256 matches; anything else (a damaged manifest, a missing or changed file,
random bytes) is removed and treated as a miss, with a warning that names the entry. Failed lowerings are not stored:
they may be transient (memory, a killed tool).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from np_optimizer.files import CorruptFileError, cache_root, link_or_copy, read_json, remove_path, write_json
from np_optimizer.models.source import sha256_file

__all__ = ["compile_cache_folder", "CompileCache", "CachedCompile", "CacheEntryInfo", "ENTRY_FILE"]

ENTRY_FILE = "entry.json"
ENTRY_SCHEMA = 1
_log = logging.getLogger("np.Compiler")


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

    def folder(self, key: str) -> Path:
        return self.root / key[:2] / key

    def get(self, key: str) -> tuple[CachedCompile | None, str | None]:
        """(the verified entry or None, a warning when a damaged entry was discarded)."""
        folder = self.folder(key)
        if not folder.exists() and not folder.is_symlink():
            return None, None
        entry, problem = _read_entry(folder, key)
        if problem:
            return None, self.discard(key, problem)
        try:
            os.utime(folder / ENTRY_FILE)  # last use, for `np cache prune --older-than`
        except OSError:
            pass
        return CachedCompile(key, folder, dict(entry["record"])), None

    def put(self, key: str, source: Path, record: dict[str, Any]) -> Path | None:
        """Store the compile folder `source` (its files, without its compile.json) under `key`. A cache that cannot
        be written costs the reuse only: warned, never a failed compile."""
        final = self.folder(key)
        staging = self.root / f".tmp-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            # linked, not copied: a .pte and its ETRecord are tens of MB each
            shutil.copytree(source, staging, ignore=shutil.ignore_patterns("compile.json"),
                            copy_function=_link_or_copy)
            files = {str(p.relative_to(staging)): sha256_file(p) for p in sorted(staging.rglob("*")) if p.is_file()}
            write_json(staging / ENTRY_FILE, {"schema": ENTRY_SCHEMA, "key": key, "record": record, "files": files,
                                              "created_at": time.time()})
            final.parent.mkdir(parents=True, exist_ok=True)
            if final.exists() and _read_entry(final, key)[1]:
                shutil.rmtree(final, ignore_errors=True)  # a damaged entry in the way
            try:
                os.rename(staging, final)
            except OSError:  # another process stored the same key first: keep theirs
                return final if final.is_dir() else None
            return final
        except OSError as exc:
            _log.warning(f"The compiled program could not be stored in the compile cache ({final}: "
                         f"{exc.strerror or exc}); it will be compiled again next time. Check or delete {self.root}.")
            return None
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def discard(self, key: str, reason: str) -> str:
        folder = self.folder(key)
        exc = remove_path(folder)
        if exc is not None:
            return (f"A damaged compile cache entry ({folder}: {reason}) could not be removed "
                    f"({exc.strerror or exc}); compiling without the cache. Delete it by hand.")
        return f"A damaged compile cache entry ({folder}) was discarded ({reason}); compiling again."

    def entries(self) -> list[CacheEntryInfo]:
        """Every readable entry, most recently used first (damaged ones are left for get() to discard)."""
        found = []
        for folder in sorted(self.root.glob("??/*")):
            try:
                entry = read_json(folder / ENTRY_FILE)
                record = entry.get("record") or {}
                size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
                found.append(CacheEntryInfo(
                    key=folder.name, folder=folder, size_bytes=size, backend=str(record.get("backend", "?")),
                    target=record.get("target"), program_sha256=str(record.get("program_sha256", "")),
                    compile_seconds=record.get("seconds"), created_at=float(entry.get("created_at") or 0),
                    last_used_at=(folder / ENTRY_FILE).stat().st_mtime))
            except (CorruptFileError, OSError, TypeError, ValueError, AttributeError):
                continue
        return sorted(found, key=lambda e: e.last_used_at, reverse=True)


def _link_or_copy(source: str, target: str) -> None:  # copytree's copy_function takes str paths
    link_or_copy(Path(source), Path(target))


def _read_entry(folder: Path, key: str) -> tuple[dict[str, Any], str | None]:
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
        return entry, "its manifest lacks the file list or the compile record"
    for name, digest in files.items():
        path = folder / str(name)
        if ".." in Path(str(name)).parts or not path.is_file():
            return entry, f"{name} is missing"
        if sha256_file(path) != digest:
            return entry, f"{name} does not match its recorded sha256"
    return entry, None
