"""`np report --json`: the experiment document in the shape of np-interface.md §4, plus provenance and warnings; and
the project document (every experiment's output checkpoint)."""

from __future__ import annotations

from typing import Any

from np_optimizer.records.codec import to_dict
from np_optimizer.records.parts import NO_COMPILE
from np_optimizer.records.results import ProfileResult
from np_optimizer.records.status import CompileStatus
from np_optimizer.report.model import ExperimentReport, PipelineRow, ProjectReport

__all__ = ["experiment_json", "project_json"]


def _metrics(row: PipelineRow) -> list[dict[str, Any]]:
    out = []
    for metric in row.metrics.values():
        item = {"metric_type": metric.metric_type, "value": metric.value, "unit": metric.unit,
                "comparison_model": metric.comparison_model, "component_name": metric.component_name}
        for extra in ("stat", "source", "method", "result_kind", "identical", "samples", "dataset", "trigger",
                      "coverage"):
            if getattr(metric, extra) is not None:
                item[extra] = getattr(metric, extra)
        out.append(item)
    return out


def _entry(row: PipelineRow) -> dict[str, Any]:
    lowering = row.lowering or NO_COMPILE
    profile = row.profile
    return {
        "name": row.model, "step_type": None if row.checkpoint == "INPUT_MODEL" else row.step_type,
        "checkpoint": row.checkpoint, "status": row.status, "model_ref_id": row.model, "components": None,
        "lowering_failed": lowering.status == CompileStatus.FAILED,
        "lowering_unsupported": lowering.status == CompileStatus.UNSUPPORTED,
        "lowering_reason": lowering.reason,
        "metrics": _metrics(row),
        "profile": None if profile is None else {
            "measurement_ref_id": profile.measurement_id, "status": profile.status,
            "method": profile.method, "result_kind": profile.result_kind,
            "provenance": profile.provenance, "warnings": list(profile.warnings),
            "notices": list(profile.notices), "cache": to_dict(profile.cache), "partial": profile.partial,
            "error": _error(profile)},
    }


def _error(result: ProfileResult) -> dict[str, Any] | None:
    return None if result.error is None else to_dict(result.error)


def _post_hoc(result: ProfileResult) -> dict[str, Any]:
    return {
        "measurement_ref_id": result.measurement_id, "kind": "PROFILE", "status": result.status,
        "trigger_source": result.trigger, "measured_at": result.started_at,
        "target": {"model_ref_id": result.job, "name": result.checkpoint.lower()},
        "dataset": None,
        "device": {"ref_id": result.device, "name": result.device, "runtime": result.runtime,
                   "backend": result.backend},
        "result_kind": result.result_kind, "method": result.method, "partial": result.partial,
        "metrics": [{"metric_type": m.metric_type, "params": None, "value": m.value, "unit": m.unit,
                     "comparison_model_ref_id": None, "comparison_model": None, "component_name": None,
                     "stat": m.stat, "source": m.source, **({"coverage": m.coverage} if m.coverage else {})}
                    for m in result.metrics],
        "provenance": result.provenance, "warnings": list(result.warnings),
        "notices": list(result.notices), "error": _error(result),
    }


def experiment_json(report: ExperimentReport) -> dict[str, Any]:
    experiment = report.experiment
    rows = report.rows
    input_row = next((r for r in rows if r.checkpoint == "INPUT_MODEL"), None)
    return {
        "experiment": {"ref_id": experiment.name, "name": experiment.name,
                       "status": experiment.status,
                       "device_backend": f"{experiment.device} / {experiment.runtime} / "
                                         f"{experiment.backend}",
                       "device": experiment.device, "runtime": experiment.runtime,
                       "backend": experiment.backend},
        "pipeline": {"input_model": _entry(input_row) if input_row else None,
                     "steps": [_entry(r) for r in rows if r.checkpoint != "INPUT_MODEL"],
                     "profiling_enabled": report.profiling_enabled, "method": report.method},
        "post_hoc": [_post_hoc(r) for r in report.post_hoc_all],
        "evaluation": [to_dict(r) for r in report.evaluation_all],
        "best_model": report.best,
        "warnings": report.warnings,
        "notices": report.notices,
    }


def _brief_metrics(row: PipelineRow | None) -> list[dict[str, Any]]:
    if row is None:
        return []
    return [{"metric_type": m.metric_type, "value": m.value, "unit": m.unit}
            for m in row.metrics.values()]


def project_json(report: ProjectReport) -> dict[str, Any]:
    """The project document; with a sweep, "sweep" holds its front (objectives, constraints, every trial with its
    values in stored units, pareto, violations, best_for; "front" and "failed" the trial numbers), or {"warning": ...}
    when trials.json cannot be read. Without a sweep there is no "sweep" key."""
    data = {
        "project": {"name": report.name, "device": report.device},
        "base_model": {"name": report.model_name, "metrics": _brief_metrics(report.input_row)},
        "experiments": [{"name": e.name, "status": e.status, "step_types": list(e.step_types),
                         "output": e.output.checkpoint if e.output else None, "metrics": _brief_metrics(e.output)}
                        for e in report.experiments],
    }
    if report.front is not None:
        data["sweep"] = to_dict(report.front)
    elif report.sweep_warning is not None:
        data["sweep"] = {"warning": report.sweep_warning}
    return data
