"""The accuracy half of the report: evaluation metrics on the pipeline rows (the run's inline result of each current
checkpoint, else its newest successful np evaluate round), the post-hoc evaluation tables, and the best-model rule.
Reads report.json's `evaluation` part only (no torch)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from np_optimizer.records.report import EvaluationGroup, RowMetric
from np_optimizer.records.results import EvaluationResult, MetricValue
from np_optimizer.records.status import CompileStatus, JobStatus, RoundStatus

if TYPE_CHECKING:
    from np_optimizer.records.index import EvaluationIndex
    from np_optimizer.records.report import PipelineRow, Table

__all__ = ["EvaluationGroup", "ROW_METRICS", "apply_evaluation", "evaluation_groups", "evaluation_tables",
           "metric_cell", "metric_header", "best_row", "BEST_RULE"]

# evaluation metrics a pipeline row takes (its SNR stays the step's own fidelity on the evaluation inputs)
ROW_METRICS = ("TOP1_ACCURACY", "TOP5_ACCURACY", "KLD", "MSE", "MAE")
_HEADERS = {"TOP1_ACCURACY": "Top1", "TOP5_ACCURACY": "Top5", "SNR": "SNR(dB)", "MSE": "MSE", "MAE": "MAE",
            "MAX_ABS_ERROR": "Max abs err", "KLD": "KLD(nats)"}
BEST_RULE = "lowest latency, then highest Top1 accuracy, then highest SNR"


def metric_header(metric_type: str) -> str:
    return _HEADERS.get(metric_type, metric_type)


def metric_cell(metric: MetricValue | None) -> str:
    if metric is None or metric.value is None:
        return "-"
    value = float(metric.value)
    if metric.unit == "fraction":
        return f"{value:.4f}"
    return f"{value:.2f}" if metric.metric_type == "SNR" else f"{value:.3g}"


def _current(result: EvaluationResult, shas: dict[str, str | None]) -> bool:
    sha = shas.get(result.checkpoint)
    return not sha or result.checkpoint_sha256 == sha


def apply_evaluation(rows: list[PipelineRow], evaluation: EvaluationIndex, shas: dict[str, str | None]) -> None:
    """Put each row's evaluation metrics (with their source and sample count) into `row.metrics`."""
    inline = {r.checkpoint: r for r in evaluation.results if r.status == RoundStatus.SUCCESS and _current(r, shas)}
    post_hoc: dict[str, EvaluationResult] = {}
    for r in evaluation.post_hoc:  # time order: the newest wins
        if r.status == RoundStatus.SUCCESS and _current(r, shas):
            post_hoc[r.checkpoint] = r
    for row in rows:
        result = inline.get(row.checkpoint) or post_hoc.get(row.checkpoint)
        if result is None:
            continue
        for metric in result.metrics:
            if metric.metric_type in ROW_METRICS:
                row.metrics[metric.metric_type] = RowMetric.of(
                    metric, trigger=result.trigger, samples=result.samples,
                    dataset=result.dataset.name if result.dataset is not None else None)


def evaluation_groups(evaluation: EvaluationIndex, shas: dict[str, str | None]) -> list[EvaluationGroup]:
    groups: dict[str, EvaluationGroup] = {}
    for r in evaluation.post_hoc:
        target = r.checkpoint.lower()
        group = groups.setdefault(target, EvaluationGroup(target, [], {}))
        if not _current(r, shas):
            group.hidden["stale (older checkpoint)"] = group.hidden.get("stale (older checkpoint)", 0) + 1
        elif r.status == RoundStatus.SUCCESS:
            group.rounds.append(r)
        else:
            status = str(r.status or "unknown").lower()
            group.hidden[status] = group.hidden.get(status, 0) + 1
    for group in groups.values():
        group.rounds.sort(key=lambda r: r.started_at, reverse=True)
    return list(groups.values())


def evaluation_tables(groups: list[EvaluationGroup]) -> list[Table]:
    """One table per checkpoint: Started | Dataset | Source (vs) | Samples | metrics (np-interface.md §4)."""
    from np_optimizer.records.report import Table

    tables = []
    for group in groups:
        names = list(dict.fromkeys(m.metric_type for r in group.rounds for m in r.metrics))
        cells, plain = [], []
        for r in group.rounds:
            values = {m.metric_type: m for m in r.metrics}
            dataset = (r.dataset.name if r.dataset is not None else None) or "evaluation inputs"
            source = "pte" if r.evaluated_on.startswith("the .pte") else "exported program"
            cells.append([r.started_at[:16].replace("T", " "), dataset, f"{source} (vs input_model)",
                          str(r.samples), *(metric_cell(values.get(n)) for n in names)])
            plain.append([r.measurement_id, r.status, dataset, source, r.samples,
                          *(_plain(values.get(n)) for n in names)])
        hidden = " · ".join(f"{status} {count}" for status, count in sorted(group.hidden.items()))
        tables.append(Table(f"[ np evaluate (post-hoc) — Target: {group.target} ]",
                            ["Started (UTC)", "Dataset", "Source (vs)", "Samples", *(metric_header(n) for n in names)],
                            cells, ["measurement_ref_id", "status", "dataset", "source", "samples",
                                    *(n.lower() for n in names)], plain,
                            caption=f"hidden: {hidden}" if hidden else "", section=f"posthoc_evaluation:{group.target}"))
    return tables


def _plain(metric: MetricValue | None) -> Any:
    return "" if metric is None else metric.value


def best_row(rows: list[PipelineRow]) -> PipelineRow | None:
    """The reference interface's best model among the step checkpoints (INPUT_MODEL is the reference, no candidate):
    of the finished ones with a latency, accuracy or SNR, the lowest latency, then the highest Top1, then the highest
    SNR (missing values last, ties keep order); else the last finished one. A checkpoint the device cannot run (its
    lowering unsupported or failed: a float checkpoint on an Ethos-U NPU) is no candidate, whatever its estimate."""
    finished = [r for r in rows if r.status in (JobStatus.SUCCESS, JobStatus.REUSED) and r.checkpoint != "INPUT_MODEL"
                and (r.lowering is None or r.lowering.status == CompileStatus.OK)]
    scored = [r for r in finished if any(r.value(m) is not None for m in ("LATENCY", "TOP1_ACCURACY", "SNR"))]
    if not scored:
        return finished[-1] if finished else None

    def key(row: PipelineRow) -> tuple[float, float, float]:
        latency, top1, snr = (row.value(m) for m in ("LATENCY", "TOP1_ACCURACY", "SNR"))
        return (latency if latency is not None else float("inf"), -(top1 if top1 is not None else -1.0),
                -(snr if snr is not None else float("-inf")))

    return min(scored, key=key)
