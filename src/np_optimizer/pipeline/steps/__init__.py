"""Pipeline steps: one function per step config type, registered with @register_step (torchao-style dispatch).

Each step's configuration side (names, config type, parser, options) is its spec in np_optimizer/config/steps/."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from np_optimizer.config.steps import step_spec
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
    """The function registered for this config's type, from the module its step spec names (importing it
    registers the function)."""
    importlib.import_module(step_spec(config.kind).function_module)
    return _STEPS[type(config)]
