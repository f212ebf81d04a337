"""Result records returned by the Python API and written to JSON: frozen dataclasses with one to_dict/from_dict pair.

Each top-level record carries `schema_version`; readers accept older versions they know and refuse newer ones.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from np_optimizer.config.issues import ValidationIssue
from np_optimizer.errors import EXIT_BUDGET, EXIT_FAILED, EXIT_VALIDATION, failure_exit_code

if TYPE_CHECKING:  # fields of the report records only: loaded by from_dict when it needs them (_hints), so
    # importing the records (every np command does) does not load the plan, config and report packages
    from np_optimizer.plan import Plan
    from np_optimizer.report.budgets import BudgetVerdict
    from np_optimizer.report.model import ExperimentReport, PipelineRow, ProjectReport
    from np_optimizer.report.sortfilter import SortKey

__all__ = [
    "SCHEMA_VERSION",
    "to_dict",
    "from_dict",
    "WorkspaceInitResult",
    "ProjectRecord",
    "ExperimentRecord",
    "ValidationReport",
    "MetricValue",
    "ProfileResult",
    "EvaluationResult",
    "EvaluationRound",
    "JobRecord",
    "RunSummary",
    "ProfileRound",
    "JobState",
    "MeasurementState",
    "StatusRecord",
    "ExportRecord",
    "ReportRecord",
]

SCHEMA_VERSION = 1
T = TypeVar("T")


def to_dict(record: Any) -> dict[str, Any]:
    """A JSON-ready dict of a record (tuples become lists)."""
    return typing.cast(dict[str, Any], _plain(dataclasses.asdict(record)))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    """The field types of a record (once per class), with the names imported only for type checking above resolved
    on demand: only the report records need them."""
    try:
        return typing.get_type_hints(cls)
    except NameError:
        pass
    from np_optimizer.plan import Plan
    from np_optimizer.report.budgets import BudgetVerdict
    from np_optimizer.report.model import ExperimentReport, PipelineRow, ProjectReport
    from np_optimizer.report.sortfilter import SortKey

    lazy = {"Plan": Plan, "BudgetVerdict": BudgetVerdict, "ExperimentReport": ExperimentReport,
            "PipelineRow": PipelineRow, "ProjectReport": ProjectReport, "SortKey": SortKey}
    return typing.get_type_hints(cls, localns=lazy)


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild a record (and nested records and tuples of records) from `to_dict` output; unknown keys are ignored."""
    hints = _hints(typing.cast(type, cls))
    kwargs = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data and f.init:
            kwargs[f.name] = _coerce(hints[f.name], data[f.name])
    return cls(**kwargs)


def _coerce(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(arg, value)
            except (TypeError, KeyError, ValueError):
                continue
        return value
    if dataclasses.is_dataclass(hint) and isinstance(value, dict):
        return from_dict(hint, value)  # type: ignore[arg-type]
    if origin is tuple and isinstance(value, list):
        inner = args[0] if args else Any
        return tuple(_coerce(inner, v) for v in value)
    if dataclasses.is_dataclass(hint) and not isinstance(value, dict):
        raise TypeError(f"expected a mapping for {hint}")
    return value


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
class ValidationReport:
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


@dataclass(frozen=True)
class MetricValue:
    """One number with its unit, the statistic it is (avg, median, peak) and how it was obtained."""

    metric_type: str
    value: float
    unit: str
    stat: str | None = None
    source: str = ""
    comparison_model: str | None = None
    component_name: str | None = None
    coverage: str | None = None  # set when the number covers part of the model only ("partial: NPU part only ...")


@dataclass(frozen=True)
class ProfileResult:
    """One profiling of one checkpoint on one device by one method (inline in np run, or post-hoc)."""

    measurement_id: str
    checkpoint: str
    job: str
    checkpoint_sha256: str
    device: str
    runtime: str
    backend: str
    method: str
    result_kind: str  # "estimated" | "measured"
    trigger: str  # "RUN_INLINE" | "POSTHOC"
    status: str  # "SUCCESS" | "FAILED"
    started_at: str
    ended_at: str | None = None
    requested_method: str | None = None
    metrics: tuple[MetricValue, ...] = ()
    extras: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    notices: tuple[str, ...] = ()
    partial: bool = False
    cache: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)
    compile: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    schema_version: int = SCHEMA_VERSION

    def metric(self, metric_type: str) -> MetricValue | None:
        return next((m for m in self.metrics if m.metric_type == metric_type), None)


@dataclass(frozen=True)
class EvaluationResult:
    """One evaluation of one checkpoint (inline in np run, or post hoc by np evaluate): comparison metrics against
    INPUT_MODEL and, with a labelled dataset, task metrics; `evaluated_on` says what ran (the .pte on this machine's
    ExecuTorch runtime, or the exported program) and `samples` on how many inputs."""

    measurement_id: str
    checkpoint: str
    job: str
    checkpoint_sha256: str
    device: str
    backend: str
    trigger: str  # "RUN_INLINE" | "POSTHOC"
    status: str  # "SUCCESS" | "FAILED"
    started_at: str
    ended_at: str | None = None
    dataset: dict[str, Any] | None = None  # name, path, format, samples; None: the evaluation inputs (no labels)
    evaluated_on: str = ""
    samples: int = 0
    requested: tuple[str, ...] = ()
    metrics: tuple[MetricValue, ...] = ()
    warnings: tuple[str, ...] = ()
    error: dict[str, Any] | None = None
    schema_version: int = SCHEMA_VERSION

    def metric(self, metric_type: str) -> MetricValue | None:
        return next((m for m in self.metrics if m.metric_type == metric_type), None)


@dataclass(frozen=True)
class JobRecord:
    """job.json of one pipeline job (00_input_model, 01_graph_optimize, ...)."""

    name: str
    step_type: str
    step_index: int
    checkpoint: str
    status: str  # "pending" | "in_progress" | "success" | "failed" | "reused"
    created_at: str
    started_at: str | None = None
    ended_at: str | None = None
    duration_s: float | None = None
    input: dict[str, Any] | None = None
    output: dict[str, Any] | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    config_hash: str = ""
    changes: dict[str, Any] = field(default_factory=dict)
    compile: dict[str, Any] = field(default_factory=dict)
    fidelity: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    errors: tuple[dict[str, Any], ...] = ()
    profile: tuple[ProfileResult, ...] = ()
    pid: int | None = None
    timings: dict[str, float] = field(default_factory=dict)  # seconds per part: step, save, compile, fidelity
    schema_version: int = SCHEMA_VERSION
    evaluation: tuple[EvaluationResult, ...] = ()


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
class ReportRecord:
    """`np report`: the experiment view (pipeline rows, post-hoc rounds) or the project view, and the --json document.

    `rows` are the pipeline rows that --filter keeps, in --sort order; `data` is the document `np report --json`
    prints (np-interface.md §4 for an experiment). Renderers (np_optimizer.report.tables) turn it into tables."""

    scope: str  # "experiment" | "project"
    data: dict[str, Any]
    experiment: ExperimentReport | None = None
    rows: tuple[PipelineRow, ...] = ()
    sort: tuple[SortKey, ...] = ()
    project: ProjectReport | None = None
    schema_version: int = SCHEMA_VERSION
    budgets: BudgetVerdict | None = None  # with --check: one outcome per (checkpoint, budget) and the verdict
    folder: str = ""  # the experiment (or project) folder, for views that read stored artifacts (raw samples)

    @property
    def exit_code(self) -> int:
        """0, or 6 (EXIT_BUDGET) when a checked budget failed."""
        return EXIT_BUDGET if self.budgets is not None and self.budgets.status == "fail" else 0

    @property
    def warnings(self) -> list[str]:
        return list(self.experiment.warnings) if self.experiment else []

    @property
    def notices(self) -> list[str]:
        return list(self.experiment.notices) if self.experiment else []

    @property
    def post_hoc_count(self) -> int:
        """Successful post-hoc rounds shown, evaluations (np evaluate) and profiles (rounds of older checkpoints and
        failed ones are counted apart)."""
        if self.experiment is None:
            return 0
        return sum(len(g.rounds) for g in [*self.experiment.post_hoc, *self.experiment.evaluation])


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
