"""Every frozen record and view type that crosses a boundary or is written to JSON, with one codec.

    codec.py       to_dict / from_dict (SCHEMA_VERSION: each top-level record carries it; readers accept older
                   versions they know and refuse newer ones)
    results.py     checkpoints, metrics, profile and evaluation results, job.json
    commands.py    what the commands return (np projects, experiments, export, run, profile, evaluate)
    state.py       what np status returns (apart: np status defines 3 record types, not commands.py's 16)
    validation.py  validation issues and the execution plan (np validate, np run --dry-run)
    report.py      np report's rows, groups, budgets verdict, tables and the report record
    views.py       np report --layers, np compare and the HTML page's records (apart: np report does not define them)
    layers.py      the layer key of every per-layer row
    index.py       report.json as a record, and build_index (pure: the jobs and the experiment's state in)

The package imports nothing of np above its floor (errors), so every layer can use it. Its names are imported on
first use (PEP 562): `from np_optimizer.records import to_dict` loads the codec alone, so a command loads the record
modules it reads, not all of them (about 70 ms of imports) at start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from np_optimizer.lazy import lazy_exports

if TYPE_CHECKING:
    from np_optimizer.records.codec import SCHEMA_VERSION, from_dict, to_dict
    from np_optimizer.records.commands import (
        DeviceRecord,
        EvaluationRound,
        ExperimentRecord,
        ExportRecord,
        FarmDevice,
        FarmPlace,
        FarmView,
        ModelSpec,
        ProfileRound,
        ProjectRecord,
        RunSummary,
        WorkspaceInitResult,
    )
    from np_optimizer.records.layers import LayerKey
    from np_optimizer.records.report import (
        BudgetOutcome,
        BudgetVerdict,
        ExperimentReport,
        Pick,
        PipelineRow,
        PostHocGroup,
        ProjectReport,
        ProjectRow,
        ReportRecord,
        SortKey,
        Table,
    )
    from np_optimizer.records.results import (
        CheckpointRef,
        CompileResult,
        EvaluationResult,
        JobRecord,
        MetricValue,
        ProfileResult,
    )
    from np_optimizer.records.state import JobState, MeasurementState, StatusRecord
    from np_optimizer.records.validation import Plan, PlannedProfile, PlannedStep, ValidationIssue, ValidationReport
    from np_optimizer.records.views import CompareRecord, ExperimentPage, LayersRecord

# name -> the module of this package that defines it
_WHERE = {
    **dict.fromkeys(["SCHEMA_VERSION", "from_dict", "to_dict"], "codec"),
    **dict.fromkeys([
        "DeviceRecord", "EvaluationRound", "ExperimentRecord", "ExportRecord", "FarmDevice", "FarmPlace", "FarmView",
        "ModelSpec", "ProfileRound", "ProjectRecord", "RunSummary", "WorkspaceInitResult"
    ], "commands"),
    **dict.fromkeys(["JobState", "MeasurementState", "StatusRecord"], "state"),
    **dict.fromkeys(["LayerKey"], "layers"),
    **dict.fromkeys([
        "BudgetOutcome", "BudgetVerdict", "ExperimentReport", "Pick", "PipelineRow", "PostHocGroup", "ProjectReport",
        "ProjectRow", "ReportRecord", "SortKey", "Table"
    ], "report"),
    **dict.fromkeys(["CompareRecord", "ExperimentPage", "LayersRecord"], "views"),
    **dict.fromkeys([
        "CheckpointRef", "CompileResult", "EvaluationResult", "JobRecord", "MetricValue", "ProfileResult"
    ], "results"),
    **dict.fromkeys(["Plan", "PlannedProfile", "PlannedStep", "ValidationIssue", "ValidationReport"], "validation"),
}

__all__ = [
    "SCHEMA_VERSION",
    "to_dict",
    "from_dict",
    "WorkspaceInitResult",
    "ProjectRecord",
    "ExperimentRecord",
    "ValidationReport",
    "MetricValue",
    "ProfileResult",
    "EvaluationResult",
    "EvaluationRound",
    "JobRecord",
    "RunSummary",
    "ProfileRound",
    "JobState",
    "MeasurementState",
    "StatusRecord",
    "ExportRecord",
    "ReportRecord",
    "CheckpointRef",
    "ValidationIssue",
    "Plan",
    "PlannedStep",
    "PlannedProfile",
    "PipelineRow",
    "PostHocGroup",
    "ExperimentReport",
    "ProjectRow",
    "ProjectReport",
    "SortKey",
    "Pick",
    "BudgetOutcome",
    "BudgetVerdict",
    "LayersRecord",
    "CompareRecord",
    "Table",
    "CompileResult",
    "ModelSpec",
    "FarmPlace",
    "FarmDevice",
    "FarmView",
    "LayerKey",
    "DeviceRecord",
    "ExperimentPage",
]


__getattr__ = lazy_exports(__name__, _WHERE)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
