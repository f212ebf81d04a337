"""The records of `np report`: the pipeline rows, post-hoc groups, project view, budgets verdict, the tables,
and the report record that carries them (what the renderers in np_optimizer.report draw; the layer views and the
HTML page's record are in views.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from np_optimizer.errors import EXIT_BUDGET
from np_optimizer.records.base import Record
from np_optimizer.records.codec import SCHEMA_VERSION, JsonValue
from np_optimizer.records.front import FrontView
from np_optimizer.records.index import ExperimentPart
from np_optimizer.records.parts import CompileSummary, Fidelity
from np_optimizer.records.results import EvaluationResult, MetricValue, ProfileResult
from np_optimizer.records.status import BudgetStatus, JobStatus

__all__ = ["Table", "RowMetric", "PipelineRow", "PostHocGroup", "EvaluationGroup", "ExperimentReport", "ProjectRow",
           "ProjectReport", "SortKey", "Pick", "BudgetOutcome", "BudgetVerdict", "ReportRecord", "FINISHED", "PASS",
           "FAIL", "NOT_CHECKED"]

FINISHED = frozenset({JobStatus.SUCCESS, JobStatus.REUSED, JobStatus.FAILED, JobStatus.CANCELED})
PASS, FAIL, NOT_CHECKED = BudgetStatus.PASS, BudgetStatus.FAIL, BudgetStatus.NOT_CHECKED


@dataclass(frozen=True, eq=False, repr=False)
class RowMetric(Record):
    """One figure of a pipeline row: a round's metric (MetricValue) with how its round got it (method, result kind),
    the step's own fidelity (SNR, identical outputs) or lowering (.pte size, ops), or an evaluation's metric (its
    trigger, samples and dataset). None: the row's source does not say."""

    metric_type: str
    value: float | None
    unit: str | None = None
    comparison_model: str | None = None
    component_name: str | None = None
    stat: str | None = None
    source: str | None = None
    method: str | None = None
    result_kind: str | None = None
    identical: bool | None = None
    samples: int | None = None
    dataset: str | None = None
    trigger: str | None = None
    coverage: str | None = None

    @classmethod
    def of(cls, metric: MetricValue, *, method: str | None = None, result_kind: str | None = None,
           trigger: str | None = None, samples: int | None = None, dataset: str | None = None) -> RowMetric:
        return cls(metric.metric_type, metric.value, metric.unit, metric.comparison_model, metric.component_name,
                   metric.stat, metric.source, method, result_kind, None, samples, dataset, trigger, metric.coverage)


@dataclass
class PipelineRow:
    model: str  # input_model | 01_graph_optimize | ...
    checkpoint: str
    step_type: str
    status: str  # the index's copy of job.json's status (a JobStatus value; "" when missing)
    metrics: dict[str, RowMetric] = field(default_factory=dict)
    profile: ProfileResult | None = None  # the inline profile result
    listed: bool = False  # in run.yaml's profile list
    lowering: CompileSummary | None = None  # the index's INDEX_KEYS (None: not lowered)
    fidelity: Fidelity | None = None  # the job's check against INPUT_MODEL (its per-layer file under "layers")

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    def value(self, metric_type: str) -> float | None:
        metric = self.metrics.get(metric_type)
        if metric is not None and metric.identical:
            return math.inf  # outputs identical to INPUT_MODEL's: the best SNR there is
        return None if metric is None else metric.value


@dataclass
class PostHocGroup:
    target: str  # checkpoint name, lower case
    job: str
    rounds: list[ProfileResult]  # SUCCESS rounds, newest first
    hidden: dict[str, int]  # status -> count of rounds not shown


@dataclass
class EvaluationGroup:
    target: str
    rounds: list[EvaluationResult]  # SUCCESS rounds of the current checkpoint, newest first
    hidden: dict[str, int]


@dataclass
class ExperimentReport:
    experiment: ExperimentPart
    rows: list[PipelineRow]
    post_hoc: list[PostHocGroup]
    post_hoc_all: list[ProfileResult]  # every round, time order (for --json)
    profiling_enabled: bool
    method: str | None
    warnings: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    evaluation: list[EvaluationGroup] = field(default_factory=list)  # one per checkpoint (report/evaluation.py)
    evaluation_all: list[EvaluationResult] = field(default_factory=list)  # every evaluation round, for --json
    best: str | None = None  # the best-model rule's pick (a row's model name)


@dataclass(frozen=True, eq=False, repr=False)
class ProjectRow(Record):
    """One experiment of the project view: its output checkpoint's row (None: no steps, or unreadable)."""

    name: str
    status: str  # the experiment's status, or "unreadable"
    step_types: tuple[str, ...] = ()
    output: PipelineRow | None = None


@dataclass(frozen=True, eq=False, repr=False)
class ProjectReport(Record):
    name: str
    device: str
    model_name: str | None
    input_row: PipelineRow | None  # INPUT_MODEL's row from the first experiment that has its metrics
    experiments: tuple[ProjectRow, ...] = ()
    front: FrontView | None = None  # the project's sweep (sweep/trials.json), None when it never ran one
    sweep_warning: str | None = None  # why the sweep's front is not shown (a damaged trials.json)


@dataclass(frozen=True, eq=False, repr=False)
class SortKey(Record):
    token: str
    metric_type: str
    descending: bool


@dataclass(frozen=True, eq=False, repr=False)
class Pick(Record):
    """The value a budget (or the scatter) uses for one checkpoint and metric, in the stored unit, and where it came
    from; `value` None with `reason` when there is none."""

    value: float | None
    kind: str = ""  # measured | estimated | static (pte size) | fidelity (SNR) | evaluated (accuracy)
    source: str = ""
    measurement_id: str | None = None
    reason: str = ""


@dataclass(frozen=True, eq=False, repr=False)
class BudgetOutcome(Record):
    checkpoint: str
    model: str  # the row's name: input_model, 02_graph_quantize ...
    budget: str  # the budget's key: latency_ms, snr_min ...
    metric_type: str
    unit: str
    limit: float
    kind_of_limit: str  # "min" (the value must reach the limit) | "max"
    status: BudgetStatus
    value: float | None  # in the budget's unit
    value_kind: str  # measured | estimated | static | fidelity | evaluated (Pick.kind)
    source: str
    reason: str | None = None
    origin: str = "run.yaml"

    @property
    def minimum(self) -> bool:
        return self.kind_of_limit == "min"

    @property
    def message(self) -> str:
        if self.status == NOT_CHECKED:
            return f"{self.budget}: not checked ({self.reason})"
        rel = ">=" if self.minimum else "<="
        word = "ok" if self.status == PASS else "over budget" if not self.minimum else "under the minimum"
        return f"{self.budget} = {_fmt(self.value)} {self.unit} ({self.value_kind}), budget {rel} {_fmt(self.limit)} " \
               f"{self.unit}: {word}"



@dataclass(frozen=True, eq=False, repr=False)
class BudgetVerdict(Record):
    __json_computed__: ClassVar[dict[str, str]] = {"status": "status", "verdict": "line", "passed": "passed",
                                                    "failed": "failed", "not_checked": "not_checked"}
    __json_order__: ClassVar[tuple[str, ...]] = ("status", "verdict", "checkpoints", "check_all", "passed", "failed",
                                                 "not_checked", "outcomes")

    outcomes: tuple[BudgetOutcome, ...]
    checkpoints: tuple[str, ...]
    check_all: bool = False

    def count(self, status: BudgetStatus) -> int:
        return sum(o.status == status for o in self.outcomes)

    @property
    def status(self) -> BudgetStatus:
        """fail if any failed; pass if at least one passed and none failed; else not checked."""
        if self.count(FAIL):
            return FAIL
        return PASS if self.count(PASS) else NOT_CHECKED

    @property
    def line(self) -> str:
        """The one-line verdict."""
        counts = f"{self.count(PASS)} passed, {self.count(FAIL)} failed, {self.count(NOT_CHECKED)} not checked"
        scope = ", ".join(c.lower() for c in self.checkpoints)
        if self.status == FAIL:
            failed = "; ".join(f"{o.model} {o.budget} {_fmt(o.value)} {o.unit} vs "
                               f"{'>=' if o.minimum else '<='} {_fmt(o.limit)}"
                               for o in self.outcomes if o.status == FAIL)
            return f"Budgets FAILED on {scope} ({counts}): {failed}"
        if self.status == PASS:
            return f"Budgets passed on {scope} ({counts})"
        return f"Budgets NOT CHECKED on {scope}: none of the {len(self.outcomes)} could be checked"

    @property
    def passed(self) -> int:
        return self.count(PASS)

    @property
    def failed(self) -> int:
        return self.count(FAIL)

    @property
    def not_checked(self) -> int:
        return self.count(NOT_CHECKED)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" if 0 < abs(value) < 1 else f"{value:.2f}"


@dataclass(frozen=True, eq=False, repr=False)
class ReportRecord(Record):
    """`np report`: the experiment view (pipeline rows, post-hoc rounds) or the project view, and the --json document.

    `rows` are the pipeline rows that --filter keeps, in --sort order; `data` is the document `np report --json`
    prints (np-interface.md §4 for an experiment). Renderers (np_optimizer.report.tables) turn it into tables."""

    scope: str  # "experiment" | "project"
    data: dict[str, JsonValue]
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
        return EXIT_BUDGET if self.budgets is not None and self.budgets.status == FAIL else 0

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
        return sum(len(g.rounds) for g in self.experiment.post_hoc) + \
            sum(len(g.rounds) for g in self.experiment.evaluation)


@dataclass
class Table:
    """One table of a report view, as every renderer (rich, --plain, HTML) draws it."""

    title: str
    columns: list[str]
    rows: list[list[str]]
    plain_columns: list[str]
    plain_rows: list[list[Any]]
    caption: str = ""
    footnotes: list[str] = field(default_factory=list)
    section: str = ""  # the --plain section name: pipeline, posthoc_profile:<checkpoint>, experiments
