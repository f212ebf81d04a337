"""API: np report (experiment or project scope)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from np_optimizer.errors import NotFoundError, UsageError
from np_optimizer.report.model import ExperimentReport, build_experiment_report, steps_label
from np_optimizer.report.sortfilter import parse_filter, parse_sort
from np_optimizer.report.tables import Table, fmt_number, pipeline_table, post_hoc_tables
from np_optimizer.profiler.render import humanize_count
from np_optimizer.workspace.store import ExperimentStore
from np_optimizer.workspace import resolve_experiment, resolve_project

__all__ = ["ReportView", "report"]


@dataclass
class ReportView:
    scope: str  # "experiment" | "project"
    tables: list[Table]
    warnings: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)  # the --json document
    post_hoc_count: int = 0


def report(*, experiment: str | None = None, project: str | None = None, sort: str | None = None,
           filter_: str | None = None, cwd: Path | None = None) -> ReportView:
    """The experiment report (inside an experiment or with -e), else the project report (--project or a project
    folder)."""
    from np_optimizer.report.json_view import experiment_json

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
        return _project_report(project, cwd)
    built = build_experiment_report(ExperimentStore(exp).read_report())
    built.experiment.setdefault("name", exp.name)
    tables = [pipeline_table(built, keys, conditions), *post_hoc_tables(built.post_hoc)]
    return ReportView("experiment", tables, built.warnings, built.notices, experiment_json(built),
                      post_hoc_count=sum(len(g.rounds) for g in built.post_hoc))


def _project_report(project: str | None, cwd: Path) -> ReportView:
    owner = resolve_project(project, cwd)
    rows: list[list[str]] = []
    plain: list[list[Any]] = []
    data_rows: list[dict[str, Any]] = []
    base: ExperimentReport | None = None
    for exp in owner.experiments():
        try:
            built = build_experiment_report(ExperimentStore(exp).read_report())
        except Exception:  # a damaged experiment must not hide the others
            rows.append([exp.name, "-", "unreadable", *(["-"] * 6)])
            plain.append([exp.name, "", "unreadable", *([""] * 6)])
            data_rows.append({"name": exp.name, "status": "unreadable", "step_types": [], "output": None,
                              "metrics": []})
            continue
        if base is None and any(r.checkpoint == "INPUT_MODEL" and r.metrics for r in built.rows):
            base = built
        steps = [r.step_type for r in built.rows if r.checkpoint != "INPUT_MODEL"]
        output = next((r for r in reversed(built.rows) if r.checkpoint != "INPUT_MODEL"), None)
        values = _values(output)
        status = built.experiment.get("status", "created")
        rows.append([exp.name, steps_label(steps) or "-", status, *values["cells"]])
        plain.append([exp.name, steps_label(steps), status, *values["plain"]])
        data_rows.append({"name": exp.name, "status": status, "step_types": steps,
                          "output": output.checkpoint if output else None, "metrics": values["metrics"]})
    input_row = next((r for r in base.rows if r.checkpoint == "INPUT_MODEL"), None) if base else None
    first = _values(input_row)
    rows.insert(0, ["input_model", "-", "-", *first["cells"]])
    plain.insert(0, ["input_model", "", "", *first["plain"]])
    columns = ["Model", "Steps", "Status", "Latency(ms)", "Memory(MB)", "MACs", "Params", "SNR (output vs input)",
               "Method"]
    caption = f"Each experiment's row shows its output checkpoint; device {owner.info['device']}."
    # Latency and memory columns no experiment has (mlia on a CPU target) are left out, as in the experiment report
    empty = [i for i, c in enumerate(columns) if c in ("Latency(ms)", "Memory(MB)") and all(r[i] == "-" for r in rows)]
    if empty:
        caption += f" No {' or '.join(columns[i].split('(')[0].lower() for i in empty)} from np run's profiling " \
                   "here: see each experiment's post-hoc rounds (np report -e NAME), or measure with `np profile " \
                   "--method on-device`."
        rows = [[cell for i, cell in enumerate(row) if i not in empty] for row in rows]
        columns = [c for i, c in enumerate(columns) if i not in empty]
    table = Table(f"Project: {owner.name}", columns, rows,
                  ["model", "steps", "status", "latency_ms", "memory_mb", "macs", "params", "snr_db", "method"], plain,
                  caption=caption)
    data = {"project": {"name": owner.name, "device": owner.info["device"]},
            "base_model": {"name": owner.info["model"].get("name"), "metrics": first["metrics"]},
            "experiments": data_rows}
    return ReportView("project", [table], data=data)


def _values(row: Any) -> dict[str, Any]:
    if row is None:
        return {"cells": ["-"] * 6, "plain": [""] * 6, "metrics": []}
    latency, memory, macs, params, snr = (row.value(t) for t in ("LATENCY", "MEMORY", "MACS", "PARAMS", "SNR"))
    cells = [fmt_number(latency) if latency is not None else "-", fmt_number(memory) if memory is not None else "-",
             humanize_count(macs) if macs is not None else "-", humanize_count(params) if params is not None else "-",
             "-" if snr is None else ("identical" if snr == float("inf") else f"{snr:.2f}")]
    profile = row.profile if row.profile and row.profile.get("status") == "SUCCESS" else None
    method = f"{profile['method']} ({profile['result_kind']})" if profile else "-"  # how latency/memory were had
    cells.append(method)
    plain = [v if v is not None else "" for v in (latency, memory, macs, params, snr)] + [method if profile else ""]
    return {"cells": cells, "plain": plain,
            "metrics": [{"metric_type": m["metric_type"], "value": m.get("value"), "unit": m.get("unit")}
                        for m in row.metrics.values()]}
