"""The records of what was measured, estimated or evaluated, and of each pipeline job (job.json).

Their parts are records too (parts.py): the error, the compile summary, the job's input, output and fidelity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from np_optimizer.records.base import Record
from np_optimizer.records.codec import OMITTED_WHEN_NONE, SCHEMA_VERSION, JsonValue
from np_optimizer.records.parts import (
    NO_COMPILE,
    CompileCacheUse,
    CompileStop,
    CompileSummary,
    ErrorRecord,
    EvalDataset,
    Fidelity,
    JobInput,
    JobOutput,
    RoundCache,
    StepReuse,
)
from np_optimizer.records.status import CompileStatus, JobStatus, RoundStatus

__all__ = ["CheckpointRef", "CompileResult", "MetricValue", "ProfileResult", "EvaluationResult", "JobRecord"]


@dataclass(frozen=True, eq=False, repr=False)
class CheckpointRef(Record):
    """A checkpoint on disk: INPUT_MODEL, GRAPH_OPTIMIZE, ... made by job `job`."""

    name: str
    job: str
    path: Path
    sha256: str


@dataclass(frozen=True, eq=False, repr=False)
class MetricValue(Record):
    """One number with its unit, the statistic it is (avg, median, peak) and how it was obtained."""

    metric_type: str
    value: float
    unit: str
    stat: str | None = None
    source: str = ""
    comparison_model: str | None = None
    component_name: str | None = None
    coverage: str | None = None  # set when the number covers part of the model only ("partial: NPU part only ...")


@dataclass(frozen=True, eq=False, repr=False)
class ProfileResult(Record):
    """One profiling of one checkpoint on one device by one method (inline in np run, or post-hoc)."""

    measurement_id: str
    checkpoint: str
    job: str
    checkpoint_sha256: str
    device: str
    runtime: str
    backend: str
    method: str
    result_kind: str  # "estimated" | "measured"
    trigger: str  # "RUN_INLINE" | "POSTHOC"
    status: RoundStatus
    started_at: str
    ended_at: str | None = None
    requested_method: str | None = None
    metrics: tuple[MetricValue, ...] = ()
    extras: dict[str, JsonValue] = field(default_factory=dict)  # the method's own figures, by name
    provenance: dict[str, JsonValue] = field(default_factory=dict)  # what the method says of how it measured
    warnings: tuple[str, ...] = ()
    notices: tuple[str, ...] = ()
    partial: bool = False
    cache: RoundCache = field(default_factory=RoundCache.none)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per part: compile_s, profile_s, ...
    artifacts: dict[str, str] = field(default_factory=dict)
    compile: CompileSummary = NO_COMPILE  # CompileSummary.ROUND_KEYS
    error: ErrorRecord | None = None
    schema_version: int = SCHEMA_VERSION

    def metric(self, metric_type: str) -> MetricValue | None:
        return next((m for m in self.metrics if m.metric_type == metric_type), None)


@dataclass(frozen=True, eq=False, repr=False)
class EvaluationResult(Record):
    """One evaluation of one checkpoint (inline in np run, or post hoc by np evaluate): comparison metrics against
    INPUT_MODEL and, with a labelled dataset, task metrics; `evaluated_on` says what ran (the .pte on this machine's
    ExecuTorch runtime, or the exported program) and `samples` on how many inputs."""

    measurement_id: str
    checkpoint: str
    job: str
    checkpoint_sha256: str
    device: str
    backend: str
    trigger: str  # "RUN_INLINE" | "POSTHOC"
    status: RoundStatus
    started_at: str
    ended_at: str | None = None
    dataset: EvalDataset | None = None  # None: the evaluation inputs (no labels)
    evaluated_on: str = ""
    samples: int = 0
    requested: tuple[str, ...] = ()
    metrics: tuple[MetricValue, ...] = ()
    warnings: tuple[str, ...] = ()
    error: ErrorRecord | None = None
    schema_version: int = SCHEMA_VERSION

    def metric(self, metric_type: str) -> MetricValue | None:
        return next((m for m in self.metrics if m.metric_type == metric_type), None)


@dataclass(frozen=True, eq=False, repr=False)
class JobRecord(Record):
    """job.json of one pipeline job (00_input_model, 01_graph_optimize, ...)."""

    name: str
    step_type: str
    step_index: int
    checkpoint: str
    status: JobStatus
    created_at: str
    started_at: str | None = None
    ended_at: str | None = None
    duration_s: float | None = None
    input: JobInput | None = None
    output: JobOutput | None = None
    parameters: dict[str, JsonValue] = field(default_factory=dict)  # the step's options, as configured
    config_hash: str = ""
    changes: dict[str, JsonValue] = field(default_factory=dict)  # what the step changed, in its own words
    compile: CompileSummary = NO_COMPILE  # every CompileResult key, or {} when the job was not lowered
    fidelity: Fidelity = field(default_factory=Fidelity.none)
    warnings: tuple[str, ...] = ()
    errors: tuple[ErrorRecord, ...] = ()
    profile: tuple[ProfileResult, ...] = ()
    pid: int | None = None
    timings: dict[str, float] = field(default_factory=dict)  # seconds per part: step, save, compile, fidelity
    schema_version: int = SCHEMA_VERSION
    evaluation: tuple[EvaluationResult, ...] = ()
    # taken from the step cache (another experiment computed it); the key is written only then
    reused_from: StepReuse | None = field(default=None, metadata=OMITTED_WHEN_NONE)


@dataclass(frozen=True, eq=False, repr=False)
class CompileResult(Record):
    """compile.json: what was compiled from what, for which device, and what the lowering delegated."""

    device: str
    backend: str
    target: str | None
    status: CompileStatus
    program_sha256: str
    compile_key: str
    reason: str | None = None
    pte_file: str | None = None  # relative to the compile folder
    pte_bytes: int | None = None
    pte_sha256: str | None = None
    num_delegates: int = 0
    delegated_ops: int = 0
    non_delegated_ops: int = 0
    delegated_histogram: dict[str, int] = field(default_factory=dict)
    non_delegated_histogram: dict[str, int] = field(default_factory=dict)
    planned_arena_bytes: int | None = None
    tosa_file: str | None = None  # relative to the compile folder
    vela_summary_file: str | None = None
    vela_summary: dict[str, int | float | str] | None = None  # Vela's summary CSV row, numbers parsed
    vela_summary_partial: bool = False
    vela_config: dict[str, str] | None = None
    quantized: bool | None = None  # does the compiled program hold quantize ops (None: not recorded)
    versions: dict[str, str] = field(default_factory=dict)
    seconds: float | None = None  # wall time of this compilation (a copy, on a cache hit)
    cache: CompileCacheUse | None = None
    stopped: CompileStop | None = None  # set when the time limit stopped the lowering

    @property
    def total_ops(self) -> int:
        return self.delegated_ops + self.non_delegated_ops

    def summary(self) -> CompileSummary:
        """The job's copy of this record (every key); `.only(CompileSummary.ROUND_KEYS)` for a round's."""
        from np_optimizer.records.codec import from_dict, to_dict

        return from_dict(CompileSummary, to_dict(self))
