"""Pipeline steps: one function per step kind, registered with @register_step("kind") (base.py) by its module here.

Each step's configuration side (names, config type, parser, options) is its spec in np_optimizer/config/steps/, a
floor below: validation reads the spec without the pipeline; the runner finds the function by the step's kind."""

from __future__ import annotations

from typing import Any

from np_optimizer.pipeline.steps.base import STEP_FUNCTIONS, StepFunction, register_step

__all__ = ["register_step", "step_function", "StepFunction"]


def step_function(config: Any) -> StepFunction:
    """The function registered for this step config's kind."""
    return STEP_FUNCTIONS.get(config.kind)
