"""The front of a project's sweep as np report shows it: the sweep's objectives and constraints, and one point per
trial (report/front.py builds a FrontView from the SweepRecord of records/sweep.py).

Apart from records/sweep.py so that `np report`, whose ProjectReport holds a FrontView, builds these four record
types and not the sweep's other nine (each frozen record costs about a millisecond to define at start).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from np_optimizer.records.base import Record
from np_optimizer.records.codec import JsonValue
from np_optimizer.records.status import TrialState

__all__ = ["SweepObjective", "SweepConstraint", "FrontPoint", "FrontView", "PARTIAL_CAVEAT", "LEFT_CAVEAT"]

# A trial's caveat "<metric> covers the NPU part only: ..." (sweep/values.py) marks that value partial on the front;
# its "partial estimate: ..." caveat says which layers left the NPU and the rewrite that brings them back.
PARTIAL_CAVEAT = "covers the NPU part only"
LEFT_CAVEAT = "partial estimate"


@dataclass(frozen=True, eq=False, repr=False)
class SweepObjective(Record):
    name: str  # as the user wrote it: latency
    metric: str  # the recorded metric: LATENCY
    direction: str  # min | max
    unit: str  # the stored unit: ms


@dataclass(frozen=True, eq=False, repr=False)
class SweepConstraint(Record):
    text: str  # as written: "latency <= 20 ms"
    metric: str
    op: str  # <= >= < >
    limit: float  # in the metric's stored unit

    def holds(self, value: float) -> bool:
        return {"<=": value <= self.limit, ">=": value >= self.limit, "<": value < self.limit,
                ">": value > self.limit}[self.op]



@dataclass(frozen=True, eq=False, repr=False)
class FrontPoint(Record):
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
    formats: dict[str, str] = field(default_factory=dict)  # mixed strategy: module path -> format ({}: uniform)

    def partial(self, metric: str) -> bool:
        """Whether this trial's value of `metric` covers the NPU part of the model only (its caveats say so)."""
        return any(c.startswith(f"{metric.lower()} {PARTIAL_CAVEAT}") for c in self.caveats)


@dataclass(frozen=True, eq=False, repr=False)
class FrontView(Record):
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
        return tuple(p for p in self.trials if p.state == TrialState.FAILED)

    @property
    def front_numbers(self) -> tuple[int, ...]:
        return tuple(p.number for p in self.front)

    @property
    def failed_numbers(self) -> tuple[int, ...]:
        return tuple(p.number for p in self.failed)

    def point(self, number: int) -> FrontPoint | None:
        return next((p for p in self.trials if p.number == number), None)
