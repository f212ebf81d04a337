"""Step graph_optimize (GO): output-preserving graph passes; it takes no parameters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from np_optimizer.config.issues import L_SCHEMA, ValidationIssue
from np_optimizer.config.options import Opt, Section
from np_optimizer.config.parsing import issue
from np_optimizer.config.steps.base import StepSpec, register_step_spec

if TYPE_CHECKING:
    from np_optimizer.devices import Device

__all__ = ["GraphOptimizeConfig", "SPEC"]


@dataclass(frozen=True)
class GraphOptimizeConfig:
    """Output-preserving graph passes; it takes no parameters."""

    kind: str = field(default="graph_optimize", init=False)


OPTIONS: Section = {
    "tolerance": Opt(1e-4, "number", "Largest max-abs output change a pass may cause, relative to the largest "
                     "output magnitude; a pass beyond it is dropped.", minimum=0, exclusive_minimum=True),
}


def parse(raw: Any, loc: str, device: Device | None, issues: list[ValidationIssue],
          model: dict[str, Any] | None = None) -> GraphOptimizeConfig:
    if raw not in (None, [], {}):
        issues.append(issue("R015", L_SCHEMA, loc, "graph_optimize takes no parameters.",
                            "Write `- graph_optimize: null`; pass tuning lives in run.detail.yaml."))
    return GraphOptimizeConfig()


SPEC = register_step_spec(StepSpec(
    kind="graph_optimize", short="go", checkpoint="GRAPH_OPTIMIZE", abbreviation="GO", logger="GraphOptimizer",
    order=20, config_type=GraphOptimizeConfig, parse=parse, options=OPTIONS,
    run_yaml=lambda _backend: ["- graph_optimize: null"],
))
