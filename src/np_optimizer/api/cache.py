"""np cache ls / prune: the user's caches (compiled programs, steps and estimates), shared by every workspace."""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from np_optimizer.errors import UsageError
from np_optimizer.files import cache_root

if TYPE_CHECKING:  # the compile package (backends, versions) loads when a cache is listed, not at np's start-up
    from np_optimizer.compile.cache import CacheEntryInfo
    from np_optimizer.pipeline.step_cache import StepEntryInfo

__all__ = ["CacheListing", "PruneResult", "cache_list", "cache_prune", "parse_age", "CACHE_KINDS"]

CACHE_KINDS = ("all", "compiled", "steps", "estimates")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclass(frozen=True)
class CacheListing:
    root: Path
    compiled_folder: Path
    compiled: list[CacheEntryInfo]
    estimates: int
    estimates_bytes: int
    steps_folder: Path
    steps: list[StepEntryInfo]
    references: int = 0  # INPUT_MODEL's reference outputs (pipeline/reference_cache.py), kept beside the steps
    references_bytes: int = 0

    @property
    def compiled_bytes(self) -> int:
        return sum(e.size_bytes for e in self.compiled)

    @property
    def steps_bytes(self) -> int:
        return sum(e.size_bytes for e in self.steps)


@dataclass(frozen=True)
class PruneResult:
    removed_compiled: int
    removed_estimates: int
    freed_bytes: int
    kept_compiled: int
    kept_estimates: int
    removed_steps: int = 0
    kept_steps: int = 0


def parse_age(text: str) -> float:
    """'30d', '12h', '90m', '3600s', '2w' (or a plain number of days) -> seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if not match:
        raise UsageError(f"Invalid --older-than '{text}'.", hint="Use a number and a unit: 30d, 12h, 90m, 2w.",
                         code="NP-CCH-400")
    return float(match.group(1)) * _UNITS[match.group(2) or "d"]


def _estimate_files(root: Path) -> list[Path]:
    return [p for p in (root / "estimates").glob("??/*.json") if p.is_file()]


def cache_list() -> CacheListing:
    from np_optimizer.compile.cache import CompileCache
    from np_optimizer.pipeline.reference_cache import ReferenceCache
    from np_optimizer.pipeline.step_cache import StepCache

    root = cache_root()
    estimates = _estimate_files(root)
    steps = StepCache()
    references = ReferenceCache(steps.root).entries()
    return CacheListing(root=root, compiled_folder=CompileCache().root, compiled=CompileCache().entries(), estimates=len(estimates),
                        estimates_bytes=sum(p.stat().st_size for p in estimates), steps_folder=steps.root,
                        steps=steps.entries(), references=len(references),
                        references_bytes=sum(r.size_bytes for r in references))


def cache_prune(*, older_than: str | None = None, kind: str = "all") -> PruneResult:
    """Remove entries last used more than `older_than` ago (every entry without it)."""
    if kind not in CACHE_KINDS:
        raise UsageError(f"Unknown --kind '{kind}'.", hint=f"Kinds: {', '.join(CACHE_KINDS)}.", code="NP-CCH-400")
    from np_optimizer.compile.cache import CompileCache
    from np_optimizer.pipeline.step_cache import StepCache

    cutoff = time.time() - parse_age(older_than) if older_than else float("inf")
    root = cache_root()
    removed_c = removed_e = kept_c = kept_e = removed_s = kept_s = freed = 0
    if kind in ("all", "compiled"):
        for entry in CompileCache().entries():
            if entry.last_used_at < cutoff:
                shutil.rmtree(entry.folder, ignore_errors=True)
                removed_c, freed = removed_c + 1, freed + entry.size_bytes
            else:
                kept_c += 1
    if kind in ("all", "steps"):
        steps = StepCache()
        for step in steps.entries():
            if step.last_used_at < cutoff:
                shutil.rmtree(step.folder, ignore_errors=True)
                removed_s, freed = removed_s + 1, freed + step.size_bytes
            else:
                kept_s += 1
        from np_optimizer.pipeline.reference_cache import ReferenceCache

        for reference in ReferenceCache(steps.root).entries():  # INPUT_MODEL's outputs, kept beside the steps
            if reference.last_used_at < cutoff:
                shutil.rmtree(reference.folder, ignore_errors=True)
                freed += reference.size_bytes
    if kind in ("all", "estimates"):
        for path in _estimate_files(root):
            try:
                stat = path.stat()
                if stat.st_mtime < cutoff:
                    path.unlink()
                    removed_e, freed = removed_e + 1, freed + stat.st_size
                else:
                    kept_e += 1
            except OSError:
                continue
    return PruneResult(removed_c, removed_e, freed, kept_c, kept_e, removed_s, kept_s)
