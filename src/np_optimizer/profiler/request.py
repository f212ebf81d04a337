"""What a profiling method is given, and what it returns."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from np_optimizer.compile.result import CompileResult
from np_optimizer.devices import Device
from np_optimizer.processes import Watch
from np_optimizer.records import CheckpointRef, MetricValue
from np_optimizer.records.compiled import CompiledCheckpoint, ProgramStats
from np_optimizer.workspace.remote import RemoteDevice

__all__ = ["RoundRequest", "ProfileRequest", "MethodOutput"]


@dataclass(frozen=True)
class RoundRequest:
    """One profile round asked of profile_checkpoint: which checkpoint, where its job keeps it, on which device, by
    which method. np run's Profiling phase and np profile build it."""

    checkpoint: CheckpointRef
    job_dir: Path  # the job folder (its compile folder and the round's artifacts go under it)
    experiment_root: Path  # artifact paths in the round are relative to it
    device: Device
    method: str
    options: dict[str, Any]  # run.detail.yaml's profile[N] (np profile: with --profile-opt on top)
    trigger: str  # "RUN_INLINE" | "POSTHOC"
    requested_method: str | None = None  # as asked (None: the device's default), kept in the round
    force: bool = False  # estimate again instead of reusing a cached estimate
    remote: RemoteDevice | None = None
    # bounds a long lowering and MLIA's estimate (None: options["time_limit"]); its label and code are set per use
    watch: Watch | None = None
    stats: ProgramStats = ProgramStats()  # the job's MACs, params, weight bytes of this exact checkpoint
    # np run: what its job compiled, profiled as is. None (np profile, a job reused under --retry): an intact earlier
    # compilation in the job folder (find_compiled), else a new one
    compiled: CompiledCheckpoint | None = None


@dataclass
class ProfileRequest:
    checkpoint: str  # INPUT_MODEL, GRAPH_QUANTIZE, ...
    job: str
    program_path: Path  # the checkpoint's .pt2
    program_sha256: str
    compiled: CompileResult
    compiled_dir: Path
    device: Device
    options: dict[str, Any]  # num_executions, timeout, warmup
    work_dir: Path  # where the method keeps its artifacts (per-layer breakdown, raw samples)
    log: logging.Logger
    remote: RemoteDevice | None = None
    queue_notice: Any = None  # callable(str) for device-queue messages (measured methods)
    # Static facts of the checkpoint recorded by its job (macs, params, weight_bytes), so a method can report them
    # without loading the program; a key may be missing.
    program_stats: dict[str, Any] = field(default_factory=dict)
    # How a long tool run of the method (MLIA's estimate) is shown and bounded; None: run it here, unbounded.
    watch: Watch | None = None

    @property
    def pte_path(self) -> Path | None:
        return self.compiled_dir / self.compiled.pte_file if self.compiled.pte_file else None


@dataclass
class MethodOutput:
    """What a method gives for a round that succeeded; a method that cannot profile raises an np error instead."""

    result_kind: str  # "estimated" | "measured"
    metrics: list[MetricValue] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    partial: bool = False
    artifacts: dict[str, str] = field(default_factory=dict)  # name -> file name inside work_dir
    timings: dict[str, float] = field(default_factory=dict)
