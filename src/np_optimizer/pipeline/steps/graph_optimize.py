"""graph_optimize: output-preserving passes, each checked against the step's input; a pass that changes outputs
beyond the tolerance is dropped with a warning."""

from __future__ import annotations

import math
from typing import Any

from np_optimizer.config import GraphOptimizeConfig
from np_optimizer.pipeline.context import StepContext, StepOutcome
from np_optimizer.pipeline.steps import register_step

__all__ = ["graph_optimize"]


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


@register_step(GraphOptimizeConfig)
def graph_optimize(ctx: StepContext, _config: GraphOptimizeConfig) -> StepOutcome:
    import torch

    from np_optimizer.graph.passes import PASSES
    from np_optimizer.graph.stats import node_count, op_histogram

    tolerance = float(ctx.options["tolerance"])
    calibration = ctx.run.calibration(8)
    inputs = [ctx.run.example_inputs, *calibration.samples]
    program = ctx.program
    with torch.no_grad():
        reference = [program.module()(*x) for x in inputs]
    before = {"nodes": node_count(program), "ops": op_histogram(program)}
    applied: list[dict[str, Any]] = []
    warnings: list[str] = []
    dropped: set[str] = set()
    for round_ in range(1, _MAX_ROUNDS + 1):  # a pass can expose work for an earlier one: repeat until stable
        changed_any = False
        for name, run_pass in PASSES:
            if name in dropped:
                continue
            ctx.progress(f"pass {name} (round {round_})")
            try:
                result = run_pass(program)
            except Exception as exc:  # a pass that crashes on this graph is dropped, like one that breaks outputs
                dropped.add(name)
                warnings.append(f"Pass {name} was dropped: it failed on this graph ({type(exc).__name__}: "
                                f"{str(exc).splitlines()[0] if str(exc) else ''}).")
                ctx.log.warning(warnings[-1])
                applied.append({"pass": name, "round": round_, "outcome": "dropped", "error": warnings[-1]})
                continue
            if not result.changed:
                if round_ == 1:
                    applied.append({"pass": name, "round": round_, "outcome": "no change"})
                continue
            with torch.no_grad():
                outputs = [result.ep.module()(*x) for x in inputs]
            error, scale = _worst_error(reference, outputs)
            entry = {"pass": name, "round": round_, "nodes_before": node_count(program),
                     "nodes_after": node_count(result.ep), "max_abs_error": error, "relative_error": error / scale}
            if error > tolerance * scale:
                entry["outcome"] = "dropped"
                dropped.add(name)
                warnings.append(f"Pass {name} was dropped: it changed the outputs by {error:.3g} (max abs), more "
                                f"than the tolerance {tolerance:g} x output scale {scale:.3g}.")
                ctx.log.warning(warnings[-1])
            else:
                entry["outcome"] = "applied"
                program = result.ep
                changed_any = True
                ctx.log.info(f"  {name}: {entry['nodes_before']} -> {entry['nodes_after']} nodes")
            applied.append(entry)
        if not changed_any:
            break
    after = {"nodes": node_count(program), "ops": op_histogram(program)}
    changes = {"passes": applied, "before": before, "after": after, "tolerance": tolerance,
               "verified_on": f"example input + {len(calibration.samples)} calibration samples ({calibration.source})"}
    return StepOutcome(program=program, changes=changes, warnings=warnings)
