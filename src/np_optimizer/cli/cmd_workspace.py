"""np workspace init."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from np_optimizer import api
from np_optimizer.cli.options import JsonOpt
from np_optimizer.cli.render import out, print_json
from np_optimizer.records import to_dict

app = typer.Typer(help="Create a workspace.", no_args_is_help=True)


@app.command("init", epilog="Example: np workspace init my_workspace")
def init(
    directory: Annotated[Optional[Path], typer.Argument(help="Folder of the workspace (default: here).")] = None,
    json_mode: JsonOpt = False,
) -> None:
    """Create a workspace with two ready sample projects (sample_cpu, sample_npu)."""
    result = api.workspace_init(directory)
    if json_mode:
        print_json(to_dict(result))
        return
    out.print(f"Workspace: {result.root}" + ("" if result.created else " (already existed)"))
    for name in result.projects:
        out.print(f"  created project {name} with experiment_01")
    for name in result.skipped:
        out.print(f"  kept existing project {name}")
    first = (result.projects or result.skipped or ("sample_cpu",))[0]
    out.print(f"Next: cd {Path(result.root) / first / 'experiment_01'} && np validate && np run")
