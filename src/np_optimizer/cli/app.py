"""The root `np` command and its command groups."""

from __future__ import annotations

from typing import Annotated

import typer

from np_optimizer import __version__
from np_optimizer.cli import (
    cmd_cache,
    cmd_compare,
    cmd_devices,
    cmd_evaluate,
    cmd_experiments,
    cmd_profile,
    cmd_projects,
    cmd_report,
    cmd_run,
    cmd_status,
    cmd_sweep,
    cmd_validate,
    cmd_workspace,
)

app = typer.Typer(
    name="np",
    help="np: optimize PyTorch models for Arm edge devices and profile every checkpoint, locally.\n\n"
    "Example: np workspace init demo && cd demo/sample_cpu/experiment_01 && np run",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"np {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[bool, typer.Option("--version", "-V", callback=_version, is_eager=True,
                                          help="Show the version and exit.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of internal errors.")] = False,
) -> None:
    """np: optimize PyTorch models for Arm edge devices and profile every checkpoint, locally."""


app.add_typer(cmd_workspace.app, name="workspace")
app.add_typer(cmd_projects.app, name="projects")
app.add_typer(cmd_projects.models_app, name="models")
app.add_typer(cmd_experiments.app, name="experiments")
app.add_typer(cmd_devices.app, name="devices")
app.add_typer(cmd_cache.app, name="cache")
cmd_validate.register(app)
cmd_run.register(app)
cmd_sweep.register(app)
cmd_report.register(app)
cmd_profile.register(app)
cmd_status.register(app)
cmd_evaluate.register(app)
cmd_compare.register(app)
