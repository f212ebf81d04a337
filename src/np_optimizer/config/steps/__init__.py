"""Pipeline steps as data: one registered `StepSpec` per step kind, bundling everything the configuration side knows.

    advanced_quantize.py   AQ: eager-level quantization of Linear layers (LLMs), before export
    graph_optimize.py      GO: output-preserving graph passes
    graph_quantize.py      GQ: PT2E quantization with the backend's quantizer

A spec holds the step's run.yaml key, its --steps abbreviation, the checkpoint it makes, its log component, its
config dataclass and parser, its run.detail.yaml options and scheme-dependent defaults, the run.yaml lines
`np experiments create` writes. The function that runs it is registered under the same kind in
np_optimizer/pipeline/steps/ (a floor above: it needs torch). Validation, the plan, the writers, the runner and the
docs read these specs; adding a step is one module here (found by package discovery) plus its function module in
pipeline/steps/. Nothing here imports torch.
"""

from __future__ import annotations

from typing import Any

from np_optimizer.config.steps.base import STEP_SPECS, StepConfig, StepSpec, register_step_spec

__all__ = ["StepConfig", "StepSpec", "register_step_spec", "step_specs", "step_spec", "calibration_samples"]


def step_specs() -> tuple[StepSpec, ...]:
    """Every registered step, in pipeline order."""
    return tuple(sorted(STEP_SPECS.entries(), key=lambda s: s.order))


def calibration_samples(detail_steps: dict[str, Any]) -> int:
    """How many calibration samples the steps of run.detail.yaml use (the evaluation inputs come after them)."""
    return max((s.calibration_samples(detail_steps.get(s.kind) or {}) for s in step_specs()), default=0)


def step_spec(kind: str) -> StepSpec:
    """The spec of step `kind` (a KeyError for a kind that is not registered: validation reports those first)."""
    spec = STEP_SPECS.find(kind)
    if spec is None:
        raise KeyError(kind)
    return spec
