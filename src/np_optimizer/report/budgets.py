"""Budgets checked against the stored results: one outcome per (checkpoint, budget), and a verdict.

A value is taken from the project's device only. Latency, memory and weight memory: the newest successful measured
round (inline or post hoc) if there is one, else the estimate (the inline round, else the newest post-hoc estimate).
.pte size: the checkpoint compiled for the project's device. SNR: the step's fidelity check against INPUT_MODEL.
A metric the combination cannot give (latency from mlia on an XNNPACK device) is "not checked" with the reason,
never a pass. Reads JSON only (no torch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from np_optimizer.devices import DEVICES
from np_optimizer.records.parts import NO_COMPILE
from np_optimizer.records.report import (
    FAIL,
    NOT_CHECKED,
    PASS,
    BudgetOutcome,
    BudgetVerdict,
    ExperimentReport,
    Pick,
    PipelineRow,
)
from np_optimizer.records.results import MetricValue, ProfileResult
from np_optimizer.records.status import CompileStatus, JobStatus, RoundStatus

if TYPE_CHECKING:
    from np_optimizer.config.budgets import Budget

__all__ = ["Pick", "BudgetOutcome", "BudgetVerdict", "pick_value", "check_budgets", "PASS", "FAIL", "NOT_CHECKED"]

_BY_NAME = {d.name: d for d in DEVICES}
_PROFILED = ("LATENCY", "MEMORY", "MODEL_WEIGHT_MEMORY")


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" if 0 < abs(value) < 1 else f"{value:.2f}"


def _metric(result: ProfileResult, metric_type: str) -> MetricValue | None:
    return next((m for m in result.metrics if m.metric_type == metric_type and m.value is not None), None)


def _rounds(report: ExperimentReport, row: PipelineRow) -> list[ProfileResult]:
    """Successful rounds of the row's checkpoint on the project's device: inline first, then post hoc newest first
    (post-hoc groups already leave out rounds of an older version of the checkpoint)."""
    device = report.experiment.device
    rounds = [row.profile] if row.profile and row.profile.status == RoundStatus.SUCCESS else []
    for group in report.post_hoc:
        if group.target == row.checkpoint.lower():
            rounds += [r for r in group.rounds if r.device == device]
    return rounds


def _profiled_pick(report: ExperimentReport, row: PipelineRow, metric_type: str) -> Pick:
    rounds = _rounds(report, row)
    measured = sorted((r for r in rounds if r.result_kind == "measured" and _metric(r, metric_type)),
                      key=lambda r: r.started_at, reverse=True)
    estimated = [r for r in rounds if r.result_kind == "estimated" and _metric(r, metric_type)]
    for kind, found in (("measured", measured), ("estimated", estimated)):
        if found:
            result = found[0]
            metric = _metric(result, metric_type)
            assert metric is not None  # found holds rounds that give it
            how = "inline in np run" if result.trigger == "RUN_INLINE" else "np profile (post hoc)"
            if (metric.source or "").startswith("static count"):
                kind = "static"  # weight bytes an on-device round copies from the job record: not measured
            return Pick(float(metric.value), kind, f"{result.method} on {result.device}, {how}: "
                        f"{metric.source or kind}", result.measurement_id)
    return Pick(None, reason=_why_missing(report, row, metric_type))


def _why_missing(report: ExperimentReport, row: PipelineRow, metric_type: str) -> str:
    device_name = str(report.experiment.device or "")
    if not row.finished:
        return f"{row.model} is not finished"
    if row.status == JobStatus.FAILED:
        return f"{row.model} failed"
    device = _BY_NAME.get(device_name)
    methods = {r.method for r in _rounds(report, row)}
    others = {r.device for g in report.post_hoc if g.target == row.checkpoint.lower()
              for r in g.rounds if r.device != device_name}
    elsewhere = f"; rounds on {', '.join(sorted(others))} are of another device and are not used" if others else ""
    if not methods:
        return f"{row.checkpoint.lower()} has no successful profile round on {device_name}{elsewhere}"
    if device is not None:
        missing = [m for m in sorted(methods) if (s := device.method(m)) is not None
                   and metric_type not in {str(x) for x in s.metrics}]
        if missing:
            return f"{metric_type} is not given by {', '.join(missing)} on {device_name} " \
                   f"({device.runtime}/{device.backend}){elsewhere}; measure it on {device_name} with np profile " \
                   "--method on-device"
    return f"no {metric_type} in the rounds of {row.checkpoint.lower()} on {device_name}{elsewhere}"


def pick_value(report: ExperimentReport, row: PipelineRow, metric_type: str) -> Pick:
    """The value of one metric of one checkpoint that budgets and the scatter use (see the module docstring)."""
    if metric_type in _PROFILED:
        return _profiled_pick(report, row, metric_type)
    metric = row.metrics.get(metric_type)
    if metric_type == "SNR":
        if row.checkpoint == "INPUT_MODEL":
            return Pick(None, reason="INPUT_MODEL is the reference SNR is measured against")
        if metric is not None and metric.identical:
            return Pick(float("inf"), "fidelity", "outputs identical to INPUT_MODEL's")
        if metric is not None and metric.value is not None:
            return Pick(float(metric.value), "fidelity",
                        f"min over outputs vs INPUT_MODEL, on {metric.source or 'the evaluation inputs'}")
        return Pick(None, reason=f"{row.model} has no SNR (its fidelity check did not run or failed)")
    if metric_type in ("TOP1_ACCURACY", "TOP5_ACCURACY"):
        if metric is not None and metric.value is not None:
            return Pick(float(metric.value), "evaluated",
                        f"{metric.source or 'the evaluator'}; {metric.samples} samples of "
                        f"{metric.dataset or 'the dataset'}")
        return Pick(None, reason=f"{row.model} has no {metric_type.split('_')[0].title()} accuracy: attach a labelled "
                    "dataset (np datasets add) and list the checkpoint under evaluate: (or run np evaluate)")
    if metric_type == "PTE_SIZE":
        lowering = row.lowering or NO_COMPILE
        if metric is not None and metric.value and lowering.status != CompileStatus.UNSUPPORTED:
            return Pick(float(metric.value), "static",
                        f"bytes of the .pte compiled for {report.experiment.device}")
        return Pick(None, reason=lowering.reason or f"{row.model} has no compiled .pte")
    return Pick(None, reason=f"unknown metric {metric_type}")


def _checked_rows(report: ExperimentReport, check_all: bool) -> list[PipelineRow]:
    steps = [r for r in report.rows if r.checkpoint != "INPUT_MODEL"]
    output = steps[-1] if steps else next(iter(report.rows), None)
    if not check_all:
        return [output] if output is not None else []
    profiled = [r for r in report.rows if _rounds(report, r) or r.listed]
    return profiled + ([output] if output is not None and output not in profiled else [])


def check_budgets(report: ExperimentReport, budgets: Sequence[Budget], *, check_all: bool = False) -> BudgetVerdict:
    """Each budget against OUTPUT_MODEL (the last step's checkpoint), or with check_all every profiled checkpoint."""
    rows = _checked_rows(report, check_all)
    outcomes = []
    for row in rows:
        for budget in budgets:
            metric = budget.metric
            pick = pick_value(report, row, metric.metric_type)
            value = None if pick.value is None else pick.value / metric.stored_per_unit
            if value is None:
                status = NOT_CHECKED
            else:
                ok = value >= budget.limit if metric.minimum else value <= budget.limit
                status = PASS if ok else FAIL
            outcomes.append(BudgetOutcome(row.checkpoint, row.model, budget.key, metric.metric_type, metric.unit,
                                          budget.limit, "min" if metric.minimum else "max", status, value,
                                          pick.kind, pick.source, pick.reason or None, budget.origin))
    return BudgetVerdict(tuple(outcomes), tuple(r.checkpoint for r in rows), check_all)
