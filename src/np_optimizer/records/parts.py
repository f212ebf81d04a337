"""The parts of job.json and of a profile round that used to be loose dicts: the error, the compile summary (one shape
for the job, the round and the report index), the compile cache's answer, the job's input, output and fidelity.

Several of them are written with a subset of their keys (a round's compile summary, a cache miss, an error without a
kind): a `present` field (codec.PRESENT) keeps the keys a record was read with, so a file re-encodes as it was, and
`only(...)` picks the keys a new record writes. A record built in code (present None) writes every key.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import ClassVar

from np_optimizer.records.base import Record
from np_optimizer.records.codec import PRESENT, JsonValue
from np_optimizer.records.status import CacheStatus, CompileStatus

__all__ = ["ErrorRecord", "CompileCacheUse", "StepReuse", "CompileStop", "CompileSummary", "NO_COMPILE", "RoundCache",
           "JobInput", "JobOutput", "OutputComparison", "LowestLayer", "NumericsSummary", "Fidelity", "EvalDataset"]


def _present() -> frozenset[str] | None:
    return field(default=None, metadata=PRESENT, compare=False, repr=False)


@dataclass(frozen=True, eq=False, repr=False)
class ErrorRecord(Record):
    """Why a job or a round failed: the NP-* code, the message, the hint (errors.error_record builds one from an
    exception) and, for some NpErrors, their kind."""

    code: str | None = None
    message: str = ""
    hint: str | None = None
    kind: str | None = None
    present: frozenset[str] | None = _present()

    @classmethod
    def of(cls, exc: BaseException) -> ErrorRecord:
        from np_optimizer.errors import error_record
        from np_optimizer.records.codec import from_dict

        return from_dict(cls, error_record(exc))

    @classmethod
    def with_message(cls, message: str) -> ErrorRecord:
        """A record of a message alone (a trial's process that ended without a result)."""
        return cls(message=message, present=frozenset({"message"}))


@dataclass(frozen=True, eq=False, repr=False)
class CompileCacheUse(Record):
    """How the compile cache answered: a miss (the entry stored), or a hit (the lowering time it saved and the device
    the entry was compiled for)."""

    status: CacheStatus | None = None
    key: str | None = None
    entry: str | None = None  # the entry folder (None: the entry could not be stored)
    saved_s: float | None = None
    compiled_for: str | None = None
    present: frozenset[str] | None = _present()

    @classmethod
    def miss(cls, key: str, entry: str | None) -> CompileCacheUse:
        return cls(CacheStatus.MISS, key, entry, present=frozenset({"status", "key", "entry"}))

    @classmethod
    def hit(cls, key: str, entry: str, saved_s: float | None, compiled_for: str) -> CompileCacheUse:
        return cls(CacheStatus.HIT, key, entry, saved_s, compiled_for)


@dataclass(frozen=True, eq=False, repr=False)
class StepReuse(Record):
    """Where a job taken from the step cache came from: the entry's key and folder, the job that computed it (project,
    experiment, job) and the time computing it took there (step, save and fidelity)."""

    key: str = ""
    entry: str | None = None
    project: str | None = None
    experiment: str | None = None
    job: str | None = None
    saved_s: float | None = None

    @property
    def where(self) -> str:
        return f"step cache {self.key[:12]} (made in {self.project}/{self.experiment}/{self.job})"


@dataclass(frozen=True, eq=False, repr=False)
class CompileStop(Record):
    """When the time limit stopped a lowering: the limit, when, in which stage, the option that raises it, and the
    error's code and hint."""

    limit_s: float | None = None
    after_s: float | None = None
    stage: str | None = None
    option: str | None = None
    code: str | None = None
    hint: str | None = None


@dataclass(frozen=True, eq=False, repr=False)
class CompileSummary(Record):
    """One compilation as the job (every key of compile.json's CompileResult), a profile round (ROUND_KEYS: with
    where the compiled files are and how they were reused) and the report index (INDEX_KEYS) keep it. A key a file
    does not hold reads as None."""

    ROUND_KEYS: ClassVar[tuple[str, ...]] = (
        "status", "reason", "pte_bytes", "num_delegates", "delegated_ops", "non_delegated_ops", "planned_arena_bytes",
        "pte_file", "tosa_file", "cache", "stopped", "reused", "folder")
    INDEX_KEYS: ClassVar[tuple[str, ...]] = ("device", "status", "reason", "pte_bytes", "num_delegates",
                                             "delegated_ops", "non_delegated_ops", "planned_arena_bytes")

    device: str | None = None
    backend: str | None = None
    target: str | None = None
    status: CompileStatus | None = None  # None: not lowered
    program_sha256: str | None = None
    compile_key: str | None = None
    reason: str | None = None
    pte_file: str | None = None
    pte_bytes: int | None = None
    pte_sha256: str | None = None
    num_delegates: int | None = None
    delegated_ops: int | None = None
    non_delegated_ops: int | None = None
    delegated_histogram: dict[str, int] | None = None
    non_delegated_histogram: dict[str, int] | None = None
    planned_arena_bytes: int | None = None
    tosa_file: str | None = None
    vela_summary_file: str | None = None
    vela_summary: dict[str, int | float | str] | None = None
    vela_summary_partial: bool | None = None
    vela_config: dict[str, str] | None = None
    quantized: bool | None = None
    versions: dict[str, str] | None = None
    seconds: float | None = None
    cache: CompileCacheUse | None = None
    stopped: CompileStop | None = None
    reused: str | None = None  # a round's: "job folder", "hit" or "miss"
    folder: str | None = None  # a round's: the compile folder, relative to the experiment
    present: frozenset[str] | None = _present()

    def only(self, keys: Iterable[str]) -> CompileSummary:
        """This summary written with `keys` alone."""
        return replace(self, present=frozenset(keys))

    @property
    def lowered(self) -> bool:
        """A compilation is recorded (job.json's `compile` is {} for a job that was not lowered)."""
        return self.status is not None


NO_COMPILE = CompileSummary(present=frozenset())


@dataclass(frozen=True, eq=False, repr=False)
class RoundCache(Record):
    """A round's use of the estimate cache: the key, and whether the estimate was reused (when it was cached) or
    forced again."""

    reused: bool = False
    key: str | None = None
    forced: bool | None = None
    cached_at: str | None = None
    present: frozenset[str] | None = _present()

    @classmethod
    def none(cls) -> RoundCache:
        """A round that never reached the cache (it failed before): written as {}."""
        return cls(present=frozenset())


@dataclass(frozen=True, eq=False, repr=False)
class JobInput(Record):
    """The checkpoint a job started from."""

    checkpoint: str
    job: str
    file: str  # relative to the job folder
    sha256: str


@dataclass(frozen=True, eq=False, repr=False)
class JobOutput(Record):
    """The checkpoint a job made, and its static figures."""

    checkpoint: str
    file: str  # relative to the job folder
    sha256: str
    size_bytes: int | None = None
    params: int | None = None
    macs: int | None = None
    weight_bytes: int | None = None
    nodes: int | None = None
    present: frozenset[str] | None = _present()


@dataclass(frozen=True, eq=False, repr=False)
class OutputComparison(Record):
    """Outputs against INPUT_MODEL's (fidelity.compare_outputs): SNR over all outputs, the lowest per tensor, the
    largest absolute error."""

    snr_db: float | None = None  # None with snr_identical: the outputs are identical
    snr_identical: bool = False
    min_tensor_snr_db: float | None = None
    max_abs_error: float | None = None
    evaluated_on: str | None = None  # the .pte's: which runtime ran it
    present: frozenset[str] | None = _present()


@dataclass(frozen=True, eq=False, repr=False)
class LowestLayer(Record):
    key: str
    snr_db: float | None = None


@dataclass(frozen=True, eq=False, repr=False)
class NumericsSummary(Record):
    """The per-layer SNR file of a job (layers_snr.json) in brief, or why there is none (`error`)."""

    file: str | None = None  # relative to the experiment
    layers: int | None = None
    lowest: tuple[LowestLayer, ...] = ()
    seconds: float | None = None
    zeroed: dict[str, JsonValue] | None = None
    weak_position: dict[str, JsonValue] | None = None
    error: str | None = None
    present: frozenset[str] | None = _present()


@dataclass(frozen=True, eq=False, repr=False)
class Fidelity(Record):
    """A job's outputs against INPUT_MODEL's on the evaluation inputs: the exported program's, the .pte's on this
    machine when it ran here, and each layer's. job.json holds {} when there were no evaluation inputs."""

    vs: str | None = None
    inputs: int | None = None
    source: str | None = None
    program: OutputComparison | None = None
    evaluated_on: str | None = None
    layers: NumericsSummary | None = None
    pte: OutputComparison | None = None
    pte_error: str | None = None
    present: frozenset[str] | None = _present()

    @classmethod
    def none(cls) -> Fidelity:
        return cls(present=frozenset())


@dataclass(frozen=True, eq=False, repr=False)
class EvalDataset(Record):
    """The labelled dataset an evaluation ran on."""

    name: str
    path: str | None = None
    format: str | None = None
    samples: int | None = None
    classes: int | None = None
    transform: dict[str, JsonValue] | None = None
    present: frozenset[str] | None = _present()
