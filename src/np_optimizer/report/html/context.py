"""What the HTML page shows for one experiment, built from the stored report (report.json, job.json, raw samples):
the pipeline table with deltas, one chart per metric, the scatter, the measured rounds' spread, the post-hoc rounds,
warnings, the glossary and the budgets. Reads files only (no torch)."""

from __future__ import annotations

from dataclasses import dataclass, field

from markupsafe import Markup

from np_optimizer.config.budgets import BUDGET_METRICS, Budget
from np_optimizer.formats import fmt_metric, is_finite
from np_optimizer.metrics import SHOWN
from np_optimizer.records import ExperimentPage
from np_optimizer.records.parts import NO_COMPILE
from np_optimizer.records.report import FAIL, NOT_CHECKED, PASS, RowMetric, Table
from np_optimizer.records.results import ProfileResult
from np_optimizer.records.status import CompileStatus, RoundStatus
from np_optimizer.report.budgets import BudgetVerdict
from np_optimizer.report.html.charts import Bar, BudgetLine, Series, bar_chart
from np_optimizer.report.html.sections import Section, SectionContext, render_sections
from np_optimizer.report.model import ExperimentReport, PipelineRow
from np_optimizer.report.tables import post_hoc_tables

__all__ = ["Cell", "Row", "Chart", "ExperimentView", "experiment_view", "CHART_METRICS", "SHOWN", "is_finite", "fmt_metric",
           "metric_kind"]

CHART_METRICS = ("LATENCY", "MEMORY", "MODEL_WEIGHT_MEMORY", "PTE_SIZE", "SNR")
_NOT_COLUMNS = {"TOTAL_OPS"}  # shown inside Delegated ops
_PROFILED = {"LATENCY", "MEMORY", "MODEL_WEIGHT_MEMORY", "MACS", "PARAMS"}
_HOW = {
    "PTE_SIZE": "bytes of the .pte compiled for the project's device (static); MB = MiB",
    "SNR": "signal-to-noise ratio of each checkpoint's outputs against INPUT_MODEL's on the evaluation inputs, the "
           "minimum over output tensors (dB); 'identical' when the outputs are bit-identical",
    "DELEGATED_OPS": "ops inside the backend's delegate / all ops of the compiled program (static)",
    "MAX_ABS_ERROR": "largest absolute difference of the outputs against INPUT_MODEL's",
}


@dataclass(frozen=True)
class Cell:
    text: str
    metric: str = ""
    value: float | None = None  # as stored (np report --json); None for text cells
    delta: str = ""  # change against INPUT_MODEL
    kind: str = ""  # estimated | measured
    title: str = ""  # how it was obtained
    identical: bool = False


@dataclass(frozen=True)
class Row:
    model: str
    checkpoint: str
    step_type: str
    status: str
    is_output: bool
    cells: list[Cell]
    budget: str = ""


@dataclass(frozen=True)
class Chart:
    metric: str
    title: str
    svg: Markup
    bars: int
    caption: str = ""


@dataclass
class ExperimentView:
    name: str
    status: str
    device: str
    runtime: str
    backend: str
    versions: list[tuple[str, str]]
    columns: list[tuple[str, str, str]]  # (metric, header, unit)
    rows: list[Row]
    charts: list[Chart]
    scatter: Markup | None
    scatter_caption: str
    boxes: Markup | None
    box_notes: list[str]
    post_hoc: list[Table]
    warnings: list[str]
    notices: list[str]
    glossary: list[tuple[str, str, list[str]]]  # (metric, unit, how obtained)
    budgets: BudgetVerdict | None
    budgets_checked: bool  # by --check (exit code) rather than shown from run.yaml
    sections: list[Section] = field(default_factory=list)


def _cell(row: PipelineRow, metric_type: str, base: PipelineRow | None) -> Cell:
    metric = row.metrics.get(metric_type)
    if metric is None:
        text = "(ref)" if metric_type == "SNR" and row.checkpoint == "INPUT_MODEL" else (
            "-" if row.finished else "--")
        return Cell(text, metric_type)
    if metric.identical:
        return Cell("identical", metric_type, None, identical=True, title=str(metric.source or ""))
    lowering = row.lowering or NO_COMPILE
    if metric_type in ("PTE_SIZE", "DELEGATED_OPS") and lowering.status == CompileStatus.UNSUPPORTED:
        return Cell("n/a", metric_type, title=str(lowering.reason or "lowering unsupported on this device"))
    value = metric.value
    if not is_finite(value):
        return Cell("-", metric_type)
    text = fmt_metric(metric_type, float(value))
    if metric_type == "DELEGATED_OPS":
        total = row.value("TOTAL_OPS")
        text += f"/{total:.0f}" if total else ""
    delta = ""
    base_value = base.value(metric_type) if base is not None and base is not row else None
    if metric_type not in ("SNR", "DELEGATED_OPS", "MAX_ABS_ERROR") and is_finite(base_value) and base_value:
        delta = f"{(float(value) - float(base_value)) / float(base_value):+.0%}"
    return Cell(text, metric_type, float(value), delta, metric_kind(metric, str(metric.result_kind or "")),
                str(metric.source or ""))


def _columns(report: ExperimentReport) -> list[tuple[str, str, str]]:
    present = {t for r in report.rows for t, m in r.metrics.items()
               if m.value is not None or m.identical} - _NOT_COLUMNS
    known = [t for t in SHOWN if t in present]
    others = sorted(present - set(SHOWN))  # metrics other views add (accuracy...) get a column of their own
    units = {t: str(next(r.metrics[t].unit for r in report.rows if t in r.metrics)) for t in others}
    return [(t, SHOWN[t][0], SHOWN[t][1]) for t in known] + \
        [(t, t.replace("_", " ").capitalize(), units[t]) for t in others]


def metric_kind(metric: RowMetric, result_kind: str) -> str:
    """estimated | measured, or static for a count a round carries but did not measure or estimate (the weight
    bytes, MACs and params an on-device round takes from the job record)."""
    return "static" if str(metric.source or "").startswith("static count") else result_kind


def _series_key(result: ProfileResult, trigger: str, metric: RowMetric) -> tuple[str, str, str]:
    kind = metric_kind(metric, result.result_kind)
    method, device = result.method, result.device
    when = "np run" if trigger == "RUN_INLINE" else "post hoc"
    return f"{kind}|{method}|{device}|{when}", f"{kind}: {method} on {device} ({when})", str(kind)


def _bars(report: ExperimentReport, metric_type: str) -> tuple[list[Series], list[Bar], list[tuple[str, str]]]:
    """The bars of one metric: the inline round of every checkpoint, and the newest post-hoc round per (device,
    method) of each; .pte size and SNR from the jobs."""
    scale = SHOWN[metric_type][2]
    series: dict[str, Series] = {}
    bars: list[Bar] = []
    notes: list[tuple[str, str]] = []

    def add(key: str, label: str, kind: str, checkpoint: str, stored: float) -> None:
        if key not in series:
            series[key] = Series(key, label, kind, len(series))
        shown = stored / scale
        text = f"{fmt_metric(metric_type, stored)} {SHOWN[metric_type][1]}" + (f" ({kind})" if kind in (
            "estimated", "measured") else "")
        bars.append(Bar(checkpoint, key, shown, stored, text))

    device = str(report.experiment.device or "")
    for row in report.rows:
        name = row.checkpoint.lower()
        metric = row.metrics.get(metric_type)
        if metric_type in _PROFILED:
            if metric is not None and is_finite(metric.value) and row.profile:
                key, label, kind = _series_key(row.profile, "RUN_INLINE", metric)
                add(key, label, kind, name, float(metric.value))
            group = next((g for g in report.post_hoc if g.target == name), None)
            seen: set[tuple[str, str]] = set()
            for result in group.rounds if group else []:  # newest first: the first of each (device, method)
                found = result.metric(metric_type)
                pair = (result.device, result.method)
                if found is None or not is_finite(found.value) or pair in seen:
                    continue
                seen.add(pair)
                key, label, kind = _series_key(result, "POSTHOC", RowMetric.of(found))
                add(key, label, kind, name, float(found.value))
        elif metric_type == "PTE_SIZE":
            if metric is not None and is_finite(metric.value) and (row.lowering or NO_COMPILE).status != \
                    CompileStatus.UNSUPPORTED:
                add("static|pte", f"static: .pte compiled for {device}", "static", name, float(metric.value))
        elif metric_type == "SNR" and metric is not None:
            if metric.identical:
                notes.append((name, "identical to INPUT_MODEL (no finite SNR)"))
            elif is_finite(metric.value):
                add("fidelity|snr", "fidelity: outputs vs INPUT_MODEL", "fidelity", name, float(metric.value))
    return list(series.values()), bars, notes


def _charts(report: ExperimentReport, budgets: dict[str, Budget], prefix: str) -> list[Chart]:
    charts = []
    checkpoints = [r.checkpoint.lower() for r in report.rows]
    for index, metric_type in enumerate(CHART_METRICS):
        series, bars, notes = _bars(report, metric_type)
        if not bars and not notes:
            continue
        header, unit, _scale = SHOWN[metric_type]
        budget = next((b for b in budgets.values() if b.metric.metric_type == metric_type), None)
        line = None if budget is None else BudgetLine(budget.limit, f"budget {'≥' if budget.metric.minimum else '≤'} "
                                                                    f"{budget.limit:g} {unit}")
        svg = bar_chart(f"{prefix}c{index}", metric_type, header, unit, checkpoints, series, bars, line, notes)
        kinds = sorted({s.kind for s in series})
        caption = f"{header} in {unit} ({' and '.join(kinds)}); hatched bars are estimates, solid bars measured " \
                  "or static values." + (f" The dashed line is the budget ({budget.origin})." if budget else "")
        charts.append(Chart(metric_type, header, svg, len(bars), caption))
    return charts


def _versions(report: ExperimentReport) -> list[tuple[str, str]]:
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str] = {}
    try:
        found["np"] = version("np-optimizer")
    except PackageNotFoundError:
        pass
    results = [r.profile for r in report.rows if r.profile] + report.post_hoc_all
    for result in results:
        provenance = result.provenance
        tool, tool_version = provenance.get("tool"), provenance.get("tool_version")
        if tool and tool_version:
            found.setdefault(str(tool), str(tool_version))
        for extra in ("torch", "python"):
            if provenance.get(extra):
                found.setdefault(extra, str(provenance[extra]))
        if provenance.get("target_profile"):
            found.setdefault("MLIA target profile", str(provenance["target_profile"]))
    return sorted(found.items())


def _glossary(report: ExperimentReport, columns: list[tuple[str, str, str]]) -> list[tuple[str, str, list[str]]]:
    how: dict[str, dict[str, None]] = {}
    units: dict[str, str] = {}
    metrics = [m for r in report.rows for m in r.metrics.values()]
    metrics += [RowMetric.of(m) for r in report.post_hoc_all if r.status == RoundStatus.SUCCESS for m in r.metrics]
    for metric in metrics:
        metric_type = str(metric.metric_type)
        units.setdefault(metric_type, str(metric.unit or ""))
        text = _HOW.get(metric_type) or str(metric.source or "")
        stat = metric.stat
        if text:
            how.setdefault(metric_type, {})[text + (f" [{stat}]" if stat else "")] = None
    shown_units = {t: u for t, _h, u in columns}
    return [(t, shown_units.get(t, units.get(t, "")) + ("" if t not in shown_units or shown_units[t] == units.get(t)
                                                       else f" (stored in {units.get(t)})"), list(how[t]))
            for t in sorted(how)]


def _budgets(page: ExperimentPage, warnings: list[str]) -> dict[str, Budget]:
    """The budgets the charts draw a line for (--check's, else run.yaml's, shown not enforced)."""
    if page.budget_warning:
        warnings.append(page.budget_warning)
    return {key: Budget(key, limit, origin) for key, limit, origin in page.budgets if key in BUDGET_METRICS}


def experiment_view(page: ExperimentPage, prefix: str = "e1") -> ExperimentView:
    """What one experiment's section shows; `prefix` keeps SVG ids unique when a project page holds several."""
    report = page.report
    experiment = report.experiment
    warnings = list(report.warnings)
    shown_verdict = page.verdict
    budgets = _budgets(page, warnings)
    columns = _columns(report)
    base = next((r for r in report.rows if r.checkpoint == "INPUT_MODEL"), None)
    steps = [r for r in report.rows if r.checkpoint != "INPUT_MODEL"]
    output = steps[-1].model if steps else None
    rows = []
    for row in report.rows:
        status = ""
        if shown_verdict is not None:
            mine = [o for o in shown_verdict.outcomes if o.model == row.model]
            status = "" if not mine else FAIL if any(o.status == FAIL for o in mine) else \
                PASS if any(o.status == PASS for o in mine) else NOT_CHECKED
        rows.append(Row(row.model, row.checkpoint, "-" if row is base else row.step_type, row.status,
                        row.model == output, [_cell(row, t, base) for t, _h, _u in columns], status))
    for group in report.post_hoc:
        for result in group.rounds:
            for text in result.warnings:
                entry = f"{group.target} on {result.device} ({result.method}): {text}"
                if entry not in warnings:
                    warnings.append(entry)
    from np_optimizer.report.html.figures import measured_spread, tradeoff_scatter

    scatter, scatter_caption = tradeoff_scatter(report, prefix)
    boxes, box_notes = measured_spread(page, prefix)
    return ExperimentView(
        name=page.name, status=str(experiment.status),
        device=str(experiment.device or ""), runtime=str(experiment.runtime or ""),
        backend=str(experiment.backend or ""), versions=_versions(report), columns=columns, rows=rows,
        charts=_charts(report, budgets, prefix), scatter=scatter, scatter_caption=scatter_caption, boxes=boxes,
        box_notes=box_notes, post_hoc=post_hoc_tables(report.post_hoc), warnings=warnings,
        notices=list(report.notices), glossary=_glossary(report, columns), budgets=shown_verdict,
        budgets_checked=page.checked, sections=render_sections(SectionContext(page)))
