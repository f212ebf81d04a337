"""API: experiments (create, detail, ls, info) and validation with the execution plan."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, cast

from np_optimizer.config import check_experiment_config, load_experiment_config
from np_optimizer.config.detail_config import spelled_out_detail
from np_optimizer.config.layer_formats import GRAPH_KEY
from np_optimizer.config.writer import parse_steps_option, render_detail_yaml, render_run_yaml
from np_optimizer.devices import get_device
from np_optimizer.errors import UsageError
from np_optimizer.files import write_text
from np_optimizer.plan import build_plan, plan_notes
from np_optimizer.records import ExperimentRecord, ValidationReport
from np_optimizer.records.commands import ExperimentJob
from np_optimizer.workspace import (
    Experiment,
    check_experiment_name,
    next_experiment_name,
    resolve_experiment,
    resolve_project,
)
from np_optimizer.workspace.remote import remote_configured
from np_optimizer.workspace.store import ExperimentStore

__all__ = ["experiments_create", "experiments_detail", "experiments_list", "experiment_info", "validate",
           "output_checkpoint"]


def output_checkpoint(exp: Experiment) -> str:
    """What OUTPUT_MODEL is in this experiment: the checkpoint of run.yaml's last step."""
    from np_optimizer.config.checkpoints import OUTPUT_MODEL, resolve_checkpoint

    device = get_device(exp.project.device_name)
    config = load_experiment_config(exp.run_file, device, model=exp.project.info["model"])
    return resolve_checkpoint(OUTPUT_MODEL, config.run.step_kinds) or "INPUT_MODEL"


def experiments_create(*, steps: str, name: str | None = None, project: str | None = None,
                       cwd: Path | None = None) -> ExperimentRecord:
    """Write `<project>/<name>/run.yaml` for the steps, with the backend's default scheme and every checkpoint profiled."""
    owner = resolve_project(project, cwd or Path.cwd())
    kinds = parse_steps_option(steps)
    name = name or next_experiment_name(owner)
    check_experiment_name(name)
    root = owner.root / name
    if (root / "run.yaml").exists():
        raise UsageError(f"Experiment {name} already exists in project {owner.name}.",
                         hint="Pick another --name, or omit it to get the next experiment_NN.", code="NP-EXP-409")
    write_text(root / "run.yaml", render_run_yaml(kinds, owner.info["backend"]))
    ExperimentStore(Experiment(root)).create_experiment(project=owner.name, device=owner.info["device"])
    return experiment_info(str(root))


def experiments_detail(*, experiment: str | None = None, project: str | None = None, cwd: Path | None = None) -> Path:
    """Write run.detail.yaml with every default spelled out; values already in it are kept (old file backed up)."""
    exp = resolve_experiment(experiment, project, cwd or Path.cwd())
    device = get_device(exp.project.device_name)
    config = load_experiment_config(exp.run_file, device, model=exp.project.info["model"])
    if exp.detail_file.exists():
        shutil.copy2(exp.detail_file, exp.detail_file.with_name("run.detail.yaml.bak"))
    detail = config.detail if exp.detail_file.exists() else spelled_out_detail(config.run)
    write_text(exp.detail_file, render_detail_yaml(config.run, detail))
    return exp.detail_file


def experiment_info(name: str | None = None, *, project: str | None = None, cwd: Path | None = None) -> ExperimentRecord:
    exp = resolve_experiment(name, project, cwd or Path.cwd())
    owner = exp.project
    device = get_device(owner.device_name)
    config, _issues = check_experiment_config(exp.run_file, device, model=owner.info["model"])
    store = ExperimentStore(exp)  # a damaged meta.json or job.json reads from its copy in report.json, with a warning
    meta = store.read_meta()
    jobs = [ExperimentJob(j.name, j.status, j.step_type) for j in store.jobs()]
    return ExperimentRecord(
        name=exp.name, path=str(exp.root), project=owner.name, device=owner.device_name,
        steps=config.run.step_kinds if config else (),
        profile=config.run.profile if config else None,
        status=str(meta.get("status", "created")) if config else "invalid",
        created_at=meta.get("created_at"),
        updated_at=meta.get("updated_at"),
        jobs=tuple(jobs),
    )


def experiments_list(*, project: str | None = None, cwd: Path | None = None) -> list[ExperimentRecord]:
    owner = resolve_project(project, cwd or Path.cwd())
    return [experiment_info(str(e.root)) for e in owner.experiments()]


def _model_graph(exp: Experiment) -> list[Any] | None:
    """The node keys of the project's model as exported (torch loads here only), or None when it does not load:
    np run then says why."""
    from np_optimizer.errors import NpError
    from np_optimizer.graph.program_io import export_model
    from np_optimizer.models.source import ModelSpec, load_model
    from np_optimizer.quantize.layer_formats import program_keys
    from np_optimizer.records import from_dict

    try:
        loaded = load_model(from_dict(ModelSpec, exp.project.info["model"]), exp.project.root)
        program = loaded.exported if loaded.exported is not None else \
            export_model(cast("Any", loaded.module), loaded.example_inputs)
    except NpError:
        return None
    return list(program_keys(program))


def validate(*, experiment: str | None = None, project: str | None = None, config_files: list[Path] | None = None,
             profile_method: str | None = None, cwd: Path | None = None) -> ValidationReport:
    """Every violation of run.yaml and run.detail.yaml, and the execution plan when there are none."""
    exp = resolve_experiment(experiment, project, cwd or Path.cwd())
    device = get_device(exp.project.device_name)
    run_file = config_files[0] if config_files else exp.run_file
    detail_file = config_files[1] if config_files and len(config_files) > 1 else None
    config, issues = check_experiment_config(run_file, device, detail_path=detail_file,
                                             model=exp.project.info["model"])
    if config is not None and any(getattr(step, "layers", ()) for step in config.run.steps):
        graph = _model_graph(exp)  # graph_quantize's `layers:` patterns checked against the model's modules
        if graph is not None:
            config, issues = check_experiment_config(run_file, device, detail_path=detail_file,
                                                     model={**exp.project.info["model"], GRAPH_KEY: graph})
    plan = None
    if config is not None:
        from np_optimizer.evaluate.inputs import project_dataset

        plan = build_plan(config, device, method=profile_method, remote_configured=remote_configured(exp, device.name),
                          evaluation_dataset=project_dataset(exp.project))
    return ValidationReport(experiment=exp.name, is_valid=config is not None, issues=tuple(issues), plan=plan,
                            notes=plan_notes(plan) if plan is not None else ())
