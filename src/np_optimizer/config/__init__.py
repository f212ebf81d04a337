"""run.yaml and run.detail.yaml: schemas, validation issues and loading."""

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
