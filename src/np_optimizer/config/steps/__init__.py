"""Pipeline steps as data: one registered `StepSpec` per step kind, bundling everything np knows of a step.

A spec holds the step's run.yaml key, its --steps abbreviation, the checkpoint it makes, its log component, its
config dataclass and parser, its run.detail.yaml options and scheme-dependent defaults, the run.yaml lines
`np experiments create` writes, and the function that runs it. Each step is one module of
np_optimizer/pipeline/steps/ (a floor above: running needs the pipeline), found by package discovery; validation,
the plan, the writers, the runner and the docs read the specs through this registry.
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
