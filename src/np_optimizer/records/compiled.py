"""What a job hands to the profiler: its checkpoint, the statistics it counted, and the program compiled from it.

np run's jobs produce these and its Profiling phase takes them as they are, so a round profiles exactly the
compilation the job made (same compile key, same .pte sha256) without looking it up on disk again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from np_optimizer.records.base import Record
from np_optimizer.records.parts import JobOutput
from np_optimizer.records.results import CheckpointRef, CompileResult

__all__ = ["ProgramStats", "CompiledCheckpoint", "ProducedCheckpoint"]


@dataclass(frozen=True, eq=False, repr=False)
class ProgramStats(Record):
    """Static facts of a checkpoint, counted by its job when it saved the .pt2 (job.json's output block)."""

    macs: int | None = None
    params: int | None = None
    weight_bytes: int | None = None

    @classmethod
    def of_output(cls, output: JobOutput | None, sha256: str) -> ProgramStats:
        """The statistics a job's output block records for exactly this checkpoint (none for another .pt2)."""
        if output is None or output.sha256 != sha256:
            return cls()
        return cls(macs=output.macs, params=output.params, weight_bytes=output.weight_bytes)

    def as_dict(self) -> dict[str, int]:
        """The known ones, as a method reads them (a key may be missing)."""
        return {k: v for k, v in (("macs", self.macs), ("params", self.params), ("weight_bytes", self.weight_bytes))
                if v is not None}


@dataclass(frozen=True, eq=False, repr=False)
class CompiledCheckpoint(Record):
    """A checkpoint compiled for one device: its compile folder and record (compile.json), and the checkpoint's
    statistics. `record.status` may be "unsupported" or "failed": the compile record says why."""

    checkpoint: CheckpointRef
    folder: Path  # <job>/artifacts/compiled_<device>/
    record: CompileResult
    stats: ProgramStats = ProgramStats()

    @property
    def compile_key(self) -> str:
        return self.record.compile_key

    @property
    def pte_sha256(self) -> str | None:
        return self.record.pte_sha256

    @property
    def pte_path(self) -> Path | None:
        return self.folder / self.record.pte_file if self.record.pte_file else None

    @property
    def delegation(self) -> tuple[int, int, int]:
        """What the lowering delegated: (delegated ops, total ops, delegates)."""
        return self.record.delegated_ops, self.record.total_ops, self.record.num_delegates


@dataclass(frozen=True, eq=False, repr=False)
class ProducedCheckpoint(Record):
    """What one job of np run produced. `compiled` is None when the job did not compile in this run (a job reused
    under --retry, or a checkpoint not lowered now): the profiler then looks its compilation up on disk."""

    checkpoint: CheckpointRef
    stats: ProgramStats = ProgramStats()
    compiled: CompiledCheckpoint | None = None
