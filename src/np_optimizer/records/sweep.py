"""The record of one `np sweep`: its objectives and constraints, and every trial with the experiment that ran it.

`np sweep` writes it (atomically, after each trial) to `<project>/sweep/trials.json`; `np report` at the project level
and the HTML report read it to draw the front. The values are copied from each trial's report when the trial ends,
in the metric's stored unit (UNITS in np_optimizer.metrics), so the front needs no experiment to be re-read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from np_optimizer.records.codec import JsonValue
from np_optimizer.records.status import TrialState

__all__ = ["SweepObjective", "SweepConstraint", "SweepTrial", "SweepRecord", "TRIAL_STATES", "COMPLETE", "FAILED",
           "RUNNING", "WAITING"]

COMPLETE, FAILED, RUNNING, WAITING = TrialState.COMPLETE, TrialState.FAILED, TrialState.RUNNING, TrialState.WAITING
TRIAL_STATES = (WAITING, RUNNING, COMPLETE, FAILED)


@dataclass(frozen=True)
class SweepObjective:
    name: str  # as the user wrote it: latency
    metric: str  # the recorded metric: LATENCY
    direction: str  # min | max
    unit: str  # the stored unit: ms


@dataclass(frozen=True)
class SweepConstraint:
    text: str  # as written: "latency <= 20 ms"
    metric: str
    op: str  # <= >= < >
    limit: float  # in the metric's stored unit

    def holds(self, value: float) -> bool:
        return {"<=": value <= self.limit, ">=": value >= self.limit, "<": value < self.limit,
                ">": value > self.limit}[self.op]


@dataclass(frozen=True)
class SweepTrial:
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


@dataclass(frozen=True)
class SweepRecord:
    sweep_file: str  # the sweep.yaml it came from, relative to the project
    strategy: str  # grid | optuna | layers
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


__all__ += ["FrontPoint", "FrontView"]


@dataclass(frozen=True)
class FrontPoint:
    """One trial as the front shows it (np_optimizer.report.front builds it from the SweepRecord)."""

    number: int
    experiment: str
    state: TrialState
    params: dict[str, JsonValue]
    values: dict[str, float | None]  # objective name -> value in the objective's stored unit (None: not given)
    pareto: bool = False  # on the front: no feasible trial with every objective value is at least as good on all
    # objectives and better on one (equal trials are both on it)
    feasible: bool = False  # complete and meets every constraint (a constraint without its value is not met)
    violations: tuple[str, ...] = ()  # the constraints it breaks, as written; "... (unknown: no value)" when missing
    best_for: tuple[str, ...] = ()  # the objectives it is best at among the feasible trials (ties: each of them)
    missing: tuple[str, ...] = ()  # a complete trial's objectives without a value
    reason: str | None = None  # one line: why it failed, or why a value is missing
    kept_float: tuple[str, ...] = ()
    note: str | None = None
    caveats: tuple[str, ...] = ()


@dataclass(frozen=True)
class FrontView:
    """The front of a project's sweep: every trial in number order with its objective values, the Pareto-optimal
    ones marked, the best trial of each objective, and the failed ones with their reason (np report --json: "sweep")."""

    __json_computed__ = {"front": "front_numbers", "failed": "failed_numbers"}  # not a field: no annotation

    sweep_file: str
    strategy: str
    objectives: tuple[SweepObjective, ...]
    constraints: tuple[SweepConstraint, ...]
    trials: tuple[FrontPoint, ...]
    varying: tuple[str, ...] = ()  # the params whose value differs between trials (all of them with one trial)
    best: dict[str, tuple[int, ...]] = field(default_factory=dict)  # objective name -> its best trials' numbers
    device: str | None = None
    method: str | None = None
    measure_on: str | None = None

    @property
    def front(self) -> tuple[FrontPoint, ...]:
        return tuple(p for p in self.trials if p.pareto)

    @property
    def failed(self) -> tuple[FrontPoint, ...]:
        return tuple(p for p in self.trials if p.state == FAILED)

    @property
    def front_numbers(self) -> tuple[int, ...]:
        return tuple(p.number for p in self.front)

    @property
    def failed_numbers(self) -> tuple[int, ...]:
        return tuple(p.number for p in self.failed)

    def point(self, number: int) -> FrontPoint | None:
        return next((p for p in self.trials if p.number == number), None)
