"""The layers strategy's ranking: which layers of the first (fully quantized) trial lose the most SNR, read from its
per-layer SNR file, with each layer's cost (time or cycles) where its profile round gives per-layer figures.

A layer's per-layer SNR includes the error of every layer before it (np compares each layer's output with the same
layer of INPUT_MODEL, both run end to end), so a layer's own damage is taken as the SNR it loses against the layer
before it in the graph; the first layer loses against the best SNR any layer keeps. Only layers with weights (the
ones keep_float can leave in float: convolutions, linear layers) are ranked.
"""

from __future__ import annotations

from typing import Any

from np_optimizer.errors import NpError
from np_optimizer.layers.files import read_numerics
from np_optimizer.report.model import build_experiment_report
from np_optimizer.workspace import Experiment
from np_optimizer.workspace.store import ExperimentStore

__all__ = ["layer_ranking", "ranking_note", "float_step"]

_WEIGHTED = ("Conv", "Linear")


def float_step() -> str:
    """The kind of the step that takes `keep_float` (the quantizing step whose layers the strategy varies)."""
    from np_optimizer.config.steps import step_specs

    return next(s.kind for s in step_specs() if "keep_float" in getattr(s.config_type, "__dataclass_fields__", {}))


def _costs(exp: Experiment, checkpoint: str) -> tuple[dict[str, float], str | None]:
    from np_optimizer.report.layers import layers_record

    try:
        record = layers_record(exp, checkpoint, 10_000)
    except NpError:
        return {}, None
    unit = str(record.cost.get("unit") or record.cost.get("metric") or "") or None
    return {str(r.get("module")): float(cost) for r in record.layers
            if isinstance(cost := r.get("cost"), (int, float))}, unit


def layer_ranking(exp: Experiment) -> tuple[list[dict[str, Any]], str | None]:
    """The weighted layers of the experiment's GRAPH_QUANTIZE checkpoint, most damaging first (module, snr_db,
    lost_db, cost, cost_unit); or no layers and why."""
    built = build_experiment_report(ExperimentStore(exp).read_index())
    row = next((r for r in built.rows if r.step_type == float_step()), None)
    if row is None:
        return [], f"the first trial has no {float_step()} step"
    numerics, unreadable = read_numerics(exp.root, row.fidelity)
    if numerics is None:
        return [], unreadable or "the first trial recorded no per-layer SNR"
    layers = [entry for entry in numerics.get("layers") or [] if isinstance(entry.get("snr_db"), (int, float))]
    if not layers:
        return [], "the first trial's per-layer SNR file lists no layer with an SNR"
    best = max(float(entry["snr_db"]) for entry in layers)
    costs, unit = _costs(exp, row.checkpoint)
    ranked: list[dict[str, Any]] = []
    before = best
    for entry in layers:
        snr = float(entry["snr_db"])
        if any(word in str(entry.get("class", "")) for word in _WEIGHTED):
            module = str(entry.get("module") or entry.get("key"))
            ranked.append({"module": module, "snr_db": snr, "lost_db": round(before - snr, 3),
                           "cost": costs.get(module), "cost_unit": unit})
        before = snr
    ranked.sort(key=lambda r: (-r["lost_db"], -(r["cost"] or 0.0)))
    return ranked, None if ranked else "the first trial has no layer with weights to keep float"


def ranking_note(layers: list[dict[str, Any]]) -> str:
    """One line: the layers a trial keeps float, each with the SNR it lost and its cost."""
    parts = []
    for layer in layers:
        value = layer.get("cost")
        number = "" if value is None else f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
        cost = f", {number} {layer['cost_unit'] or ''}".rstrip() if number else ""
        parts.append(f"{layer['module']} (lost {layer['lost_db']:.2f} dB{cost})")
    return "float: " + "; ".join(parts)
