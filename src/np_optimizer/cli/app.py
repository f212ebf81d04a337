"""The root `np` command and its commands, each imported and built when it is invoked (or listed by --help).

typer turns every command function's signature into click parameters when the app is built, and importing a command's
module imports what its module imports: building all of them took about a fifth of `np --version`. The root group
builds a command the first time click asks for it by name (click's lazy-loading pattern), so `np report` builds
`report` only and `np --version` none.
"""

from __future__ import annotations

import importlib
from typing import Annotated

import click
import typer
import typer.main
from typer.core import TyperGroup

from np_optimizer import __version__

# command -> (module of np_optimizer.cli, attribute): a typer app (a command group) or a `register(app)` function that
# adds the command (and maybe others) to an app. In the order of `np --help`: commands first, then groups.
_COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("cmd_validate", "register"),
    "run": ("cmd_run", "register"),
    "sweep": ("cmd_sweep", "register"),
    "report": ("cmd_report", "register"),
    "profile": ("cmd_profile", "register"),
    "status": ("cmd_status", "register"),
    "export": ("cmd_status", "register"),
    "evaluate": ("cmd_evaluate", "register"),
    "compare": ("cmd_compare", "register"),
    "workspace": ("cmd_workspace", "app"),
    "projects": ("cmd_projects", "app"),
    "models": ("cmd_projects", "models_app"),
    "experiments": ("cmd_experiments", "app"),
    "devices": ("cmd_devices", "app"),
    "cache": ("cmd_cache", "app"),
    "datasets": ("cmd_evaluate", "register"),
}


def _build(name: str) -> click.Command | None:
    """Command `name` as typer builds it, from the module that declares it."""
    module, attribute = _COMMANDS[name]
    declared = getattr(importlib.import_module(f"np_optimizer.cli.{module}"), attribute)
    holder = typer.Typer()
    if isinstance(declared, typer.Typer):
        holder.add_typer(declared, name=name)
    else:
        declared(holder)
    command = typer.main.get_group(holder).commands.get(name)
    _one_suggestion(command)
    return command


def _one_suggestion(command: click.Command | None) -> None:
    """click's NoSuchCommand names the nearest command already; typer's groups would add it a second time."""
    if isinstance(command, TyperGroup):
        command.suggest_commands = False
        for sub in command.commands.values():
            _one_suggestion(sub)


class _LazyGroup(TyperGroup):
    """The root group: lists every command, builds each when click first asks for it."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            # an unknown name builds them all, so that the usage error suggests the nearest (typer reads `commands`)
            for name in (cmd_name,) if cmd_name in _COMMANDS else _COMMANDS:
                command = _build(name)
                if command is not None:
                    self.add_command(command, name)
        return self.commands.get(cmd_name)


app = typer.Typer(
    name="np",
    cls=_LazyGroup,
    help="np: optimize PyTorch models for Arm edge devices and profile every checkpoint, locally.\n\n"
    "Example: np workspace init demo && cd demo/sample_cpu/experiment_01 && np run",
    no_args_is_help=True,
    add_completion=False,
    suggest_commands=False,  # click's NoSuchCommand names the nearest command already (see _one_suggestion)
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
