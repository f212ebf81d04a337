"""np sweep: run the project's sweep.yaml (every trial a real experiment), or print its plan (--dry-run)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from np_optimizer.cli.options import JsonOpt, ProjectOpt
from np_optimizer.cli.render import line, out, print_json, print_table
from np_optimizer.errors import UsageError
from np_optimizer.records import to_dict
from np_optimizer.records.status import TrialState

_EPILOG = ("Example: np sweep --dry-run   (then: np sweep; after Ctrl+C: np sweep --resume; np report for the front; "
           "np sweep --ray 10.0.0.5:6379 to spread the trials over a Ray cluster)")


def _print_plan(plan: object) -> None:
    from np_optimizer.cli.sweep_display import params_text
    from np_optimizer.sweep.plan import SweepPlan

    assert isinstance(plan, SweepPlan)
    what = {"grid": "all", "optuna": f"{plan.budget} trials drawn by Optuna from the"}.get(plan.strategy)
    line(("Dry run: ", "bold"), f"{plan.sweep_file}")
    out.print(f"  base {plan.base}, device method {plan.method}"
              + (f", each trial measured on {plan.measure_on}" if plan.measure_on else ""), markup=False)
    out.print(f"  objectives: {', '.join(plan.objectives)}"
              + (f"; constraints: {', '.join(plan.constraints)}" if plan.constraints else ""), markup=False)
    if what is None:  # layers: one fully quantized trial, then the float mixes its per-layer SNR suggests
        out.print(f"  layers: 1 trial quantized fully, then up to {plan.budget - 1} keeping its most damaging layers "
                  f"float; {plan.workers} at a time ({plan.workers_why})", markup=False)
    else:
        out.print(f"  {plan.strategy}: {what} {plan.grid} configurations; {plan.workers} at a time "
                  f"({plan.workers_why})", markup=False)
    rows = [[str(i), params_text(t.params), ",".join(t.steps) or "(none)", "; ".join(t.problems) or "ok"]
            for i, t in enumerate(plan.trials, 1)]
    print_table("Trials", ["#", "settings", "steps", "check"], rows)
    for warning in plan.warnings:
        line(("Warning:", "yellow"), " ", warning)
    bad = sum(1 for t in plan.trials if t.problems)
    if bad:
        line(("Note:", "yellow"), f" {bad} configuration(s) break a rule of the device or model: they will be "
             "recorded as failed with that reason.")
    out.print("Next: np sweep", markup=False)


def register(app: typer.Typer) -> None:
    @app.command("sweep", epilog=_EPILOG)
    def sweep(
        project: ProjectOpt = None,
        file: Annotated[Optional[Path], typer.Option("--file", "-f", help="The sweep file (default: sweep.yaml in "
                                                     "the project folder).", show_default=False)] = None,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Check sweep.yaml and every trial's run.yaml; print "
                                              "the trials; run nothing.")] = False,
        resume: Annotated[bool, typer.Option("--resume", help="Continue the project's sweep: finished trials are "
                                             "kept, interrupted ones run again.")] = False,
        workers: Annotated[Optional[int], typer.Option("--workers", "-j", min=1, help="Trials at once on this "
                                                       "machine (default: what cores and memory allow; 1 when "
                                                       "trials measure on this machine).", show_default=False)] = None,
        ray: Annotated[Optional[str], typer.Option("--ray", help="Run the trials' compute as tasks on this Ray "
                                                   "cluster (host:port; default $RAY_ADDRESS when given as 'env').",
                                                   show_default=False)] = None,
        storage: Annotated[Optional[str], typer.Option("--storage", help="A database URL for the Optuna study "
                                                       "(e.g. sqlite:////shared/study.db) instead of the journal "
                                                       "file in the project's sweep/ folder.", show_default=False)] = None,
        report: Annotated[bool, typer.Option("--report", help="Print the front (as np report at the project level) "
                                             "and exit; runs nothing.")] = False,
        json_mode: JsonOpt = False,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress; the summary only.")] = False,
    ) -> int:
        """Search the optimization space of sweep.yaml: each trial is an experiment (experiment_NN) run by np run;
        the study lives in the project's sweep/ folder, so an interrupted sweep continues with --resume."""
        from np_optimizer.workspace import resolve_project

        owner = resolve_project(project, Path.cwd())
        if report:
            from np_optimizer.api import report as api_report
            from np_optimizer.cli.views.report import json_view, table_view

            record = api_report(project=str(owner.root))
            (json_view if json_mode else table_view)(record, None)
            return 0
        from np_optimizer.sweep.plan import plan_sweep

        plan = plan_sweep(owner, file, workers)
        if dry_run:
            if json_mode:
                print_json(to_dict(plan))
            else:
                _print_plan(plan)
            return 0
        return _run(owner, plan, resume=resume, ray=ray, storage=storage, json_mode=json_mode, quiet=quiet)


def _run(owner: object, plan: object, *, resume: bool, ray: str | None, storage: str | None, json_mode: bool,
         quiet: bool) -> int:
    from np_optimizer.cli.sweep_display import SweepDisplay
    from np_optimizer.config.sweep import load_sweep
    from np_optimizer.sweep.driver import SweepRun, run_sweep
    from np_optimizer.sweep.plan import SweepPlan
    from np_optimizer.sweep.pool import LocalPool, Pool, threads_per_trial
    from np_optimizer.workspace import Project

    assert isinstance(owner, Project) and isinstance(plan, SweepPlan)
    address = os.environ.get("RAY_ADDRESS") if ray == "env" else ray
    if ray == "env" and not address:
        raise UsageError("--ray env, but RAY_ADDRESS is not set.", hint="Give the head's address: --ray host:port.")
    run = SweepRun(owner, load_sweep(Path(plan.sweep_file)), Path(plan.sweep_file), plan.workers, plan.workers_why,
                   resume=resume, storage=storage)
    pool: Pool
    if address:
        from np_optimizer.sweep.ray_pool import RayPool

        pool = RayPool(address, owner, measure_on=run.sweep.measure_on)
        run = SweepRun(owner, run.sweep, run.sweep_file, pool.slots, f"Ray cluster at {address}", resume=resume,
                       storage=storage)
    else:
        pool = LocalPool(plan.workers, threads_per_trial(plan.workers, plan.measures_here))
    display = SweepDisplay(json_mode=json_mode, quiet=quiet)
    try:
        with display:
            record = run_sweep(run, pool, display.event)
    except KeyboardInterrupt:
        line(("Interrupted.", "yellow"), " Finished trials are recorded; np sweep --resume continues the sweep "
             "(trials that were running run again).", stderr=True)
        return 130
    failed = [t for t in record.trials if t.state == TrialState.FAILED]
    if not json_mode:
        done = sum(1 for t in record.trials if t.state == "complete")
        line(("Sweep finished: ", "bold"), f"{done} trial(s) complete, {len(failed)} failed.")
        out.print("Next: np report   (the project's trials with the Pareto front; np report --html for the chart)",
                  markup=False)
    return 0
