"""The two figures of an experiment's page beyond the bar charts: the trade-off scatter (latency, or size, against
SNR, with the Pareto front) and the spread of every measured round (box plots from the raw samples in the job
folders). Reads files only (no torch)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from markupsafe import Markup

from np_optimizer.formats import fmt_metric, fmt_number, is_finite
from np_optimizer.metrics import SHOWN
from np_optimizer.records import ExperimentPage
from np_optimizer.records.results import ProfileResult
from np_optimizer.report.budgets import Pick, pick_value
from np_optimizer.report.html.charts import Box, Point, box_chart, scatter_chart
from np_optimizer.report.model import ExperimentReport, PipelineRow, measured_rounds

__all__ = ["tradeoff_scatter", "measured_spread"]


def _measured_elsewhere(report: ExperimentReport, steps: list[PipelineRow]) -> tuple[str, dict[str, Pick]]:
    """The other device with the most checkpoints measured post hoc, and its newest latency per checkpoint."""
    found: dict[str, dict[str, Pick]] = {}
    for group in report.post_hoc:
        for result in group.rounds:  # newest first
            metric = result.metric("LATENCY")
            if result.result_kind != "measured" or metric is None or not is_finite(metric.value):
                continue
            picks = found.setdefault(result.device, {})
            picks.setdefault(group.target.upper(), Pick(float(metric.value), "measured", str(metric.source)))
    named = {r.checkpoint for r in steps}
    best = max(found, key=lambda d: len(named & set(found[d])), default="")
    return best, found.get(best, {})


def tradeoff_scatter(report: ExperimentReport, prefix: str = "e1") -> tuple[Markup | None, str]:
    steps = [r for r in report.rows if r.checkpoint != "INPUT_MODEL"]
    device = str(report.experiment.device)
    other, elsewhere = _measured_elsewhere(report, steps)
    candidates = [("LATENCY", "Latency (ms)", {r.checkpoint: pick_value(report, r, "LATENCY") for r in steps}, ""),
                  ("LATENCY", f"Latency on {other} (ms, measured)", elsewhere,
                   f" No latency on {device} here: the latency measured on {other} stands in for it."),
                  ("PTE_SIZE", ".pte size (MB)", {r.checkpoint: pick_value(report, r, "PTE_SIZE") for r in steps},
                   f" No latency on {device} here, so .pte size stands in for it.")]
    for metric_type, label, picks, why in candidates:
        if not any(p.value is not None for p in picks.values()):
            continue
        points = []
        for row in steps:
            x, y = picks.get(row.checkpoint, Pick(None)), pick_value(report, row, "SNR")
            if x.value is None or y.value is None or not math.isfinite(y.value):
                continue
            shown = x.value / SHOWN[metric_type][2]
            points.append(Point(row.checkpoint.lower(), shown, y.value, f"{fmt_metric(metric_type, x.value)} "
                                f"{SHOWN[metric_type][1]} ({x.kind})", f"SNR {y.value:.2f} dB"))
        if not points:
            continue
        return scatter_chart(f"{prefix}sc", points, label, "SNR (dB)"), \
            f"Each optimized checkpoint's {label} against its SNR vs INPUT_MODEL (the reference, not " \
            f"plotted); latency is measured where a measurement exists, else estimated. Diamonds joined by the line " \
            f"form the Pareto front (no other checkpoint is both faster or smaller and more faithful).{why}"
    return None, "No checkpoint has both an SNR and a latency or .pte size yet."


def _samples(page: ExperimentPage, result: ProfileResult) -> tuple[list[float], str]:
    raw = result.artifacts.get("raw")
    samples = page.samples.get(str(raw)) if raw else None
    if samples:
        return samples, f"{len(samples)} raw samples from {raw}"
    return [], f"raw samples missing ({raw or 'no file recorded'}); the stored summary is drawn"


def _box(label: str, samples: list[float], summary: dict[str, Any]) -> Box | None:
    if len(samples) >= 2:
        q1, median, q3 = statistics.quantiles(samples, n=4, method="inclusive")
        return Box(label, min(samples), q1, median, q3, max(samples), statistics.fmean(samples), len(samples))
    keys = ("min", "q1", "median", "q3", "max", "avg")
    if all(is_finite(summary.get(k)) for k in keys):
        low, q1, median, q3, high, mean = (float(summary[k]) for k in keys)
        return Box(label, low, q1, median, q3, high, mean, int(summary.get("n") or 0))
    return None


def measured_spread(page: ExperimentPage, prefix: str = "e1") -> tuple[Markup | None, list[str]]:
    boxes, notes = [], []
    for result in measured_rounds(page.report):
        label = f"{result.checkpoint.lower()} · {result.device} · {result.started_at[:16].replace('T', ' ')}"
        samples, note = _samples(page, result)
        summary = result.extras.get("latency_ms")
        box = _box(label, samples, summary if isinstance(summary, dict) else {})
        if box is not None:
            boxes.append(box)
            notes.append(f"{label}: {note}; {result.provenance.get('runs_done')} timed runs")
    if not boxes:
        return None, []
    return box_chart(f"{prefix}bx", boxes, "ms", fmt_number), notes
