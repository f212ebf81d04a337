"""np run: validate, then run the steps and profile the listed checkpoints (--dry-run prints the plan only)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from np_optimizer import api
from np_optimizer.cli.cmd_validate import print_plan, print_report
from np_optimizer.cli.options import ExperimentOpt, JsonOpt, ProjectOpt
from np_optimizer.cli.render import print_json
from np_optimizer.errors import EXIT_VALIDATION, UsageError
from np_optimizer.records import to_dict

MethodOpt = Annotated[Optional[str], typer.Option("--profile-method", help="mlia | on-device (default: the device's).",
                                                  case_sensitive=False)]


def register(app: typer.Typer) -> None:
    @app.command("run", epilog="Example: np run --dry-run   (then: np run, np report)")
    def run(
        experiment: ExperimentOpt = None,
        project: ProjectOpt = None,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Validate and print the plan; run nothing.")] = False,
        retry: Annotated[bool, typer.Option("--retry", help="Reuse finished steps whose inputs and config are "
                                            "unchanged.")] = False,
        profile_method: MethodOpt = None,
        json_mode: JsonOpt = False,
    ) -> int:
        """Run the experiment's steps, then compile and profile each checkpoint listed under profile:."""
        method = profile_method.lower() if profile_method else None
        if dry_run and retry:
            raise UsageError("--retry cannot be combined with --dry-run.", hint="Drop one of them.")
        if dry_run:
            report = api.validate(experiment=experiment, project=project, profile_method=method)
            if json_mode:
                print_json(to_dict(report))
            elif report.is_valid and report.plan is not None:
                if report.issues:
                    print_report(report)
                else:
                    print_plan(report.plan, f"Dry run: {report.experiment}")
            else:
                print_report(report)
            return 0 if report.is_valid else EXIT_VALIDATION
        raise UsageError("np run is not available yet in this build.", hint="Use np run --dry-run.")
