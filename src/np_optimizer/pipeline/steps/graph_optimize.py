"""Step graph_optimize (GO): output-preserving graph passes, each checked against the step's input; a pass that
changes outputs beyond the tolerance is dropped with a warning. The generic passes (graph/passes.py) run on every
device; the target rewrites (graph/rewrites/) are given the run's device and change only what its backend refuses.
It takes no run.yaml parameters."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from np_optimizer.config.checkpoints import INPUT_MODEL
from np_optimizer.config.issues import L_SCHEMA, ValidationIssue
from np_optimizer.config.options import Opt, Section
from np_optimizer.config.parsing import issue
from np_optimizer.config.steps.base import StepSpec, register_step_spec
from np_optimizer.pipeline.context import StepContext, StepOutcome

if TYPE_CHECKING:
    from np_optimizer.devices import Device
    from np_optimizer.layers.numerics import Taps

__all__ = ["GraphOptimizeConfig", "SPEC", "graph_optimize"]


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


def _worst_error(reference: list[Any], outputs: list[Any]) -> tuple[float, float]:
    """(max abs error, largest reference magnitude) over every output tensor of every sample."""
    from np_optimizer.fidelity import flat_tensors

    worst, scale = 0.0, 0.0
    for ref, out in zip(reference, outputs):
        for r, o in zip(flat_tensors(ref), flat_tensors(out)):
            if r.shape != o.shape:
                return float("inf"), 1.0
            error = float((r.double() - o.double()).abs().max()) if r.numel() else 0.0
            if not math.isfinite(error):  # NaN or inf: the pass broke the outputs
                return float("inf"), 1.0
            worst = max(worst, error)
            scale = max(scale, float(r.abs().max()) if r.numel() else 0.0)
    return worst, max(scale, 1e-12)


_MAX_ROUNDS = 3


def graph_optimize(ctx: StepContext, _config: GraphOptimizeConfig) -> StepOutcome:
    import torch

    from np_optimizer.graph.stats import node_count, op_histogram

    tolerance = float(ctx.options["tolerance"])
    inputs, verified_on = _verification_inputs(ctx)
    program = ctx.program
    run = ctx.run
    # The step's input is INPUT_MODEL (the usual case): its outputs on the evaluation inputs are already known.
    same_as_reference = (run.evaluation is not None and inputs is run.evaluation.samples
                         and ctx.input.name == INPUT_MODEL and len(run.reference_outputs) == len(inputs))
    if same_as_reference:
        reference = run.reference_outputs
    else:
        module = program.module()
        with torch.no_grad():
            reference = [module(*x) for x in inputs]
    current = reference  # the outputs of `program` on `inputs`
    before = {"nodes": node_count(program), "ops": op_histogram(program)}
    state = _Passes(ctx, inputs, reference, tolerance)
    for round_ in range(1, _MAX_ROUNDS + 1):  # a pass can expose work for an earlier one: repeat until stable
        changed, program, current = state.round(round_, program, current)
        if not changed:
            break
    after = {"nodes": node_count(program), "ops": op_histogram(program)}
    changes = {"passes": state.applied, "before": before, "after": after, "tolerance": tolerance,
               "verified_on": verified_on}
    # the last check ran the result on the evaluation inputs, layer by layer: the job's fidelity takes that run
    last = state.taps
    taps = last[1] if last is not None and last[0] is program and run.evaluation is not None \
        and inputs is run.evaluation.samples else None
    return StepOutcome(program=program, changes=changes, warnings=state.warnings, taps=taps)


class _Passes:
    """One round runs every pass in turn and checks the outputs once, on the round's result; only when that check
    fails are the round's passes checked one by one, so that just the pass that broke the outputs is dropped."""

    def __init__(self, ctx: StepContext, inputs: list[Any], reference: list[Any], tolerance: float) -> None:
        self.ctx, self.inputs, self.reference, self.tolerance = ctx, inputs, reference, tolerance
        self.applied: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.dropped: set[str] = set()
        self.taps: tuple[Any, Taps] | None = None  # the last program checked and its run, layer by layer

    def _outputs(self, program: Any) -> list[Any]:
        """The program's outputs on the inputs, from one run that keeps each layer's output too (layers/numerics.py):
        when the program is the step's result, the job's per-layer SNR needs no second run."""
        from np_optimizer.layers.numerics import tap

        self.taps = (program, tap(program, self.inputs))
        return self.taps[1].outputs

    def _run(self, name: str, run_pass: Any, program: Any, round_: int) -> Any:
        """The pass's result, or None when it crashed (then it is dropped, like a pass that breaks outputs)."""
        self.ctx.progress(f"pass {name} (round {round_})")
        try:
            return run_pass(program)
        except Exception as exc:
            self.dropped.add(name)
            self.warnings.append(f"Pass {name} was dropped: it failed on this graph ({type(exc).__name__}: "
                                 f"{str(exc).splitlines()[0] if str(exc) else ''}).")
            self.ctx.log.warning(self.warnings[-1])
            self.applied.append({"pass": name, "round": round_, "outcome": "dropped", "error": self.warnings[-1]})
            return None

    def _all_passes(self) -> list[tuple[str, Any]]:
        """The generic passes, then the target rewrites the device's backend lists, given its target profile."""
        from np_optimizer.graph.passes import PASSES
        from np_optimizer.graph.rewrites import Rewrite, Target, rewrites_of

        device = self.ctx.run.device
        target = Target(device.mlia_target)

        def bound(rewrite: Rewrite) -> Any:
            return lambda program: rewrite.run(program, target)

        return [*PASSES, *((r.name, bound(r)) for r in rewrites_of(device.backend_spec.rewrites))]

    def round(self, round_: int, program: Any, current: list[Any]) -> tuple[bool, Any, list[Any]]:
        from np_optimizer.graph.stats import node_count

        candidate, steps = program, []
        for name, run_pass in self._all_passes():
            if name in self.dropped:
                continue
            result = self._run(name, run_pass, candidate, round_)
            if result is None:
                continue
            if not result.changed:
                if round_ == 1:
                    self.applied.append({"pass": name, "round": round_, "outcome": "no change"})
                continue
            steps.append((name, run_pass, node_count(candidate), node_count(result.ep), result.layers))
            candidate = result.ep
        if not steps:
            return False, program, current
        outputs = self._outputs(candidate)
        error, scale = _worst_error(self.reference, outputs)
        if error <= self.tolerance * scale:
            for name, _run_pass, nodes_before, nodes_after, layers in steps:
                entry = {"pass": name, "round": round_, "nodes_before": nodes_before, "nodes_after": nodes_after,
                         "outcome": "applied", "max_abs_error": error, "relative_error": error / scale,
                         "checked": "with the round's other passes", **_layers(layers)}
                self.applied.append(entry)
                self.ctx.log.info(f"  {name}: {nodes_before} -> {nodes_after} nodes{_touched(layers)}")
            return True, candidate, outputs
        return self._one_by_one(round_, [(n, p) for n, p, _b, _a, _l in steps], program, current)

    def _one_by_one(self, round_: int, steps: list[tuple[str, Any]], program: Any,
                    current: list[Any]) -> tuple[bool, Any, list[Any]]:
        from np_optimizer.graph.stats import node_count

        changed_any = False
        for name, run_pass in steps:
            result = self._run(name, run_pass, program, round_)
            if result is None or not result.changed:
                continue
            outputs = self._outputs(result.ep)
            error, scale = _worst_error(self.reference, outputs)
            entry = {"pass": name, "round": round_, "nodes_before": node_count(program),
                     "nodes_after": node_count(result.ep), "max_abs_error": error, "relative_error": error / scale,
                     "checked": "alone", **_layers(result.layers)}
            if error > self.tolerance * scale:
                entry["outcome"] = "dropped"
                self.dropped.add(name)
                self.warnings.append(f"Pass {name} was dropped: it changed the outputs by {error:.3g} (max abs), "
                                     f"more than the tolerance {self.tolerance:g} x output scale {scale:.3g}.")
                self.ctx.log.warning(self.warnings[-1])
            else:
                entry["outcome"] = "applied"
                program, current = result.ep, outputs
                changed_any = True
                self.ctx.log.info(f"  {name}: {entry['nodes_before']} -> {entry['nodes_after']} nodes"
                                  f"{_touched(result.layers)}")
            self.applied.append(entry)
        return changed_any, program, current


def _layers(layers: tuple[str, ...]) -> dict[str, Any]:
    """job.json's `layers` of a pass entry: the module paths a target rewrite changed (generic passes name none)."""
    return {"layers": list(layers)} if layers else {}


def _touched(layers: tuple[str, ...]) -> str:
    return f" ({', '.join(layers)})" if layers else ""


def _verification_inputs(ctx: StepContext) -> tuple[list[Any], str]:
    """The run's evaluation inputs (the example input first), on which INPUT_MODEL's outputs are already known;
    else the example input and 8 calibration samples."""
    evaluation = ctx.run.evaluation
    if evaluation is not None and len(evaluation.samples) > 1:
        return evaluation.samples, f"the {len(evaluation.samples)} evaluation inputs ({evaluation.source})"
    calibration = ctx.run.calibration(8)
    return ([ctx.run.example_inputs, *calibration.samples],
            f"example input + {len(calibration.samples)} calibration samples ({calibration.source})")


SPEC = register_step_spec(StepSpec(
    kind="graph_optimize", short="go", checkpoint="GRAPH_OPTIMIZE", abbreviation="GO", logger="GraphOptimizer",
    order=20, config_type=GraphOptimizeConfig, parse=parse, options=OPTIONS, run=graph_optimize,
    run_yaml=lambda _backend: ["- graph_optimize: null"],
))
