"""The records the commands return: what `np <command> --json` prints (np status's are in state.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from np_optimizer.errors import EXIT_FAILED, failure_exit_code
from np_optimizer.records.base import Record
from np_optimizer.records.codec import NOT_WRITTEN, SCHEMA_VERSION
from np_optimizer.records.parts import ErrorRecord
from np_optimizer.records.results import EvaluationResult, ProfileResult
from np_optimizer.records.status import JobStatus, RoundStatus, RunStatus

__all__ = ["DeviceRecord", "ModelSpec", "FarmPlace", "FarmDevice", "FarmView", "WorkspaceInitResult",
           "ProjectRecord", "ExperimentRecord", "ExportRecord", "RunSummary", "RunJob", "EvaluationRound", "ProfileRound",
           "ExperimentJob", "DeviceMethod"]

@dataclass(frozen=True, eq=False, repr=False)
class WorkspaceInitResult(Record):
    root: str
    created: bool
    projects: tuple[str, ...]
    skipped: tuple[str, ...] = ()
    schema_version: int = SCHEMA_VERSION


@dataclass(frozen=True, eq=False, repr=False)
class ProjectRecord(Record):
    name: str
    path: str
    device: str
    runtime: str
    backend: str
    model: ModelSpec
    calibration_dataset: str | None
    created_at: str
    experiments: tuple[str, ...] = ()
    schema_version: int = SCHEMA_VERSION


@dataclass(frozen=True, eq=False, repr=False)
class ExperimentJob(Record):
    """One job of `np experiments show --json`: its status as job.json says it, or "unreadable"."""

    name: str
    status: JobStatus | Literal["unreadable"] | None
    step_type: str | None


@dataclass(frozen=True, eq=False, repr=False)
class ExperimentRecord(Record):
    name: str
    path: str
    project: str
    device: str
    steps: tuple[str, ...]
    profile: tuple[str, ...] | None
    status: str  # an ExperimentStatus, or "invalid" (run.yaml breaks a rule), "unknown (...)"
    created_at: str | None = None
    updated_at: str | None = None
    jobs: tuple[ExperimentJob, ...] = ()
    schema_version: int = SCHEMA_VERSION


@dataclass(frozen=True, eq=False, repr=False)
class ExportRecord(Record):
    """`np export`: what was copied where (`files` are absolute paths, the .pte first).

    No schema_version: `np export --json` prints this record as is, and its shape is pinned."""

    level: str  # "deploy" | "inspect" | "result"
    folder: str
    checkpoint: str
    job: str
    device: str
    files: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False, repr=False)
class RunJob(Record):
    """One job of `np run --json`'s `jobs`."""

    name: str
    status: JobStatus
    duration_s: float | None = None


@dataclass(frozen=True, eq=False, repr=False)
class RunSummary(Record):
    """`np run`: how the run ended, its jobs, its profile rounds, and the error that stopped the steps (if any).

    No schema_version: `np run --json` prints `to_dict()` of it, whose shape is pinned."""

    experiment: str
    status: RunStatus
    duration_s: float
    jobs: tuple[RunJob, ...] = ()
    profile: tuple[ProfileResult, ...] = ()
    error: ErrorRecord | None = None
    evaluation: tuple[EvaluationResult, ...] = ()

    @property
    def exit_code(self) -> int:
        """0; else 4 when every failure (the step's and the rounds') is a device that could not be reached, else 1."""
        if self.status == RunStatus.SUCCESS:
            return 0
        codes = [str(p.error.code) for p in self.profile if p.status != RoundStatus.SUCCESS and p.error]
        if self.error is not None:
            codes.append(str(self.error.code))
        return failure_exit_code(codes) or EXIT_FAILED



@dataclass(frozen=True, eq=False, repr=False)
class EvaluationRound(Record):
    """`np evaluate`: the post-hoc evaluations of one command.

    No schema_version: `np evaluate --json` prints `to_dict()` of it."""

    experiment: str
    dataset: str | None
    results: tuple[EvaluationResult, ...] = ()

    @property
    def failed(self) -> list[EvaluationResult]:
        return [r for r in self.results if r.status != RoundStatus.SUCCESS]

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if self.failed else 0



@dataclass(frozen=True, eq=False, repr=False)
class ProfileRound(Record):
    """`np profile`: the post-hoc rounds of one command, on one device with one method.

    No schema_version: `np profile --json` prints `to_dict()` of it, whose shape is pinned."""

    __json_computed__: ClassVar[dict[str, str]] = {"reused": "reused"}
    __json_order__: ClassVar[tuple[str, ...]] = ("experiment", "device", "method", "reused", "results")

    experiment: str
    device: str
    method: str
    results: tuple[ProfileResult, ...] = ()
    requested_method: str | None = field(default=None, metadata=NOT_WRITTEN)  # as asked (None: the default method)

    @property
    def reused(self) -> bool:
        """True only when every result was reused (the batch rule of the reference product)."""
        return bool(self.results) and all(r.cache.reused for r in self.results)

    @property
    def failed(self) -> list[ProfileResult]:
        return [r for r in self.results if r.status != RoundStatus.SUCCESS]

    @property
    def exit_code(self) -> int:
        """0, or 4 when every failed round could not reach its device, else 1."""
        return failure_exit_code([str(r.error.code if r.error else None) for r in self.failed])



@dataclass(frozen=True, eq=False, repr=False)
class ModelSpec(Record):
    """project.json's `model`: what the project's model is and where its copy lives."""

    # "builtin" | "pt2" | "hf" (a Hugging Face model folder, copied to model/hf/) | "package" (file.py:factory: the
    # file's folder copied to model/package/) | "module" (package.module:factory, installed) | "factory" (an older
    # np's file.py:factory: the file alone at model/model.py)
    kind: str
    name: str
    file: str | None = None  # relative to the project folder
    factory: str | None = None
    seed: int = 0
    source: str | None = None  # what the user passed
    sha256: str | None = None  # of the file, or of every file of the copied folder
    package: str | None = None  # "package": the copied folder that goes first on sys.path, relative to the project
    module: str | None = None  # "package", "module": the module to import (dotted)
    distribution: str | None = None  # "module": the distribution that installed it, and its version then
    version: str | None = None


@dataclass(frozen=True, eq=False, repr=False)
class FarmPlace(Record):
    name: str
    state: str  # "free" | "acquired" | "reserved"
    acquired_by: str | None  # labgrid's owner, host/user
    tags: dict[str, str]
    board: str | None  # the NetworkService's user@address:port
    exporter: str | None
    available: bool  # the exporter publishes the service now


@dataclass(frozen=True, eq=False, repr=False)
class FarmDevice(Record):
    device: str
    tags: dict[str, str]
    places: tuple[FarmPlace, ...]
    waiting: int  # reservations for exactly these tags still in the queue


@dataclass(frozen=True, eq=False, repr=False)
class FarmView(Record):
    coordinator: str
    devices: tuple[FarmDevice, ...]
    exporters: tuple[str, ...]


@dataclass(frozen=True, eq=False, repr=False)
class DeviceMethod(Record):
    """What one profiling method gives on a device, as `np devices ls --json` prints it."""

    result_kind: str  # "estimated" | "measured"
    metrics: tuple[str, ...]
    requires: str | None = None  # a precondition the user must meet (an SSH destination)
    note: str = ""


@dataclass(frozen=True, eq=False, repr=False)
class DeviceRecord(Record):
    """One row of `np devices ls --json`: a device of the catalogue and the metrics each of its methods gives."""

    device: str
    display_name: str
    runtime: str
    backend: str
    chipset: str
    architecture: str
    memory: str
    mlia_target: str | None
    methods: dict[str, DeviceMethod]  # by method name
    notes: str


@dataclass(frozen=True, eq=False, repr=False)
class DeviceListing(Record):
    """`np devices ls`: the catalogue's devices that pass the filters, in the asked order, and the workspace's farm
    (its devices' places and their state; None without a farm)."""

    devices: tuple[DeviceRecord, ...]
    farm: FarmView | None = None
