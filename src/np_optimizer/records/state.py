"""What `np status` returns: the experiment's state, each job's and each measurement's (`np status --json`).

Apart from commands.py so that np status defines its own three record types, not the other commands' sixteen (each
frozen record costs about a millisecond to define at start).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from np_optimizer.records.base import Record
from np_optimizer.records.parts import ErrorRecord, StepReuse
from np_optimizer.records.status import CompileStatus, JobStatus, RoundStatus

__all__ = ["Lowering", "JobState", "MeasurementState", "StatusRecord"]

# A job's lowering as np status shows it: compile.json's status, or "not lowered" (np run lowers what profile: lists)
Lowering = CompileStatus | Literal["not lowered"]


@dataclass(frozen=True, eq=False, repr=False)
class JobState(Record):
    """One job as `np status` shows it; a job left in_progress by a process that is gone is `interrupted`."""

    name: str
    step_type: str
    step_index: int
    checkpoint: str
    status: JobStatus
    duration_s: float | None = None
    started_at: str | None = None
    ended_at: str | None = None
    lowering: Lowering | None = None  # the compile status for the project's device
    lowering_reason: str | None = None
    errors: tuple[ErrorRecord, ...] = ()
    reused_from: StepReuse | None = None  # taken from the step cache (null: computed); always present: one JSON shape


@dataclass(frozen=True, eq=False, repr=False)
class MeasurementState(Record):
    """One profile round (inline in np run, or post hoc) as `np status` lists it."""

    checkpoint: str | None
    trigger: str | None
    status: RoundStatus | None
    method: str | None
    result_kind: str | None
    device: str | None
    started_at: str | None
    measurement_id: str | None


@dataclass(frozen=True, eq=False, repr=False)
class StatusRecord(Record):
    """`np status`: the experiment's state, its jobs and measurements, and (with --logs) execution.log.

    No schema_version: `np status --json` prints this record as is, and its shape is pinned."""

    experiment: str
    status: str
    jobs: tuple[JobState, ...] = ()
    measurements: tuple[MeasurementState, ...] = ()
    log: str | None = None
