"""Report data built from report.json: the pipeline rows with their metrics, and the post-hoc rounds.

Everything here reads JSON only (no torch), so `np report` starts fast.
"""

from __future__ import annotations

from collections.abc import Sequence

from np_optimizer import metrics
from np_optimizer.devices import DEVICES
from np_optimizer.records.codec import to_dict
from np_optimizer.records.index import ExperimentPart, PipelineEntry, ReportIndex
from np_optimizer.records.report import (
    FINISHED,
    ExperimentReport,
    PipelineRow,
    PostHocGroup,
    ProjectReport,
    ProjectRow,
    RowMetric,
)
from np_optimizer.records.results import ProfileResult
from np_optimizer.records.status import RoundStatus

__all__ = ["PipelineRow", "PostHocGroup", "ExperimentReport", "ProjectRow", "ProjectReport", "build_experiment_report",
           "steps_label", "measured_rounds", "FINISHED", "HEADLINE"]

HEADLINE = tuple(str(m) for m in metrics.HEADLINE)
_BY_NAME = {d.name: d for d in DEVICES}


def _row(entry: PipelineEntry, result: ProfileResult | None, listed: set[str]) -> PipelineRow:
    checkpoint = entry.checkpoint
    row = PipelineRow(model="input_model" if entry.step_type == "input_model" else entry.job,
                      checkpoint=checkpoint, step_type=entry.step_type, status=entry.status,
                      profile=result, listed=checkpoint in listed,
                      lowering=entry.lowering,
                      fidelity=entry.fidelity)
    if result is not None and result.status == RoundStatus.SUCCESS:
        for metric in result.metrics:
            row.metrics[metric.metric_type] = RowMetric.of(metric, method=result.method,
                                                           result_kind=result.result_kind)
    program = entry.fidelity.program
    if checkpoint != "INPUT_MODEL" and program is not None and to_dict(program):
        row.metrics["SNR"] = RowMetric("SNR", program.snr_db, "dB", comparison_model="INPUT_MODEL",
                                       identical=program.snr_identical, source=entry.fidelity.evaluated_on or "")
        row.metrics["MAX_ABS_ERROR"] = RowMetric("MAX_ABS_ERROR", program.max_abs_error, "abs",
                                                 comparison_model="INPUT_MODEL")
    lowering = entry.lowering
    if lowering is not None and lowering.pte_bytes:
        row.metrics["PTE_SIZE"] = RowMetric("PTE_SIZE", lowering.pte_bytes, "B")
        total = (lowering.delegated_ops or 0) + (lowering.non_delegated_ops or 0)
        row.metrics["DELEGATED_OPS"] = RowMetric("DELEGATED_OPS", lowering.delegated_ops, "ops")
        row.metrics["TOTAL_OPS"] = RowMetric("TOTAL_OPS", total, "ops")
    return row


def _of_older_checkpoint(sha: str | None, current_sha: str | None) -> bool:
    """Was a result taken of another version (another sha256, `sha`) of the checkpoint than the current one?"""
    return bool(sha and current_sha and sha != current_sha)


def _groups(post_hoc: Sequence[ProfileResult], current: dict[str, str | None]) -> list[PostHocGroup]:
    """One group per checkpoint; rounds of an older version of it (another sha256) are counted as stale."""
    groups: dict[str, PostHocGroup] = {}
    for result in post_hoc:
        if result.trigger != "POSTHOC":
            continue
        target = result.checkpoint.lower()
        group = groups.setdefault(target, PostHocGroup(target, result.job, [], {}))
        if _of_older_checkpoint(result.checkpoint_sha256, current.get(result.checkpoint)):
            group.hidden["stale (older checkpoint)"] = group.hidden.get("stale (older checkpoint)", 0) + 1
        elif result.status == RoundStatus.SUCCESS:
            group.rounds.append(result)
        else:
            status = str(result.status or "unknown").lower()
            group.hidden[status] = group.hidden.get(status, 0) + 1
    for group in groups.values():
        group.rounds.sort(key=lambda r: r.started_at, reverse=True)
    return list(groups.values())


def _scope_warning(experiment: ExperimentPart, rows: list[PipelineRow], method: str | None, *,
                   measured_post_hoc: bool = False) -> list[str]:
    device = _BY_NAME.get(experiment.device or "")
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


def build_experiment_report(index: ReportIndex) -> ExperimentReport:
    """The experiment view of report.json's index (ExperimentStore.read_index)."""
    profile = index.profile
    listed = set(profile.listed)
    results = {r.checkpoint: r for r in profile.results}
    pipeline = index.pipeline
    # OUTPUT_MODEL is an alias: listed names resolve to the concrete checkpoint in results
    listed |= {r.checkpoint for r in profile.results}
    entries = ([pipeline.input_model] if pipeline.input_model else []) + list(pipeline.steps)
    current: dict[str, str | None] = {e.checkpoint: e.output.sha256 if e.output else None for e in entries}
    stale = {name for name, sha in current.items()
             if name in results and _of_older_checkpoint(results[name].checkpoint_sha256, sha)}
    rows = [_row(e, None if e.checkpoint in stale else results.get(e.checkpoint), listed) for e in entries]
    enabled = profile.enabled
    method = profile.method
    measured = any(r.trigger == "POSTHOC" and r.status == RoundStatus.SUCCESS and r.result_kind == "measured"
                   for r in index.post_hoc)
    warnings = _scope_warning(index.experiment, rows, method, measured_post_hoc=measured)
    if stale:  # an interrupted run can leave profile results of the checkpoints its steps have since replaced
        warnings.append(f"{', '.join(n.lower() for n in current if n in stale)}: the profile result in report.json is of an older checkpoint (another "
                        "sha256) and is not shown; `np run --retry` or `np profile` profiles the current one.")
    if not enabled and rows:
        warnings.append("run.yaml has no profile section, so nothing was profiled in np run; "
                        "add `profile:` or use `np profile`.")
    for entry in entries:  # what a step warned of (calibration, weights left float, zeroed activations)
        for text in entry.warnings:
            if not str(text).startswith("Lowering "):  # the PTE Size column's footnote says that one
                warnings.append(f"{entry.job}: {text}")
    notices: dict[str, list[str]] = {}
    for entry in entries:
        result = None if entry.checkpoint in stale else results.get(entry.checkpoint)
        if result is None:
            continue
        name = entry.checkpoint.lower()
        for text in result.warnings:
            if text not in warnings and not text.startswith("MLIA estimates Arm Ethos-U NPUs only"):
                warnings.append(f"{name}: {text}")
        for text in result.notices:
            notices.setdefault(text, []).append(name)
        error = to_dict(result.error) if result.error is not None else {}
        if result.status == RoundStatus.FAILED and error:
            warnings.append(f"{name}: profiling failed: {error.get('message')}")
    from np_optimizer.report.evaluation import apply_evaluation, best_row, evaluation_groups

    evaluation = index.evaluation
    apply_evaluation(rows, evaluation, current)
    best = best_row(rows)
    return ExperimentReport(experiment=index.experiment, rows=rows,
                            post_hoc=_groups(index.post_hoc, current),
                            post_hoc_all=sorted(index.post_hoc, key=lambda r: r.started_at),
                            profiling_enabled=enabled, method=method, warnings=warnings,
                            notices=[f"{', '.join(names)}: {text}" for text, names in notices.items()]
                            + [f"{job.name}: reused from the {job.reused_from.where}" for job in
                               index.job_records.values() if job.reused_from is not None],
                            evaluation=list(evaluation_groups(evaluation, current)),
                            evaluation_all=[*index.evaluation.results, *index.evaluation.post_hoc],
                            best=best.model if best else None)


def measured_rounds(report: ExperimentReport) -> list[ProfileResult]:
    """The successful measured rounds of an experiment: np run's own, then the post-hoc ones."""
    rounds = [r.profile for r in report.rows if r.profile and r.profile.status == RoundStatus.SUCCESS
              and r.profile.result_kind == "measured"]
    return rounds + [r for g in report.post_hoc for r in g.rounds if r.result_kind == "measured"]


def steps_label(step_types: list[str]) -> str:
    from np_optimizer.config.steps import step_specs  # (reading the step registry imports every step's module)

    names = {s.kind: s.abbreviation for s in step_specs()}
    return ",".join(names.get(s, s) for s in step_types)


