"""np evaluate (post-hoc evaluation of finished checkpoints) and np datasets add|info (the labelled dataset)."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from np_optimizer.cli.live import live_display
from np_optimizer.cli.options import ExperimentOpt, JsonOpt, ProjectOpt
from np_optimizer.cli.render import out, print_json, print_table, warn

datasets_app = typer.Typer(help="The project's labelled evaluation dataset (accuracy in np run and np evaluate).",
                           no_args_is_help=True)


def evaluation_table(results: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Checkpoint | Status | Samples | one column per metric | Evaluated on."""
    from np_optimizer.records.codec import from_dict
    from np_optimizer.records.results import MetricValue
    from np_optimizer.report.evaluation import metric_cell, metric_header

    names = list(dict.fromkeys(m["metric_type"] for r in results for m in r.get("metrics", [])))
    rows = []
    for r in results:
        values = {m["metric_type"]: from_dict(MetricValue, m) for m in r.get("metrics", [])}
        rows.append([str(r.get("checkpoint", "")).lower(), str(r.get("status", "")), str(r.get("samples", "")),
                     *(metric_cell(values.get(n)) for n in names),
                     r.get("evaluated_on") or (r.get("error") or {}).get("message", "")])
    return ["Checkpoint", "Status", "Samples", *(metric_header(n) for n in names), "Evaluated on"], rows


def register(app: typer.Typer) -> None:
    @app.command("evaluate", epilog="Examples: np evaluate                 (every checkpoint, the project's dataset)"
                 "\n\nnp evaluate graph_quantize --metric TOP1_ACCURACY --dataset ./digits_val")
    def evaluate(
        ids: Annotated[Optional[list[str]], typer.Argument(help="Checkpoint names (GRAPH_QUANTIZE, output_model) or "
                                                           "job names; default: all.")] = None,
        experiment: ExperimentOpt = None,
        project: ProjectOpt = None,
        dataset: Annotated[Optional[str], typer.Option("--dataset", "-d", help="A labelled dataset to use instead of "
                                                       "the project's (folder or .npz/.pt; not copied).")] = None,
        metric: Annotated[Optional[list[str]], typer.Option("--metric", "-m", help="TOP1_ACCURACY, TOP5_ACCURACY, "
                                                            "SNR, MSE, MAE, MAX_ABS_ERROR, KLD; repeatable.")] = None,
        json_mode: JsonOpt = False,
    ) -> int:
        """Evaluate finished checkpoints post hoc (accuracy with a labelled dataset, fidelity against INPUT_MODEL)."""
        from np_optimizer.api.evaluate import evaluate as run_evaluate
        from np_optimizer.api.evaluate import parse_metrics
        from np_optimizer.records import to_dict

        metrics = parse_metrics(metric)
        with live_display(quiet=json_mode) as display:
            result = run_evaluate(ids, experiment=experiment, project=project, dataset=dataset, metrics=metrics,
                                  console_write=display.write, progress=display.progress)
        if json_mode:
            print_json(to_dict(result))
            return result.exit_code
        columns, rows = evaluation_table([to_dict(r) for r in result.results])
        print_table(f"Post-hoc evaluation: {result.experiment}" + (f" on {result.dataset}" if result.dataset else ""),
                    columns, rows)
        for r in result.results:
            for text in r.warnings:
                warn(f"{r.checkpoint.lower()}: {text}")
        out.print("Next: np report")
        return result.exit_code

    app.add_typer(datasets_app, name="datasets")


@datasets_app.command("add", epilog="Example: np datasets add ./digits_val --project sample_digits")
def add(
    source: Annotated[str, typer.Argument(help="DIR/<class>/*.png|jpg|npy, or a .npz/.pt file with `inputs` and "
                                         "`labels`.")],
    project: ProjectOpt = None,
    mean: Annotated[Optional[str], typer.Option("--mean", help="Per-channel mean subtracted from images after "
                                                "scaling to 0..1 (default 0).")] = None,
    std: Annotated[Optional[str], typer.Option("--std", help="Per-channel std images are divided by (default 1).")]
    = None,
    json_mode: JsonOpt = False,
) -> None:
    """Check a labelled dataset against the project's model and copy it into the project (replacing any earlier)."""
    from np_optimizer import api
    from np_optimizer.evaluate.attach import parse_channels

    entry = api.datasets_add(source, project=project, mean=parse_channels(mean, "--mean"),
                             std=parse_channels(std, "--std"))
    if json_mode:
        print_json(entry)
        return
    out.print(f"Evaluation dataset {entry['name']} ({entry['samples']} labelled samples, {entry['classes']} classes, "
              f"{entry['format']}) copied into {entry['project']}/{entry['path']}")
    out.print(f"Transform: {entry['transform']}")
    out.print("Next: add `evaluate:` to run.yaml (np run), or np evaluate")


@datasets_app.command("info", epilog="Example: np datasets info --json")
def info(project: ProjectOpt = None, json_mode: JsonOpt = False) -> None:
    """Show the project's evaluation and calibration datasets."""
    from np_optimizer import api

    record = api.dataset_info(project=project)
    if json_mode:
        print_json(record)
        return
    entry = record["evaluation_dataset"]
    rows = [["Evaluation", "none (np datasets add DIR)" if entry is None else
             f"{entry.get('name')}: {entry.get('samples')} samples, {entry.get('classes')} classes, "
             f"{entry.get('format')}, at {entry.get('path')}"],
            ["Transform", "-" if entry is None else str(entry.get("transform"))],
            ["Calibration", record["calibration_dataset"] or "generated samples"]]
    print_table(f"Datasets: {record['project']}", ["Dataset", "Value"], rows)
