"""np report."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from np_optimizer.cli.options import ExperimentOpt, JsonOpt, PlainOpt


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
        layers: Annotated[bool, typer.Option("--layers", help="The costliest layers of CHECKPOINT (default: the "
                                             "last profiled), by module path.")] = False,
        checkpoint: Annotated[Optional[str], typer.Argument(help="With --layers: the checkpoint.")] = None,
        top: Annotated[int, typer.Option("--top", help="With --layers: how many layers.")] = 10,
    ) -> None:
        """Compare every checkpoint of an experiment side by side (or every experiment of a project)."""
        if layers or checkpoint is not None:
            from np_optimizer.api.layers import layers_report
            from np_optimizer.cli.layer_views import show_layers

            show_layers(layers_report(checkpoint=checkpoint, experiment=experiment, top=top),
                        "json" if json_mode else "plain" if plain else "table")
            return
        from np_optimizer.api.report import report as build
        from np_optimizer.cli.report_views import get_report_view

        record = build(experiment=experiment, project=project, sort=sort, filter_=filter_)
        get_report_view("json" if json_mode else "plain" if plain else "table")(record)
