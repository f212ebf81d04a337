"""The StepSpec type and the registry of steps.

The steps themselves live two floors up, in np_optimizer/pipeline/steps/ (one module per step: its config, parser,
options and the function that runs it), because running a step needs the pipeline. Configuration reads the specs
through this registry without naming that package: the top package (np_optimizer/__init__.py) plugs the step package
into it, the way MLIA's core reads registries its targets fill."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from np_optimizer.config.options import Section
from np_optimizer.registry import Registry

if TYPE_CHECKING:
    from np_optimizer.config.issues import ValidationIssue
    from np_optimizer.devices import Device

__all__ = ["StepConfig", "StepSpec", "STEP_SPECS", "register_step_spec"]

# (raw parameters, YAML location, the project's device or None, issues to append to, project model entry or None)
Parser = Callable[[Any, str, "Device | None", "list[ValidationIssue]", "dict[str, Any] | None"], Any]


class StepConfig(Protocol):
    """What every step's config is: a frozen dataclass with the run.yaml key of its step."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def kind(self) -> str: ...


@dataclass(frozen=True)
class StepSpec:
    kind: str  # the run.yaml key: graph_quantize
    short: str  # the --steps abbreviation: gq
    checkpoint: str  # the checkpoint it makes: GRAPH_QUANTIZE
    abbreviation: str  # the label in tables: GQ
    logger: str  # the log component of its phase: GraphQuantizer
    order: int  # pipeline position; a step may only follow steps of lower order
    config_type: type
    parse: Parser
    options: Section  # run.detail.yaml `<kind>[0]`
    run: Callable[[Any, Any], Any]  # (pipeline StepContext, config) -> StepOutcome: the function that runs it
    run_yaml: Callable[[str], list[str]]  # backend name -> the lines `np experiments create` writes
    scheme_defaults: Callable[[Any], dict[str, Any]] = lambda _config: {}  # option defaults that depend on the config
    # run.detail.yaml section -> how many samples of the calibration data the step uses (the evaluation skips them)
    calibration_samples: Callable[[dict[str, Any]], int] = lambda _section: 0


STEP_SPECS: Registry[StepSpec] = Registry("step")  # its package is plugged in by np_optimizer/__init__.py


def register_step_spec(spec: StepSpec) -> StepSpec:
    return STEP_SPECS.register(spec.kind, spec)
