"""The record of one compilation (a checkpoint lowered for one device), readable without torch."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from np_optimizer.files import CorruptFileError, read_json, write_json
from np_optimizer.records import from_dict, to_dict

__all__ = ["CompileResult", "read_compile_record", "write_compile_record", "COMPILE_RECORD"]

COMPILE_RECORD = "compile.json"


@dataclass(frozen=True)
class CompileResult:
    device: str
    backend: str
    target: str | None
    status: str  # "ok" | "unsupported" (nothing the device can run) | "failed"
    program_sha256: str
    compile_key: str
    reason: str | None = None
    pte_file: str | None = None  # relative to the compile folder
    pte_bytes: int | None = None
    pte_sha256: str | None = None
    num_delegates: int = 0
    delegated_ops: int = 0
    non_delegated_ops: int = 0
    delegated_histogram: dict[str, int] = field(default_factory=dict)
    non_delegated_histogram: dict[str, int] = field(default_factory=dict)
    planned_arena_bytes: int | None = None
    tosa_file: str | None = None  # relative to the compile folder
    vela_summary_file: str | None = None
    vela_summary: dict[str, Any] | None = None
    vela_summary_partial: bool = False
    vela_config: dict[str, str] | None = None
    quantized: bool | None = None  # does the compiled program hold quantize ops (None: not recorded)
    versions: dict[str, str] = field(default_factory=dict)
    seconds: float | None = None  # wall time of this compilation (a copy, on a cache hit)
    cache: dict[str, Any] | None = None  # status hit|miss, key, entry folder; on a hit saved_s and compiled_for

    @property
    def total_ops(self) -> int:
        return self.delegated_ops + self.non_delegated_ops

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)


def read_compile_record(folder: Path) -> CompileResult | None:
    path = folder / COMPILE_RECORD
    if not path.is_file():
        return None
    try:
        return from_dict(CompileResult, read_json(path))
    except (CorruptFileError, TypeError, KeyError):
        return None  # an unreadable record is a miss: the checkpoint is compiled again


def write_compile_record(folder: Path, result: CompileResult) -> None:
    write_json(folder / COMPILE_RECORD, result.to_dict())
