"""np run: validate, extract the input model, run each step, then profile the listed checkpoints.

Phases and their log lines follow the spec's format. A step that fails stops the pipeline (later steps have no
input) but the checkpoints already made are still profiled; the run then ends as failed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from np_optimizer.config import ExperimentConfig, load_experiment_config
from np_optimizer.config.checkpoints import INPUT_MODEL, checkpoint_of_step
from np_optimizer.config.steps import calibration_samples, step_spec
from np_optimizer.devices import Device, get_device
from np_optimizer.errors import NpError
from np_optimizer.logs import get_logger, phase_banner
from np_optimizer.pipeline.context import RunContext, StepContext, StepOutcome
from np_optimizer.pipeline.jobs import JobRunner, config_hash
from np_optimizer.pipeline.step_cache import StepCache, folder_digest, step_key
from np_optimizer.plan import INPUT_JOB, job_name
from np_optimizer.records import CheckpointRef, EvaluationResult, ProfileResult, RunSummary
from np_optimizer.records.commands import RunJob
from np_optimizer.records.compiled import ProducedCheckpoint
from np_optimizer.records.parts import ErrorRecord
from np_optimizer.records.status import ExperimentStatus, RoundStatus, RunStatus
from np_optimizer.workspace import Experiment
from np_optimizer.workspace.store import ExperimentStore

__all__ = ["run_experiment"]



def _prepare(experiment: Experiment, device: Device, config: ExperimentConfig) -> RunContext:
    project = experiment.project
    calibration = project.info.get("calibration_dataset")
    folder = project.root / calibration if calibration else None
    return RunContext(experiment=experiment, project=project, device=device, config=config, calibration_dir=folder,
                      calibration_digest=folder_digest(folder) if folder is not None and folder.exists() else None)


def _load_reference(run: RunContext, jobs: JobRunner, ref: CheckpointRef) -> None:
    """Example inputs, evaluation inputs and INPUT_MODEL's outputs on them: what every fidelity is measured against.
    The outputs come from the reference cache (pipeline/reference_cache.py) when an earlier run of the same INPUT_MODEL
    on the same inputs stored them (not read with --force), else from one pass of INPUT_MODEL, stored there."""
    from np_optimizer.graph.program_io import load_inputs
    from np_optimizer.layers.numerics import tap
    from np_optimizer.models.inputs import evaluation_inputs
    from np_optimizer.pipeline.reference_cache import ReferenceCache, reference_key

    if not run.example_inputs:
        run.example_inputs = load_inputs(ref.path.parent / "example_inputs.pt")[0]
    globals_ = run.config.detail.globals
    num_calibration = calibration_samples(run.config.detail.steps)
    run.evaluation = evaluation_inputs(run.calibration_dir, run.example_inputs,
                                       int(globals_["evaluation"]["num_samples"]), int(globals_["seed"]),
                                       skip=num_calibration)
    cache = ReferenceCache(jobs.steps.root) if jobs.steps is not None else None
    key = reference_key(ref.sha256, run.evaluation.samples) if cache is not None else ""
    taps = cache.get(key) if cache is not None and not jobs.force else None
    if taps is None:
        # one pass per input keeps INPUT_MODEL's outputs and every layer's output (the per-layer SNR's reference)
        taps = tap(jobs.program_of(ref), run.evaluation.samples)
        if cache is not None:
            cache.put(key, taps)
    run.reference_taps = taps
    run.reference_outputs = taps.outputs


def run_experiment(experiment: Experiment, *, retry: bool = False, profile_method: str | None = None,
                   force: bool = False, progress: Callable[[str], None] = lambda _t: None,
                   loaded: tuple[Device, ExperimentConfig] | None = None) -> RunSummary:
    """Run everything run.yaml asks for; the caller sets up logging (see np_optimizer.logs.run_logging).
    `loaded`: the project's device and the validated config when the caller has them already (api.run), so they are
    looked up and validated once per np run.

    Long because: it is the one place the phases are sequenced (validate, extract, steps, evaluation, profiling)
    with the failure rules between them.
    """
    started = time.perf_counter()
    project = experiment.project
    if loaded is None:  # ValidationFailed here means nothing runs.
        device = get_device(project.device_name)
        config = load_experiment_config(experiment.run_file, device, model=project.info["model"])
    else:
        device, config = loaded
    from np_optimizer.plan import build_plan
    from np_optimizer.workspace.remote import remote_configured

    plan = build_plan(config, device, method=profile_method, remote_configured=remote_configured(experiment, device.name))
    if device.local and any(p.result_kind == "measured" for p in plan.profile or ()):
        from np_optimizer.profiler.measure.local import prewarm_local_measuring

        prewarm_local_measuring()  # its imports overlap the steps (about 1 s less before the first measurement)
    store = ExperimentStore(experiment)
    run = _prepare(experiment, device, config)
    log = get_logger("Pipeline")
    _set_aside_stale_jobs(experiment, {INPUT_JOB, *(s.job for s in plan.steps)}, log)
    store.start_run(project=project.name, device=device.name, runtime=device.runtime, backend=device.backend)
    try:  # whatever ends the run (a library's SystemExit, Ctrl+C), meta.json never stays "running"
        jobs = JobRunner(run, store, retry=retry, log=log, progress=progress, lowered=plan.lowered,
                         steps=StepCache(), force=force or not config.detail.globals.get("reuse_steps", True))
        rounds: list[ProfileResult] = []
        produced: dict[str, ProducedCheckpoint] = {}
        error: ErrorRecord | None = None
        phase = 1
        try:
            extractor = get_logger("GraphExtractor")
            phase_banner(extractor, phase, "Graph extraction")
            extractor.info(f"Target: {device.name} / {device.runtime} / {device.backend}")
            from np_optimizer.pipeline.extract import extract_input_model, input_model_hash_payload

            input_hash = config_hash(input_model_hash_payload(run))
            reference = step_key(input_hash, {})  # INPUT_MODEL's key: what every later job is measured against
            made = jobs.run_job(name=INPUT_JOB, step_type="input_model", index=0, checkpoint=INPUT_MODEL,
                                input_ref=None, parameters={}, hash_=input_hash, reuse_key=reference,
                                produce=lambda artifacts: extract_input_model(run, artifacts))
            produced[INPUT_MODEL] = made
            ref = input_ref = made.checkpoint
            extractor.info(f"INPUT_MODEL: {ref.path.stat().st_size:,} B .pt2, sha256 {ref.sha256[:12]}")
            run.load_reference = lambda: _load_reference(run, jobs, input_ref)
            for index, step in enumerate(config.run.steps, 1):
                phase += 1
                step_log = get_logger(step_spec(step.kind).logger)
                phase_banner(step_log, phase, step.kind)
                made = _run_step(run, jobs, step, index, ref, step_log, progress, reference)
                produced[checkpoint_of_step(step.kind)] = made
                ref = made.checkpoint
        except Exception as exc:  # a failed step still lets the finished checkpoints be profiled and the run end cleanly
            error = ErrorRecord.of(exc)  # not an NpError: a bug, whose traceback goes to the log (console with --debug)
            log.error(error.message + (f" Hint: {error.hint}" if error.hint else ""),
                      exc_info=None if isinstance(exc, NpError) else exc)
        evaluations: list[EvaluationResult] = []
        if config.run.evaluate:  # the accuracy half, before profiling (which may wait for a device)
            phase += 1
            from np_optimizer.runner.evaluation_phase import evaluation_phase

            evaluations = evaluation_phase(run, store, {k: p.checkpoint for k, p in produced.items()}, phase=phase,
                                           progress=progress)
        if config.run.profile is not None and plan.profile is not None:
            phase += 1
            from np_optimizer.runner.profiling_phase import profile_run

            rounds = profile_run(run, store, plan, produced, phase=phase, progress=progress,
                                 requested_method=profile_method, force=force)
        else:
            get_logger("Profiler").info("No profile section in run.yaml: profiling skipped.")
            store.disable_profiling()
        failed_profiles = [p for p in rounds if p.status != RoundStatus.SUCCESS]
        failed_evaluations = [e for e in evaluations if e.status != RoundStatus.SUCCESS]
        status = RunStatus.FAILED if error is not None or failed_profiles or failed_evaluations else RunStatus.SUCCESS
        summary = RunSummary(experiment=experiment.name, status=status, duration_s=round(time.perf_counter() - started, 2),
                             jobs=tuple(RunJob(j.name, j.status, j.duration_s) for j in store.jobs()), profile=tuple(rounds), error=error,
                             evaluation=tuple(evaluations))
        store.end_run(status, duration_s=summary.duration_s)
        return summary
    except BaseException as exc:
        ended = ExperimentStatus.INTERRUPTED if isinstance(exc, KeyboardInterrupt) else ExperimentStatus.FAILED
        store.end_run(ended)
        raise


def _set_aside_stale_jobs(experiment: Experiment, planned: set[str], log: logging.Logger) -> None:
    """Job folders of steps no longer in run.yaml move to .stale/ (kept, not deleted) and leave the report."""
    stale = [p for p in sorted(experiment.root.glob("[0-9][0-9]_*")) if p.is_dir() and p.name not in planned]
    if stale:
        stamp = time.strftime("%Y%m%dT%H%M%S")
        for folder in stale:
            target = experiment.root / ".stale" / f"{folder.name}-{stamp}"
            target.parent.mkdir(exist_ok=True)
            folder.rename(target)
            log.info(f"{folder.name} is not in run.yaml's steps any more: moved to {target.relative_to(experiment.root)}")


def _run_step(run: RunContext, jobs: JobRunner, step: Any, index: int, input_ref: CheckpointRef,
              log: logging.Logger, progress: Callable[[str], None], reference: str) -> ProducedCheckpoint:
    from dataclasses import asdict

    name = job_name(index, step.kind)
    checkpoint = checkpoint_of_step(step.kind)
    options = run.config.detail.step_options(step.kind)
    parameters = {k: v for k, v in asdict(step).items() if k != "kind"}
    payload = {"step": step.kind, "parameters": parameters, "options": options, "input": input_ref.sha256,
               "globals": {k: v for k, v in run.config.detail.globals.items() if k != "reuse_steps"},
               "device": [run.device.name, run.device.backend],
               "calibration": run.calibration_digest}
    amp = options.get("amp")
    if isinstance(amp, dict) and amp.get("target_top1_drop") is not None:  # GREEDY scores TOP1 on the project's
        payload["evaluation_dataset"] = _evaluation_dataset(run)             # labelled dataset: it decides the output
    # what the job's fidelity is measured against besides the payload: INPUT_MODEL (its key), the evaluation inputs
    # (a dataset's: those after the calibration samples), the layers the steps before it fused, and whether its .pte
    # is lowered (and run)
    skip = calibration_samples(run.config.detail.steps) if run.calibration_dir is not None else None
    context = {"reference": reference, "skip": skip,
               "module_map": run.module_map, "lowered": jobs.lowered is None or checkpoint in jobs.lowered}

    def produce(artifacts: Path) -> Any:
        run.need_reference()
        program = jobs.program_of(input_ref)
        ctx = StepContext(run=run, options=options, input=input_ref, program=program, artifacts_dir=artifacts,
                          log=log, progress=lambda text: progress(f"{name}: {text}"))
        from np_optimizer.layers.lineage import LayerGraph, module_map
        from np_optimizer.layers.numerics import layer_graph

        try:  # before the step runs: a step may edit its input in place
            before: LayerGraph | None = layer_graph(program.module())
        except Exception:  # a graph np cannot key: no map, never a failed step
            before = None
        outcome: StepOutcome = step_spec(step.kind).run(ctx, step)
        # which of the input's layer keys the step fused or removed (a BN folded into its conv): old -> new or None
        try:
            outcome.changes["module_map"] = module_map(before, layer_graph(outcome.program.module())) \
                if before is not None else {}
        except Exception as exc:
            outcome.changes["module_map"] = {}
            outcome.changes["module_map_error"] = f"{type(exc).__name__}: {exc}"
        return outcome

    hash_ = config_hash(payload)
    made = jobs.run_job(name=name, step_type=step.kind, index=index, checkpoint=checkpoint, input_ref=input_ref,
                        parameters=parameters, hash_=hash_, produce=produce, reuse_key=step_key(hash_, context))
    record = jobs.store.read_job(name)
    if record is not None and record.fidelity.program is not None:
        fid = record.fidelity.program
        snr = "identical" if fid.snr_identical else f"{fid.snr_db} dB"
        log.info(f"{checkpoint}: SNR vs INPUT_MODEL {snr}, max abs error {fid.max_abs_error:.3g}")
    return made


def _evaluation_dataset(run: RunContext) -> dict[str, Any] | None:
    """The project's labelled evaluation dataset (project.json's entry) and its content's digest, for a step whose
    output depends on it."""
    entry = run.project.info.get("evaluation_dataset")
    if not isinstance(entry, dict):
        return None
    folder = run.project.root / str(entry.get("path", "data/evaluation"))
    return {**entry, "digest": folder_digest(folder) if folder.exists() else None}
