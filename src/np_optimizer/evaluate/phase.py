"""Evaluations of checkpoints: np run's Evaluation phase (np_optimizer.runner) and the post-hoc rounds of np evaluate
build the inputs the same way here and record each result in its job's job.json."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from np_optimizer.compile import compile_dir
from np_optimizer.config.steps import calibration_samples
from np_optimizer.devices import Device
from np_optimizer.errors import ConfigError
from np_optimizer.evaluate.inputs import EvalInputs, labelled_inputs, num_classes, project_dataset, unlabelled_inputs
from np_optimizer.evaluate.session import evaluate_checkpoint, format_metrics
from np_optimizer.records import CheckpointRef, EvaluationResult
from np_optimizer.records.parts import NO_COMPILE, ErrorRecord
from np_optimizer.records.status import CompileStatus, RoundStatus
from np_optimizer.workspace import Project, utc_now
from np_optimizer.workspace.store import ExperimentStore

if TYPE_CHECKING:
    from np_optimizer.config import ExperimentConfig

__all__ = ["build_inputs", "evaluate_refs", "failed_evaluation"]


def build_inputs(*, project: Project, config: ExperimentConfig | None, input_ref: CheckpointRef,
                 dataset: Path | None = None) -> EvalInputs:
    """The labelled dataset (given, else the project's) or the run's evaluation inputs, with INPUT_MODEL's outputs
    on them. ConfigError (exit 3) naming the file when the dataset does not fit the model."""
    import torch

    from np_optimizer.graph.program_io import load_inputs, load_program

    example = load_inputs(input_ref.path.parent / "example_inputs.pt")[0]
    program = load_program(input_ref.path)
    entry = project_dataset(project)
    if dataset is not None:
        inputs = labelled_inputs(dataset, {"name": dataset.name}, example, num_classes(program, example))
    elif entry is not None:
        root = project.root / str(entry.get("path", "data/evaluation"))
        if not root.exists():
            raise ConfigError(f"The project's evaluation dataset {root} is missing.",
                              hint="Attach it again with `np datasets add DIR`.", code="NP-DAT-404")
        inputs = labelled_inputs(root, entry, example, num_classes(program, example))
    else:
        globals_ = config.detail.globals if config else {"evaluation": {"num_samples": 8}, "seed": 0}
        steps = config.detail.steps if config else {}
        skip = calibration_samples(steps)
        calibration = project.info.get("calibration_dataset")
        inputs = unlabelled_inputs(project.root / calibration if calibration else None, example,
                                   int(globals_["evaluation"]["num_samples"]), int(globals_["seed"]), skip)
    module = program.module()
    with torch.no_grad():
        inputs.reference = [module(*batch) for batch in inputs.batches]
    return inputs


def evaluate_refs(refs: list[tuple[CheckpointRef, tuple[str, ...]]], *, store: ExperimentStore, device: Device,
                  inputs: EvalInputs, trigger: str, log: logging.Logger,
                  progress: Callable[[str], None] = lambda _t: None) -> list[EvaluationResult]:
    results = []
    for index, (ref, metrics) in enumerate(refs, 1):
        job = store.read_job(ref.job)
        lowered = job is not None and job.compile.status == CompileStatus.OK
        where = "the .pte" if device.backend_spec.runs_on_host and lowered else "the exported program"
        log.info(f"Evaluating: {ref.name.lower()} on {where} ({inputs.count} samples; {', '.join(metrics)})")
        progress(f"evaluating {ref.name.lower()} ({index}/{len(refs)})")
        folder = compile_dir(store.job_dir(ref.job), device)
        result = evaluate_checkpoint(ref=ref, compile_record=job.compile if job else NO_COMPILE, compile_folder=folder,
                                     device=device, inputs=inputs, metrics=metrics, trigger=trigger, log=log)
        if result.status == RoundStatus.SUCCESS:
            log.info(f"  {format_metrics(result)}")
            log.info(f"  (on {result.evaluated_on})")
        for text in result.warnings:
            log.warning(f"  {ref.name.lower()}: {text}")
        store.add_evaluation(result)
        results.append(result)
    return results


def failed_evaluation(ref: CheckpointRef, device: Device, metrics: tuple[str, ...], trigger: str,
            exc: BaseException) -> EvaluationResult:
    import uuid

    now = utc_now()
    return EvaluationResult(measurement_id=uuid.uuid4().hex[:12], checkpoint=ref.name, job=ref.job,
                            checkpoint_sha256=ref.sha256, device=device.name, backend=device.backend,
                            trigger=trigger, status=RoundStatus.FAILED, started_at=now, ended_at=now, requested=metrics,
                            error=ErrorRecord.of(exc))


