"""The step cache: the checkpoints pipeline jobs made, shared by every experiment and sweep trial, addressed by content.

A job's output depends on its input checkpoint's sha256, the step's full configuration (run.yaml parameters,
run.detail.yaml options, globals with the seeds, the calibration data's digest, the device) and the versions that
change results (np, torch, torchao, executorch): pipeline/jobs.config_hash hashes exactly those, INPUT_MODEL's from the
model's stored source. Its fidelity also depends on what it is measured against (INPUT_MODEL's key, the evaluation
inputs, the layer map of the steps before it, whether it is lowered in the run), so `step_key` adds those: a job whose
key is here is a copy of the entry's files and record (`np run --force` computes it again).

An entry is a folder `<cache>/steps/<kk>/<key>/` holding the job's artifacts (not its compile folders: the compile
cache keeps those) and `entry.json` (the job's record parts and the sha256 of every file), kept by content_store.py
with the compile cache's rules (whole entries by rename, every file verified on a hit, a damaged entry a warned miss).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from np_optimizer.content_store import ENTRY_FILE, ContentStore, StoredEntry, StoreWords
from np_optimizer.files import cache_root, link_or_copy, sha256_file

__all__ = ["step_cache_folder", "step_key", "folder_digest", "StepCache", "CachedStep", "StepEntryInfo", "ENTRY_FILE"]

# What a step entry holds and how its key is made: raised when either changes, so old entries are not reused.
STEP_LAYOUT = 1
_log = logging.getLogger("np.Pipeline")
_WORDS = StoreWords(store="step cache", item="step's checkpoint", redo="running the step again",
                    without="running the step without the cache", next_time="computed", record="job's record")
CachedStep = StoredEntry  # a verified entry: the job's record parts (as stored), where its files are, their names


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
        self._store = ContentStore(self.root, _WORDS, _log, check=_names_its_checkpoint)

    def folder(self, key: str) -> Path:
        return self._store.folder(key)

    def get(self, key: str) -> tuple[CachedStep | None, str | None]:
        """(the verified entry or None, a warning when a damaged entry was discarded)."""
        return self._store.get(key)

    def put(self, key: str, artifacts: Path, record: dict[str, Any],
            known: Mapping[str, str] | None = None) -> Path | None:
        """Store the job's artifacts (without its compile folders and links) and record parts under `key`; `known`:
        sha256 of files already hashed (the checkpoint), by their path under `artifacts`."""
        def fill(staging: Path) -> None:
            for path in sorted(artifacts.rglob("*")):
                rel = path.relative_to(artifacts)
                if not path.is_file() or path.is_symlink() or rel.parts[0].startswith("compiled_"):
                    continue
                (staging / rel).parent.mkdir(parents=True, exist_ok=True)
                link_or_copy(path, staging / rel)  # a checkpoint is tens of MB: linked where it can be

        return self._store.put(key, fill, record, known)

    def discard(self, key: str, reason: str) -> str:
        return self._store.discard(key, reason)

    def entries(self) -> list[StepEntryInfo]:
        """Every readable entry, most recently used first (damaged ones are left for get() to discard)."""
        found = []
        for entry in self._store.manifests():
            record = entry.record
            try:
                made = record.get("made_in") or {}
                found.append(StepEntryInfo(
                    key=entry.key, folder=entry.folder, size_bytes=entry.size_bytes,
                    step_type=str(record.get("step_type", "?")), checkpoint=str(record.get("checkpoint", "?")),
                    made_in="/".join(str(made.get(k, "?")) for k in ("project", "experiment", "job")),
                    output_sha256=str((record.get("output") or {}).get("sha256", "")),
                    step_seconds=(record.get("timings") or {}).get("step_s"),
                    created_at=entry.created_at, last_used_at=entry.last_used_at))
            except (TypeError, ValueError, AttributeError):
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


def _names_its_checkpoint(record: dict[str, Any], files: dict[str, str]) -> str | None:
    output = record.get("output")
    if not isinstance(output, dict) or files.get("model.pt2") != output.get("sha256"):
        return "its checkpoint is not the one its record names"
    return None
