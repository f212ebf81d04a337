"""run.yaml and run.detail.yaml: schemas, validation issues and loading.

Names are imported on first use (PEP 562): a module that needs one submodule (records.py needs the validation
issue only) does not load the YAML loader and every step's schema with it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from np_optimizer.lazy import lazy_exports

if TYPE_CHECKING:
    from np_optimizer.config.checkpoints import checkpoint_names, step_kinds, step_short_names
    from np_optimizer.config.detail_config import DetailConfig
    from np_optimizer.config.issues import ValidationIssue
    from np_optimizer.config.loader import (
        DETAIL_FILE,
        RUN_FILE,
        ExperimentConfig,
        check_experiment_config,
        load_experiment_config,
    )
    from np_optimizer.config.run_config import RunConfig, StepConfig

_WHERE = {
    "checkpoint_names": "checkpoints", "step_kinds": "checkpoints", "step_short_names": "checkpoints",
    "DetailConfig": "detail_config", "ValidationIssue": "issues",
    "DETAIL_FILE": "loader", "RUN_FILE": "loader", "ExperimentConfig": "loader",
    "check_experiment_config": "loader", "load_experiment_config": "loader",
    "RunConfig": "run_config", "StepConfig": "run_config",
}

__all__ = [
    "checkpoint_names",
    "step_kinds",
    "step_short_names",
    "DETAIL_FILE",
    "RUN_FILE",
    "DetailConfig",
    "ExperimentConfig",
    "RunConfig",
    "StepConfig",
    "ValidationIssue",
    "check_experiment_config",
    "load_experiment_config",
]


__getattr__ = lazy_exports(__name__, _WHERE)
