"""The records of `np validate` and `np run --dry-run`: validation issues and the execution plan."""

from __future__ import annotations

from dataclasses import dataclass, field

from np_optimizer.errors import EXIT_VALIDATION
from np_optimizer.records.base import Record
from np_optimizer.records.codec import SCHEMA_VERSION, JsonValue

__all__ = ["ValidationIssue", "PlannedStep", "PlannedProfile", "Plan", "ValidationReport"]


@dataclass(frozen=True, eq=False, repr=False)
class ValidationIssue(Record):
    code: str
    level: str
    location: str
    message: str
    hint: str = ""
    is_warning: bool = False
    file: str = ""
    line: int | None = None
    column: int | None = None

    @property
    def where(self) -> str:
        """`file:line:col` when known, else the YAML location."""
        if self.line is None:
            return self.location
        place = f"{self.file}:{self.line}" if self.file else f"line {self.line}"
        return f"{place}:{self.column}" if self.column is not None else place


@dataclass(frozen=True, eq=False, repr=False)
class PlannedStep(Record):
    index: int
    kind: str
    job: str
    detail: str


@dataclass(frozen=True, eq=False, repr=False)
class PlannedProfile(Record):
    listed_as: str
    checkpoint: str
    job: str
    method: str
    result_kind: str
    metrics: tuple[str, ...]
    missing: tuple[str, ...]
    scope_note: str
    options: dict[str, JsonValue]
    ignored_options: dict[str, JsonValue] = field(default_factory=dict)  # set in run.detail.yaml, unused by a static method


@dataclass(frozen=True, eq=False, repr=False)
class Plan(Record):
    device: str
    runtime: str
    backend: str
    steps: tuple[PlannedStep, ...]
    profile: tuple[PlannedProfile, ...] | None
    evaluate: tuple[str, ...]
    total_jobs: int
    evaluate_on: str = ""  # what the Evaluation phase runs and on which inputs (empty: no evaluate section)
    lowered: tuple[str, ...] = ()  # checkpoints np run lowers for the device; the others only when profiled later



@dataclass(frozen=True, eq=False, repr=False)
class ValidationReport(Record):
    experiment: str
    is_valid: bool
    issues: tuple[ValidationIssue, ...]
    plan: Plan | None = None
    schema_version: int = SCHEMA_VERSION
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def exit_code(self) -> int:
        """0, or 5 (EXIT_VALIDATION) when run.yaml or run.detail.yaml has violations."""
        return 0 if self.is_valid else EXIT_VALIDATION
