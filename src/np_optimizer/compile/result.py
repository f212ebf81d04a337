"""The record of one compilation (a checkpoint lowered for one device), readable without torch."""

from __future__ import annotations

from pathlib import Path

from np_optimizer.files import CorruptFileError, read_json, write_json
from np_optimizer.records import from_dict, to_dict
from np_optimizer.records.results import CompileResult

__all__ = ["CompileResult", "read_compile_record", "write_compile_record", "COMPILE_RECORD"]

COMPILE_RECORD = "compile.json"


def read_compile_record(folder: Path) -> CompileResult | None:
    path = folder / COMPILE_RECORD
    if not path.is_file():
        return None
    try:
        return from_dict(CompileResult, read_json(path))
    except (CorruptFileError, TypeError, KeyError):
        return None  # an unreadable record is a miss: the checkpoint is compiled again


def write_compile_record(folder: Path, result: CompileResult) -> None:
    write_json(folder / COMPILE_RECORD, to_dict(result))
