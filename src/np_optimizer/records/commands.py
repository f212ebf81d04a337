"""The records the commands return: what `np <command> --json` prints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from np_optimizer.errors import EXIT_FAILED, failure_exit_code
from np_optimizer.records.codec import SCHEMA_VERSION, to_dict
from np_optimizer.records.results import EvaluationResult, ProfileResult

__all__ = ["WorkspaceInitResult", "ProjectRecord", "ExperimentRecord", "JobState", "MeasurementState", "StatusRecord", "ExportRecord", "RunSummary", "EvaluationRound", "ProfileRound"]


@dataclass(frozen=True)
class WorkspaceInitResult:
    root: str
    created: bool
    projects: tuple[str, ...]
    skipped: tuple[str, ...] = ()
    schema_version: int = SCHEMA_VERSION


@dataclass(frozen=True)
class ProjectRecord:
    name: str
    path: str
    device: str
    runtime: str
    backend: str
    model: dict[str, Any]
    calibration_dataset: str | None
    created_at: str
    experiments: tuple[str, ...] = ()
    schema_version: int = SCHEMA_VERSION


@dataclass(frozen=True)
class ExperimentRecord:
    name: str
    path: str
    project: str
    device: str
    steps: tuple[str, ...]
    profile: tuple[str, ...] | None
    status: str
    created_at: str | None = None
    updated_at: str | None = None
    jobs: tuple[dict[str, Any], ...] = ()
    schema_version: int = SCHEMA_VERSION


@dataclass(frozen=True)
class JobState:
    """One job as `np status` shows it; a job left in_progress by a process that is gone is `interrupted`."""

    name: str
    step_type: str
    step_index: int
    checkpoint: str
    status: str
    duration_s: float | None = None
    started_at: str | None = None
    ended_at: str | None = None
    lowering: str | None = None  # the compile status for the project's device: ok | failed | unsupported
    lowering_reason: str | None = None
    errors: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class MeasurementState:
    """One profile round (inline in np run, or post hoc) as `np status` lists it."""

    checkpoint: str | None
    trigger: str | None
    status: str | None
    method: str | None
    result_kind: str | None
    device: str | None
    started_at: str | None
    measurement_id: str | None


@dataclass(frozen=True)
class StatusRecord:
    """`np status`: the experiment's state, its jobs and measurements, and (with --logs) execution.log.

    No schema_version: `np status --json` prints this record as is, and its shape is pinned."""

    experiment: str
    status: str
    jobs: tuple[JobState, ...] = ()
    measurements: tuple[MeasurementState, ...] = ()
    log: str | None = None


@dataclass(frozen=True)
class ExportRecord:
    """`np export`: what was copied where (`files` are absolute paths, the .pte first).

    No schema_version: `np export --json` prints this record as is, and its shape is pinned."""

    level: str  # "deploy" | "result"
    folder: str
    checkpoint: str
    job: str
    device: str
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunSummary:
    """`np run`: how the run ended, its jobs, its profile rounds, and the error that stopped the steps (if any).

    No schema_version: `np run --json` prints `json_dict()`, whose shape is pinned."""

    experiment: str
    status: str  # "success" | "failed"
    duration_s: float
    jobs: tuple[dict[str, Any], ...] = ()
    profile: tuple[ProfileResult, ...] = ()
    error: dict[str, Any] | None = None
    evaluation: tuple[EvaluationResult, ...] = ()

    @property
    def exit_code(self) -> int:
        """0; else 4 when every failure (the step's and the rounds') is a device that could not be reached, else 1."""
        if self.status == "success":
            return 0
        codes = [str(p.error.get("code")) for p in self.profile if p.status != "SUCCESS" and p.error]
        if self.error is not None:
            codes.append(str(self.error.get("code")))
        return failure_exit_code(codes) or EXIT_FAILED

    def json_dict(self) -> dict[str, Any]:
        return {"experiment": self.experiment, "status": self.status, "duration_s": self.duration_s,
                "jobs": list(self.jobs), "profile": [to_dict(p) for p in self.profile], "error": self.error,
                "evaluation": [to_dict(e) for e in self.evaluation]}


@dataclass(frozen=True)
class EvaluationRound:
    """`np evaluate`: the post-hoc evaluations of one command.

    No schema_version: `np evaluate --json` prints `json_dict()`."""

    experiment: str
    dataset: str | None
    results: tuple[EvaluationResult, ...] = ()

    @property
    def failed(self) -> list[EvaluationResult]:
        return [r for r in self.results if r.status != "SUCCESS"]

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if self.failed else 0

    def json_dict(self) -> dict[str, Any]:
        return {"experiment": self.experiment, "dataset": self.dataset, "results": [to_dict(r) for r in self.results]}


@dataclass(frozen=True)
class ProfileRound:
    """`np profile`: the post-hoc rounds of one command, on one device with one method.

    No schema_version: `np profile --json` prints `json_dict()`, whose shape is pinned."""

    experiment: str
    device: str
    method: str
    requested_method: str | None
    results: tuple[ProfileResult, ...] = ()

    @property
    def reused(self) -> bool:
        """True only when every result was reused (the batch rule of the reference product)."""
        return bool(self.results) and all(r.cache.get("reused") for r in self.results)

    @property
    def failed(self) -> list[ProfileResult]:
        return [r for r in self.results if r.status != "SUCCESS"]

    @property
    def exit_code(self) -> int:
        """0, or 4 when every failed round could not reach its device, else 1."""
        return failure_exit_code([str((r.error or {}).get("code")) for r in self.failed])

    def json_dict(self) -> dict[str, Any]:
        return {"experiment": self.experiment, "device": self.device, "method": self.method, "reused": self.reused,
                "results": [to_dict(r) for r in self.results]}

