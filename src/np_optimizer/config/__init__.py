"""run.yaml and run.detail.yaml: schemas, validation issues and loading.

Names are imported on first use (PEP 562): a module that needs one submodule (records.py needs the validation
issue only) does not load the YAML loader and every step's schema with it."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from np_optimizer.config.checkpoints import CHECKPOINT_NAMES, STEP_KINDS, STEP_SHORT_NAMES
    from np_optimizer.config.detail_config import DetailConfig
    from np_optimizer.config.issues import ValidationIssue
    from np_optimizer.config.loader import (
        DETAIL_FILE,
        RUN_FILE,
        ExperimentConfig,
        check_experiment_config,
        load_experiment_config,
    )
    from np_optimizer.config.run_config import (
        AdvancedQuantizeConfig,
        GraphOptimizeConfig,
        GraphQuantizeConfig,
        RunConfig,
        StepConfig,
    )

_WHERE = {
    "CHECKPOINT_NAMES": "checkpoints", "STEP_KINDS": "checkpoints", "STEP_SHORT_NAMES": "checkpoints",
    "DetailConfig": "detail_config", "ValidationIssue": "issues",
    "DETAIL_FILE": "loader", "RUN_FILE": "loader", "ExperimentConfig": "loader",
    "check_experiment_config": "loader", "load_experiment_config": "loader",
    "AdvancedQuantizeConfig": "run_config", "GraphOptimizeConfig": "run_config", "GraphQuantizeConfig": "run_config",
    "RunConfig": "run_config", "StepConfig": "run_config",
}

__all__ = [
    "CHECKPOINT_NAMES",
    "STEP_KINDS",
    "STEP_SHORT_NAMES",
    "DETAIL_FILE",
    "RUN_FILE",
    "AdvancedQuantizeConfig",
    "DetailConfig",
    "ExperimentConfig",
    "GraphOptimizeConfig",
    "GraphQuantizeConfig",
    "RunConfig",
    "StepConfig",
    "ValidationIssue",
    "check_experiment_config",
    "load_experiment_config",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'np_optimizer.config' has no attribute '{name}'")
    value = getattr(importlib.import_module(f"np_optimizer.config.{module}"), name)
    globals()[name] = value
    return value
