"""np sweep: run the project's sweep.yaml (every trial a real experiment), or print its plan (--dry-run)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from np_optimizer.cli.options import JsonOpt, ProjectOpt
from np_optimizer.cli.render import line, out, print_json, print_table
from np_optimizer.errors import EXIT_INTERRUPTED
from np_optimizer.records import to_dict

if TYPE_CHECKING:
    from np_optimizer.records.sweep import SweepPlan

_EPILOG = ("Example: np sweep --dry-run   (then: np sweep; after Ctrl+C: np sweep --resume; np report for the front; "
           "np sweep --ray 10.0.0.5:6379 to spread the trials over a Ray cluster)")


def _print_plan(plan: SweepPlan) -> None:
    from np_optimizer.cli.sweep_display import params_text

    what = {"grid": "all", "optuna": f"{plan.budget} trials drawn by Optuna from the"}.get(plan.strategy)
    line(("Dry run: ", "bold"), f"{plan.sweep_file}")
    out.print(f"  base {plan.base}, device method {plan.method}"
              + (f", each trial measured on {plan.measure_on}" if plan.measure_on else ""), markup=False)
    out.print(f"  objectives: {', '.join(plan.objectives)}"
              + (f"; constraints: {', '.join(plan.constraints)}" if plan.constraints else ""), markup=False)
    if plan.strategy == "mixed":  # two uniform trials (the first measures the sensitivity), then the planned mixes
        out.print(f"  mixed: 2 uniform trials (one measures each layer's sensitivity), then up to "
                  f"{plan.budget - 2} with the first k greedy moves; {plan.workers} at a time ({plan.workers_why})",
                  markup=False)
    elif what is None:  # layers: one fully quantized trial, then the float mixes its per-layer SNR suggests
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
        from np_optimizer import api

        if report:
            from np_optimizer.cli.views.report import json_view, table_view

            (json_view if json_mode else table_view)(api.sweep_front(project=project), None)
            return 0
        from np_optimizer.cli.sweep_display import SweepDisplay

        display = SweepDisplay(json_mode=json_mode, quiet=quiet)
        with contextlib.nullcontext() if dry_run else display:
            result = api.sweep(project=project, file=file, dry_run=dry_run, resume=resume, workers=workers, ray=ray,
                               storage=storage, on_event=display.event)
        if dry_run:
            if json_mode:
                print_json(to_dict(result.plan))
            else:
                _print_plan(result.plan)
            return 0
        if result.interrupted:
            return EXIT_INTERRUPTED  # main says how to continue (np sweep --resume)
        if not json_mode:
            line(("Sweep finished: ", "bold"), f"{result.complete} trial(s) complete, {result.failed} failed.")
            out.print("Next: np report   (the project's trials with the Pareto front; np report --html for the chart)",
                      markup=False)
        return 0
