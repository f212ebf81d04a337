"""API: np report (experiment or project scope), returned as data; np_optimizer.report.tables renders it."""

from __future__ import annotations

from pathlib import Path

from np_optimizer.errors import NotFoundError, NpError, UsageError
from np_optimizer.records import ReportRecord
from np_optimizer.report.model import (
    PipelineRow,
    ProjectReport,
    ProjectRow,
    build_experiment_report,
)
from np_optimizer.report.sortfilter import apply_filter, apply_sort, parse_filter, parse_sort
from np_optimizer.workspace import resolve_experiment, resolve_project
from np_optimizer.workspace.store import ExperimentStore

__all__ = ["report"]


def _value(row: PipelineRow, metric_type: str) -> float | None:
    return row.value(metric_type)


def report(*, experiment: str | None = None, project: str | None = None, sort: str | None = None,
           filter_: str | None = None, cwd: Path | None = None) -> ReportRecord:
    """The experiment report (inside an experiment or with -e), else the project report (--project or a project
    folder). --sort and --filter apply to the experiment's pipeline rows; `data` (the --json document) has them all."""
    from np_optimizer.report.json_view import experiment_json, project_json

    cwd = cwd or Path.cwd()
    if experiment is not None and project is not None:
        raise UsageError("--project and --experiment cannot be combined.", hint="Give one of them.",
                         code="NP-RPT-400")
    keys, conditions = parse_sort(sort), parse_filter(filter_)
    exp = None
    if experiment is not None:
        exp = resolve_experiment(experiment, None, cwd)
    elif project is None:
        try:
            exp = resolve_experiment(None, None, cwd)  # the nearest folder holding run.yaml
        except NotFoundError:
            exp = None  # not inside an experiment: the project report
    if exp is None:
        view = _project_report(project, cwd)
        return ReportRecord("project", project_json(view), project=view)
    built = build_experiment_report(ExperimentStore(exp).read_report())
    built.experiment.setdefault("name", exp.name)
    rows = apply_sort(apply_filter(built.rows, conditions, _value), keys, _value)
    return ReportRecord("experiment", experiment_json(built), experiment=built, rows=tuple(rows), sort=tuple(keys))


def _project_report(project: str | None, cwd: Path) -> ProjectReport:
    owner = resolve_project(project, cwd)
    rows: list[ProjectRow] = []
    input_row: PipelineRow | None = None
    for exp in owner.experiments():
        try:
            built = build_experiment_report(ExperimentStore(exp).read_report())
        except NpError:  # a damaged experiment (newer np, unreadable files) must not hide the others
            rows.append(ProjectRow(exp.name, "unreadable"))
            continue
        if input_row is None:
            input_row = next((r for r in built.rows if r.checkpoint == "INPUT_MODEL" and r.metrics), None)
        steps = tuple(r.step_type for r in built.rows if r.checkpoint != "INPUT_MODEL")
        output = next((r for r in reversed(built.rows) if r.checkpoint != "INPUT_MODEL"), None)
        rows.append(ProjectRow(exp.name, str(built.experiment.get("status", "created")), steps, output))
    return ProjectReport(owner.name, owner.info["device"], owner.info["model"].get("name"), input_row, tuple(rows))
