"""Report data built from report.json: the pipeline rows with their metrics, and the post-hoc rounds.

Everything here reads JSON only (no torch), so `np report` starts fast.
"""

from __future__ import annotations

from typing import Any

from np_optimizer import metrics
from np_optimizer.devices import DEVICES
from np_optimizer.records.report import (
    FINISHED,
    ExperimentReport,
    PipelineRow,
    PostHocGroup,
    ProjectReport,
    ProjectRow,
)
from np_optimizer.records.status import RoundStatus

__all__ = ["PipelineRow", "PostHocGroup", "ExperimentReport", "ProjectRow", "ProjectReport", "build_experiment_report",
           "steps_label", "measured_rounds", "FINISHED", "HEADLINE"]

HEADLINE = tuple(str(m) for m in metrics.HEADLINE)
_BY_NAME = {d.name: d for d in DEVICES}


def _metric(metric_type: str, value: Any, unit: str, **extra: Any) -> dict[str, Any]:
    return {"metric_type": metric_type, "value": value, "unit": unit, "comparison_model": None,
            "component_name": None, **extra}


def _row(entry: dict[str, Any], result: dict[str, Any] | None, listed: set[str]) -> PipelineRow:
    checkpoint = entry.get("checkpoint", "")
    row = PipelineRow(model="input_model" if entry.get("step_type") == "input_model" else entry.get("job", ""),
                      checkpoint=checkpoint, step_type=entry.get("step_type", ""), status=entry.get("status", ""),
                      profile=result, listed=checkpoint in listed, lowering=entry.get("lowering"),
                      fidelity=entry.get("fidelity"))
    if result is not None and result.get("status") == RoundStatus.SUCCESS:
        for metric in result.get("metrics", []):
            row.metrics[metric["metric_type"]] = {**metric, "method": result.get("method"),
                                                  "result_kind": result.get("result_kind")}
    fidelity = (entry.get("fidelity") or {}).get("program") or {}
    if checkpoint != "INPUT_MODEL" and fidelity:
        snr = fidelity.get("snr_db")
        identical = bool(fidelity.get("snr_identical"))
        row.metrics["SNR"] = _metric("SNR", snr, "dB", comparison_model="INPUT_MODEL", identical=identical,
                                     source=(entry.get("fidelity") or {}).get("evaluated_on", ""))
        row.metrics["MAX_ABS_ERROR"] = _metric("MAX_ABS_ERROR", fidelity.get("max_abs_error"), "abs",
                                               comparison_model="INPUT_MODEL")
    lowering = entry.get("lowering") or {}
    if lowering.get("pte_bytes"):
        row.metrics["PTE_SIZE"] = _metric("PTE_SIZE", lowering["pte_bytes"], "B")
        total = (lowering.get("delegated_ops") or 0) + (lowering.get("non_delegated_ops") or 0)
        row.metrics["DELEGATED_OPS"] = _metric("DELEGATED_OPS", lowering.get("delegated_ops"), "ops")
        row.metrics["TOTAL_OPS"] = _metric("TOTAL_OPS", total, "ops")
    return row


def _of_older_checkpoint(result: dict[str, Any] | None, current_sha: str | None) -> bool:
    """Was this result taken of another version (another sha256) of the checkpoint than the current one?"""
    sha = (result or {}).get("checkpoint_sha256")
    return bool(sha and current_sha and sha != current_sha)


def _groups(post_hoc: list[dict[str, Any]], current: dict[str, str | None]) -> list[PostHocGroup]:
    """One group per checkpoint; rounds of an older version of it (another sha256) are counted as stale."""
    groups: dict[str, PostHocGroup] = {}
    for result in post_hoc:
        if result.get("trigger") != "POSTHOC":
            continue
        target = str(result.get("checkpoint", "")).lower()
        group = groups.setdefault(target, PostHocGroup(target, result.get("job", ""), [], {}))
        if _of_older_checkpoint(result, current.get(str(result.get("checkpoint")))):
            group.hidden["stale (older checkpoint)"] = group.hidden.get("stale (older checkpoint)", 0) + 1
        elif result.get("status") == RoundStatus.SUCCESS:
            group.rounds.append(result)
        else:
            status = str(result.get("status", "unknown")).lower()
            group.hidden[status] = group.hidden.get(status, 0) + 1
    for group in groups.values():
        group.rounds.sort(key=lambda r: r.get("started_at", ""), reverse=True)
    return list(groups.values())


def _scope_warning(report: dict[str, Any], rows: list[PipelineRow], method: str | None, *,
                   measured_post_hoc: bool = False) -> list[str]:
    experiment = report.get("experiment", {})
    device = _BY_NAME.get(experiment.get("device", ""))
    if device is None or method is None:
        return []
    support = device.method(method)
    if support is None:
        return []
    missing = [m for m in HEADLINE if m not in {str(x) for x in support.metrics}]
    if not missing or not any(r.profile for r in rows):
        return []
    where = ("Measured latency and memory are in the post-hoc tables above." if measured_post_hoc else
             "For measured latency and memory run `np profile --method on-device -d host` (this machine) or give the "
             "device an SSH destination.")
    return [f"Not given by {method} on {device.name} ({device.runtime}/{device.backend}): {', '.join(missing)}; "
            f"those columns are omitted. {support.note} {where}"]


def build_experiment_report(report: dict[str, Any]) -> ExperimentReport:
    profile = report.get("profile") or {}
    listed = set(profile.get("listed") or [])
    results = {r.get("checkpoint"): r for r in profile.get("results", [])}
    pipeline = report.get("pipeline") or {}
    # OUTPUT_MODEL is an alias: listed names resolve to the concrete checkpoint in results
    listed |= {r.get("checkpoint") for r in profile.get("results", [])}
    entries = ([pipeline["input_model"]] if pipeline.get("input_model") else []) + list(pipeline.get("steps", []))
    current: dict[str, str | None] = {e.get("checkpoint"): (e.get("output") or {}).get("sha256") for e in entries}
    stale = {name for name, sha in current.items() if _of_older_checkpoint(results.get(name), sha)}
    rows = [_row(e, None if e.get("checkpoint") in stale else results.get(e.get("checkpoint")), listed)
            for e in entries]
    enabled = bool(profile.get("enabled"))
    method = profile.get("method")
    measured = any(r.get("trigger") == "POSTHOC" and r.get("status") == RoundStatus.SUCCESS and r.get("result_kind") == "measured"
                   for r in report.get("post_hoc") or [])
    warnings = _scope_warning(report, rows, method, measured_post_hoc=measured)
    if stale:  # an interrupted run can leave profile results of the checkpoints its steps have since replaced
        warnings.append(f"{', '.join(n.lower() for n in current if n in stale)}: the profile result in report.json is of an older checkpoint (another "
                        "sha256) and is not shown; `np run --retry` or `np profile` profiles the current one.")
    if not enabled and rows:
        warnings.append("run.yaml has no profile section, so nothing was profiled in np run; "
                        "add `profile:` or use `np profile`.")
    for entry in entries:  # what a step warned of (calibration, weights left float, zeroed activations)
        for text in entry.get("warnings") or []:
            if not str(text).startswith("Lowering "):  # the PTE Size column's footnote says that one
                warnings.append(f"{entry.get('job')}: {text}")
    notices: dict[str, list[str]] = {}
    for row in rows:
        if row.profile is None:
            continue
        for text in row.profile.get("warnings", []):
            if text not in warnings and not text.startswith("MLIA estimates Arm Ethos-U NPUs only"):
                warnings.append(f"{row.checkpoint.lower()}: {text}")
        for text in row.profile.get("notices", []):
            notices.setdefault(text, []).append(row.checkpoint.lower())
        if row.profile.get("status") == RoundStatus.FAILED and row.profile.get("error"):
            warnings.append(f"{row.checkpoint.lower()}: profiling failed: {row.profile['error'].get('message')}")
    post_hoc = list(report.get("post_hoc") or [])
    from np_optimizer.report.evaluation import apply_evaluation, best_row, evaluation_groups

    evaluation = report.get("evaluation") if isinstance(report.get("evaluation"), dict) else {}
    apply_evaluation(rows, evaluation, current)
    best = best_row(rows)
    return ExperimentReport(experiment=dict(report.get("experiment") or {}), rows=rows,
                            post_hoc=_groups(post_hoc, current),
                            post_hoc_all=sorted(post_hoc, key=lambda r: r.get("started_at", "")),
                            profiling_enabled=enabled, method=method, warnings=warnings,
                            notices=[f"{', '.join(names)}: {text}" for text, names in notices.items()],
                            evaluation=list(evaluation_groups(evaluation, current)),
                            evaluation_all=[*(evaluation or {}).get("results", []),
                                            *(evaluation or {}).get("post_hoc", [])],
                            best=best.model if best else None)


def measured_rounds(report: ExperimentReport) -> list[dict[str, Any]]:
    """The successful measured rounds of an experiment: np run's own, then the post-hoc ones."""
    rounds = [r.profile for r in report.rows if r.profile and r.profile.get("status") == RoundStatus.SUCCESS
              and r.profile.get("result_kind") == "measured"]
    return rounds + [r for g in report.post_hoc for r in g.rounds if r.get("result_kind") == "measured"]


def steps_label(step_types: list[str]) -> str:
    from np_optimizer.config.steps import step_specs  # (reading the step registry imports every step's module)

    names = {s.kind: s.abbreviation for s in step_specs()}
    return ",".join(names.get(s, s) for s in step_types)


