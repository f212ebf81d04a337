"""np report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from np_optimizer.cli.options import (
    BudgetOpt,
    CheckAllOpt,
    CheckOpt,
    ExperimentOpt,
    JsonOpt,
    JunitOpt,
    PlainOpt,
)


def register(app: typer.Typer) -> None:
    """`np report`.

    Long because: typer declares every option of the command in its signature (one line or two each).
    """

    @app.command("report", epilog="Example: np report --sort latency --filter 'snr>=30'   (np report --json; "
                                  "np report --html; np report --check --budget latency_ms=20 --junit budgets.xml)")
    def report(  # Long because: typer declares every option of the command in its signature.
        target: Annotated[Optional[str], typer.Argument(
            metavar="[CHECKPOINT|FILE]", help="With --layers: the checkpoint (default: the last profiled). With --html: "
            "the file to write (default report.html in the experiment or project folder).", show_default=False)] = None,
        experiment: ExperimentOpt = None,
        project: Annotated[Optional[str], typer.Option("--project", "-p", help="Project report (all experiments).")] = None,
        sort: Annotated[Optional[str], typer.Option("--sort", "-s", help="metric[:asc|desc][,...]: latency, memory, "
                                                    "macs, params, model_weight_memory, snr, pte_size.")] = None,
        filter_: Annotated[Optional[str], typer.Option("--filter", "-f", help="metric OP number[,...], e.g. "
                                                       "'latency<5,snr>=30,pte_size<0.5'. Numbers in the units "
                                                       "shown: ms, MB (MiB), dB.")] = None,
        json_mode: JsonOpt = False,
        plain: PlainOpt = False,
        output_format: Annotated[Optional[str], typer.Option("--format", help="Any registered format of the "
                                                   "report (table, json, plain, or one a module of "
                                                   "np_optimizer/cli/views adds); --json and --plain are its "
                                                   "short forms.")] = None,
        layers: Annotated[bool, typer.Option("--layers", help="The costliest layers of CHECKPOINT (default: the "
                                             "last profiled), by module path.")] = False,
        top: Annotated[int, typer.Option("--top", help="With --layers: how many layers.")] = 10,
        html: Annotated[bool, typer.Option("--html", help="Write one self-contained HTML page (no network, no "
                                           "JavaScript) and print its path: np report --html [FILE].")] = False,
        check: CheckOpt = False,
        budget: BudgetOpt = None,
        check_all: CheckAllOpt = False,
        junit: JunitOpt = None,
    ) -> int:
        """Compare every checkpoint of an experiment side by side (or every experiment of a project)."""
        from np_optimizer.errors import UsageError

        if layers and html:
            raise UsageError("--layers and --html cannot be combined.", hint="Run them one after the other.",
                             code="NP-RPT-400")
        if layers:
            from np_optimizer.api.layers import layers_report
            from np_optimizer.cli.views import render

            render("layers", "json" if json_mode else "plain" if plain else "table",
                   layers_report(checkpoint=target, experiment=experiment, top=top))
            return 0
        file = Path(target) if target is not None else None
        from np_optimizer.api.report import report as build
        from np_optimizer.cli.render import out
        from np_optimizer.cli.views import render
        from np_optimizer.cli.views.report import print_budget_outcome

        if file is not None and not html:
            raise UsageError(f"np report takes an argument only with --html (a file) or --layers (a checkpoint); "
                             f"got {file}.", hint="Write np report --html FILE, or np report --layers CHECKPOINT.",
                             code="NP-RPT-400")
        if html and (json_mode or plain):
            raise UsageError("--html cannot be combined with --json or --plain.", hint="Give one format.",
                             code="NP-RPT-400")
        record = build(experiment=experiment, project=project, sort=sort, filter_=filter_,
                       check=check or junit is not None, budgets=budget, check_all=check_all)
        if html:
            written = render("report", "html", record, file)
            print_budget_outcome(record, junit)
            out.print(f"HTML report: {written}", soft_wrap=True)
            return record.exit_code
        chosen = output_format or ("json" if json_mode else "plain" if plain else "table")
        render("report", chosen, record)
        if chosen == "table":
            print_budget_outcome(record, junit)
        elif junit is not None:
            print_budget_outcome(record, junit, quiet=True)
        return record.exit_code
