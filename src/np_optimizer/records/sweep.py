"""The record of one `np sweep`: its objectives and constraints, and every trial with the experiment that ran it.

`np sweep` writes it (atomically, after each trial) to `<project>/sweep/trials.json`; `np report` at the project level
and the HTML report read it to draw the front. The values are copied from each trial's report when the trial ends,
in the metric's stored unit (UNITS in np_optimizer.metrics), so the front needs no experiment to be re-read.

Also what crosses the sweep's process boundaries: the TrialJob a pool hands its worker (as JSON), the TrialResult the
worker reports (one JSON line, or a Ray task's return: the figures the driver tells the study), and what `np sweep`
returns (SweepPlan, SweepResult). The front np report draws (FrontView, its objectives and constraints) is in
records/front.py, re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from np_optimizer.records.base import Record
from np_optimizer.records.codec import JsonValue
from np_optimizer.records.front import FrontPoint, FrontView, SweepConstraint, SweepObjective
from np_optimizer.records.status import RunStatus, TrialState

__all__ = ["SweepObjective", "SweepConstraint", "SweepTrial", "SweepRecord", "TRIAL_STATES", "COMPLETE", "FAILED",
           "RUNNING", "WAITING", "FrontPoint", "FrontView"]

COMPLETE, FAILED, RUNNING, WAITING = TrialState.COMPLETE, TrialState.FAILED, TrialState.RUNNING, TrialState.WAITING
TRIAL_STATES = (WAITING, RUNNING, COMPLETE, FAILED)


@dataclass(frozen=True, eq=False, repr=False)
class SweepTrial(Record):
    number: int  # the Optuna trial number (0, 1, ...): one per configuration, never reused
    experiment: str  # the experiment folder that ran it: experiment_07
    params: dict[str, JsonValue]  # dimension path -> value: {"graph_quantize.scheme": "W8-A8", "graph_optimize": true}
    state: TrialState
    checkpoint: str | None = None  # the checkpoint the values are of (the trial's last step): GRAPH_QUANTIZE
    values: dict[str, float | None] = field(default_factory=dict)  # metric -> value (None: the trial did not give it)
    reason: str | None = None  # one line: why it failed, or why a value is missing
    duration_s: float | None = None
    runs: int = 1  # how many times it was started (a trial that was running when the sweep stopped is run again)
    kept_float: tuple[str, ...] = ()  # layers strategy: the layers this trial keeps float
    note: str | None = None  # layers strategy: how the trial was proposed ("2 most damaging layers float")
    caveats: tuple[str, ...] = ()  # one line each: a value that covers part of the model only (NPU part)
    formats: dict[str, str] = field(default_factory=dict)  # mixed strategy: module path -> the format it was given


@dataclass(frozen=True, eq=False, repr=False)
class SweepRecord(Record):
    sweep_file: str  # the sweep.yaml it came from, relative to the project
    strategy: str  # grid | optuna | layers | mixed
    objectives: tuple[SweepObjective, ...]
    constraints: tuple[SweepConstraint, ...] = ()
    trials: tuple[SweepTrial, ...] = ()
    method: str | None = None  # the profile method of every trial
    device: str | None = None
    measure_on: str | None = None  # the device each trial's last checkpoint was measured on (its latency, memory)
    key: str | None = None  # the sweep's shape (space, objectives, ...): a resumed sweep must have the same
    schema_version: int = 1

    def trial(self, number: int) -> SweepTrial | None:
        return next((t for t in self.trials if t.number == number), None)

    def to_json(self) -> dict[str, Any]:
        from np_optimizer.records.codec import to_dict

        return to_dict(self)


__all__ += ["TrialJob", "TrialError", "TrialFigure", "TrialResult", "TrialStatus", "PlannedTrial", "SweepPlan",
            "SweepResult"]

TrialStatus = RunStatus  # a trial ends as an np run does: success or failed


@dataclass(frozen=True, eq=False, repr=False)
class TrialJob(Record):
    """One trial handed to a pool: its experiment folder and what to do there (JSON: the worker process's argument)."""

    number: int
    experiment_dir: Path
    method: str | None = None
    retry: bool = False  # reuse the finished steps (a trial that was running when the sweep stopped)
    measure_on: str | None = None  # then measure the last checkpoint on this device
    metrics: tuple[str, ...] = ()  # the sweep's metrics (objectives, then constraints): the figures it reports
    measure_only: bool = False  # the steps ran elsewhere (a Ray node): only measure here


@dataclass(frozen=True, eq=False, repr=False)
class TrialError(Record):
    """Why a trial failed: the error that stopped it, as np reports errors."""

    message: str
    hint: str | None = None
    code: str | None = None


@dataclass(frozen=True, eq=False, repr=False)
class TrialFigure(Record):
    """One of the sweep's metrics for the trial's last checkpoint, in the metric's stored unit."""

    metric: str  # LATENCY
    value: float | None  # None: not given (see why)
    unit: str  # ms
    why: str | None = None  # why there is no value: "not given by this device and method"

    @property
    def missing(self) -> str | None:
        """The line a trial's reason shows for it: "latency: not given by this device and method"."""
        return None if self.why is None else f"{self.metric.lower()}: {self.why}"


@dataclass(frozen=True, eq=False, repr=False)
class TrialResult(Record):
    """How one trial ended, as its worker reports it (one JSON line of the local pool's child, or a Ray task's
    return): success or failed, the figures of its last checkpoint, the error that stopped it."""

    experiment: str  # experiment_07
    status: TrialStatus
    duration_s: float | None = None
    checkpoint: str | None = None  # the checkpoint the figures are of: GRAPH_QUANTIZE
    figures: tuple[TrialFigure, ...] = ()  # one per metric of the sweep, in the sweep's order
    caveats: tuple[str, ...] = ()  # one line each: a value that covers part of the model only (NPU part)
    notes: tuple[str, ...] = ()  # one line each: what else the figures lack (no measured round on the device)
    error: TrialError | None = None
    node: str | None = None  # the Ray node that ran its steps
    schema_version: int = 1

    @property
    def values(self) -> dict[str, float | None]:
        """metric -> value, as sweep/trials.json keeps them."""
        return {f.metric: f.value for f in self.figures}


@dataclass(frozen=True, eq=False, repr=False)
class PlannedTrial(Record):
    params: dict[str, JsonValue]
    steps: tuple[str, ...]
    problems: tuple[str, ...]  # why this trial will fail (its run.yaml breaks a rule of the device or model)


@dataclass(frozen=True, eq=False, repr=False)
class SweepPlan(Record):
    """What `np sweep` will do, before it does it (`np sweep --dry-run --json` prints it)."""

    project: str
    sweep_file: str
    base: str
    strategy: str
    budget: int  # trials the sweep will run
    grid: int  # distinct configurations in the space
    method: str
    measure_on: str | None
    objectives: tuple[str, ...]
    constraints: tuple[str, ...]
    workers: int
    workers_why: str
    measures_here: bool  # a trial measures on this machine (its latency must not share the CPU)
    trials: tuple[PlannedTrial, ...]  # grid: in the order they run; optuna: the space it draws from
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False, repr=False)
class SweepResult(Record):
    """`np sweep`: its plan; with a run, the sweep's record when it ended (or when it was interrupted, as far as
    trials.json got; None for a study kept in a database and stopped before it wrote a record)."""

    plan: SweepPlan
    record: SweepRecord | None = None
    interrupted: bool = False  # Ctrl+C: finished trials are recorded; np sweep --resume continues

    @property
    def complete(self) -> int:
        return sum(1 for t in self.record.trials if t.state == COMPLETE) if self.record else 0

    @property
    def failed(self) -> int:
        return sum(1 for t in self.record.trials if t.state == FAILED) if self.record else 0
