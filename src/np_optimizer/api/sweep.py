"""API: np sweep (search a project's sweep.yaml with real experiments, one per trial), and its front."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from np_optimizer.errors import ConfigError, NpError, UsageError
from np_optimizer.processes import sticky_interrupt
from np_optimizer.records import ReportRecord
from np_optimizer.records.sweep import SweepPlan, SweepResult
from np_optimizer.workspace import resolve_project

__all__ = ["sweep", "sweep_front"]


def _ray_address(ray: str | None) -> str | None:
    """--ray host:port, or 'env': $RAY_ADDRESS."""
    if ray != "env":
        return ray
    address = os.environ.get("RAY_ADDRESS")
    if not address:
        raise UsageError("--ray env, but RAY_ADDRESS is not set.", hint="Give the head's address: --ray host:port.")
    return address


def _refuse_an_empty_space(plan: SweepPlan) -> None:
    """Every trial refused by its check: an error naming each distinct reason, not a sweep of failed trials."""
    if not plan.trials or not all(t.problems for t in plan.trials):
        return
    reasons = list(dict.fromkeys(p for t in plan.trials for p in t.problems))
    shown = "; ".join(r.rstrip(".") for r in reasons[:5]) + (f"; and {len(reasons) - 5} more" if len(reasons) > 5
                                                               else "") + "."
    raise ConfigError(f"Every one of the {len(plan.trials)} configuration(s) of {Path(plan.sweep_file).name} breaks a rule "
                      f"of the device or model: {shown}", hint="Change the values under `space` (np sweep --dry-run "
                      "lists each configuration with its check), then run np sweep again.", code="NP-SWP-422")


def sweep(*, project: str | None = None, file: Path | None = None, dry_run: bool = False, resume: bool = False,
          workers: int | None = None, ray: str | None = None, storage: str | None = None,
          on_event: Callable[[dict[str, Any]], None] = lambda _e: None, cwd: Path | None = None) -> SweepResult:
    """Plan the project's sweep (sweep.yaml, or `file`) and, unless `dry_run`, run it (or with `resume` continue it)
    to the end of its budget: each trial an experiment run by np run, on `workers` local processes or as tasks on the
    Ray cluster at `ray` (host:port, or 'env' for $RAY_ADDRESS). `storage`: a database URL for the Optuna study.

    `on_event` gets the driver's events (kind: start, waiting, trial_start, progress, trial_done, ranking, end).
    Ctrl+C stops the sweep: the result says `interrupted`, with the trials recorded so far (np sweep --resume
    continues it; the trials that were running run again)."""
    from np_optimizer.config.sweep import load_sweep
    from np_optimizer.sweep.plan import plan_of, sweep_file_of

    owner = resolve_project(project, cwd or Path.cwd())
    path = sweep_file_of(owner, file)
    config = load_sweep(path)
    plan = plan_of(owner, path, config, workers)
    _refuse_an_empty_space(plan)
    if dry_run:
        return SweepResult(plan)
    address = _ray_address(ray)
    from np_optimizer.api.trial import WORKER
    from np_optimizer.sweep.driver import SweepRun, run_sweep
    from np_optimizer.sweep.pool import LocalPool, Pool, threads_per_trial

    pool: Pool
    if address:
        from np_optimizer.sweep.ray_pool import RayPool

        pool = RayPool(address, owner, WORKER, measure_on=config.measure_on)
        slots, why = pool.slots, f"Ray cluster at {address}"
    else:
        pool = LocalPool(plan.workers, WORKER, threads_per_trial(plan.workers, plan.measures_here),
                         measures_here=plan.measures_here)
        slots, why = plan.workers, plan.workers_why
    run = SweepRun(owner, config, path, slots, why, resume=resume, storage=storage)
    try:
        with sticky_interrupt():  # a Ctrl+C is never lost, even one that lands while a trial's process is forked
            return SweepResult(plan, run_sweep(run, pool, on_event))
    except KeyboardInterrupt:  # the pool is closed (the driver's finally); trials.json has every finished trial
        from np_optimizer.workspace.sweep_files import read_sweep_record

        try:
            record = read_sweep_record(owner.root)
        except NpError:  # a record Ctrl+C left unreadable: np sweep --resume rebuilds it from the study
            record = None
        return SweepResult(plan, record, interrupted=True)


def sweep_front(*, project: str | None = None, cwd: Path | None = None) -> ReportRecord:
    """np sweep --report: the project's report with the sweep's front (np report at the project level)."""
    from np_optimizer.api.report import report

    cwd = cwd or Path.cwd()
    return report(project=str(resolve_project(project, cwd).root), cwd=cwd)
