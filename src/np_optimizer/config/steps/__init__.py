"""Pipeline steps as data: one registered `StepSpec` per step kind, bundling everything the configuration side knows.

    advanced_quantize.py   AQ: eager-level quantization of Linear layers (LLMs), before export
    graph_optimize.py      GO: output-preserving graph passes
    graph_quantize.py      GQ: PT2E quantization with the backend's quantizer

A spec holds the step's run.yaml key, its --steps abbreviation, the checkpoint it makes, its log component, its
config dataclass and parser, its run.detail.yaml options and scheme-dependent defaults, the run.yaml lines
`np experiments create` writes, and the module whose `@register_step(Config)` function runs it (imported only when the
step runs: it needs torch). Validation, the plan, the writers, the runner and the docs read these specs; adding a step
is one module here plus its function module in pipeline/steps/. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from np_optimizer.config.options import Section

if TYPE_CHECKING:
    from np_optimizer.config.issues import ValidationIssue
    from np_optimizer.devices import Device

__all__ = ["StepConfig", "StepSpec", "register_step_spec", "step_specs", "step_spec"]

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
    run_yaml: Callable[[str], list[str]]  # backend name -> the lines `np experiments create` writes
    function_module: str  # registers the function that runs it, with @register_step(config_type)
    scheme_defaults: Callable[[Any], dict[str, Any]] = lambda _config: {}  # option defaults that depend on the config


_SPECS: dict[str, StepSpec] = {}


def register_step_spec(spec: StepSpec) -> StepSpec:
    _SPECS[spec.kind] = spec
    return spec


def step_specs() -> tuple[StepSpec, ...]:
    """Every registered step, in pipeline order."""
    from np_optimizer.config.steps import advanced_quantize, graph_optimize, graph_quantize  # noqa: F401

    return tuple(sorted(_SPECS.values(), key=lambda s: s.order))


def step_spec(kind: str) -> StepSpec:
    """The spec of step `kind` (a KeyError for a kind that is not registered: validation reports those first)."""
    return {s.kind: s for s in step_specs()}[kind]
