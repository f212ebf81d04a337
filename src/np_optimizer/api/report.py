"""API: np report (experiment or project scope), returned as data; np_optimizer.report.tables renders it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from np_optimizer.errors import ConfigError, NotFoundError, NpError, UsageError
from np_optimizer.records import ReportRecord, to_dict
from np_optimizer.records.front import FrontView
from np_optimizer.report.model import (
    PipelineRow,
    ProjectReport,
    ProjectRow,
    build_experiment_report,
)
from np_optimizer.report.sortfilter import apply_filter, apply_sort, parse_filter, parse_sort
from np_optimizer.workspace import resolve_experiment, resolve_project
from np_optimizer.workspace.store import ExperimentStore

if TYPE_CHECKING:
    from np_optimizer.config.budgets import Budget

__all__ = ["report", "check_report_budgets", "budgets_to_check", "write_html_report"]


def _value(row: PipelineRow, metric_type: str) -> float | None:
    return row.value(metric_type)


def report(*, experiment: str | None = None, project: str | None = None, sort: str | None = None,
           filter_: str | None = None, cwd: Path | None = None, check: bool = False,
           budgets: Sequence[str] | None = None, check_all: bool = False) -> ReportRecord:
    """The experiment report (inside an experiment or with -e), else the project report (--project or a project
    folder). --sort and --filter apply to the experiment's pipeline rows; `data` (the --json document) has them all.

    With `check` (implied by `budgets`, `--budget k=v` overrides of run.yaml's `budgets:`, and by `check_all`) the
    record carries the budget verdict (`record.budgets`, `data["budgets"]`; `record.exit_code` 6 on a failure)."""
    from np_optimizer.report.json_view import experiment_json, project_json

    cwd = cwd or Path.cwd()
    if experiment is not None and project is not None:
        raise UsageError("--project and --experiment cannot be combined.", hint="Give one of them.",
                         code="NP-RPT-400")
    check = check or bool(budgets) or check_all
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
        if check:
            raise UsageError("Budgets are checked on one experiment, not a project.",
                             hint="Run np report --check inside an experiment folder, or give -e NAME.",
                             code="NP-BDG-400")
        view = _project_report(project, cwd)
        return ReportRecord("project", project_json(view), project=view, folder=str(resolve_project(project, cwd).root))
    built = build_experiment_report(ExperimentStore(exp).read_index())
    rows = apply_sort(apply_filter(built.rows, conditions, _value), keys, _value)
    record = ReportRecord("experiment", experiment_json(built), experiment=built, rows=tuple(rows), sort=tuple(keys),
                          folder=str(exp.root))
    if check:
        record = check_report_budgets(record, exp.root / "run.yaml", budgets or (), check_all=check_all)
    return record


def budgets_to_check(*, experiment: str | None, project: str | None, overrides: Sequence[str],
                     cwd: Path | None = None) -> tuple[Path, list[Budget]]:
    """The experiment folder and the budgets `np run --check` will check after the run, found before it runs: a bad
    --budget (exit 2), a bad budgets: section (exit 5) or no budget at all (exit 3) stop it before anything runs."""
    from np_optimizer.config.budgets import load_budgets, merge_budgets, parse_budget_overrides

    exp = resolve_experiment(experiment, project, cwd or Path.cwd())
    budgets = merge_budgets(load_budgets(exp.root / "run.yaml"), parse_budget_overrides(list(overrides)))
    if not budgets:
        raise ConfigError("Nothing to check: run.yaml has no budgets: section and no --budget was given.",
                          hint="Add e.g. `budgets:` with `  latency_ms: 20` to run.yaml, or pass --budget "
                               "latency_ms=20.", code="NP-BDG-404")
    return exp.root, budgets


def check_report_budgets(record: ReportRecord, run_yaml: Path, overrides: Sequence[str], *,
                         check_all: bool = False) -> ReportRecord:
    """The record with its budget verdict: run.yaml's `budgets:` (its other sections are not read) with the
    `metric=value` overrides on top. No budget at all is NP-BDG-404 (exit 3)."""
    from np_optimizer.config.budgets import load_budgets, merge_budgets, parse_budget_overrides
    from np_optimizer.report.budgets import check_budgets

    assert record.experiment is not None  # an experiment record: the caller built it
    given = parse_budget_overrides(list(overrides))
    budgets = merge_budgets(load_budgets(run_yaml), given)
    if not budgets:
        raise ConfigError("Nothing to check: run.yaml has no budgets: section and no --budget was given.",
                          hint="Add e.g. `budgets:` with `  latency_ms: 20` to run.yaml, or pass --budget "
                               "latency_ms=20.", code="NP-BDG-404")
    verdict = check_budgets(record.experiment, budgets, check_all=check_all)
    return dataclasses.replace(record, budgets=verdict, data={**record.data, "budgets": to_dict(verdict)})


def _project_report(project: str | None, cwd: Path) -> ProjectReport:
    owner = resolve_project(project, cwd)
    rows: list[ProjectRow] = []
    input_row: PipelineRow | None = None
    for exp in owner.experiments():
        try:
            built = build_experiment_report(ExperimentStore(exp).read_index())
        except NpError:  # a damaged experiment (newer np, unreadable files) must not hide the others
            rows.append(ProjectRow(exp.name, "unreadable"))
            continue
        if input_row is None:
            input_row = next((r for r in built.rows if r.checkpoint == "INPUT_MODEL" and r.metrics), None)
        steps = tuple(r.step_type for r in built.rows if r.checkpoint != "INPUT_MODEL")
        output = next((r for r in reversed(built.rows) if r.checkpoint != "INPUT_MODEL"), None)
        rows.append(ProjectRow(exp.name, str(built.experiment.status), steps, output))
    front, sweep_warning = _sweep_front(owner.root)
    return ProjectReport(owner.name, owner.info["device"], owner.info["model"].get("name"), input_row, tuple(rows),
                         front=front, sweep_warning=sweep_warning)


def _sweep_front(project_root: Path) -> tuple[FrontView | None, str | None]:
    """The front of the project's sweep (None: it never ran one), or the one-line warning a damaged trials.json
    gives instead: it must not hide the rest of the project report."""
    from np_optimizer.report.front import front_view
    from np_optimizer.workspace.sweep_files import read_sweep_record

    try:
        record = read_sweep_record(project_root)
        return (front_view(record) if record is not None else None), None
    except NpError as error:
        return None, f"The sweep's front is not shown: {error.message}" + (f" {error.hint}" if error.hint else "")
    except OSError as error:  # unreadable (permissions)
        return None, f"The sweep's front is not shown: {error}"
    except (AttributeError, TypeError, ValueError, KeyError) as error:  # JSON of another shape than np writes
        return None, f"The sweep's front is not shown: sweep/trials.json holds a record np cannot read ({error}). " \
                     "np sweep --resume rebuilds it from the study journal (sweep/study.journal)."


def write_html_report(record: ReportRecord, file: Path | None = None) -> Path:
    """Write `np report --html`: one self-contained page, atomically, to `file` (default report.html in the experiment
    or project folder); returns its path. A folder in the way or a missing parent folder is NP-CFG-400."""
    from np_optimizer.files import write_text
    from np_optimizer.report.html import render_html
    from np_optimizer.report.pages import experiment_pages

    target = Path(file) if file is not None else Path(record.folder) / "report.html"
    if target.is_dir():
        raise ConfigError(f"{target} is a folder.", hint="Give a file name, e.g. np report --html report.html.",
                          code="NP-CFG-400")
    if not target.parent.is_dir():
        raise ConfigError(f"Cannot write {target}: the folder {target.parent} does not exist.",
                          hint="Create the folder first, or give a path in an existing one.", code="NP-CFG-400")
    write_text(target, render_html(record, experiment_pages(record)))
    return target.resolve()
