"""The mixed strategy: per-layer formats chosen greedily from measured sensitivity and cost, each point a real trial.

    strategy: {mixed: {candidates: [W8-A8, W8-A16], budget: latency, points: 8, from: widest, rest: both}}

1. The first two trials are uniform: in the base candidate (the first) and in the widest (the last). One of them
   also asks graph_quantize for its `sensitivity:` (pipeline/sensitivity.py: each weighted layer's SNR loss and cost
   per format, from the target's own tool; on Ethos-U also the model's `<input>` and `<output>`, measured as a layer
   is): the widest one (`from: widest`, the default: what a layer loses alone in the base format, among wide
   neighbours, as AIMET's AMP measures) or the base one (`from: base`: what a layer gains alone in the wider format,
   among base neighbours; on the bench's three models no layer gained anything that way, a lone int16 layer's output
   rounded to int8 again at the next layer's input, so no mixed trial was planned). A base experiment that ran the
   same step gives it from the step cache.
2. From that file, the per-layer moves out of the base format in greedy order, SNR gained per unit of extra cost:
   `budget: latency` prices them by the target's figures (Vela's cycles on Ethos-U, traced times for XNNPACK; from
   the base, the file's own `moves`), `budget: size` by the layer's weight bytes in each format. `<input>` and
   `<output>` cost 0 in both (no row of their own in the target's table: their cost shows in their readers' and
   writers' rows). A latency the table prices at (nearly) nothing is floored at the median priced move's: each move
   adds int8/int16 RESCALEs at its boundaries that no row holds, so a free move competes on its gain; a layer the
   table does not price in a format is priced at that median too (greedy_moves).
3. One trial per point k along that order (the first k moves as graph_quantize `layers:`), k spread over the
   moves, over the scheme `rest:` names: the base scheme with the k layers moved (`rest: base`), or the widest
   scheme with the layers not moved dropped to the base (`rest: widest`: the ops outside weighted layers, as adds,
   softmax and pools, then keep the widest format), or each k over both (`rest: both`, the default). Which is worth
   it depends on the model, so no default of one fits: on the bench's sample_npu CNN the adds and pools, not the
   convolutions, held the SNR W8-A16 adds (only `widest` met issue 37's done-when); on its transformer their int16
   cycles kept every `widest` point near W8-A16's latency (only `base` met it). Both cost twice the trials; the
   front keeps the points that are worth it. Each trial is a run.yaml np runs and profiles like any other: the
   figures on the front are the compiled program's, never the sum of the per-layer predictions (the predictions
   are kept in the trial's note).

Trial params: `mixed.scheme` (a candidate for a uniform trial; `mixed` for a mixed one, `mixed base` / `mixed
widest` under `rest: both`: config/sweep_mixed.mixed_label) and `mixed.moves` (k). Pure but for read_plan, which
reads the measuring trial's file.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from np_optimizer.config.sweep import Strategy
from np_optimizer.config.sweep_mixed import MIXED, MOVES, SCHEME, mixed_label

if TYPE_CHECKING:
    import optuna

    from np_optimizer.workspace import Experiment

__all__ = ["MixedPoint", "SCHEME", "MOVES", "MIXED", "first_point", "uniform_points", "measuring_point",
           "sensitivity_formats", "plan_points", "ordered_moves", "spread",
           "distributions", "apply_point", "read_plan", "weight_bits", "point_note"]


@dataclass(frozen=True)
class MixedPoint:
    """One trial of the strategy: a uniform format (`scheme`, no layers) or the base with the first `moves` moves."""

    scheme: str  # graph_quantize's scheme: the base for a mixed point
    moves: int = 0
    layers: dict[str, str] = field(default_factory=dict)  # module path -> format (graph_quantize `layers:`)
    label: str = MIXED  # the uniform format, or "mixed"
    predicted_snr_gain_db: float | None = None  # the sum of the moves' own gains: a prediction, never measured
    predicted_extra_cost: float | None = None

    @property
    def params(self) -> dict[str, Any]:
        return {SCHEME: self.label, MOVES: self.moves}

    def to_json(self) -> dict[str, Any]:
        return {"scheme": self.scheme, "moves": self.moves, "layers": dict(self.layers), "label": self.label,
                "predicted_snr_gain_db": self.predicted_snr_gain_db,
                "predicted_extra_cost": self.predicted_extra_cost}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MixedPoint:
        return cls(str(data["scheme"]), int(data["moves"]), {str(k): str(v) for k, v in data["layers"].items()},
                   str(data["label"]), data.get("predicted_snr_gain_db"), data.get("predicted_extra_cost"))


def first_point(strategy: Strategy) -> MixedPoint:
    """The uniform trial in the base candidate."""
    return MixedPoint(strategy.candidates[0], label=strategy.candidates[0])


def uniform_points(strategy: Strategy) -> list[MixedPoint]:
    """The base and the widest candidate's uniform trials: the first two trials."""
    return [first_point(strategy), MixedPoint(strategy.candidates[-1], label=strategy.candidates[-1])]


def measuring_point(strategy: Strategy) -> MixedPoint:
    """The uniform trial that also measures the sensitivity: the widest one (`from: widest`) or the base one."""
    first, widest = uniform_points(strategy)
    return widest if strategy.measure_from == "widest" else first


def sensitivity_formats(strategy: Strategy) -> list[str]:
    """graph_quantize's `sensitivity:` of the measuring trial (its first format is the analysis' base)."""
    formats = list(strategy.candidates)
    return [formats[-1], *formats[:-1]] if strategy.measure_from == "widest" else formats


def apply_point(params: dict[str, Any], point: MixedPoint, strategy: Strategy) -> None:
    """Set graph_quantize's parameters (run.yaml) for the point; the measuring trial also asks for the sensitivity."""
    params["scheme"] = point.scheme
    for key in ("layers", "sensitivity"):
        params.pop(key, None)
    if point.layers:
        params["layers"] = dict(point.layers)
    if point == measuring_point(strategy):
        params["sensitivity"] = sensitivity_formats(strategy)


def distributions(strategy: Strategy) -> dict[str, optuna.distributions.BaseDistribution]:
    import optuna

    # k is known only once the measuring trial's moves are: an integer range, not a list of choices
    # `rest: both` labels its points by their scheme; the other studies keep the choices they were made with
    labels = [mixed_label(r) for r in strategy.points_schemes] if len(strategy.points_schemes) > 1 else [MIXED]
    return {SCHEME: optuna.distributions.CategoricalDistribution([*strategy.candidates, *labels]),
            MOVES: optuna.distributions.IntDistribution(0, 100_000)}


def weight_bits(fmt: str) -> int:
    """The weight width of a format, for `budget: size`: W8-A16 -> 8, W4-A8_dynamic -> 4, float -> 32."""
    found = re.match(r"W(\d+)", fmt)
    return int(found.group(1)) if found else 32


def _rows(doc: dict[str, Any], budget: str, strategy: Strategy) -> dict[str, dict[str, dict[str, Any]]]:
    """Per layer and candidate: the SNR a move out of the base gains and its cost, as greedy_moves takes them.
    Measured from the base (`from: base`): the file's cells as they are. Measured from the widest candidate: a move
    base -> widest gains what the layer loses when it alone drops from the all-widest model to the base (the file's
    base-format cell, negated): SNR lost to a layer's own int8 rounding adds up, where a lone int16 layer among int8
    neighbours gains little (its output is rounded to int8 again at the next layer's input)."""
    base, widest = strategy.candidates[0], strategy.candidates[-1]
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for layer in doc.get("layers") or []:
        cells, params = dict(layer.get("formats") or {}), layer.get("params")
        if strategy.measure_from == "widest":
            dropped = cells.get(base, {}).get("snr_loss_db")
            cells = {base: {"snr_loss_db": 0.0, "cost": cells.get(base, {}).get("cost")},
                     widest: {"snr_loss_db": None if dropped is None else -float(dropped),
                              "cost": cells.get(widest, {}).get("cost")}}
        if budget == "size":
            cells = {fmt: {**cell, "cost": None if params is None else params * weight_bits(fmt) / 8.0}
                     for fmt, cell in cells.items()}
        rows[str(layer["module"])] = cells
    return rows


def ordered_moves(doc: dict[str, Any], budget: str, strategy: Strategy) -> list[dict[str, Any]]:
    """The greedy moves out of the base (pipeline/sensitivity.greedy_moves: SNR gained per unit of extra cost, a
    latency priced free or nearly free, or not priced, as the median priced move's): the file's own `moves` when it
    was measured from the base for latency; for size (each cell's cost the layer's weight bytes in the format) or from
    the widest candidate, the same order over _rows. Then the layers that gain SNR but that order left out (a layer
    without a cost for size, or a file's `moves` written before unpriced layers joined them): by gain, their cost
    unknown (None)."""
    from np_optimizer.pipeline.sensitivity import greedy_moves

    rows = _rows(doc, budget, strategy)
    moves = [dict(m) for m in doc.get("moves") or []] if budget == "latency" and strategy.measure_from == "base" \
        else greedy_moves(rows, strategy.candidates[0], measured=budget == "latency")
    return moves + _unpriced(rows, strategy.candidates[0], {str(m["module"]) for m in moves},
                             moves[-1]["predicted_snr_gain_db"] if moves else 0.0)


def _unpriced(rows: dict[str, dict[str, dict[str, Any]]], base: str, priced: set[str],
              gained: float) -> list[dict[str, Any]]:
    best = []
    for module, cells in rows.items():
        gains = [(float(cell["snr_loss_db"]), fmt) for fmt, cell in cells.items()
                 if fmt != base and (cell.get("snr_loss_db") or 0) > 0]
        if gains and module not in priced:
            best.append((*max(gains), module))
    out = []
    for gain, fmt, module in sorted(best, key=lambda b: -b[0]):
        gained += gain
        out.append({"module": module, "format": fmt, "snr_gain_db": round(gain, 3), "extra_cost": None,
                    "predicted_snr_gain_db": round(gained, 3), "predicted_extra_cost": None})
    return out


def spread(count: int, points: int) -> list[int]:
    """k for each mixed point: every k when there are few moves, else `points` values spread evenly up to all."""
    if count <= points:
        return list(range(1, count + 1))
    return list(dict.fromkeys(max(1, round(i * count / points)) for i in range(1, points + 1)))


def plan_points(doc: dict[str, Any], strategy: Strategy) -> tuple[list[MixedPoint], str | None]:
    """The mixed trials (after the two uniform ones): one per k along the greedy moves; or none and why."""
    if list(doc.get("formats") or []) != sensitivity_formats(strategy):
        return [], f"the sensitivity file is of formats {doc.get('formats')}, not {sensitivity_formats(strategy)}"
    moves = [m for m in ordered_moves(doc, strategy.budget or "latency", strategy)
             if m.get("format") in strategy.candidates]
    base, widest = strategy.candidates[0], strategy.candidates[-1]
    weighted = [str(layer["module"]) for layer in doc.get("layers") or []]
    out = []
    schemes = strategy.points_schemes
    # `points` counts trials: under `rest: both` each k is two of them
    for k in spread(len(moves), -(-strategy.points // len(schemes))):
        taken = {str(m["module"]): str(m["format"]) for m in moves[:k]}
        for rest in schemes:
            label = mixed_label(rest) if len(schemes) > 1 else MIXED
            if rest == "widest":  # the widest scheme, the rest set layer by layer
                point = MixedPoint(widest, k, {m: fmt for m in weighted if (fmt := taken.get(m, base)) != widest},
                                   label)
            else:
                point = MixedPoint(base, k, taken, label)
            if not point.layers:  # every layer moved up from the widest scheme: the uniform widest trial already
                continue
            out.append(dataclasses.replace(point, predicted_snr_gain_db=moves[k - 1].get("predicted_snr_gain_db"),
                                           predicted_extra_cost=moves[k - 1].get("predicted_extra_cost")))
    return out, None if moves else "no layer gains SNR in another candidate format: only the uniform points run"


def read_plan(exp: Experiment, strategy: Strategy) -> tuple[list[MixedPoint], str | None, str | None]:
    """The mixed points planned from the measuring trial's layers_sensitivity.json, why there are none, and the
    cost's unit."""
    from np_optimizer.layers.files import read_sensitivity
    from np_optimizer.report.model import build_experiment_report
    from np_optimizer.sweep.layers import float_step
    from np_optimizer.workspace.store import ExperimentStore

    built = build_experiment_report(ExperimentStore(exp).read_index())
    row = next((r for r in built.rows if r.step_type == float_step()), None)
    if row is None or not row.model:
        return [], f"the measuring trial has no {float_step()} step", None
    doc, unreadable = read_sensitivity(exp.root / row.model)
    if doc is None:
        return [], unreadable or "the measuring trial wrote no layers_sensitivity.json", None
    points, why = plan_points(doc, strategy)
    unit = "bytes" if strategy.budget == "size" else (doc.get("cost") or {}).get("unit")
    return points, why, unit


def point_note(point: MixedPoint, unit: str | None) -> str:
    """One line for the front: the formats the trial gives its layers, and what the sensitivity predicted."""
    if not point.layers:
        return f"uniform {point.label}"
    said = "; ".join(f"{module} {fmt}" for module, fmt in point.layers.items())
    predicted = ""
    if point.predicted_snr_gain_db is not None:
        cost = "cost not given for every layer" if point.predicted_extra_cost is None else \
            f"{point.predicted_extra_cost:+,.6g}{f' {unit}' if unit else ''}"
        predicted = f" (predicted +{point.predicted_snr_gain_db:.2f} dB, {cost}; measured: the trial's own figures)"
    return f"mixed, {point.moves} move(s): {point.scheme}, but {said}{predicted}"
