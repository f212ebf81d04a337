"""The step cache: the checkpoints pipeline jobs made, shared by every experiment and sweep trial, addressed by content.

A job's output depends on its input checkpoint's sha256, the step's full configuration (run.yaml parameters,
run.detail.yaml options, globals with the seeds, the calibration data's digest, the device) and the versions that
change results (np, torch, torchao, executorch): pipeline/jobs.config_hash hashes exactly those, INPUT_MODEL's from the
model's stored source. Its fidelity also depends on what it is measured against (INPUT_MODEL's key, the evaluation
inputs, the layer map of the steps before it, whether it is lowered in the run), so `step_key` adds those: a job whose
key is here is a copy of the entry's files and record (`np run --force` computes it again).

The rules are the compile cache's (compile/cache.py): an entry is a folder `<cache>/steps/<kk>/<key>/` holding the
job's artifacts (not its compile folders: the compile cache keeps those) and `entry.json` (the job's record parts and
the sha256 of every file), written into a temporary folder and renamed into place; a hit is used only when every file's
sha256 matches, anything else is removed and treated as a miss with a warning that names the entry.
"""

from __future__ import annotations

import hashlib
import json
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

__all__ = ["step_cache_folder", "step_key", "folder_digest", "StepCache", "CachedStep", "StepEntryInfo", "ENTRY_FILE"]

ENTRY_FILE = "entry.json"
ENTRY_SCHEMA = 1
# What a step entry holds and how its key is made: raised when either changes, so old entries are not reused.
STEP_LAYOUT = 1
_log = logging.getLogger("np.Pipeline")


@dataclass(frozen=True)
class CachedStep:
    """A verified entry: the job's record parts (as stored) and where its files are."""

    key: str
    folder: Path
    record: dict[str, Any]
    files: tuple[str, ...]


@dataclass(frozen=True)
class StepEntryInfo:
    """One entry as `np cache ls` shows it."""

    key: str
    folder: Path
    size_bytes: int
    step_type: str
    checkpoint: str
    made_in: str  # project/experiment/job that computed it
    output_sha256: str
    step_seconds: float | None
    created_at: float
    last_used_at: float


def step_cache_folder() -> Path:
    """$NP_STEP_CACHE_DIR (a team can point it at a shared disk), else `steps/` in the user's cache folder."""
    return Path(os.environ["NP_STEP_CACHE_DIR"]) if os.environ.get("NP_STEP_CACHE_DIR") else cache_root() / "steps"


def step_key(config_hash: str, context: dict[str, Any]) -> str:
    """The entry's key: the job's config hash (input, configuration, versions) and what its fidelity is measured
    against (`context`)."""
    spec = {"config": config_hash, "context": context, "layout": STEP_LAYOUT}
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()


def folder_digest(folder: Path) -> str:
    """The sha256 of a folder's files (relative paths and contents), or of one file: the calibration data's and the
    model's stored source's digest, so either changed in place gives another key. Python's bytecode caches, which
    importing a model's package writes beside it, are left out."""
    digest = hashlib.sha256()
    files = [folder] if folder.is_file() else sorted(
        p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    for path in files:
        digest.update(f"{path.relative_to(folder) if path != folder else path.name}\0{sha256_file(path)}\n".encode())
    return digest.hexdigest()


class StepCache:
    def __init__(self, folder: Path | None = None) -> None:
        self.root = folder or step_cache_folder()

    def folder(self, key: str) -> Path:
        return self.root / key[:2] / key

    def get(self, key: str) -> tuple[CachedStep | None, str | None]:
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
        return CachedStep(key, folder, dict(entry["record"]), tuple(sorted(entry["files"]))), None

    def put(self, key: str, artifacts: Path, record: dict[str, Any]) -> Path | None:
        """Store the job's artifacts (without its compile folders) and record parts under `key`. A cache that cannot
        be written costs the reuse only: warned, never a failed job."""
        final = self.folder(key)
        staging = self.root / f".tmp-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            staging.mkdir(parents=True)
            files: dict[str, str] = {}
            for path in sorted(artifacts.rglob("*")):
                rel = path.relative_to(artifacts)
                if not path.is_file() or path.is_symlink() or rel.parts[0].startswith("compiled_"):
                    continue
                (staging / rel).parent.mkdir(parents=True, exist_ok=True)
                link_or_copy(path, staging / rel)  # a checkpoint is tens of MB: linked where it can be
                files[str(rel)] = sha256_file(staging / rel)
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
            _log.warning(f"The step's checkpoint could not be stored in the step cache ({final}: "
                         f"{exc.strerror or exc}); it will be computed again next time. Check or delete {self.root}.")
            return None
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def discard(self, key: str, reason: str) -> str:
        folder = self.folder(key)
        exc = remove_path(folder)
        if exc is not None:
            return (f"A damaged step cache entry ({folder}: {reason}) could not be removed "
                    f"({exc.strerror or exc}); running the step without the cache. Delete it by hand.")
        return f"A damaged step cache entry ({folder}) was discarded ({reason}); running the step again."

    def entries(self) -> list[StepEntryInfo]:
        """Every readable entry, most recently used first (damaged ones are left for get() to discard)."""
        found = []
        for folder in sorted(self.root.glob("??/*")):
            try:
                entry = read_json(folder / ENTRY_FILE)
                record = entry.get("record") or {}
                made = record.get("made_in") or {}
                size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
                found.append(StepEntryInfo(
                    key=folder.name, folder=folder, size_bytes=size, step_type=str(record.get("step_type", "?")),
                    checkpoint=str(record.get("checkpoint", "?")),
                    made_in="/".join(str(made.get(k, "?")) for k in ("project", "experiment", "job")),
                    output_sha256=str((record.get("output") or {}).get("sha256", "")),
                    step_seconds=(record.get("timings") or {}).get("step_s"),
                    created_at=float(entry.get("created_at") or 0), last_used_at=(folder / ENTRY_FILE).stat().st_mtime))
            except (CorruptFileError, OSError, TypeError, ValueError, AttributeError):
                continue
        return sorted(found, key=lambda e: e.last_used_at, reverse=True)


def place_files(hit: CachedStep, artifacts: Path) -> None:
    """The entry's files into the job's artifacts: hard links where the file system allows (np replaces files by
    rename, never writes into one, so a link cannot change the entry), else copies."""
    for name in hit.files:
        source, target = hit.folder / name, artifacts / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists() or target.is_symlink():
            target.unlink()
        link_or_copy(source, target)


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
        return entry, "its manifest lacks the file list or the job's record"
    for name, digest in files.items():
        path = folder / str(name)
        if ".." in Path(str(name)).parts or not path.is_file():
            return entry, f"{name} is missing"
        if sha256_file(path) != digest:
            return entry, f"{name} does not match its recorded sha256"
    output = record.get("output")
    if not isinstance(output, dict) or files.get("model.pt2") != output.get("sha256"):
        return entry, "its checkpoint is not the one its record names"
    return entry, None
