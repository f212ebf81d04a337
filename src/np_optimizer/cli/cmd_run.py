"""np run: validate, then run the steps and profile the listed checkpoints (--dry-run prints the plan only)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from np_optimizer import api
from np_optimizer.cli.cmd_validate import print_report
from np_optimizer.cli.live import live_display
from np_optimizer.cli.options import BudgetOpt, CheckAllOpt, CheckOpt, ExperimentOpt, JsonOpt, JunitOpt, ProjectOpt
from np_optimizer.cli.render import failures, line, out, print_json
from np_optimizer.errors import UsageError
from np_optimizer.records import to_dict
from np_optimizer.records.status import JobStatus, RoundStatus, RunStatus

if TYPE_CHECKING:
    from np_optimizer.records import RunSummary

MethodOpt = Annotated[Optional[str], typer.Option("--profile-method", help="mlia | on-device (default: the device's).",
                                                  case_sensitive=False)]


def summary_dict(summary: RunSummary) -> dict[str, object]:
    return to_dict(summary)


def print_summary(summary: RunSummary) -> None:
    ok = summary.status == RunStatus.SUCCESS
    line(("Run completed successfully.", "green") if ok else ("Run failed.", "red"), f" ({summary.duration_s:.1f} s)")
    for job in summary.jobs:
        mark = {JobStatus.SUCCESS: "✓", JobStatus.REUSED: "✓ (reused)", JobStatus.FAILED: "✗"}.get(job.status,
                                                                                                    job.status)
        out.print(f"  {job.name:<22} {mark}")
    if summary.profile:
        kinds = sorted({p.result_kind for p in summary.profile})
        marks = "  ".join(f"{p.checkpoint.lower()}{'✓' if p.status == RoundStatus.SUCCESS else '✗'}" for p in summary.profile)
        out.print(f"  Profile   {marks}  ({', '.join(kinds)})")
        from np_optimizer.report.rounds import round_failures

        failures(round_failures(summary.profile))
    if summary.error:
        line((summary.error.message, "red"))
        if summary.error.hint:
            line(("Hint:", "yellow"), " ", summary.error.hint)
    out.print("Next: np report   (np status for jobs, np export for the .pte)")


def register(app: typer.Typer) -> None:
    @app.command("run", epilog="Example: np run --dry-run   (then: np run, np report)")
    def run(
        experiment: ExperimentOpt = None,
        project: ProjectOpt = None,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Validate and print the plan; run nothing.")] = False,
        retry: Annotated[bool, typer.Option("--retry", help="Reuse finished steps whose inputs and config are "
                                            "unchanged.")] = False,
        profile_method: MethodOpt = None,
        force: Annotated[bool, typer.Option("--force", help="Compute every step again instead of taking it from the "
                                            "step cache, and profile again instead of reusing an earlier estimate of "
                                            "the same compiled checkpoint.")] = False,
        json_mode: JsonOpt = False,
        check: CheckOpt = False,
        budget: BudgetOpt = None,
        check_all: CheckAllOpt = False,
        junit: JunitOpt = None,
    ) -> int:
        """Run the experiment's steps, then compile and profile each checkpoint listed under profile:."""
        method = profile_method.lower() if profile_method else None
        if dry_run and retry:
            raise UsageError("--retry cannot be combined with --dry-run.", hint="Drop one of them.")
        checking = (check or bool(budget) or check_all or junit is not None) and not dry_run
        if dry_run:  # np validate, with the plan for this --profile-method
            report = api.validate(experiment=experiment, project=project, profile_method=method)
            if json_mode:
                print_json(to_dict(report))
            else:
                print_report(report, title=f"Dry run: {report.experiment}")
            return report.exit_code
        with live_display(quiet=json_mode) as display:
            if checking:  # bad or missing budgets stop np run before anything runs
                checked = api.run_checked(experiment=experiment, project=project, retry=retry, profile_method=method,
                                          force=force, budgets=budget or (), check_all=check_all,
                                          console_write=display.write, progress=display.progress)
                summary, record, code = checked.summary, checked.report, checked.exit_code  # 6: a budget failed
            else:
                summary = api.run(experiment=experiment, project=project, retry=retry, profile_method=method,
                                  force=force, console_write=display.write, progress=display.progress)
                record, code = None, summary.exit_code  # 4: every failure an unreachable device; else 1 or 0
        if json_mode:
            print_json({**summary_dict(summary), **({"budgets": record.data["budgets"]} if record else {})})
        else:
            print_summary(summary)
        if record is not None:
            from np_optimizer.cli.views.report import print_budget_outcome

            print_budget_outcome(record, junit, quiet=json_mode)
        return code
