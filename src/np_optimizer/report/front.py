"""The front of a project's sweep, from its SweepRecord (sweep/trials.json): each trial's objective values, the
Pareto-optimal trials, the constraints each breaks, the best trial of each objective and the failed trials with their
reason; and the table `np report` prints of it (rich, --plain; the HTML page draws the same view). Pure: no file, no
torch, no optuna.

    view = front_view(record)            # FrontView: one FrontPoint per trial, in trial number order
    table = front_table(view)            # Table: trial, experiment, the varying params, objectives, ★ front, ...

Which trials compete:
- feasible: complete, and every constraint holds (a constraint whose value the trial did not give is not met: it is
  listed as "unknown", since nobody knows whether it holds);
- on the front: feasible with every objective value, and no such trial is at least as good on every objective and
  better on one (min or max per objective). Equal trials do not dominate each other: both are on the front;
- best for an objective: the feasible trials with the best value of it (ties: each of them).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from np_optimizer.formats import fmt_metric
from np_optimizer.layers.coverage import PARTIAL_MARK
from np_optimizer.metrics import SHOWN
from np_optimizer.records.report import Table
from np_optimizer.records.sweep import (
    COMPLETE,
    FrontPoint,
    FrontView,
    SweepConstraint,
    SweepObjective,
    SweepRecord,
    SweepTrial,
)

__all__ = ["front_view", "dominates", "front_table", "best_line", "trial_lines", "objective_unit", "objective_shown",
           "objective_text", "param_text", "FRONT_MARK", "NO_REASON"]

FRONT_MARK = "★ front"
NO_REASON = "no reason recorded"
_UNIT_TOKENS = {"B": "bytes", "1/s": "per_s", "%": "pct", "abs^2": "abs2"}


def _number(value: Any) -> float | None:
    """A value as the front compares it: None for a value not given or not a number (NaN included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


def _better(objective: SweepObjective, a: float, b: float) -> bool:
    return a > b if objective.direction == "max" else a < b


def dominates(a: Sequence[float], b: Sequence[float], objectives: Sequence[SweepObjective]) -> bool:
    """a is at least as good as b on every objective and better on one (min or max per objective)."""
    not_worse = all(not _better(o, y, x) for o, x, y in zip(objectives, a, b))
    return not_worse and any(_better(o, x, y) for o, x, y in zip(objectives, a, b))


def _violations(trial: SweepTrial, constraints: Sequence[SweepConstraint]) -> tuple[str, ...]:
    broken = []
    for constraint in constraints:
        value = _number(trial.values.get(constraint.metric))
        if value is None:
            broken.append(f"{constraint.text} (unknown: no {constraint.metric.lower()} value)")
        elif not constraint.holds(value):
            broken.append(constraint.text)
    return tuple(broken)


def _one_line(text: str | None) -> str | None:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[0] if lines else None


def _varying(trials: Sequence[SweepTrial]) -> tuple[str, ...]:
    """The params whose value differs between trials, in first-seen order; every param when none differs."""
    keys = list(dict.fromkeys(k for t in trials for k in t.params))
    missing = object()
    varying = [k for k in keys
               if len({json.dumps(t.params.get(k, missing), default=repr, sort_keys=True) for t in trials}) > 1]
    return tuple(varying or keys)


def front_view(record: SweepRecord) -> FrontView:
    """The front of the sweep (see the module docstring for which trials compete)."""
    objectives = record.objectives
    trials = sorted(record.trials, key=lambda t: t.number)
    values = {t.number: {o.name: _number(t.values.get(o.metric)) for o in objectives} for t in trials}
    violations = {t.number: _violations(t, record.constraints) if t.state == COMPLETE else () for t in trials}
    feasible = [t for t in trials if t.state == COMPLETE and not violations[t.number]]
    whole = {t.number: tuple(v for v in values[t.number].values() if v is not None) for t in feasible}
    candidates = [n for n, v in whole.items() if len(v) == len(objectives) and objectives]
    pareto = {n for n in candidates if not any(dominates(whole[m], whole[n], objectives) for m in candidates)}
    best: dict[str, tuple[int, ...]] = {}
    for objective in objectives:
        given = [(t.number, v) for t in feasible if (v := values[t.number][objective.name]) is not None]
        if given:
            top = max(v for _, v in given) if objective.direction == "max" else min(v for _, v in given)
            best[objective.name] = tuple(n for n, v in given if v == top)
    points = []
    for t in trials:
        missing = tuple(o.name for o in objectives if values[t.number][o.name] is None) if t.state == COMPLETE else ()
        points.append(FrontPoint(
            t.number, t.experiment, t.state, dict(t.params), values[t.number], pareto=t.number in pareto,
            feasible=t.state == COMPLETE and not violations[t.number], violations=violations[t.number],
            best_for=tuple(name for name, numbers in best.items() if t.number in numbers), missing=missing,
            reason=_one_line(t.reason), kept_float=tuple(t.kept_float), note=t.note,
            caveats=tuple(t.caveats), formats=dict(t.formats)))
    return FrontView(record.sweep_file, record.strategy, objectives, record.constraints, tuple(points),
                     _varying(trials), best, record.device, record.method, record.measure_on)


# -- how the views show it ------------------------------------------------------------------------------------------

def objective_unit(objective: SweepObjective) -> str:
    """The unit a view shows the objective in (MB for sizes stored in bytes, as the report tables)."""
    shown = SHOWN.get(objective.metric)
    return shown[1] if shown else objective.unit


def objective_shown(objective: SweepObjective, value: float) -> float:
    """A stored value in the unit objective_unit names."""
    shown = SHOWN.get(objective.metric)
    return value / shown[2] if shown else value


def objective_text(objective: SweepObjective, value: float | None) -> str:
    """The number a view writes (unit apart): "-" for no value, "identical" for an SNR identical to the input's."""
    if value is None:
        return "-"
    if math.isinf(value):
        return "identical" if objective.metric == "SNR" and value > 0 else str(value)
    return fmt_metric(objective.metric, value)


def param_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "-"
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _trials_named(view: FrontView, numbers: Sequence[int]) -> str:
    named = [f"trial {n} ({p.experiment})" for n in numbers if (p := view.point(n)) is not None]
    return " and ".join(named) if len(named) < 3 else ", ".join(named[:-1]) + f" and {named[-1]}"


def best_line(view: FrontView) -> str:
    """One line: the best trial of each objective, with its value and unit."""
    parts = []
    for objective in view.objectives:
        numbers = view.best.get(objective.name)
        if not numbers:
            parts.append(f"{objective.name} ({objective.direction}): no feasible trial gave it")
            continue
        first = view.point(numbers[0])
        shown = objective_text(objective, first.values.get(objective.name) if first else None)
        parts.append(f"{objective.name} ({objective.direction}) {shown} {objective_unit(objective)}: "
                     f"{_trials_named(view, numbers)}" + (" (tie)" if len(numbers) > 1 else ""))
    return "Best per objective: " + "; ".join(parts)


def trial_lines(view: FrontView) -> list[str]:
    """One line per failed trial with its reason, and one per complete trial that lacks an objective value."""
    lines = [f"Trial {p.number} ({p.experiment}) failed: {p.reason or NO_REASON}" for p in view.failed]
    lines += [f"Trial {p.number} ({p.experiment}) gave no {', '.join(p.missing)} value: {p.reason or NO_REASON}"
              for p in view.trials if p.missing]
    lines += [f"Trial {p.number} ({p.experiment}) keeps {p.note.removeprefix('float: ')}"
              if p.note.startswith("float: ") else f"Trial {p.number} ({p.experiment}): {p.note}"
              for p in view.trials if p.note]
    lines += [f"Trial {p.number} ({p.experiment}): {caveat}" for p in view.trials for caveat in p.caveats]
    return lines


def _plain_unit(unit: str) -> str:
    return _UNIT_TOKENS.get(unit) or re.sub(r"[^a-z0-9]+", "_", unit.lower()).strip("_")


def _caption(view: FrontView) -> str:
    where = ", ".join(x for x in (view.device, view.method) if x)
    if view.measure_on:
        where += f"; latency and memory measured on {view.measure_on}"
    objectives = ", ".join(f"{o.name} {o.direction} ({objective_unit(o)})" for o in view.objectives)
    text = f"Sweep {view.sweep_file}: {view.strategy}, {len(view.trials)} trials{f' on {where}' if where else ''}. " \
           f"{FRONT_MARK}: Pareto-optimal, no other complete trial that meets every constraint is as good on every " \
           f"objective and better on one (objectives: {objectives})."
    if view.constraints:
        text += f" Constraints: {'; '.join(c.text for c in view.constraints)}; a value a trial did not give breaks " \
                "its constraint as unknown."
    return text


def front_table(view: FrontView) -> Table:
    """The sweep's trials: number, experiment, the params that vary, each objective with its unit, the front mark,
    the broken constraints and the state; footnotes: the best per objective and the failed trials' reasons. The
    --plain columns carry the stored values (stored units) and every param that varies."""
    kept = any(p.kept_float for p in view.trials)
    columns = ["Trial", "Experiment", *view.varying, *(f"{o.name} ({objective_unit(o)}, {o.direction})"
                                                       for o in view.objectives)]
    plain_columns = ["trial", "experiment", *(f"param:{k}" for k in view.varying),
                     *(f"{o.name}_{_plain_unit(o.unit)}" for o in view.objectives)]
    columns += (["Kept float"] if kept else []) + ["Front"] + (["Constraints broken"] if view.constraints else []) \
        + ["State"]
    plain_columns += (["kept_float"] if kept else []) + ["pareto", "feasible", "violations", "best_for", "state",
                                                         "reason"]
    rows, plain = [], []
    for p in view.trials:
        row = [str(p.number), p.experiment, *(param_text(p.params.get(k)) for k in view.varying),
               *(objective_text(o, p.values.get(o.name)) + (f" {PARTIAL_MARK}" if p.partial(o.metric) else "")
                 for o in view.objectives)]
        values: list[Any] = [p.number, p.experiment, *(param_text(p.params.get(k)) for k in view.varying),
                             *("" if p.values.get(o.name) is None else p.values[o.name] for o in view.objectives)]
        if kept:
            row.append(", ".join(p.kept_float) or "-")
            values.append(",".join(p.kept_float))
        row.append(FRONT_MARK if p.pareto else "")
        if view.constraints:
            row.append(("; ".join(p.violations) or "none") if p.state == COMPLETE else "-")
        state = p.state + (f" (no {', '.join(p.missing)})" if p.missing else "")
        row.append(state)
        values += [str(p.pareto).lower(), str(p.feasible).lower(), "; ".join(p.violations), ",".join(p.best_for),
                   p.state, p.reason or ""]
        rows.append(row)
        plain.append(values)
    footnotes = [best_line(view), *trial_lines(view)]
    if any(p.partial(o.metric) for p in view.trials for o in view.objectives):
        footnotes.append(f"{PARTIAL_MARK}: a partial estimate, of the NPU part only (layers left on the CPU are not "
                         "estimated); the trial's line above names them and the rewrite that brings them back")
    return Table("Sweep: trials and the Pareto front", columns, rows, plain_columns, plain, _caption(view), footnotes,
                 section="sweep")
