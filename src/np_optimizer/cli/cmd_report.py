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

        view = build(experiment=experiment, project=project, sort=sort, filter_=filter_)
        if json_mode:
            print_json(view.data)
            return
        if plain:
            header = view.data.get("experiment") or view.data.get("project") or {}
            print_plain(["key", "value"], [[k, v] for k, v in header.items() if not isinstance(v, (dict, list))],
                        section=view.scope)
            for index, table in enumerate(view.tables):
                name = "pipeline" if index == 0 and view.scope == "experiment" else (
                    "experiments" if index == 0 else "posthoc_profile:" + table.title.rsplit(": ", 1)[-1].rstrip(" ]"))
                print_plain(table.plain_columns, table.plain_rows, section=name)
            return
        first, *post_hoc = view.tables
        print_table(first.title, first.columns, first.rows, caption=first.caption or None)
        for note in first.footnotes:
            line("  ", (note, "dim"))
        if post_hoc:
            out.print()
            heading(f"Post-hoc Measurements ({view.post_hoc_count})")
            for table in post_hoc:
                print_table(table.title, table.columns, table.rows, caption=table.caption or None)
        for text in view.warnings:
            warn(text)
        for text in view.notices:
            line(("Note:", "cyan"), " ", text)
        if view.scope == "experiment":
            on_cpu = (view.data.get("experiment") or {}).get("backend") == "xnnpack"
            # measuring on this machine only makes sense for a CPU target; an NPU's figures come from MLIA
            out.print("Next: np report --sort latency" + ("   |   np profile --method on-device -d host" if on_cpu else ""))
