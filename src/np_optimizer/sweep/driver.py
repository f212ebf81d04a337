"""The sweep's one driving process: it proposes trials (study.py), writes each trial's experiment, hands it to a pool
(local processes or Ray tasks), tells the study the figures each finished trial reports (its TrialResult); after
every change it writes the sweep record (trials.json) that the reports read. Only this process writes the study and
the record.

Events go to `on_event` as plain dicts (kind: start, trial_start, progress, trial_done, end), which the command line
shows as live lines or JSON lines.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from np_optimizer.config.sweep import SweepConfig
from np_optimizer.errors import ConfigError, NotFoundError, NpError, UsageError
from np_optimizer.files import write_text
from np_optimizer.locks import FileLock
from np_optimizer.metrics import UNITS, MetricType
from np_optimizer.processes import raise_if_interrupted
from np_optimizer.records.status import RunStatus
from np_optimizer.records.sweep import (
    COMPLETE,
    FAILED,
    RUNNING,
    SweepConstraint,
    SweepObjective,
    SweepRecord,
    SweepTrial,
    TrialJob,
    TrialResult,
)
from np_optimizer.sweep.pool import Pool
from np_optimizer.sweep.study import STUDY_NAME, Proposal, SweepStudy
from np_optimizer.workspace import Experiment, Project
from np_optimizer.workspace.layout import next_experiment_name
from np_optimizer.workspace.store import ExperimentStore
from np_optimizer.workspace.sweep_files import LOCK_FILE, read_sweep_record, sweep_dir, write_sweep_record

__all__ = ["SweepRun", "run_sweep", "sweep_key", "base_experiment", "record_of", "metrics_of"]

OnEvent = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class SweepRun:
    """What `np sweep` was asked: the project, its sweep, the pool's size, resume or not, the study's storage."""

    project: Project
    sweep: SweepConfig
    sweep_file: Path
    workers: int
    workers_why: str
    resume: bool = False
    storage: str | None = None  # a database URL; None: the journal file in sweep/


def sweep_key(sweep: SweepConfig) -> str:
    """What a resumed sweep must share with the one it continues (not the budget: more trials may be asked)."""
    shape: dict[str, Any] = {
        "base": sweep.base, "space": [[d.path, list(d.values)] for d in sweep.space],
        "objectives": [[o.name, o.maximize] for o in sweep.objectives], "constraints": [c.text for c in sweep.constraints],
        "strategy": sweep.strategy.name, "seed": sweep.strategy.seed, "method": sweep.method,
        "measure_on": sweep.measure_on, "layers_scheme": sweep.strategy.scheme}
    if sweep.strategy.name == "mixed":  # only then: the keys of the sweeps before it stay as they were
        shape["mixed"] = [list(sweep.strategy.candidates), sweep.strategy.budget, sweep.strategy.measure_from]
        if sweep.strategy.points_scheme != sweep.strategy.measure_from:
            # only then: a sweep whose `rest:` is its `from:` keeps its key (one written without `rest:` before `both`
            # became the default plans both now: a new key)
            shape["mixed"].append(sweep.strategy.points_scheme)
    return hashlib.sha256(json.dumps(shape, sort_keys=True, default=str).encode()).hexdigest()[:16]


def metrics_of(sweep: SweepConfig) -> list[str]:
    return list(dict.fromkeys([str(o.metric) for o in sweep.objectives] + [str(c.metric) for c in sweep.constraints]))


def base_experiment(project: Project, sweep: SweepConfig) -> Experiment:
    """The experiment each trial varies: sweep.yaml's `base`, else the project's first experiment."""
    experiments = project.experiments()
    if sweep.base is not None:
        found = next((e for e in experiments if e.name == sweep.base), None)
        if found is None:
            raise NotFoundError(f"sweep.yaml's base {sweep.base} is not an experiment of project {project.name}.",
                                hint="Name an existing experiment (np experiments ls), or drop `base:` to use the "
                                     "first one.", code="NP-EXP-404")
        return found
    if not experiments:
        raise NotFoundError(f"Project {project.name} has no experiment for the sweep to vary.",
                            hint="Create one first: np experiments create --steps GQ", code="NP-EXP-404")
    return experiments[0]


def base_run(project: Project, sweep: SweepConfig) -> dict[str, Any]:
    data = yaml.safe_load(base_experiment(project, sweep).run_file.read_text(encoding="utf-8"))
    return dict(data) if isinstance(data, dict) else {}


def trial_detail(project: Project, sweep: SweepConfig, run: dict[str, Any],
                 options: dict[str, Any] | None) -> dict[str, Any] | None:
    """The trial's run.detail.yaml data: the base's options for the steps the trial has (its per-checkpoint profile
    options are left out: the trial's profile list may differ), with the options the space sets on top."""
    base_file = base_experiment(project, sweep).detail_file
    base = yaml.safe_load(base_file.read_text(encoding="utf-8")) if base_file.is_file() else None
    kinds = {f"{next(iter(s))}[0]" for s in run.get("steps") or [] if isinstance(s, dict) and s}
    merged: dict[str, Any] = {}
    if isinstance(base, dict) and isinstance(base.get("detail"), dict):
        for key, value in base["detail"].items():
            if not str(key).endswith("]") or key in kinds:
                merged[key] = value
    for key, sections in ((options or {}).get("detail") or {}).items():
        target = merged.setdefault(key, {})
        for section, values in sections.items():
            target.setdefault(section, {}).update(values)
    return {"detail": merged} if merged else None


def record_of(run: SweepRun, trials: dict[int, SweepTrial]) -> SweepRecord:
    sweep = run.sweep
    return SweepRecord(
        sweep_file=str(run.sweep_file.relative_to(run.project.root)) if run.sweep_file.is_relative_to(
            run.project.root) else str(run.sweep_file),
        strategy=sweep.strategy.name,
        objectives=tuple(SweepObjective(o.name, str(o.metric), "max" if o.maximize else "min",
                                        UNITS[MetricType(o.metric)]) for o in sweep.objectives),
        constraints=tuple(SweepConstraint(c.text, str(c.metric), c.op, c.limit) for c in sweep.constraints),
        trials=tuple(trials[n] for n in sorted(trials)), method=sweep.method, device=run.project.device_name,
        measure_on=sweep.measure_on,
        key=sweep_key(sweep))


LEFTOVER_WAIT_S = 60.0  # how long a resumed sweep waits for a stopped sweep's trials to let go of their experiments


@contextlib.contextmanager
def _sweep_lock(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(folder / LOCK_FILE)
    try:
        if not lock.acquire(exclusive=True, timeout=0):
            raise UsageError(f"Another np sweep is driving the sweep of this project ({folder}).",
                             hint="Wait for it to end, or stop it (Ctrl+C) and run np sweep --resume.",
                             code="NP-SWP-409")
        yield
    finally:
        lock.release()


def _trial_yaml(number: int, params: dict[str, Any], run: dict[str, Any]) -> str:
    said = ", ".join(f"{k}={json.dumps(v)}" for k, v in params.items())
    return f"# np sweep, trial {number}: {said}\n" + yaml.safe_dump(run, sort_keys=False)


def _create(project: Project, name: str, number: int, params: dict[str, Any], run: dict[str, Any],
            detail: dict[str, Any] | None) -> Experiment:
    root = project.root / name
    write_text(root / "run.yaml", _trial_yaml(number, params, run))
    if detail is not None:
        write_text(root / "run.detail.yaml", f"# np sweep, trial {number}: the options its space sets (the rest: "
                                             "defaults)\n" + yaml.safe_dump(detail, sort_keys=False))
    experiment = Experiment(root)
    ExperimentStore(experiment).create_experiment(project=project.name, device=project.device_name, sweep_trial=number)
    return experiment


class _Driver:
    def __init__(self, run: SweepRun, pool: Pool, on_event: OnEvent) -> None:
        self.run, self.pool, self.on_event = run, pool, on_event
        self.study = SweepStudy(run.sweep, base_run(run.project, run.sweep), sweep_dir(run.project.root), run.storage,
                                name=f"{STUDY_NAME}-{run.project.name}" if run.storage else STUDY_NAME)
        self.trials: dict[int, SweepTrial] = {}
        self.started_at: dict[int, float] = {}

    def _save(self) -> None:
        write_sweep_record(self.run.project.root, record_of(self.run, self.trials))

    def _from_study(self) -> None:
        """The record rebuilt from the study (the source of truth): every counted trial, finished or not."""
        from optuna.trial import TrialState

        for t in self.study.counted():
            state = {TrialState.COMPLETE: COMPLETE, TrialState.FAIL: FAILED}.get(t.state, RUNNING)
            values = t.user_attrs.get("values") or {}
            self.trials[t.number] = SweepTrial(
                t.number, str(t.user_attrs.get("experiment", "")), dict(t.params), state,
                t.user_attrs.get("checkpoint"), dict(values), t.user_attrs.get("reason"),
                t.user_attrs.get("duration_s"), int(t.user_attrs.get("runs", 1)),
                tuple(t.user_attrs.get("kept_float") or ()), t.user_attrs.get("note"),
                tuple(t.user_attrs.get("caveats") or ()), dict(t.user_attrs.get("formats") or {}))

    def _start(self, proposal: Proposal, retry: bool) -> None:
        name = proposal.experiment or next_experiment_name(self.run.project)
        self.study.started(proposal.number, name)  # before the folder: a resumed sweep finds its folder by this
        detail = trial_detail(self.run.project, self.run.sweep, proposal.run, proposal.detail)
        exp = _create(self.run.project, name, proposal.number, proposal.params, proposal.run, detail)
        attrs = self.study.study.trials[proposal.number].user_attrs
        self.trials[proposal.number] = SweepTrial(proposal.number, name, proposal.params, RUNNING,
                                                  runs=int(attrs.get("runs", 1)),
                                                  kept_float=tuple(attrs.get("kept_float") or ()),
                                                  note=attrs.get("note"), formats=dict(attrs.get("formats") or {}))
        self.started_at[proposal.number] = time.monotonic()
        self._save()
        self.on_event({"kind": "trial_start", "number": proposal.number, "experiment": name,
                       "params": proposal.params, "rerun": retry, "formats": dict(attrs.get("formats") or {})})
        self.pool.submit(TrialJob(proposal.number, exp.root, self.run.sweep.method, retry=retry,
                                  measure_on=self.run.sweep.measure_on, metrics=tuple(metrics_of(self.run.sweep))))

    def _finish(self, number: int, result: TrialResult) -> None:
        """Tell the study what the trial reported: complete when it succeeded with a value for every objective."""
        trial = self.trials[number]
        objectives = {str(o.metric) for o in self.run.sweep.objectives}
        values = result.values if result.status == RunStatus.SUCCESS else {}
        if result.status == RunStatus.SUCCESS:
            reason = "; ".join(f.missing for f in result.figures if f.missing and f.metric in objectives) or None
        else:
            reason = (result.error.message if result.error else "failed").splitlines()[0]
        caveats, checkpoint = result.caveats, result.checkpoint
        self.study.tell(number, values, reason, {"values": values, "checkpoint": checkpoint,
                                                 "duration_s": result.duration_s, "caveats": list(caveats)})
        state = FAILED if reason is not None and (result.status != RunStatus.SUCCESS or
                                                   any(values.get(m) is None for m in objectives)) else COMPLETE
        self.trials[number] = replace(trial, state=state, values=values, reason=reason, checkpoint=checkpoint,
                                      duration_s=result.duration_s, caveats=caveats)
        if self.run.sweep.strategy.name == "layers" and trial.params.get("layers.keep_float") == 0:
            self._rank(trial.experiment, state)
        if self.run.sweep.strategy.name == "mixed" and self._measuring(trial):
            self._plan_mixed(trial.experiment, state)
        self._save()
        self.on_event({"kind": "trial_done", "number": number, "experiment": trial.experiment, "state": state,
                       "values": values, "reason": reason, "hint": result.error.hint if result.error else None,
                       "duration_s": result.duration_s, **self._counts()})

    def _rank(self, experiment: str, state: str) -> None:
        """After the layers strategy's first trial: rank its layers (stored in the study, so a resume keeps them)."""
        from np_optimizer.sweep.layers import layer_ranking

        ranking, why = ([], "the first trial failed") if state != COMPLETE else layer_ranking(
            Experiment(self.run.project.root / experiment))
        self.study.set_ranking(ranking, why)
        self.on_event({"kind": "ranking", "layers": ranking[:8], "why": why})

    def _measuring(self, trial: SweepTrial) -> bool:
        from np_optimizer.sweep.mixed import measuring_point

        return trial.params == measuring_point(self.run.sweep.strategy).params

    def _plan_mixed(self, experiment: str, state: str) -> None:
        """After the mixed strategy's measuring trial: its trials planned from the sensitivity it measured (stored in
        the study, so a resume keeps them)."""
        from np_optimizer.sweep.mixed import read_plan

        points, why, unit = ([], "the trial that measures the sensitivity failed", None) if state != COMPLETE else read_plan(
            Experiment(self.run.project.root / experiment), self.run.sweep.strategy)
        self.study.set_mixed_plan(points, why, unit)
        self.on_event({"kind": "mixed_plan", "points": [p.to_json() for p in points], "why": why, "unit": unit})

    def _wait_for_leftovers(self, stale: list[Any]) -> None:
        """The trials a stopped sweep left running are killed with it (processes.dies_with_parent), but a killed
        process takes a moment to let go of its experiment's run lock: wait for that before running them again, up to
        LEFTOVER_WAIT_S; past that, stop here (nothing changed yet), naming the processes still holding them."""
        from np_optimizer.workspace.run_lock import describe_holders, run_lock_holders, wait_until_free

        roots = [self.run.project.root / str(t.user_attrs.get("experiment")) for t in stale
                 if t.user_attrs.get("experiment")]
        held = [root for root in roots if not wait_until_free(root, 0)]
        if not held:
            return
        self.on_event({"kind": "waiting", "experiments": [root.name for root in held], "limit_s": LEFTOVER_WAIT_S})
        deadline = time.monotonic() + LEFTOVER_WAIT_S
        still = [root for root in held if not wait_until_free(root, max(0.0, deadline - time.monotonic()))]
        if still:
            who, kill = describe_holders([h for root in still for h in run_lock_holders(root)])
            raise ConfigError(f"The interrupted trials' experiments ({', '.join(r.name for r in still)}) are still "
                              f"in use after {LEFTOVER_WAIT_S:g} s: {who}.",
                              hint=f"Wait until it ends, or stop it (`kill {kill}`); then run np sweep --resume "
                                   "again.", code="NP-EXP-423")

    def _counts(self) -> dict[str, Any]:
        states = [t.state for t in self.trials.values()]
        done = [t for t in self.trials.values() if t.state in (COMPLETE, FAILED) and t.duration_s]
        remaining = max(0, self.study.budget() - states.count(COMPLETE) - states.count(FAILED))
        eta = None
        if done:
            mean = sum(float(t.duration_s or 0) for t in done) / len(done)
            eta = round(mean * remaining / max(1, self.pool.slots), 1)
        return {"complete": states.count(COMPLETE), "failed": states.count(FAILED),
                "running": states.count(RUNNING), "remaining": remaining, "eta_s": eta}

    def drive(self) -> SweepRecord:
        existing = read_sweep_record(self.run.project.root) if not self.run.storage else None
        key = sweep_key(self.run.sweep)
        self.study.open()
        has_trials = bool(self.study.counted())
        if has_trials and not self.run.resume:
            raise UsageError(f"Project {self.run.project.name} already has a sweep of "
                             f"{len(self.study.counted())} trials.",
                             hint="Continue it with np sweep --resume, or remove the project's sweep/ folder to start "
                                  "over (its experiments stay).", code="NP-SWP-409")
        stored_key = self.study.study.user_attrs.get("sweep_key") or (existing.key if existing else None)
        if has_trials and stored_key and stored_key != key:
            raise ConfigError("sweep.yaml changed since the sweep started (its space, objectives, constraints, "
                              "strategy, seed, base or method).",
                              hint="Put sweep.yaml back, or remove the project's sweep/ folder to start a new sweep "
                                   "(only the number of trials may grow on --resume).", code="NP-SWP-412")
        self.study.study.set_user_attr("sweep_key", key)
        self._from_study()
        if self.run.sweep.strategy.name == "layers" and self.study.ranking() is None:
            first = next((t for t in self.trials.values() if t.params.get("layers.keep_float") == 0 and
                          t.state in (COMPLETE, FAILED)), None)
            if first is not None:  # the sweep stopped between the first trial's end and its ranking
                self._rank(first.experiment, first.state)
        if self.run.sweep.strategy.name == "mixed" and self.study.mixed_plan() is None:
            done = next((t for t in self.trials.values() if self._measuring(t) and t.state in (COMPLETE, FAILED)),
                        None)
            if done is not None:  # the sweep stopped between the measuring trial's end and its plan
                self._plan_mixed(done.experiment, done.state)
        stale = self.study.interrupted()
        self.on_event({"kind": "start", "workers": self.pool.slots, "why": self.run.workers_why,
                       "budget": self.study.budget(), "grid": len(self.study.grid),
                       "resumed": sum(1 for t in self.trials.values() if t.state in (COMPLETE, FAILED)),
                       "rerun": len(stale), **self._counts()})
        self._wait_for_leftovers(stale)
        queue = [self.study.rerun(t) for t in stale]
        for t in stale:
            self.trials.pop(t.number, None)
        try:
            while True:
                while self.pool.running() < self.pool.slots:
                    proposal = queue.pop(0) if queue else self.study.ask()
                    if proposal is None:
                        break
                    self._start(proposal, retry=proposal.experiment is not None)
                if self.pool.running() == 0:
                    break
                raise_if_interrupted()  # a Ctrl+C swallowed while a trial's process was forked ends the sweep now
                for event in self.pool.poll(1.0):
                    if event.kind == "progress":
                        self.on_event({"kind": "progress", "number": event.number, "text": event.text,
                                       "elapsed_s": round(time.monotonic() - self.started_at.get(
                                           event.number, time.monotonic()), 1)})
                    elif event.result is not None:
                        self._finish(event.number, event.result)
        finally:
            self.pool.close()
        record = record_of(self.run, self.trials)
        self.on_event({"kind": "end", **self._counts()})
        return record


def run_sweep(run: SweepRun, pool: Pool, on_event: OnEvent = lambda _e: None) -> SweepRecord:
    """Run (or resume) the project's sweep to the end of its budget; the record of every trial."""
    folder = sweep_dir(run.project.root)
    fresh = not folder.exists()
    try:
        with _sweep_lock(folder):
            return _Driver(run, pool, on_event).drive()
    except BaseException as exc:
        pool.close()  # refused before its loop: the local pool's warm host started with it (closing twice is harmless)
        # refused before anything was recorded (a storage that cannot be opened): leave no sweep/ behind
        if isinstance(exc, NpError) and fresh and {p.name for p in folder.iterdir()} <= {LOCK_FILE}:
            shutil.rmtree(folder, ignore_errors=True)
        raise
