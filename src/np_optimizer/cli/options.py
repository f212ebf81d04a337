"""Typer option declarations shared by several commands."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON (errors too, as {error, code, message, hint}).")]
PlainOpt = Annotated[bool, typer.Option("--plain", help="Print tab-separated values for scripts.")]
ExperimentOpt = Annotated[
    Optional[str],
    typer.Option("--experiment", "-e", help="Experiment folder or name (default: the nearest folder with run.yaml)."),
]
ProjectOpt = Annotated[Optional[str], typer.Option("--project", "-p", help="Project name or folder.")]
