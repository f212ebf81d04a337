"""np projects create|ls|info, np models ls."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from np_optimizer import api
from np_optimizer.cli.options import JsonOpt, PlainOpt
from np_optimizer.cli.render import out, print_json, print_plain, print_table
from np_optimizer.records import to_dict

if TYPE_CHECKING:
    from np_optimizer.records import ProjectRecord

app = typer.Typer(help="Create and inspect projects (one model, one target device).", no_args_is_help=True)
models_app = typer.Typer(help="Built-in models.", no_args_is_help=True)


@app.command("create", epilog="Example: np projects create --name cnn_pi --model small_cnn --device raspberry_pi_5")
def create(
    name: Annotated[str, typer.Option("--name", "-n", help="Project name (3-50 letters, digits, _ or -).")],
    model: Annotated[str, typer.Option("--model", "-m", help="Built-in model name, a .pt2 file, path/to/file.py:factory "
                                       "(the file's folder is copied), an installed package.module:factory, or a "
                                       "Hugging Face model folder.")],
    device: Annotated[str, typer.Option("--device", "-d", help="Target device (see `np devices ls`).")],
    runtime: Annotated[Optional[str], typer.Option("--runtime", "-r", help="Runtime; must match the device.")] = None,
    backend: Annotated[Optional[str], typer.Option("--backend", "-b", help="Backend; must match the device.")] = None,
    calibration_dataset: Annotated[Optional[str], typer.Option(
        "--calibration-dataset", "-C", help="Folder of .npy/.pt tensors or images for quantization.")] = None,
    evaluation_dataset: Annotated[Optional[str], typer.Option(
        "--evaluation-dataset", "-E", help="Labelled data for accuracy: DIR/<class>/*.png|jpg|npy, or a .npz/.pt "
        "file with `inputs` and `labels`.")] = None,
    json_mode: JsonOpt = False,
) -> None:
    """Create a project in the current workspace; the model is copied into it."""
    record = api.projects_create(name=name, model=model, device=device, runtime=runtime, backend=backend,
                                 calibration_dataset=calibration_dataset, evaluation_dataset=evaluation_dataset)
    if json_mode:
        print_json(to_dict(record))
        return
    out.print(f"Created project {record.name} ({record.device} / {record.runtime} / {record.backend}) at {record.path}")
    out.print(f"Next: np experiments create --project {record.name} --steps go,gq")


def _row(p: ProjectRecord) -> list[object]:
    return [p.name, p.model.name, p.device, p.runtime, p.backend, len(p.experiments)]


@app.command("ls", epilog="Example: np projects ls --plain")
def ls(json_mode: JsonOpt = False, plain: PlainOpt = False) -> None:
    """List the workspace's projects."""
    records = api.projects_list()
    columns = ["Name", "Model", "Device", "Runtime", "Backend", "Experiments"]
    if json_mode:
        print_json([to_dict(r) for r in records])
    elif plain:
        print_plain([c.lower() for c in columns], [_row(r) for r in records])
    else:
        print_table(f"Projects ({len(records)})", columns, [_row(r) for r in records])


@app.command("info", epilog="Example: np projects info sample_cpu")
def info(
    name: Annotated[Optional[str], typer.Argument(help="Project name (default: the current project).")] = None,
    json_mode: JsonOpt = False,
) -> None:
    """Show a project's model, device and experiments."""
    record = api.project_info(name)
    if json_mode:
        print_json(to_dict(record))
        return
    rows = [["Path", record.path], ["Model", f"{record.model.kind}: {record.model.source}"],
            ["Device", record.device], ["Runtime / backend", f"{record.runtime} / {record.backend}"],
            ["Calibration data", record.calibration_dataset or "generated samples"],
            ["Experiments", ", ".join(record.experiments) or "-"], ["Created", record.created_at]]
    print_table(f"Project: {record.name}", ["Field", "Value"], rows)


@models_app.command("ls", epilog="Example: np models ls --json")
def models_ls(json_mode: JsonOpt = False, plain: PlainOpt = False) -> None:
    """List the built-in models, each with its example input."""
    models = api.models_list()
    rows = [[m.name, m.task, m.inputs, m.description] for m in models]
    if json_mode:
        print_json([to_dict(m) for m in models])
    elif plain:
        print_plain(["name", "task", "inputs", "description"], rows)
    else:
        print_table(f"Built-in models ({len(models)})", ["Name", "Task", "Example input", "Description"], rows)
