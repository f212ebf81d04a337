"""The report renderer: a ReportRecord as tables of formatted cells (title, columns, cells, footnotes, and the
--plain columns and values), which the CLI prints as rich tables or TSV sections."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from np_optimizer.backends import BACKENDS
from np_optimizer.devices import DEVICES
from np_optimizer.formats import fmt_number, humanize_count, mib
from np_optimizer.layers.coverage import PARTIAL_MARK
from np_optimizer.metrics import HEADLINE
from np_optimizer.records.codec import as_object
from np_optimizer.records.parts import NO_COMPILE
from np_optimizer.records.results import ProfileResult
from np_optimizer.report.model import ExperimentReport, PipelineRow, PostHocGroup, ProjectReport, steps_label
from np_optimizer.report.sortfilter import SortKey

if TYPE_CHECKING:
    from np_optimizer.records import ReportRecord

from np_optimizer.records.report import RowMetric, Table
from np_optimizer.records.status import CompileStatus, RoundStatus

__all__ = ["Table", "report_tables", "header_rows", "next_step", "pipeline_table", "post_hoc_tables",
           "project_table", "fmt_number"]

_BY_NAME = {d.name: d for d in DEVICES}
NOT_FINISHED, NO_VALUE, NOT_GIVEN = "--", "-", "n/a"
FOOTNOTES = {
    NOT_FINISHED: "--  the row is not finished yet",
    NO_VALUE: "-   finished, but no value (not listed under profile:, or its profiling failed)",
}


def report_tables(record: ReportRecord) -> list[Table]:
    """The tables of a report, in print order: the pipeline then one per post-hoc checkpoint, or the project's."""
    if record.project is not None:  # the project's table, then its sweep's trials and front (report/front.py)
        from np_optimizer.report.front import front_table

        front = record.project.front
        return [project_table(record.project), *([front_table(front)] if front is not None else [])]
    if record.experiment is None:
        return []
    from np_optimizer.report.evaluation import evaluation_tables

    return [pipeline_table(record.experiment, list(record.rows), list(record.sort)),
            *evaluation_tables(record.experiment.evaluation), *post_hoc_tables(record.experiment.post_hoc)]


def header_rows(record: ReportRecord) -> list[list[Any]]:
    """The --plain header section: the scalar fields of the experiment (or project) part of the --json document."""
    head = as_object(record.data.get(record.scope))
    return [[k, v] for k, v in head.items() if not isinstance(v, (dict, list))]


def next_step(record: ReportRecord) -> str | None:
    """What to run next after an experiment report; measuring on this machine only makes sense for a CPU target
    (an NPU's figures come from MLIA)."""
    if record.scope != "experiment":
        return None
    backend = BACKENDS.find(str(as_object(record.data.get("experiment")).get("backend")))
    on_cpu = backend is not None and backend.runs_on_host
    return "Next: np report --sort latency" + ("   |   np profile --method on-device -d host" if on_cpu else "")


def _fmt_snr(metric: RowMetric) -> str:
    if metric.identical:
        return "identical"
    return "-" if metric.value is None else f"{metric.value:.2f}"


def _value(metric: RowMetric) -> float:
    """The value of a metric the table shows (a cell is formatted only when it has one)."""
    assert metric.value is not None
    return metric.value


# (header, metric type, plain column, cell formatter, optional column)
_Column = tuple[str, str, str, Callable[[RowMetric], str], bool]
_COLUMNS: list[_Column] = [
    ("Memory(MB)", "MEMORY", "memory_mb", lambda m: fmt_number(_value(m)), False),
    ("Latency(ms)", "LATENCY", "latency_ms", lambda m: fmt_number(_value(m)), False),
    ("MACs", "MACS", "macs", lambda m: humanize_count(m.value), True),
    ("Params", "PARAMS", "params", lambda m: humanize_count(m.value), True),
    ("Weight Memory(MB)", "MODEL_WEIGHT_MEMORY", "model_weight_memory_mb", lambda m: f"{mib(_value(m)):.2f}", True),
    ("SNR (vs input)", "SNR", "snr_db", _fmt_snr, True),
    ("Top1", "TOP1_ACCURACY", "top1_accuracy", lambda m: f"{m.value:.4f}", True),
    ("Top5", "TOP5_ACCURACY", "top5_accuracy", lambda m: f"{m.value:.4f}", True),
]


def _coverage(row: PipelineRow) -> dict[str, Any]:
    """The method's NPU coverage figures of the row's round ({} when it gives none)."""
    found = row.profile.extras.get("coverage") if row.profile is not None else None
    return found if isinstance(found, dict) else {}


def _coverage_cell(row: PipelineRow) -> str:
    coverage = _coverage(row)
    if not coverage:
        return NO_VALUE
    if coverage.get("npu_op_share_pct") is None:
        return "unknown" + (f" {PARTIAL_MARK}" if coverage.get("partial") else "")
    macs = coverage.get("npu_mac_share_pct")
    return f"{coverage['npu_op_share_pct']:.1f}% / " + ("-" if macs is None else f"{macs:.1f}%")


def _plain_value(metric: RowMetric | None, metric_type: str) -> Any:
    if metric is None or metric.value is None:
        return ""
    if metric_type == "MODEL_WEIGHT_MEMORY":
        return round(mib(metric.value), 4)
    return metric.value


def _gives(row: PipelineRow, metric_type: str, device_name: str) -> bool:
    """Can the row's profiling combination give this metric at all?"""
    device = _BY_NAME.get(device_name)
    method = row.profile.method if row.profile is not None else None
    if metric_type == "SNR" or device is None or method is None:
        return True
    support = device.method(method)
    return support is None or metric_type in {str(m) for m in support.metrics}


def _expected(report: ExperimentReport) -> set[str]:
    """Metrics the experiment's profiling combination gives (so a running experiment already shows their columns),
    plus SNR when there are steps to compare with INPUT_MODEL."""
    expected = {"SNR"} if any(r.checkpoint != "INPUT_MODEL" for r in report.rows) else set()
    device = _BY_NAME.get(report.experiment.device or "")
    support = device.method(report.method) if device is not None and report.method else None
    if report.profiling_enabled and support is not None:
        expected |= {str(m) for m in support.metrics}
    return expected


def pipeline_table(report: ExperimentReport, rows: Sequence[PipelineRow], sort: Sequence[SortKey]) -> Table:
    """The pipeline table of `rows` (the ones --filter kept, in --sort order); columns follow the whole report.

    Long because: the columns, cells, --plain values, caption and footnotes of one table are decided together.
    """
    experiment = report.experiment
    device_name = experiment.device or ""
    shown = [c for c in _COLUMNS if c[1] in _expected(report) or any(r.value(c[1]) is not None for r in report.rows)]
    lowered = any(r.value("PTE_SIZE") for r in report.rows)
    backend = BACKENDS.find(str(experiment.backend))
    delegated_column = backend.delegated_column if backend is not None else None
    methods = {(r.profile.method, r.profile.result_kind) for r in report.rows
               if r.profile and r.profile.status == RoundStatus.SUCCESS}
    show_method = len(methods) > 1
    columns = ["Model", "Type", "Status"] + [c[0] for c in shown]
    plain_columns = ["model", "type", "status"] + [c[2] for c in shown]
    if lowered:
        columns.append("PTE Size(MB)")
        plain_columns.append("pte_size_bytes")
        if delegated_column:
            columns.append(delegated_column)
            plain_columns += ["delegated_ops", "total_ops"]
    covered = any(_coverage(r) for r in report.rows)
    if covered:
        columns.append("On NPU (ops / MACs)")
        plain_columns += ["npu_op_share_pct", "npu_mac_share_pct", "partial_totals"]
    if show_method:
        columns.append("Method")
        plain_columns.append("method")
    input_pte = next((r.value("PTE_SIZE") for r in report.rows if r.checkpoint == "INPUT_MODEL"), None)
    steps = [r for r in report.rows if r.checkpoint != "INPUT_MODEL"]
    output = steps[-1].model if steps else None  # OUTPUT_MODEL: the last step's checkpoint
    used: set[str] = set()
    cells, plain = [], []
    for row in rows:
        is_input = row.checkpoint == "INPUT_MODEL"
        name = row.model + (" (output)" if row.model == output else "")
        line = [name, "-" if is_input else row.step_type, "-" if is_input and row.finished else row.status]
        plain_line: list[Any] = [row.model, "" if is_input else row.step_type, row.status]
        for header, metric_type, _plain, fmt, _optional in shown:
            metric = row.metrics.get(metric_type)
            if metric is not None and (metric.value is not None or metric.identical):
                partial = metric_type == "LATENCY" and bool(row.profile and row.profile.partial)
                line.append(fmt(metric) + (" (partial)" if partial else "")  # fewer runs than asked: timeout
                            + (f" {PARTIAL_MARK}" if metric.coverage else ""))  # NPU part of the model only
            elif metric_type == "SNR" and is_input:
                line.append("(ref)")  # the reference every SNR is measured against
            else:
                mark = NOT_FINISHED if not row.finished else (
                    NOT_GIVEN if row.profile and not _gives(row, metric_type, device_name) else NO_VALUE)
                used.add(mark)
                line.append(mark)
            plain_line.append(_plain_value(metric, metric_type))
        if lowered:
            size = row.value("PTE_SIZE")
            unsupported = (row.lowering or NO_COMPILE).status == CompileStatus.UNSUPPORTED
            if size and not unsupported:
                change = f" ({(size - input_pte) / input_pte:+.0%})" if input_pte and not is_input else ""
                line.append(f"{mib(size):.3f}{change}")
            else:
                line.append("n/a" if unsupported else (NOT_FINISHED if not row.finished else NO_VALUE))
                used.add("lowering" if unsupported else (NOT_FINISHED if not row.finished else NO_VALUE))
            plain_line.append(size or "")
            if delegated_column:
                delegated, total = row.value("DELEGATED_OPS"), row.value("TOTAL_OPS")
                line.append(f"{delegated}/{total}" if total else NO_VALUE)
                plain_line += [delegated if total else "", total or ""]
        if covered:
            line.append(_coverage_cell(row))
            coverage = _coverage(row)
            marked = sorted({m.metric_type for m in row.metrics.values() if m.coverage})
            plain_line += [coverage.get("npu_op_share_pct") or "", coverage.get("npu_mac_share_pct") or "",
                           ",".join(marked)]  # the columns whose value covers the NPU part only
        if show_method:
            profile = row.profile
            line.append(f"{profile.method} ({profile.result_kind})" if profile else "-")
            plain_line.append(profile.method if profile else "")
        cells.append(line)
        plain.append(plain_line)
    title = f"Experiment: {experiment.name}"
    if sort:
        title += " (sorted by " + ", ".join(f"{k.token.capitalize()} {'DESC' if k.descending else 'ASC'}"
                                            for k in sort) + ")"
    caption = ""
    if len(methods) == 1:
        method, kind = next(iter(methods))
        caption = f"Profiled with {method} ({kind}) for {device_name} / {experiment.runtime} / " \
                  f"{experiment.backend}."
    footnotes = [FOOTNOTES[m] for m in (NOT_FINISHED, NO_VALUE) if m in used]
    if NOT_GIVEN in used:
        footnotes.append(f"n/a not given by this method on {device_name}; see the warning below")
    if "lowering" in used:
        reasons = sorted({(r.lowering or NO_COMPILE).reason or "" for r in rows
                          if (r.lowering or NO_COMPILE).status == CompileStatus.UNSUPPORTED})
        footnotes.append(f"n/a (PTE Size) lowering unsupported on {device_name}: {'; '.join(reasons)}")
    if any(m.coverage for r in rows for m in r.metrics.values()):
        footnotes.append(f"{PARTIAL_MARK} partial total: it covers the ops on the NPU only, the rest of the model "
                         "runs on the CPU and was not estimated (see the warning, and np report --layers)")
    if output is not None:
        footnotes.append(f"(output) {output} is OUTPUT_MODEL, the checkpoint of run.yaml's last step")
    if any(r.metrics.get("SNR") for r in rows):
        footnotes.append("SNR (dB) of each checkpoint's outputs against INPUT_MODEL's, on the evaluation inputs")
    footnotes += _accuracy_footnotes(report)
    return Table(title, columns, cells, plain_columns, plain, caption, footnotes, section="pipeline")


def _accuracy_footnotes(report: ExperimentReport) -> list[str]:
    """Where the accuracy figures come from (what ran, on how many samples) and the best-model rule's pick."""
    from np_optimizer.report.evaluation import BEST_RULE

    out = []
    sources = {(m.source, m.trigger) for r in report.rows for k, m in r.metrics.items()
               if k in ("TOP1_ACCURACY", "TOP5_ACCURACY")}
    for source, trigger in sorted(sources, key=str):
        out.append(f"Top1/Top5 (fraction correct{'; np evaluate' if trigger == 'POSTHOC' else ''}): {source}")
    if report.best and (sources or any(r.value("LATENCY") is not None for r in report.rows)):
        out.append(f"Best model ({BEST_RULE}): {report.best}")
    return out


_POST_HOC_COLUMNS = ["Started (UTC)", "Device", "Runtime", "Backend", "Method", "Latency(ms)", "Memory(MB)",
                     "Weight Memory(MB)", "MACs", "Params"]
_POST_HOC_PLAIN = ["measurement_ref_id", "status", "device", "runtime", "backend", "method", "latency_ms",
                   "memory_mb", "model_weight_memory_mb", "macs", "params"]
_POST_HOC_LEADING = 5  # the columns before the metrics, always shown


def _metric_of(result: ProfileResult, metric_type: str) -> RowMetric | None:
    metric = result.metric(metric_type)
    return None if metric is None else RowMetric.of(metric)


def _device_cell(result: ProfileResult) -> str:
    """The device, and for a farm round the board it ran on (the labgrid place): `raspberry_pi_5 @ rpi5-a`."""
    farm = result.provenance.get("farm")
    place = farm.get("place") if isinstance(farm, dict) else None
    return f"{result.device} @ {place}" if place else result.device


def post_hoc_tables(groups: list[PostHocGroup]) -> list[Table]:
    """One table per checkpoint; a metric column no round gives (latency from mlia on a CPU, say) is left out.
    The --plain columns stay fixed, so scripts can rely on them."""
    tables = []
    for group in groups:
        cells, plain = [], []
        for result in group.rounds:
            metrics = [_metric_of(result, t) for t in HEADLINE_ORDER]
            method = result.method + (" (partial)" if result.partial else "")
            cells.append([result.started_at[:16].replace("T", " "), _device_cell(result),
                          result.runtime, result.backend, method,
                          *(_cell(m, t) for m, t in zip(metrics, HEADLINE_ORDER))])
            plain.append([result.measurement_id, result.status, result.device,
                          result.runtime, result.backend, result.method,
                          *(_plain_value(m, t) for m, t in zip(metrics, HEADLINE_ORDER))])
        keep = [i for i in range(len(_POST_HOC_COLUMNS))
                if i < _POST_HOC_LEADING or any(line[i] != NO_VALUE for line in cells)]
        hidden = " · ".join(f"{status} {count}" for status, count in sorted(group.hidden.items()))
        tables.append(Table(f"[ np profile (post-hoc) — Target: {group.target} ]",
                            [_POST_HOC_COLUMNS[i] for i in keep], [[line[i] for i in keep] for line in cells],
                            list(_POST_HOC_PLAIN), plain, caption=f"hidden: {hidden}" if hidden else "",
                            section=f"posthoc_profile:{group.target}"))
    return tables


HEADLINE_ORDER = tuple(str(m) for m in HEADLINE)


def _cell(metric: RowMetric | None, metric_type: str) -> str:
    if metric is None or metric.value is None:
        return "-"
    if metric.coverage:  # a total of the NPU part only never stands unmarked
        return f"{_cell(replace(metric, coverage=None), metric_type)} {PARTIAL_MARK}"
    if metric_type in ("MACS", "PARAMS"):
        return humanize_count(metric.value)
    if metric_type == "MODEL_WEIGHT_MEMORY":
        return f"{mib(metric.value):.2f}"
    return fmt_number(metric.value)


_PROJECT_COLUMNS = ["Model", "Steps", "Status", "Latency(ms)", "Memory(MB)", "MACs", "Params", "SNR (output vs input)",
                    "Top1", "Method"]
_PROJECT_PLAIN = ["model", "steps", "status", "latency_ms", "memory_mb", "macs", "params", "snr_db", "top1_accuracy",
                  "method"]


def _project_values(row: PipelineRow | None) -> tuple[list[str], list[Any]]:
    """(cells, plain values) of latency, memory, MACs, params, SNR and the method of one output checkpoint."""
    if row is None:
        return ["-"] * 7, [""] * 7
    latency, memory, macs, params, snr, top1 = (row.value(t) for t in ("LATENCY", "MEMORY", "MACS", "PARAMS", "SNR",
                                                                        "TOP1_ACCURACY"))
    cells = [fmt_number(latency) if latency is not None else "-", fmt_number(memory) if memory is not None else "-",
             humanize_count(macs) if macs is not None else "-", humanize_count(params) if params is not None else "-",
             "-" if snr is None else ("identical" if snr == float("inf") else f"{snr:.2f}"),
             "-" if top1 is None else f"{top1:.4f}"]
    for index, metric_type in enumerate(("LATENCY", "MEMORY", "MACS")):  # totals of the NPU part only are marked
        if (row.metrics[metric_type].coverage if metric_type in row.metrics else None) and cells[index] != "-":
            cells[index] += f" {PARTIAL_MARK}"
    profile = row.profile if row.profile and row.profile.status == RoundStatus.SUCCESS else None
    method = f"{profile.method} ({profile.result_kind})" if profile else "-"  # how latency/memory were had
    plain = [v if v is not None else "" for v in (latency, memory, macs, params, snr, top1)] + \
        [method if profile else ""]
    return [*cells, method], plain


def project_table(report: ProjectReport) -> Table:
    """INPUT_MODEL, then each experiment's output checkpoint. The --plain columns stay fixed."""
    first_cells, first_plain = _project_values(report.input_row)
    rows = [["input_model", "-", "-", *first_cells]]
    plain: list[list[Any]] = [["input_model", "", "", *first_plain]]
    for exp in report.experiments:
        if exp.status == "unreadable":
            rows.append([exp.name, "-", "unreadable", *(["-"] * 7)])
            plain.append([exp.name, "", "unreadable", *([""] * 7)])
            continue
        cells, values = _project_values(exp.output)
        rows.append([exp.name, steps_label(list(exp.step_types)) or "-", exp.status, *cells])
        plain.append([exp.name, steps_label(list(exp.step_types)), exp.status, *values])
    columns = list(_PROJECT_COLUMNS)
    caption = f"Each experiment's row shows its output checkpoint; device {report.device}."
    # Latency and memory columns no experiment has (mlia on a CPU target) are left out, as in the experiment report
    empty = [i for i, c in enumerate(columns) if c in ("Latency(ms)", "Memory(MB)") and all(r[i] == "-" for r in rows)]
    no_top1 = [columns.index("Top1")] if all(r[columns.index("Top1")] == "-" for r in rows) else []  # no dataset
    if empty:
        caption += f" No {' or '.join(columns[i].split('(')[0].lower() for i in empty)} from np run's profiling " \
                   "here: see each experiment's post-hoc rounds (np report -e NAME), or measure with `np profile " \
                   "--method on-device`."
    if empty or no_top1:
        rows = [[cell for i, cell in enumerate(row) if i not in empty + no_top1] for row in rows]
        columns = [c for i, c in enumerate(columns) if i not in empty + no_top1]
    return Table(f"Project: {report.name}", columns, rows, list(_PROJECT_PLAIN), plain, caption=caption,
                 section="experiments")
