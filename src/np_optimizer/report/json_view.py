"""`np report --json`: the experiment document in the shape of np-interface.md §4, plus provenance and warnings; and
the project document (every experiment's output checkpoint)."""

from __future__ import annotations

from typing import Any

from np_optimizer.records.codec import to_dict
from np_optimizer.records.parts import NO_COMPILE
from np_optimizer.records.status import CompileStatus
from np_optimizer.report.model import ExperimentReport, PipelineRow, ProjectReport

__all__ = ["experiment_json", "project_json"]


def _metrics(row: PipelineRow) -> list[dict[str, Any]]:
    out = []
    for metric in row.metrics.values():
        item = {"metric_type": metric["metric_type"], "value": metric.get("value"), "unit": metric.get("unit"),
                "comparison_model": metric.get("comparison_model"), "component_name": metric.get("component_name")}
        for extra in ("stat", "source", "method", "result_kind", "identical", "samples", "dataset", "trigger",
                      "coverage"):
            if metric.get(extra) is not None:
                item[extra] = metric[extra]
        out.append(item)
    return out


def _entry(row: PipelineRow) -> dict[str, Any]:
    lowering = row.lowering or NO_COMPILE
    profile = row.profile or {}
    return {
        "name": row.model, "step_type": None if row.checkpoint == "INPUT_MODEL" else row.step_type,
        "checkpoint": row.checkpoint, "status": row.status, "model_ref_id": row.model, "components": None,
        "lowering_failed": lowering.status == CompileStatus.FAILED,
        "lowering_unsupported": lowering.status == CompileStatus.UNSUPPORTED,
        "lowering_reason": lowering.reason,
        "metrics": _metrics(row),
        "profile": None if not profile else {
            "measurement_ref_id": profile.get("measurement_id"), "status": profile.get("status"),
            "method": profile.get("method"), "result_kind": profile.get("result_kind"),
            "provenance": profile.get("provenance"), "warnings": profile.get("warnings", []),
            "notices": profile.get("notices", []), "cache": profile.get("cache"), "partial": profile.get("partial"),
            "error": profile.get("error")},
    }


def _post_hoc(result: dict[str, Any]) -> dict[str, Any]:
    return {
        "measurement_ref_id": result.get("measurement_id"), "kind": "PROFILE", "status": result.get("status"),
        "trigger_source": result.get("trigger"), "measured_at": result.get("started_at"),
        "target": {"model_ref_id": result.get("job"), "name": str(result.get("checkpoint", "")).lower()},
        "dataset": None,
        "device": {"ref_id": result.get("device"), "name": result.get("device"), "runtime": result.get("runtime"),
                   "backend": result.get("backend")},
        "result_kind": result.get("result_kind"), "method": result.get("method"), "partial": result.get("partial"),
        "metrics": [{"metric_type": m["metric_type"], "params": None, "value": m.get("value"), "unit": m.get("unit"),
                     "comparison_model_ref_id": None, "comparison_model": None, "component_name": None,
                     "stat": m.get("stat"), "source": m.get("source"), **({"coverage": m["coverage"]} if m.get(
                         "coverage") else {})} for m in result.get("metrics", [])],
        "provenance": result.get("provenance"), "warnings": result.get("warnings", []),
        "notices": result.get("notices", []), "error": result.get("error"),
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
        "evaluation": report.evaluation_all,
        "best_model": report.best,
        "warnings": report.warnings,
        "notices": report.notices,
    }


def _brief_metrics(row: PipelineRow | None) -> list[dict[str, Any]]:
    if row is None:
        return []
    return [{"metric_type": m["metric_type"], "value": m.get("value"), "unit": m.get("unit")}
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
