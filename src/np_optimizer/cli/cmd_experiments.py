"""np experiments create|detail|ls|info."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import click
import typer
from typer.core import TyperCommand

from np_optimizer import api
from np_optimizer.cli.options import ExperimentOpt, JsonOpt, PlainOpt, ProjectOpt
from np_optimizer.cli.render import out, print_json, print_plain, print_table
from np_optimizer.records import to_dict

if TYPE_CHECKING:
    from np_optimizer.records import ExperimentRecord

app = typer.Typer(help="Create and inspect experiments (one run.yaml each).", no_args_is_help=True)


class _CreateCommand(TyperCommand):
    """Lists what --steps accepts when the help is shown: the list comes from the step registry, which imports every
    step's module, so building it when np starts would make every command pay for it."""

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from np_optimizer.config.writer import STEP_COMBINATIONS

        for param in self.params:
            if isinstance(param, click.Option) and param.name == "steps":
                param.help = " | ".join(STEP_COMBINATIONS)
        super().format_help(ctx, formatter)


@app.command("create", cls=_CreateCommand,
             epilog="Example: np experiments create --project sample_cpu --steps go,gq --name int8")
def create(
    steps: Annotated[str, typer.Option("--steps", "-s", help="Steps, comma separated, in pipeline order.")],
    name: Annotated[Optional[str], typer.Option("--name", "-n", help="Default: the next experiment_NN.")] = None,
    project: ProjectOpt = None,
    json_mode: JsonOpt = False,
) -> None:
    """Write a run.yaml with defaults for the device's backend, profiling every checkpoint."""
    record = api.experiments_create(steps=steps, name=name, project=project)
    if json_mode:
        print_json(to_dict(record))
        return
    out.print(f"Created {record.path}/run.yaml (steps: {', '.join(record.steps)})")
    out.print(f"Next: cd {record.path} && np validate && np run")


@app.command("detail", epilog="Example: np experiments detail -e experiment_01")
def detail(experiment: ExperimentOpt = None, project: ProjectOpt = None, json_mode: JsonOpt = False) -> None:
    """Write run.detail.yaml with every option and default spelled out (existing values kept)."""
    path = api.experiments_detail(experiment=experiment, project=project)
    if json_mode:
        print_json({"path": str(path)})
    else:
        out.print(f"Wrote {path}")


def _row(e: ExperimentRecord) -> list[object]:
    return [e.name, ",".join(e.steps), ", ".join(e.profile or ()) or "-", e.status, e.updated_at or "-"]


@app.command("ls", epilog="Example: np experiments ls --project sample_cpu")
def ls(project: ProjectOpt = None, json_mode: JsonOpt = False, plain: PlainOpt = False) -> None:
    """List the experiments of a project."""
    records = api.experiments_list(project=project)
    columns = ["Name", "Steps", "Profile", "Status", "Updated"]
    if json_mode:
        print_json([to_dict(r) for r in records])
    elif plain:
        print_plain([c.lower() for c in columns], [_row(r) for r in records])
    else:
        print_table(f"Experiments ({len(records)})", columns, [_row(r) for r in records])


@app.command("info", epilog="Example: np experiments info experiment_01 --json")
def info(
    name: Annotated[Optional[str], typer.Argument(help="Experiment name or folder (default: the current one).")] = None,
    project: ProjectOpt = None,
    json_mode: JsonOpt = False,
) -> None:
    """Show an experiment's steps, profile list, status and jobs."""
    record = api.experiment_info(name, project=project)
    if json_mode:
        print_json(to_dict(record))
        return
    rows = [["Path", record.path], ["Project", record.project], ["Device", record.device],
            ["Steps", ", ".join(record.steps) or "-"], ["Profile", ", ".join(record.profile or ()) or "(no profiling)"],
            ["Status", record.status]]
    rows += [[j.name, str(j.status)] for j in record.jobs]
    print_table(f"Experiment: {record.name}", ["Field", "Value"], rows)
