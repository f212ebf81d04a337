"""The sweep's Optuna study: created in the project's sweep/ folder (a journal file, or a database URL), asked for
the next configuration and told each result by the driver only, so a single process writes it.

Every trial carries user attributes: `experiment` (its folder), `run_key` (the hash of its run.yaml data: two
trials with one key would run the same experiment), `constraints` (Optuna's convention: <= 0 is met) and, when it
failed, `reason`. A configuration is never proposed twice: a sampler's repeat is closed as PRUNED with `duplicate`
and does not count against the budget.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.config.sweep import SweepConfig
from np_optimizer.config.sweep_space import detail_for, run_for, run_key, trial_runs
from np_optimizer.workspace.sweep_files import repair_journal

if TYPE_CHECKING:
    import optuna

    from np_optimizer.sweep.mixed import MixedPoint

__all__ = ["SweepStudy", "Proposal", "constraint_values", "STUDY_NAME"]

STUDY_NAME = "np-sweep"
_MAX_REPEATS = 64  # sampler repeats in a row before the next untried grid point is taken instead


@dataclass(frozen=True)
class Proposal:
    number: int  # the Optuna trial number
    params: dict[str, Any]
    run: dict[str, Any]  # the trial's run.yaml data
    experiment: str | None  # set when the trial reruns one that was running when the sweep stopped
    detail: dict[str, Any] | None = None  # its run.detail.yaml data (options the space sets), if any


def constraint_values(sweep: SweepConfig, values: dict[str, float | None]) -> list[float]:
    """Optuna's form of the constraints: one number each, <= 0 when met; a missing value counts as broken."""
    out = []
    for c in sweep.constraints:
        value = values.get(str(c.metric))
        if value is None:
            out.append(1.0)
        elif c.op in ("<=", "<"):
            out.append(value - c.limit + (1e-12 if c.op == "<" and value == c.limit else 0.0))
        else:
            out.append(c.limit - value + (1e-12 if c.op == ">" and value == c.limit else 0.0))
    return out


class SweepStudy:
    def __init__(self, sweep: SweepConfig, base_run: dict[str, Any], folder: Path, storage: str | None = None,
                 name: str = STUDY_NAME) -> None:
        self.name = name  # the project's name in it: a database may hold the studies of several projects
        self.sweep = sweep
        self.base_run = base_run
        self.folder = folder
        self.storage_url = storage
        self.grid = trial_runs(sweep, base_run)
        self._study: optuna.Study | None = None
        self._storage: optuna.storages.BaseStorage | None = None  # the storage np made (Optuna's public API on it)
        self._study_id = -1

    @property
    def journal(self) -> Path:
        from np_optimizer.workspace.sweep_files import JOURNAL_FILE

        return self.folder / JOURNAL_FILE

    def open(self) -> optuna.Study:
        import optuna
        from optuna.storages import JournalStorage, RDBStorage
        from optuna.storages.journal import JournalFileBackend
        from sqlalchemy.exc import ArgumentError, SQLAlchemyError

        optuna.logging.set_verbosity(logging.WARNING)
        directions = [optuna.study.StudyDirection.MAXIMIZE if o.maximize else optuna.study.StudyDirection.MINIMIZE
                      for o in self.sweep.objectives]
        storage: optuna.storages.BaseStorage | None = None
        if not self.storage_url:
            self.folder.mkdir(parents=True, exist_ok=True)
            repair_journal(self.journal)
            storage = JournalStorage(JournalFileBackend(str(self.journal)))
        try:
            if storage is None:
                storage = RDBStorage(self.storage_url or "")
            self._study = optuna.create_study(study_name=self.name, storage=storage, directions=directions,
                                              sampler=self._sampler(), load_if_exists=True)
        except (ImportError, ValueError, ArgumentError) as exc:  # no driver for the database, or not a URL SQLAlchemy takes
            from np_optimizer.errors import ConfigError, first_line

            raise ConfigError(f"--storage {self.storage_url}: the study cannot be opened ({first_line(exc)}).",
                              hint="Give a URL SQLAlchemy takes (sqlite:////path/study.db; PostgreSQL needs psycopg2 "
                                   "installed), or leave --storage out for the journal file in sweep/.",
                              code="NP-CFG-400") from None
        except SQLAlchemyError as exc:  # a URL it takes, but a database it cannot open (no folder, no server, ...)
            from np_optimizer.errors import ConfigError, first_line

            cause = getattr(exc, "orig", None) or exc  # the database driver's own error, without SQLAlchemy's notes
            raise ConfigError(f"--storage {self.storage_url}: the database cannot be opened ({first_line(cause)}).",
                              hint="Check that its folder exists and is writable (an absolute SQLite path takes four "
                                   "slashes: sqlite:////path/study.db) or that its server is up, or leave --storage "
                                   "out for the journal file in sweep/.", code="NP-CFG-400") from None
        # Optuna wraps an RDBStorage in a cache that writes through and reads unfinished trials from it: np's own
        # reads and writes go to the storage it made, by the study's public id, never to study._storage.
        self._storage, self._study_id = storage, storage.get_study_id_from_name(self.name)
        return self._study

    @property
    def study(self) -> optuna.Study:
        assert self._study is not None, "open() first"
        return self._study

    def _sampler(self) -> optuna.samplers.BaseSampler:
        import optuna

        strategy = self.sweep.strategy
        constraints: Callable[[optuna.trial.FrozenTrial], list[float]] | None = None
        if self.sweep.constraints:
            count = len(self.sweep.constraints)

            def constraints(trial: optuna.trial.FrozenTrial) -> list[float]:
                return list(trial.user_attrs.get("constraints", [1.0] * count))
        if strategy.name == "optuna":
            # TPE handles several objectives and constraints; its first trials are random (a third of the budget)
            startup = max(2, (strategy.trials or 6) // 3)
            return optuna.samplers.TPESampler(seed=strategy.seed, n_startup_trials=startup,
                                              constraints_func=constraints)
        # grid: the points are enqueued in order; the sampler only ever sees fixed parameters
        return optuna.samplers.RandomSampler(seed=strategy.seed)

    # --- what the study holds -------------------------------------------------------------------------------------

    def counted(self) -> list[optuna.trial.FrozenTrial]:
        """The trials that count: every one but the closed repeats and the interrupted runs asked again, by number."""
        return [t for t in self.study.get_trials(deepcopy=False)
                if not t.user_attrs.get("duplicate") and not t.user_attrs.get("interrupted")]

    def budget(self) -> int:
        if self.sweep.strategy.name == "layers":
            ranking = self.ranking()
            keep = self.sweep.strategy.keep
            return 1 + (len(keep) if ranking is None else sum(1 for k in keep if k <= len(ranking)))
        if self.sweep.strategy.name == "mixed":
            planned = self.mixed_plan()
            return 2 + (len(planned) if planned is not None else self.sweep.strategy.points)
        if self.sweep.strategy.name == "optuna":
            return min(self.sweep.strategy.trials or 0, len(self.grid))
        return len(self.grid)

    def interrupted(self) -> list[optuna.trial.FrozenTrial]:
        """Trials left RUNNING by a sweep that stopped (Ctrl+C, kill -9): the driver reruns each.

        A trial left WAITING (the sweep was killed between enqueueing a configuration and asking for it) never started:
        it is closed here, not rerun (its configuration stays untried, so it is proposed again). Optuna's ask() takes
        the oldest WAITING trial, so one left in the queue would be handed out in place of the configuration the next
        rerun or ask enqueues: two trials in one experiment folder, and a configuration never run.
        """
        import optuna

        for t in self.counted():
            if t.state == optuna.trial.TrialState.WAITING:
                self._close_interrupted(t.number)
        return [t for t in self.counted() if t.state == optuna.trial.TrialState.RUNNING]

    def tried_keys(self) -> set[str]:
        return {str(t.user_attrs.get("run_key")) for t in self.counted() if t.user_attrs.get("run_key")}

    # --- ask and tell ---------------------------------------------------------------------------------------------

    def ask(self) -> Proposal | None:
        """The next configuration not tried yet, or None when the budget is spent or the space exhausted."""
        import optuna

        if len(self.counted()) >= self.budget():
            return None
        if self.sweep.strategy.name == "layers":
            return self._ask_layers()
        if self.sweep.strategy.name == "mixed":
            return self._ask_mixed()
        tried = self.tried_keys()
        untried = [(params, run) for params, run in self.grid
                   if run_key(run, detail_for(self.sweep, run, params)) not in tried]
        if not untried:
            return None
        if self.sweep.strategy.name != "optuna":
            self.study.enqueue_trial(untried[0][0])
        distributions: dict[str, optuna.distributions.BaseDistribution] = {
            d.path: optuna.distributions.CategoricalDistribution(list(d.values)) for d in self.sweep.space}
        for _attempt in range(_MAX_REPEATS + 1):
            trial = self.study.ask(distributions)
            params = dict(trial.params)
            run = run_for(self.sweep, self.base_run, params)
            detail = detail_for(self.sweep, run, params)
            key = run_key(run, detail)
            if key not in tried:
                trial.set_user_attr("run_key", key)
                return Proposal(trial.number, params, run, None, detail)
            trial.set_user_attr("duplicate", True)
            self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            if _attempt == _MAX_REPEATS - 1:  # the sampler keeps repeating itself: take the next untried point
                self.study.enqueue_trial(untried[0][0])
        return None

    # --- the layers strategy -------------------------------------------------------------------------------------

    def strategy_run(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The base run (with the space's one value per line) and its quantizing step's parameters, which the layers
        and mixed strategies set (the step is added when the base has none)."""
        run = run_for(self.sweep, self.base_run, dict(self.grid[0][0]) if self.grid else {})
        from np_optimizer.sweep.layers import float_step

        kind = float_step()
        steps = run.setdefault("steps", [])
        index = next((i for i, s in enumerate(steps) if isinstance(s, dict) and kind in s), None)
        if index is None:
            steps.append({kind: [{}]})
            index = len(steps) - 1
        params = steps[index][kind]
        params = params[0] if isinstance(params, list) and params and isinstance(params[0], dict) else {}
        steps[index][kind] = [params]
        params.pop("automatic_mixed_precision", None)
        return run, params

    def layers_run(self, kept: list[str]) -> dict[str, Any]:
        """The base quantized with the strategy's scheme, `kept` left float."""
        run, params = self.strategy_run()
        params["scheme"] = self.sweep.strategy.scheme
        if kept:
            params["keep_float"] = list(kept)
        else:
            params.pop("keep_float", None)
        return run

    def set_ranking(self, ranking: list[dict[str, Any]], why: str | None) -> None:
        self.study.set_user_attr("layer_ranking", ranking)
        self.study.set_user_attr("layer_ranking_why", why)

    def ranking(self) -> list[dict[str, Any]] | None:
        if self._study is None:  # a plan (np sweep --dry-run) never opens the study
            return None
        found = self.study.user_attrs.get("layer_ranking")
        return list(found) if isinstance(found, list) else None

    def _ask_layers(self) -> Proposal | None:
        import optuna

        counts = [0, *self.sweep.strategy.keep]
        distributions: dict[str, optuna.distributions.BaseDistribution] = {
            "layers.keep_float": optuna.distributions.CategoricalDistribution(counts)}
        tried = {t.params.get("layers.keep_float") for t in self.counted()}
        if 0 not in tried:
            k, kept = 0, []
        else:
            ranking = self.ranking()
            if not ranking:  # the first trial still runs, failed, or gave no per-layer SNR
                return None
            left = [k for k in self.sweep.strategy.keep if k not in tried and k <= len(ranking)]
            if not left:
                return None
            k = left[0]
            kept = ranking[:k]
        self.study.enqueue_trial({"layers.keep_float": k})
        trial = self.study.ask(distributions)
        run = self.layers_run([str(layer["module"]) for layer in kept])
        trial.set_user_attr("run_key", run_key(run))
        if kept:
            from np_optimizer.sweep.layers import ranking_note

            trial.set_user_attr("kept_float", [str(layer["module"]) for layer in kept])
            trial.set_user_attr("note", ranking_note(kept))
        return Proposal(trial.number, dict(trial.params), run, None)

    # --- the mixed strategy (sweep/mixed.py) ------------------------------------------------------------------------

    def mixed_run(self, point: MixedPoint) -> dict[str, Any]:
        from np_optimizer.sweep.mixed import apply_point

        run, params = self.strategy_run()
        apply_point(params, point, self.sweep.strategy)
        return run

    def set_mixed_plan(self, points: list[MixedPoint], why: str | None, unit: str | None) -> None:
        for key, value in {"mixed_plan": [p.to_json() for p in points], "mixed_plan_why": why,
                           "mixed_unit": unit}.items():
            self.study.set_user_attr(key, value)

    def mixed_plan(self) -> list[MixedPoint] | None:
        from np_optimizer.sweep.mixed import MixedPoint

        found = self.study.user_attrs.get("mixed_plan") if self._study is not None else None
        return [MixedPoint.from_json(p) for p in found] if isinstance(found, list) else None

    def _ask_mixed(self) -> Proposal | None:
        from np_optimizer.sweep import mixed

        strategy = self.sweep.strategy
        tried = {(t.params.get(mixed.SCHEME), t.params.get(mixed.MOVES)) for t in self.counted()}
        planned = [*mixed.uniform_points(strategy), *(self.mixed_plan() or [])]
        point = next((p for p in planned if (p.label, p.moves) not in tried), None)
        if point is None:  # all run, or the measuring trial still runs, failed, or gave no sensitivity
            return None
        self.study.enqueue_trial(point.params)
        trial = self.study.ask(mixed.distributions(strategy))
        run = self.mixed_run(point)
        trial.set_user_attr("run_key", run_key(run))
        trial.set_user_attr("point", point.to_json())
        trial.set_user_attr("formats", dict(point.layers))
        trial.set_user_attr("note", mixed.point_note(point, self.study.user_attrs.get("mixed_unit")))
        return Proposal(trial.number, dict(trial.params), run, None)

    def rerun(self, stale: optuna.trial.FrozenTrial) -> Proposal:
        """A trial that was running when the sweep stopped: closed as failed (interrupted) and asked again with the
        same parameters and experiment folder, so it is counted once."""
        import optuna

        if not stale.state.is_finished():
            self._close_interrupted(stale.number)
        experiment = stale.user_attrs.get("experiment")
        self.study.enqueue_trial(stale.params)  # the queue is empty (interrupted() closed what waited): asked next
        distributions: dict[str, optuna.distributions.BaseDistribution] = {
            d.path: optuna.distributions.CategoricalDistribution(list(d.values)) for d in self.sweep.space}
        if self.sweep.strategy.name == "layers":
            distributions = {"layers.keep_float": optuna.distributions.CategoricalDistribution(
                [0, *self.sweep.strategy.keep])}
        if self.sweep.strategy.name == "mixed":
            from np_optimizer.sweep import mixed

            distributions = mixed.distributions(self.sweep.strategy)
        trial = self.study.ask(distributions)
        kept = [str(m) for m in stale.user_attrs.get("kept_float") or []]
        if self.sweep.strategy.name == "mixed":
            run = self.mixed_run(mixed.MixedPoint.from_json(stale.user_attrs["point"]))
        elif self.sweep.strategy.name == "layers":
            run = self.layers_run(kept)
        else:
            run = run_for(self.sweep, self.base_run, dict(trial.params))
        detail = detail_for(self.sweep, run, dict(trial.params))
        trial.set_user_attr("run_key", run_key(run, detail))
        trial.set_user_attr("rerun_of", stale.number)
        for key in ("kept_float", "note", "point", "formats"):
            if stale.user_attrs.get(key):
                trial.set_user_attr(key, stale.user_attrs[key])
        trial.set_user_attr("runs", int(stale.user_attrs.get("runs", 1)) + 1)
        if experiment:
            trial.set_user_attr("experiment", experiment)
        return Proposal(trial.number, dict(trial.params), run, str(experiment) if experiment else None, detail)

    def _close_interrupted(self, number: int) -> None:
        """Mark a trial a stopped sweep left open as interrupted (not counted) and FAIL it; its state is set directly,
        as a WAITING trial (enqueued, never asked) cannot be told."""
        import optuna

        self._set(number, "interrupted", True)
        self.storage.set_trial_state_values(self._trial_id(number), optuna.trial.TrialState.FAIL)

    def started(self, number: int, experiment: str) -> None:
        self._set(number, "experiment", experiment)

    @property
    def storage(self) -> optuna.storages.BaseStorage:
        assert self._storage is not None, "open() first"
        return self._storage

    def _trial_id(self, number: int) -> int:
        return self.storage.get_trial_id_from_study_id_trial_number(self._study_id, number)

    def _set(self, number: int, key: str, value: Any) -> None:
        self._set_all(number, {key: value})

    def _set_all(self, number: int, attrs: dict[str, Any]) -> None:
        storage = self.storage
        trial_id = self._trial_id(number)
        if storage.get_trial(trial_id).state.is_finished():  # told already (a resumed sweep): its record is final
            return
        for key, value in attrs.items():
            storage.set_trial_user_attr(trial_id, key, value)

    def tell(self, number: int, values: dict[str, float | None], reason: str | None,
             attrs: dict[str, Any] | None = None) -> None:
        """The trial's result: its objective values, or failed with `reason` (a missing objective value fails it);
        `attrs` are recorded with it (one look-up of the trial for all of them)."""
        import optuna

        objective = [values.get(str(o.metric)) for o in self.sweep.objectives]
        failed = reason is not None or any(v is None for v in objective)
        self._set_all(number, {**(attrs or {}), "constraints": constraint_values(self.sweep, values),
                               **({"reason": reason or "an objective value is missing"} if failed else {})})
        if failed:
            self.study.tell(number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
            return
        self.study.tell(number, [float(v) for v in objective if v is not None], skip_if_finished=True)

