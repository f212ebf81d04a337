"""Pipeline steps: one function per step config type, registered with @register_step (torchao-style dispatch)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from np_optimizer.pipeline.context import StepContext, StepOutcome

__all__ = ["register_step", "step_function"]

StepFunction = Callable[[StepContext, Any], StepOutcome]
_STEPS: dict[type, StepFunction] = {}


def register_step(config_type: type) -> Callable[[StepFunction], StepFunction]:
    def register(function: StepFunction) -> StepFunction:
        _STEPS[config_type] = function
        return function

    return register


def step_function(config: Any) -> StepFunction:
    """The function registered for this config's type (importing the step modules registers them)."""
    from np_optimizer.pipeline.steps import advanced_quantize, graph_optimize, graph_quantize  # noqa: F401

    try:
        return _STEPS[type(config)]
    except KeyError:
        known = ", ".join(t.__name__ for t in _STEPS)
        raise LookupError(f"No step registered for {type(config).__name__} (registered: {known})") from None
