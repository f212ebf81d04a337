"""np report."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from np_optimizer.cli.options import ExperimentOpt, JsonOpt, PlainOpt
from np_optimizer.cli.render import heading, line, out, print_json, print_plain, print_table, warn


def register(app: typer.Typer) -> None:
    @app.command("report", epilog="Example: np report --sort latency --filter 'snr>=30'   (np report --json)")
    def report(
        experiment: ExperimentOpt = None,
        project: Annotated[Optional[str], typer.Option("--project", "-p", help="Project report (all experiments).")] = None,
        sort: Annotated[Optional[str], typer.Option("--sort", "-s", help="metric[:asc|desc][,...]: latency, memory, "
                                                    "macs, params, model_weight_memory, snr, pte_size.")] = None,
        filter_: Annotated[Optional[str], typer.Option("--filter", "-f", help="metric OP number[,...], e.g. "
                                                       "'latency<5,snr>=30,pte_size<0.5'. Numbers in the units "
                                                       "shown: ms, MB (MiB), dB.")] = None,
        json_mode: JsonOpt = False,
        plain: PlainOpt = False,
    ) -> None:
        """Compare every checkpoint of an experiment side by side (or every experiment of a project)."""
        from np_optimizer.api.report import report as build
        from np_optimizer.report.tables import header_rows, next_step, report_tables

        record = build(experiment=experiment, project=project, sort=sort, filter_=filter_)
        if json_mode:
            print_json(record.data)
            return
        tables = report_tables(record)
        if plain:
            print_plain(["key", "value"], header_rows(record), section=record.scope)
            for table in tables:
                print_plain(table.plain_columns, table.plain_rows, section=table.section)
            return
        first, *post_hoc = tables
        print_table(first.title, first.columns, first.rows, caption=first.caption or None)
        for note in first.footnotes:
            line("  ", (note, "dim"))
        if post_hoc:
            out.print()
            heading(f"Post-hoc Measurements ({record.post_hoc_count})")
            for table in post_hoc:
                print_table(table.title, table.columns, table.rows, caption=table.caption or None)
        for text in record.warnings:
            warn(text)
        for text in record.notices:
            line(("Note:", "cyan"), " ", text)
        hint = next_step(record)
        if hint:
            out.print(hint)
