"""report.json's index as a record, and `build_index`: the one pure function that builds it from the experiment's
jobs and its own state. The store reads the files, calls it and writes `to_dict` of the result; nothing else edits the
index (no file access here, so the same jobs and state give the same index).

    IndexState   what report.json keeps of its own: the experiment's state (meta.json's copy), np run's profiling
                 and evaluation phases, and the profile rounds of jobs that have no readable job.json
    ReportIndex  report.json: the state plus the pipeline rows, the run's latest results, the post-hoc rounds and a
                 copy of every job record (`job_records`), rebuilt from the job files

The JSON keys and their order are report.json's as older np wrote them (the index's fields are in that order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from np_optimizer.records.base import Record
from np_optimizer.records.codec import OMITTED_WHEN_NONE, SCHEMA_VERSION
from np_optimizer.records.parts import CompileSummary, ErrorRecord, Fidelity, JobOutput
from np_optimizer.records.results import EvaluationResult, JobRecord, ProfileResult
from np_optimizer.records.status import CompileStatus, JobStatus

__all__ = ["DAMAGED", "ExperimentPart", "ProfilingPhase", "EvaluationPhase", "IndexState", "PipelineEntry",
           "PipelineIndex", "ProfileIndex", "EvaluationIndex", "ReportIndex", "build_index", "pipeline_entry"]

DAMAGED = JobStatus.DAMAGED  # the status of a job whose job.json cannot be read and has no copy in report.json
_NOT_SET: dict[str, Any] = OMITTED_WHEN_NONE  # a key written only once np run has set it (older files' shape)


@dataclass(frozen=True, eq=False, repr=False)
class ExperimentPart(Record):
    """report.json's `experiment`: the experiment's state, as meta.json keeps it (a copy that restores meta.json)."""

    name: str
    project: str | None = field(default=None, metadata=_NOT_SET)
    device: str | None = field(default=None, metadata=_NOT_SET)
    runtime: str | None = field(default=None, metadata=_NOT_SET)
    backend: str | None = field(default=None, metadata=_NOT_SET)
    status: str = "created"
    started_at: str | None = field(default=None, metadata=_NOT_SET)
    ended_at: str | None = field(default=None, metadata=_NOT_SET)


@dataclass(frozen=True, eq=False, repr=False)
class ProfilingPhase(Record):
    """np run's Profiling phase: whether run.yaml lists checkpoints to profile, which, by what method and since
    when (the run's results are its inline rounds since then)."""

    enabled: bool = False
    listed: tuple[str, ...] = ()
    method: str | None = field(default=None, metadata=_NOT_SET)
    started_at: str | None = field(default=None, metadata=_NOT_SET)


@dataclass(frozen=True, eq=False, repr=False)
class EvaluationPhase(Record):
    """np run's Evaluation phase: the checkpoints run.yaml's `evaluate:` lists, and since when."""

    enabled: bool = False
    listed: tuple[str, ...] = ()
    started_at: str | None = None


@dataclass(frozen=True, eq=False, repr=False)
class IndexState(Record):
    """What report.json keeps of its own, not derived from the job files. `inline_rounds` and `post_hoc_rounds` are
    the rounds the stored index holds; build_index keeps those whose job has no readable job.json (a step that
    never ran, a damaged file) and takes the others from the jobs."""

    experiment: ExperimentPart
    profiling: ProfilingPhase = field(default_factory=ProfilingPhase)
    evaluation: EvaluationPhase = field(default_factory=EvaluationPhase)
    inline_rounds: tuple[ProfileResult, ...] = ()
    post_hoc_rounds: tuple[ProfileResult, ...] = ()


@dataclass(frozen=True, eq=False, repr=False)
class PipelineEntry(Record):
    """The report.json row of a job: status, checkpoint, lowering and fidelity (no profile results: those are apart).
    `lowering` is the compile summary's INDEX_KEYS (None when the job was not lowered)."""

    job: str
    step_type: str
    step_index: int
    checkpoint: str
    status: JobStatus
    started_at: str | None
    ended_at: str | None
    duration_s: float | None
    output: JobOutput | None
    lowering: CompileSummary | None
    lowering_failed: bool
    lowering_unsupported: bool
    fidelity: Fidelity
    warnings: tuple[str, ...]
    errors: tuple[ErrorRecord, ...]


@dataclass(frozen=True, eq=False, repr=False)
class PipelineIndex(Record):
    input_model: PipelineEntry | None = None
    steps: tuple[PipelineEntry, ...] = ()


@dataclass(frozen=True, eq=False, repr=False)
class ProfileIndex(Record):
    """report.json's `profile`: the Profiling phase and its results, the latest round per checkpoint."""

    enabled: bool = False
    listed: tuple[str, ...] = ()
    method: str | None = field(default=None, metadata=_NOT_SET)
    started_at: str | None = field(default=None, metadata=_NOT_SET)
    results: tuple[ProfileResult, ...] = ()


@dataclass(frozen=True, eq=False, repr=False)
class EvaluationIndex(Record):
    """report.json's `evaluation`: the latest run's inline result per checkpoint, and every post-hoc round."""

    enabled: bool = False
    listed: tuple[str, ...] = ()
    started_at: str | None = None
    results: tuple[EvaluationResult, ...] = ()
    post_hoc: tuple[EvaluationResult, ...] = ()


@dataclass(frozen=True, eq=False, repr=False)
class ReportIndex(Record):
    """report.json."""

    __json_order__: ClassVar[tuple[str, ...]] = ("schema_version",)

    experiment: ExperimentPart
    pipeline: PipelineIndex = field(default_factory=PipelineIndex)
    profile: ProfileIndex = field(default_factory=ProfileIndex)
    post_hoc: tuple[ProfileResult, ...] = ()
    evaluation: EvaluationIndex = field(default_factory=EvaluationIndex)
    job_records: dict[str, JobRecord] = field(default_factory=dict)  # the second copy of every readable job.json
    schema_version: int = SCHEMA_VERSION


def pipeline_entry(record: JobRecord) -> PipelineEntry:
    compiled = record.compile
    return PipelineEntry(
        job=record.name, step_type=record.step_type, step_index=record.step_index, checkpoint=record.checkpoint,
        status=record.status, started_at=record.started_at, ended_at=record.ended_at, duration_s=record.duration_s,
        output=record.output or None, lowering=compiled.only(CompileSummary.INDEX_KEYS) if compiled.lowered else None,
        lowering_failed=compiled.status == CompileStatus.FAILED,
        lowering_unsupported=compiled.status == CompileStatus.UNSUPPORTED,
        fidelity=record.fidelity, warnings=tuple(record.warnings), errors=tuple(record.errors))


def build_index(jobs: Sequence[JobRecord], state: IndexState) -> ReportIndex:
    """report.json from the jobs (in step order, as the store lists them) and the experiment's own state."""
    names = {j.name for j in jobs if j.status != DAMAGED}  # a damaged job's rounds in the stored index are kept
    rows = [pipeline_entry(j) for j in jobs]
    pipeline = PipelineIndex(input_model=next((r for r in rows if r.step_type == "input_model"), None),
                             steps=tuple(sorted((r for r in rows if r.step_type != "input_model"),
                                                key=lambda r: r.step_index)))
    rounds = [r for j in jobs for r in j.profile]
    phase = state.profiling
    return ReportIndex(
        experiment=state.experiment, pipeline=pipeline,
        profile=ProfileIndex(enabled=phase.enabled, listed=phase.listed, method=phase.method,
                             started_at=phase.started_at,
                             results=_latest_inline(state, names, rounds) if phase.enabled else ()),
        post_hoc=tuple(sorted([*(r for r in state.post_hoc_rounds if r.job not in names),
                               *(r for r in rounds if r.trigger == "POSTHOC")], key=lambda r: r.started_at or "")),
        evaluation=_evaluation(state.evaluation, jobs),
        job_records={j.name: j for j in jobs if j.status != DAMAGED})


def _latest_inline(state: IndexState, names: set[str], rounds: list[ProfileResult]) -> tuple[ProfileResult, ...]:
    """The latest run's result per checkpoint: its latest inline round since the Profiling phase began; a checkpoint
    profiled again moves to the end."""
    since = state.profiling.started_at or ""
    inline = [*(r for r in state.inline_rounds if r.job not in names),
              *(r for r in rounds if r.trigger == "RUN_INLINE")]
    latest: dict[str, ProfileResult] = {}
    for r in sorted((r for r in inline if (r.started_at or "") >= since), key=lambda r: r.started_at or ""):
        latest.pop(r.checkpoint, None)
        latest[r.checkpoint] = r
    return tuple(latest.values())


def _evaluation(phase: EvaluationPhase, jobs: Sequence[JobRecord]) -> EvaluationIndex:
    since = phase.started_at or ""
    rounds = sorted((r for j in jobs for r in j.evaluation), key=lambda r: r.started_at or "")
    latest: dict[str, EvaluationResult] = {}
    for r in rounds:
        if r.trigger == "RUN_INLINE" and (r.started_at or "") >= since:
            latest[r.checkpoint] = r
    return EvaluationIndex(enabled=phase.enabled, listed=phase.listed, started_at=phase.started_at,
                           results=tuple(latest.values()), post_hoc=tuple(r for r in rounds if r.trigger == "POSTHOC"))
