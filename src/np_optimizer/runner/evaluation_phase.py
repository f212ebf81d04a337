"""np run's Evaluation phase: run.yaml's `evaluate:` entries, after the steps, on one set of inputs."""

from __future__ import annotations

from collections.abc import Callable

from np_optimizer.errors import NpError
from np_optimizer.evaluate.phase import build_inputs, evaluate_refs, failed_evaluation
from np_optimizer.logs import get_logger, phase_banner
from np_optimizer.pipeline.context import RunContext
from np_optimizer.records import CheckpointRef, EvaluationResult
from np_optimizer.workspace.store import ExperimentStore

__all__ = ["evaluation_phase"]


def evaluation_phase(run: RunContext, store: ExperimentStore, produced: dict[str, CheckpointRef], *, phase: int,
                     progress: Callable[[str], None]) -> list[EvaluationResult]:
    """np run's Evaluation phase: each `evaluate:` entry whose checkpoint was produced, on one set of inputs."""
    from np_optimizer.config.checkpoints import INPUT_MODEL, resolve_checkpoint

    log = get_logger("Evaluator")
    phase_banner(log, phase, "Evaluation")
    entries = run.config.run.evaluate
    store.start_evaluation([e.checkpoint for e in entries])
    refs: list[tuple[CheckpointRef, tuple[str, ...]]] = []
    for entry in entries:
        concrete = resolve_checkpoint(entry.checkpoint, run.config.run.step_kinds) or entry.checkpoint
        if concrete in produced:
            refs.append((produced[concrete], entry.metrics))
        else:
            log.warning(f"{concrete.lower()} was not produced (its step failed): not evaluated.")
    if not refs or INPUT_MODEL not in produced:
        return []
    try:
        inputs = build_inputs(project=run.project, config=run.config, input_ref=produced[INPUT_MODEL])
    except NpError as exc:  # a dataset that no longer fits: each entry fails with the reason, the run goes on
        log.error(f"{exc.message} Hint: {exc.hint}" if exc.hint else exc.message)
        failed = [failed_evaluation(ref, run.device, metrics, "RUN_INLINE", exc) for ref, metrics in refs]
        for result in failed:
            store.add_evaluation(result)
        return failed
    log.info(f"Inputs: {inputs.source}")
    results = evaluate_refs(refs, store=store, device=run.device, inputs=inputs, trigger="RUN_INLINE", log=log,
                            progress=progress)
    log.info("Evaluation complete. Results saved to report.json")
    return results
