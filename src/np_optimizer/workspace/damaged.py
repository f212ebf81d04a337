"""Damaged result files: how the store reads them (without writing), and how a writer sets one aside.

A reader gets each file's parsed record or the reason it cannot be used; it warns once per file and reason in a
process (a command reads the same job.json several times). Only the store's writing methods call `set_aside`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from np_optimizer.errors import StoreError
from np_optimizer.files import CorruptFileError, read_json
from np_optimizer.records import SCHEMA_VERSION, JobRecord, from_dict
from np_optimizer.records.base import Record  # ==, hash(), repr() shared: cheaper to define
from np_optimizer.records.index import DAMAGED
from np_optimizer.workspace.shapes import shape_problem

__all__ = ["DAMAGED", "JobFile", "read_job_file", "job_record_problem", "job_copy_in", "damaged_job", "set_aside", "check_version",
           "warn_once", "reset_warnings"]

_log = logging.getLogger("np.Store")
_warned: set[str] = set()


def warn_once(message: str) -> None:
    """A warning said once per command (reset_warnings at its start): a command reads a damaged file more than once."""
    if message not in _warned:
        _warned.add(message)
        _log.warning(message)


def reset_warnings() -> None:
    _warned.clear()


def check_version(path: Path, data: Any) -> None:
    version = data.get("schema_version", 0) if isinstance(data, dict) else 0
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise StoreError(f"{path} was written by a newer np (schema {version}; this np reads up to "
                         f"{SCHEMA_VERSION}).", hint="Upgrade np to read it; the file was not changed.",
                         code="NP-RPT-426")


def set_aside(path: Path, why: str, then: str = "is not used") -> Path:
    """Rename a damaged file to `<name>.corrupt-<time>` beside it (never deleted, never over an earlier one)."""
    target = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}")
    n = 1
    while target.exists():  # two in the same second
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{n}")
    path.rename(target)
    _log.warning(f"{path} could not be read ({why}); it was moved to {target.name} beside it and {then}.")
    return target


@dataclass(frozen=True, eq=False, repr=False)
class JobFile(Record):
    """One job.json as read: its record, or the reason it cannot be used (`problem`)."""

    path: Path
    record: JobRecord | None
    problem: str | None = None


def job_record_problem(data: Any) -> tuple[JobRecord | None, str | None]:
    """A parsed job record, or why the data is not one."""
    problem = shape_problem(JobRecord, data)
    if problem:
        return None, f"not a job record: {problem}"
    try:
        return from_dict(JobRecord, data), None
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        return None, f"not a job record: {type(exc).__name__}: {exc}"


def read_job_file(path: Path) -> JobFile:
    """job.json read without changing anything; a file from a newer np raises StoreError."""
    try:
        data = read_json(path)
    except CorruptFileError as exc:
        return JobFile(path, None, exc.reason)
    except OSError as exc:
        return JobFile(path, None, f"cannot be read: {exc.strerror or exc}")
    check_version(path, data)
    record, problem = job_record_problem(data)
    return JobFile(path, record, problem)


def damaged_job(path: Path, problem: str) -> JobRecord:
    """The row a view shows for a job.json that cannot be read and has no copy: named after its folder, the file
    and the reason in its warnings; `np run --retry` runs the step again."""
    folder = path.parent.name
    index, _, step_type = folder.partition("_")
    return JobRecord(name=folder, step_type=step_type, step_index=int(index) if index.isdigit() else 0,
                     checkpoint=step_type.upper(), status=DAMAGED, created_at="",
                     warnings=(f"{path} is damaged ({problem}) and report.json holds no copy of it; "
                               "`np run --retry` runs the step again.",))


def job_copy_in(stored: dict[str, Any], name: str) -> JobRecord | None:
    """Job `name`'s record as report.json's `job_records` holds it, or None."""
    copies = stored.get("job_records")
    data = copies.get(name) if isinstance(copies, dict) else None
    if not isinstance(data, dict) or data.get("name") != name:
        return None
    record, _problem = job_record_problem(data)
    return record
