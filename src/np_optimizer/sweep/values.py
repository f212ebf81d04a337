"""A finished trial's figures: the values of the sweep's metrics for its last checkpoint, read from the trial's own
report (the same numbers `np report` shows for that experiment), each in the metric's stored unit. The trial's worker
reads them where the trial ran and reports them in its TrialResult."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from np_optimizer.metrics import UNITS, MetricType
from np_optimizer.records.front import LEFT_CAVEAT, PARTIAL_CAVEAT
from np_optimizer.records.results import ProfileResult
from np_optimizer.records.status import RoundStatus
from np_optimizer.records.sweep import TrialFigure
from np_optimizer.report.model import build_experiment_report
from np_optimizer.workspace import Experiment
from np_optimizer.workspace.store import ExperimentStore

__all__ = ["TrialValues", "trial_values"]


@dataclass(frozen=True)
class TrialValues:
    checkpoint: str
    figures: tuple[TrialFigure, ...]  # one per metric, in the order asked; a value of None says why
    notes: tuple[str, ...] = ()  # what else is missing: no measured round on the device
    caveats: tuple[str, ...] = ()  # one line per metric that covers part of the model only


def _measured(rounds: list[ProfileResult], checkpoint: str, sha: str | None, device: str) -> ProfileResult | None:
    """The newest successful post-hoc round of this checkpoint (these bytes) on `device`."""
    mine = [r for r in rounds if r.checkpoint == checkpoint and r.device == device
            and r.status == RoundStatus.SUCCESS and (sha is None or r.checkpoint_sha256 == sha)]
    return max(mine, key=lambda r: r.started_at) if mine else None


def trial_values(exp: Experiment, metrics: Iterable[str], measure_on: str | None = None) -> TrialValues:
    """The values of `metrics` for the experiment's last checkpoint (the trial's output); with `measure_on`, the
    metrics its newest measured round on that device gives come from that round."""
    built = build_experiment_report(ExperimentStore(exp).read_index())
    row = built.rows[-1]
    values: dict[str, float | None] = {}
    whys: dict[str, str] = {}
    notes = []
    measured: dict[str, Any] = {}
    if measure_on is not None:
        found = _measured(built.post_hoc_all, row.checkpoint, None, measure_on)
        if found is None:
            notes.append(f"no measured round of {row.checkpoint.lower()} on {measure_on}")
        else:
            measured = {m.metric_type: m.value for m in found.metrics}
    for metric in metrics:
        value = measured[metric] if metric in measured else row.value(metric)
        if value is not None and math.isinf(value):
            value = None
            whys[metric] = "the outputs are identical to INPUT_MODEL's (no finite SNR)"
        elif value is None:
            why = "not given by this device and method"
            if row.profile is not None and row.profile.status == RoundStatus.FAILED:
                why = f"profiling failed: {row.profile.error.message if row.profile.error else None}"
            elif row.profile is None and metric not in ("SNR", "MAX_ABS_ERROR", "PTE_SIZE"):
                why = f"{row.checkpoint.lower()} was not profiled"
            whys[metric] = why
        values[metric] = None if value is None else float(value)
    caveats = []
    for metric in values:
        coverage = (row.metrics[metric].coverage if metric in row.metrics else None)
        if values[metric] is not None and metric not in measured and coverage:  # a total of the NPU part only
            caveats.append(f"{metric.lower()} {PARTIAL_CAVEAT}: layers left on the CPU are not estimated "
                           "(np report --layers in its experiment)")
    if caveats:  # which layers left the NPU, why, and the rewrite that brings them back (layers/reasons.py's advice)
        from np_optimizer.report.layers import left_summary

        left = left_summary(exp, row)
        if left:
            caveats.append(f"{LEFT_CAVEAT}: {left}")
    figures = tuple(TrialFigure(metric, value, _unit(metric), whys.get(metric)) for metric, value in values.items())
    return TrialValues(row.checkpoint, figures, tuple(notes), tuple(caveats))


def _unit(metric: str) -> str:
    return UNITS.get(MetricType(metric), "") if metric in MetricType.__members__ else ""
