"""np validate (and the plan that np run --dry-run prints)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from np_optimizer import api
from np_optimizer.cli.options import ExperimentOpt, JsonOpt, ProjectOpt
from np_optimizer.cli.render import heading, line, out, print_json, print_table
from np_optimizer.errors import UsageError
from np_optimizer.records import to_dict

if TYPE_CHECKING:
    from np_optimizer.plan import Plan
    from np_optimizer.records import ValidationReport

ConfigOpt = Annotated[Optional[str], typer.Option("--config", "-c", help="run.yaml[,run.detail.yaml] to check instead.")]


def plan_text(plan: Plan) -> str:
    lines = []
    for step in plan.steps:
        prefix = "Steps:   " if step.index == 1 else "         "
        lines.append(f"{prefix}[{step.index}/{len(plan.steps)}] {step.kind} ({step.detail})  -> {step.job}")
    lines.append(f"Target:  {plan.device} / {plan.runtime} / {plan.backend}")
    if plan.profile is None:
        lines.append("Profile: none (no profile section in run.yaml)")
    else:
        lines.append("Profile: " + (", ".join(p.listed_as for p in plan.profile) or "none"))
        for p in plan.profile:
            opts = f"  [{', '.join(f'{k}={v}' for k, v in p.options.items())}]" if p.options else ""
            lines.append(f"  {p.listed_as:<18} -> {p.job:<20} {p.method} ({p.result_kind}): {', '.join(p.metrics)}{opts}")
        for index, p in enumerate(plan.profile):
            if p.ignored_options:
                given = ", ".join(f"{k}={v}" for k, v in p.ignored_options.items())
                lines.append(f"  Note: run.detail.yaml's profile[{index}] sets {given}, which {p.method} on {plan.device} "
                             "does not use (measured profiling uses the measuring options; time_limit bounds Ethos-U "
                             "lowerings and MLIA estimates).")
        gaps = {(p.method, p.missing, p.scope_note) for p in plan.profile if p.missing}
        for method, missing, note in sorted(gaps):
            lines.append(f"  Not given by {method} on {plan.device}: {', '.join(missing)}. {note}")
    if plan.evaluate:
        lines.append("Evaluate: " + "; ".join(plan.evaluate))
        lines.append(f"  Evaluation phase after the steps, on {plan.evaluate_on}")
    if plan.lowered:
        lines.append(f"Lowered for {plan.device} during the run: {', '.join(plan.lowered)} (the rest when profiled)")
    lines.append(f"Total: {plan.total_jobs} jobs (input model + {len(plan.steps)} step(s))")
    return "\n".join(lines)


def print_report(report: ValidationReport, *, title: str) -> None:
    """The violations (or warnings) table, then the plan under `title` and its notes when the config is valid."""
    if report.issues:
        errors = [i for i in report.issues if not i.is_warning]
        rows = [[i.code, i.level + (" (warning)" if i.is_warning else ""), i.where, i.message, i.hint]
                for i in report.issues]
        print_table("Violations" if errors else "Warnings", ["Code", "Level", "Location", "Message", "Hint"], rows)
    if report.plan is not None:
        heading(title)
        out.print(plan_text(report.plan), soft_wrap=True)
        for text in report.notes:
            line(("Note:", "cyan"), " ", text)


def parse_config(config: str | None) -> list[Path] | None:
    if config is None:
        return None
    files = [Path(p.strip()) for p in config.split(",") if p.strip()]
    if not 1 <= len(files) <= 2:
        raise UsageError(f"Invalid --config '{config}'.", hint="Use --config run.yaml or --config run.yaml,run.detail.yaml.")
    return files


def register(app: typer.Typer) -> None:
    @app.command("validate", epilog="Example: np validate -e sample_cpu/experiment_01")
    def validate(experiment: ExperimentOpt = None, project: ProjectOpt = None, config: ConfigOpt = None,
                 json_mode: JsonOpt = False) -> int:
        """Check run.yaml and run.detail.yaml; print violations (exit 5) or the execution plan."""
        report = api.validate(experiment=experiment, project=project, config_files=parse_config(config))
        if json_mode:
            print_json(to_dict(report))
        else:
            print_report(report, title=f"Execution plan: {report.experiment}")
            if report.is_valid:
                line(("Valid.", "green"), " Next: np run")
        return report.exit_code
