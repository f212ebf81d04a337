"""API: np evaluate (post-hoc evaluations of finished checkpoints) and np datasets add / info."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from np_optimizer.config.checkpoints import INPUT_MODEL
from np_optimizer.errors import NotFoundError, NpError, UsageError
from np_optimizer.records import EvaluationResult, EvaluationRound
from np_optimizer.workspace import resolve_experiment, resolve_project

__all__ = ["evaluate", "datasets_add", "dataset_info", "parse_metrics"]


def parse_metrics(items: list[str] | None) -> tuple[str, ...] | None:
    """`--metric TOP1_ACCURACY` (repeatable or comma-separated; case-insensitive; `top1` for short)."""
    from np_optimizer.evaluate.metrics import ALL_METRICS

    if not items:
        return None
    aliases = {"TOP1": "TOP1_ACCURACY", "TOP5": "TOP5_ACCURACY", "ACCURACY": "TOP1_ACCURACY"}
    out: list[str] = []
    for raw in [p.strip() for item in items for p in item.split(",") if p.strip()]:
        name = aliases.get(raw.upper(), raw.upper())
        if name not in ALL_METRICS:
            raise UsageError(f"Unknown metric '{raw}'.", hint=f"Metrics: {', '.join(ALL_METRICS)}.", code="NP-USE-400")
        if name not in out:
            out.append(name)
    return tuple(out)


def datasets_add(source: str, *, project: str | None = None, mean: list[float] | None = None,
                 std: list[float] | None = None, cwd: Path | None = None) -> dict[str, Any]:
    """Attach (or replace) the project's labelled evaluation dataset; returns its project.json entry."""
    from np_optimizer.evaluate.attach import attach_dataset

    owner = resolve_project(project, cwd or Path.cwd())
    return {"project": owner.name, **attach_dataset(owner, source, mean=mean, std=std)}


def dataset_info(*, project: str | None = None, cwd: Path | None = None) -> dict[str, Any]:
    from np_optimizer.evaluate.inputs import project_dataset

    owner = resolve_project(project, cwd or Path.cwd())
    return {"project": owner.name, "evaluation_dataset": project_dataset(owner),
            "calibration_dataset": owner.info.get("calibration_dataset")}


def evaluate(ids: list[str] | None = None, *, experiment: str | None = None, project: str | None = None,
             dataset: str | None = None, metrics: tuple[str, ...] | None = None, cwd: Path | None = None,
             progress: Callable[[str], None] = lambda _t: None,
             console_write: Callable[[str], None] | None = None) -> EvaluationRound:
    """Evaluate finished checkpoints post hoc (default: all of them) and record each round in job.json."""
    from np_optimizer.logs import quiet_native_output, run_logging
    from np_optimizer.workspace.run_lock import run_lock

    exp = resolve_experiment(experiment, project, cwd or Path.cwd())
    data = Path(dataset).expanduser() if dataset else None
    if data is not None and not data.exists():
        raise NotFoundError(f"Evaluation dataset {data} does not exist.",
                            hint="Pass a folder of class subfolders, or a .npz/.pt file.", code="NP-DAT-404")
    with run_lock(exp, "np evaluate", exclusive=False), run_logging(exp.log_file, console_write), \
            quiet_native_output(exp.log_file):
        return _evaluate(exp, list(ids or []), data, metrics, progress)


def _evaluate(exp: Any, ids: list[str], data: Path | None, metrics: tuple[str, ...] | None,
              progress: Callable[[str], None]) -> EvaluationRound:
    from np_optimizer.api.experiments import output_checkpoint
    from np_optimizer.api.profile import _checkpoint, _targets
    from np_optimizer.config import ExperimentConfig, load_experiment_config
    from np_optimizer.devices import get_device
    from np_optimizer.evaluate.inputs import project_dataset
    from np_optimizer.evaluate.phase import build_inputs, evaluate_refs, failed_evaluation
    from np_optimizer.evaluate.session import DEFAULT_LABELLED, DEFAULT_UNLABELLED
    from np_optimizer.logs import get_logger
    from np_optimizer.workspace.store import ExperimentStore

    store = ExperimentStore(exp)
    store.recover()  # a writing command: damaged result files are restored from their copies before it reads them
    device = get_device(exp.project.device_name)
    log = get_logger("Evaluator")
    jobs = _targets(store, ids, lambda: output_checkpoint(exp))
    input_job = next((j for j in store.jobs() if j.checkpoint == INPUT_MODEL and j.output), None)
    if input_job is None:
        raise NotFoundError("INPUT_MODEL has not finished, so there is no reference to evaluate against.",
                            hint="Run the experiment first with `np run`.", code="NP-CPF-404")
    config: ExperimentConfig | None = None
    try:
        config = load_experiment_config(exp.run_file, device, model=exp.project.info["model"])
    except NpError as exc:  # an edited run.yaml must not block evaluating finished checkpoints
        log.warning(f"run.yaml could not be read ({exc.message}); default evaluation inputs apply.")
    labelled = data is not None or project_dataset(exp.project) is not None
    chosen = metrics or (DEFAULT_LABELLED if labelled else DEFAULT_UNLABELLED)
    log.info(f"Post-hoc evaluation on {device.name} / {device.backend}: {', '.join(chosen)}")
    inputs = build_inputs(project=exp.project, config=config, input_ref=_checkpoint(store, input_job), dataset=data)
    log.info(f"Inputs: {inputs.source}")
    results: list[EvaluationResult] = []
    refs = []
    for job in jobs:
        try:
            refs.append((_checkpoint(store, job), chosen))
        except NotFoundError as exc:
            from np_optimizer.records import CheckpointRef

            ref = CheckpointRef(job.checkpoint, job.name, store.job_dir(job.name),
                                job.output.sha256 if job.output else "")
            failed = failed_evaluation(ref, device, chosen, "POSTHOC", exc)
            log.error(f"{job.checkpoint.lower()}: {exc.message}")
            store.add_evaluation(failed)
            results.append(failed)
    results += evaluate_refs(refs, store=store, device=device, inputs=inputs, trigger="POSTHOC", log=log,
                             progress=progress)
    name = inputs.dataset["name"] if inputs.dataset else None
    return EvaluationRound(exp.name, name, tuple(results))
