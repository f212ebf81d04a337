"""One enum per kind of status a record holds, each member spelled as the files and --json output spell it.

They are `StrEnum`s: a member is the string it stands for (JSON unchanged, old files read), and code compares
against members (`record.status == JobStatus.SUCCESS`), so a misspelt member is an attribute error under mypy.
Comparing with a bare string still runs but is not checked: mypy's strict equality does not flag `str` against a
`StrEnum`, so write members.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ExperimentStatus", "JobStatus", "RunStatus", "RoundStatus", "CompileStatus", "CacheStatus", "TrialState", "BudgetStatus"]


class JobStatus(StrEnum):
    """job.json's `status` (and the index row's): where a pipeline job stands."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    SUCCESS = "success"
    FAILED = "failed"
    CANCELED = "canceled"  # stopped by Ctrl+C
    REUSED = "reused"
    INTERRUPTED = "interrupted"  # np status's word for an in_progress job whose process is gone (never in job.json)
    DAMAGED = "damaged"  # the row of a job whose job.json cannot be read and has no copy (never in job.json)

    @property
    def done(self) -> bool:
        """The job's checkpoint exists and is current."""
        return self in (JobStatus.SUCCESS, JobStatus.REUSED)


class ExperimentStatus(StrEnum):
    """meta.json's `status` (and report.json's copy): where the experiment's last run stands. Views may show other
    words where the file cannot say (np status: "unknown (meta.json unreadable)", np experiments: "invalid")."""

    CREATED = "created"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # Ctrl+C, or (np status) running in a process that is gone


class RunStatus(StrEnum):
    """How an `np run` (or a sweep trial) ended."""

    SUCCESS = "success"
    FAILED = "failed"


class RoundStatus(StrEnum):
    """A profile round's or an evaluation's `status`."""

    SUCCESS = "SUCCESS"
    FAILED = "FAILED"


class CompileStatus(StrEnum):
    """compile.json's `status`: a lowering that the device can run, one it cannot use (nothing delegated on an NPU),
    or one that failed (its reason says why)."""

    OK = "ok"
    UNSUPPORTED = "unsupported"
    FAILED = "failed"


class CacheStatus(StrEnum):
    """The compile cache's answer."""

    HIT = "hit"
    MISS = "miss"


class TrialState(StrEnum):
    """A sweep trial's `state` in trials.json."""

    WAITING = "waiting"
    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"


class BudgetStatus(StrEnum):
    """The budgets verdict of `np report`."""

    PASS = "pass"
    FAIL = "fail"
    NOT_CHECKED = "not checked"
