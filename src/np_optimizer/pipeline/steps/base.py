"""The registry of step functions: one function per step kind, registered with @register_step("kind") by its module
in this package (found by package discovery; torchao-style dispatch)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from np_optimizer.pipeline.context import StepContext, StepOutcome
from np_optimizer.registry import Registry

__all__ = ["StepFunction", "STEP_FUNCTIONS", "register_step"]

StepFunction = Callable[[StepContext, Any], StepOutcome]
# Each step's module is named after its kind (graph_quantize.py): a run imports the modules of its own steps only.
STEP_FUNCTIONS: Registry[StepFunction] = Registry("step function", package="np_optimizer.pipeline.steps",
                                                  module_of=lambda kind: kind)


def register_step(kind: str) -> Callable[[StepFunction], StepFunction]:
    """Register the function that runs step `kind` (its spec's run.yaml key, np_optimizer.config.steps)."""

    def register(function: StepFunction) -> StepFunction:
        return STEP_FUNCTIONS.register(kind, function)

    return register
