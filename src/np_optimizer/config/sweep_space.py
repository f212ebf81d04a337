"""A sweep's points as experiments: the run.yaml (and run.detail.yaml) data of each point of the space, and the key
that says two points would run the same experiment. No torch."""

from __future__ import annotations

import copy
import itertools
from typing import Any

from np_optimizer.config.checkpoints import checkpoint_of_step, step_kinds
from np_optimizer.config.sweep import Dimension, SweepConfig

__all__ = ["run_for", "detail_for", "run_key", "grid_size", "trial_runs"]


def _with(run: dict[str, Any], dimension: Dimension, value: Any) -> dict[str, Any]:
    """`run` (run.yaml data) with one dimension set; a parameter of a step the trial lacks changes nothing."""
    steps = run.setdefault("steps", [])
    index = next((i for i, s in enumerate(steps) if isinstance(s, dict) and dimension.kind in s), None)
    if dimension.parameter is None:
        order = step_kinds()
        if value and index is None:  # added where the pipeline order puts it
            steps.append({dimension.kind: None})
            steps.sort(key=lambda s: order.index(next(iter(s))) if isinstance(s, dict) and s and
                       next(iter(s)) in order else len(order))
        elif not value and index is not None:  # and its checkpoint no longer profiled
            del steps[index]
            gone = checkpoint_of_step(dimension.kind)
            if isinstance(run.get("profile"), list):
                run["profile"] = [c for c in run["profile"] if str(c).upper() != gone]
        return run
    if index is None:
        return run
    params = steps[index][dimension.kind]
    if isinstance(params, list) and params and isinstance(params[0], dict):
        params = params[0]
    elif not isinstance(params, dict):
        params = {}
        steps[index][dimension.kind] = [params]
    params[dimension.parameter] = value
    return run


def run_for(sweep: SweepConfig, base_run: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The run.yaml data of one point: the base with each dimension's value (steps first: a parameter needs its
    step present; a parameter of a step the point drops changes nothing)."""
    run = copy.deepcopy(base_run)
    for dimension in sorted(sweep.space, key=lambda d: d.parameter is not None):
        if dimension.path in values and dimension.option is None:
            run = _with(run, dimension, values[dimension.path])
    return run


def detail_for(sweep: SweepConfig, run: dict[str, Any], values: dict[str, Any]) -> dict[str, Any] | None:
    """The run.detail.yaml data of one point (its options of steps the run has), None when it sets none."""
    kinds = [next(iter(s)) for s in run.get("steps") or [] if isinstance(s, dict) and s]
    detail: dict[str, Any] = {}
    for dimension in sweep.space:
        if dimension.option is None or dimension.path not in values or dimension.kind not in kinds:
            continue
        section, option = dimension.option
        detail.setdefault(f"{dimension.kind}[0]", {}).setdefault(section, {})[option] = values[dimension.path]
    return {"detail": detail} if detail else None


def run_key(run: dict[str, Any], detail: dict[str, Any] | None = None) -> str:
    """Two points with the same key run the same experiment (the same run.yaml and run.detail.yaml data)."""
    import hashlib
    import json

    both = run if detail is None else {"run": run, "detail": detail}
    return hashlib.sha256(json.dumps(both, sort_keys=True, default=str).encode()).hexdigest()[:16]


def grid_size(sweep: SweepConfig) -> int:
    size = 1
    for dimension in sweep.space:
        size *= len(dimension.values)
    return size


def trial_runs(sweep: SweepConfig, base_run: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every distinct grid point as (its values by dimension path, its run.yaml data), in the order the space lists
    them; a point whose run.yaml repeats an earlier one's (a parameter of a step it drops) is left out."""
    out, seen = [], set()
    for values in itertools.product(*(d.values for d in sweep.space)):
        point = {d.path: v for d, v in zip(sweep.space, values)}
        run = run_for(sweep, base_run, point)
        key = run_key(run, detail_for(sweep, run, point))
        if key not in seen:
            seen.add(key)
            out.append((point, run))
    return out
