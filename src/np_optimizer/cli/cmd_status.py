"""np status, np export."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from np_optimizer import api
from np_optimizer.cli.options import ExperimentOpt, JsonOpt, ProjectOpt
from np_optimizer.cli.render import line, out, print_json, print_table
from np_optimizer.records import to_dict
from np_optimizer.records.status import ExperimentStatus


def register(app: typer.Typer) -> None:
    @app.command("status", epilog="Example: np status --logs")
    def status(experiment: ExperimentOpt = None, project: ProjectOpt = None,
               logs: Annotated[bool, typer.Option("--logs", help="Append the execution log.")] = False,
               json_mode: JsonOpt = False) -> None:
        """Show the experiment's jobs and measurements, and whether a run was interrupted."""
        state = api.status(experiment=experiment, project=project, logs=logs)
        if json_mode:
            print_json(to_dict(state))
            return
        rows: list[list[Any]] = [[j.name, j.step_type, j.status, f"{j.duration_s:.1f} s" if j.duration_s else "-", j.lowering or "-",
                 (j.errors[0].message if j.errors else f"reused from the {j.reused_from.where}" if j.reused_from
                  else j.lowering_reason or "")] for j in state.jobs]
        print_table(f"Experiment: {state.experiment}  Status: {state.status}",
                    ["Job", "Type", "Status", "Duration", "Lowering", "Detail"], rows)
        if state.measurements:
            rows = [[m.checkpoint, "run" if m.trigger == "RUN_INLINE" else "post-hoc", m.device,
                     f"{m.method} ({m.result_kind})", m.status, (m.started_at or "")[:19]] for m in state.measurements]
            print_table("Measurements", ["Checkpoint", "Trigger", "Device", "Method", "Status", "Started"], rows)
        if state.status == ExperimentStatus.INTERRUPTED:
            line(("The last run was interrupted.", "yellow"), " Resume it with: np run --retry")
        if state.log is not None:
            out.print("─── Logs ───")
            out.print(state.log, soft_wrap=True)

    @app.command("export", epilog="Example: np export --level result -o ./release")
    def export(experiment: ExperimentOpt = None, project: ProjectOpt = None,
               level: Annotated[str, typer.Option("--level", "-l", help="deploy (the .pte) | inspect (plus its "
                                                  "ETRecord, made now by one more lowering, and its latest ETDump, "
                                                  "for ExecuTorch's Inspector) | result (plus report, jobs, configs, "
                                                  "logs).")] = "deploy",
               output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Folder (default: "
                                                              "<experiment>/export/<level>).")] = None,
               json_mode: JsonOpt = False) -> None:
        """Export the final checkpoint's .pte (with --level inspect, its ETRecord and ETDump; with --level result, the
        results)."""
        result = api.export(level=level, output=output, experiment=experiment, project=project)
        if json_mode:
            print_json(to_dict(result))
            return
        out.print(f"Exported {result.checkpoint} ({result.job}, {result.device}) to {result.folder}:")
        for name in result.files:
            out.print(f"  {name}")
