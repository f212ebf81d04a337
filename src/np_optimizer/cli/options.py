"""Typer option declarations shared by several commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON (errors too, as {error, code, message, hint}).")]
PlainOpt = Annotated[bool, typer.Option("--plain", help="Print tab-separated values for scripts.")]
ExperimentOpt = Annotated[
    Optional[str],
    typer.Option("--experiment", "-e", help="Experiment folder or name (default: the nearest folder with run.yaml)."),
]
ProjectOpt = Annotated[Optional[str], typer.Option("--project", "-p", help="Project name or folder.")]

# Budgets (np report, np run): run.yaml's budgets: with command-line overrides; exit 6 when one fails
CheckOpt = Annotated[bool, typer.Option("--check", help="Check the budgets (run.yaml's budgets: and --budget) on "
                                        "OUTPUT_MODEL; exit 6 when one fails.")]
BudgetOpt = Annotated[Optional[list[str]], typer.Option("--budget", help="metric=value, overriding run.yaml's "
                                                        "budgets: (implies --check): latency_ms, memory_mb, "
                                                        "weight_memory_mb, pte_size_mb, snr_db_min.",
                                                        show_default=False)]
CheckAllOpt = Annotated[bool, typer.Option("--check-all", help="Check the budgets on every profiled checkpoint, not "
                                           "only OUTPUT_MODEL (implies --check).")]
JunitOpt = Annotated[Optional[Path], typer.Option("--junit", help="Write the budget outcomes as JUnit XML, one test "
                                                  "case per budget and checkpoint (implies --check).",
                                                  show_default=False)]
