"""What a pipeline step gets to work with, and what it gives back."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.config import ExperimentConfig
from np_optimizer.devices import Device
from np_optimizer.models.inputs import InputSet
from np_optimizer.records import CheckpointRef
from np_optimizer.workspace import Experiment, Project

if TYPE_CHECKING:
    from torch.export import ExportedProgram

    from np_optimizer.layers.numerics import Taps
    from np_optimizer.models.source import LoadedModel

__all__ = ["CheckpointRef", "RunContext", "StepContext", "StepOutcome"]


@dataclass
class RunContext:
    experiment: Experiment
    project: Project
    device: Device
    config: ExperimentConfig
    calibration_dir: Path | None
    example_inputs: tuple[Any, ...] = ()
    evaluation: InputSet | None = None
    reference_outputs: list[Any] = field(default_factory=list)
    reference_taps: Taps | None = None  # INPUT_MODEL's per-layer outputs on the evaluation inputs
    module_map: dict[str, str | None] = field(default_factory=dict)  # INPUT_MODEL's keys that the steps so far fused
    loaded_model: LoadedModel | None = None
    calibration_digest: str | None = None  # the calibration data's content (step cache keys)
    # loads example inputs, evaluation inputs and INPUT_MODEL's outputs when a step or a fidelity first needs them, so
    # a run whose jobs all come from the step cache never imports torch
    load_reference: Callable[[], None] | None = None

    def need_reference(self) -> None:
        loader, self.load_reference = self.load_reference, None
        if loader is not None:
            loader()

    def calibration(self, num_samples: int) -> InputSet:
        from np_optimizer.models.inputs import calibration_inputs

        return calibration_inputs(self.calibration_dir, self.example_inputs, num_samples,
                                  int(self.config.detail.globals["seed"]))

    def validation(self, limit: int) -> InputSet:
        """The dataset's samples past the calibration and the evaluation ones (models/inputs.validation_inputs)."""
        from np_optimizer.config.steps import calibration_samples
        from np_optimizer.models.inputs import validation_inputs

        # the evaluation inputs are the example input and the dataset's files after the calibration ones
        skip = calibration_samples(self.config.detail.steps) + int(self.config.detail.globals["evaluation"]
                                                                   ["num_samples"]) - 1
        return validation_inputs(self.calibration_dir, self.example_inputs, skip, limit)


@dataclass
class StepContext:
    run: RunContext
    options: dict[str, Any]
    input: CheckpointRef
    program: ExportedProgram
    artifacts_dir: Path
    log: logging.Logger
    progress: Callable[[str], None] = lambda _text: None


@dataclass
class StepOutcome:
    program: ExportedProgram
    changes: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)
    # `program`'s run on the run's evaluation inputs, when the step made one (GO's last check): the job's fidelity
    # takes it instead of running the program again
    taps: Taps | None = None
