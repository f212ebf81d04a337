"""np compare."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from np_optimizer.cli.options import ExperimentOpt, JsonOpt, PlainOpt


def register(app: typer.Typer) -> None:
    @app.command("compare", epilog="Example: np compare INPUT_MODEL GRAPH_QUANTIZE   (np compare --json)")
    def compare(
        checkpoints: Annotated[Optional[list[str]], typer.Argument(
            help="Checkpoints to compare, the first is the base (default: every profiled checkpoint).")] = None,
        experiment: ExperimentOpt = None,
        other: Annotated[Optional[list[str]], typer.Option("--with", "-w", help="Another experiment of the project "
                                                           "whose checkpoints join the comparison (repeatable).")]
        = None,
        json_mode: JsonOpt = False,
        plain: PlainOpt = False,
    ) -> None:
        """Totals of checkpoints side by side with deltas, then the layer diff (cost, placement) against the first."""
        from np_optimizer.api.layers import compare as build
        from np_optimizer.cli.views import render

        record = build(checkpoints=checkpoints, experiment=experiment, others=other)
        render("compare", "json" if json_mode else "plain" if plain else "table", record)
