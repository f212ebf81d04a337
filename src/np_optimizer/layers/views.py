"""The per-layer views, from stored files only (no torch): the top-N layers of one checkpoint, and the N-way compare
of checkpoints with the layer diff.

Significance: an estimate is deterministic (same input, same tool: same number), so any change is significant; a
measured latency carries its spread, and a change no larger than the larger IQR of the two is "not significant". The
same holds for a layer's measured time (its IQR over the traced runs).
"""

from __future__ import annotations

from typing import Any

from np_optimizer.records.codec import JsonValue, as_list

__all__ = ["top_layers", "TOTALS", "compare_totals", "layer_diff", "ROUNDING_DB", "COST_HEADER", "cost_text",
           "layer_macs", "snr_text"]

# (metric type, label, unit shown, lower is better)
TOTALS: tuple[tuple[str, str, str, bool], ...] = (
    ("LATENCY", "Latency", "ms", True), ("MEMORY", "Memory", "MB", True),
    ("MODEL_WEIGHT_MEMORY", "Weights", "B", True), ("MACS", "MACs", "MACs", True), ("SNR", "SNR", "dB", False),
    ("PTE_SIZE", "PTE size", "B", True), ("DELEGATED_SHARE", "Delegated ops", "%", False),
)


COST_HEADER = {"cycles": "Cycles", "ms": "Time (ms)", "MACs": "MACs"}  # a layer table's cost column, by its unit


def raw_ids_text(entry: dict[str, JsonValue], shown: int) -> str:
    """The tool's ids of a layer's ops, the first `shown` of them (" ..." when there are more)."""
    ids = [str(i) for i in as_list(entry.get("raw_ids"))]
    return ", ".join(ids[:shown]) + (" ..." if len(ids) > shown else "")


def cost_text(value: Any, unit: str = "") -> str:
    """A layer cost or change as the tables show it: whole cycles with separators, else three significant digits
    below 1 and two decimals above."""
    if value is None:
        return "-"
    if unit == "cycles" or isinstance(value, int):
        return f"{int(value):,}"
    return f"{value:.3g}" if abs(value) < 1 else f"{value:,.2f}"


def layer_macs(entry: dict[str, Any]) -> Any:
    """The tool's MACs (Vela's on Ethos-U), else the graph's count (a measured CPU layer)."""
    return entry.get("macs") if entry.get("macs") is not None else entry.get("graph_macs")


def snr_text(entry: dict[str, Any], about: dict[str, Any] | None) -> str:
    """A layer's SNR cell: (ref) on INPUT_MODEL, identical, dB with the zeroed and weak-position marks, or -."""
    if about is None or about.get("reference"):
        return "(ref)" if about else "-"
    if entry.get("snr_identical"):
        return "identical"
    if entry.get("snr_db") is None:
        return "-"
    weak = entry.get("snr_weak_position")
    return f"{entry['snr_db']:.1f}" + (" zeroed" if entry.get("snr_zeroed") else "") + (
        f" (pos {weak['index']}: {weak['snr_db']:.1f})" if weak else "")


def top_layers(document: dict[str, Any], top: int) -> list[dict[str, Any]]:
    """The `top` costliest layers (the document lists them costliest first); layers without a cost (on the CPU,
    not estimated) follow the costed ones."""
    return list(document.get("layers") or [])[:top]


def _spread(metric: dict[str, Any] | None, extras: dict[str, Any]) -> float | None:
    if metric is None or metric.get("metric_type") != "LATENCY" or metric.get("result_kind") != "measured":
        return None
    iqr = (extras.get("latency_ms") or {}).get("iqr")
    return float(iqr) if iqr is not None else None


def compare_totals(columns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per total: each column's value (with its coverage mark), and its delta against the first column with
    whether the delta is larger than the measured spread."""
    rows = []
    for metric_type, label, unit, lower_better in TOTALS:
        cells = [c["totals"].get(metric_type) for c in columns]
        if all(cell is None for cell in cells):
            continue
        base = cells[0]
        out: list[dict[str, Any] | None] = []
        for index, cell in enumerate(cells):
            if cell is None or (cell.get("value") is None and not cell.get("identical")):
                out.append(None)
                continue
            item = dict(cell)  # an SNR "identical" to INPUT_MODEL's has no value and no delta, but is shown
            if index and cell.get("value") is not None and base is not None and base.get("value") is not None:
                delta = float(cell["value"]) - float(base["value"])
                spreads = [s for s in (base.get("spread"), cell.get("spread")) if s is not None]
                item["delta"] = delta
                item["delta_pct"] = 100.0 * delta / float(base["value"]) if base["value"] else None
                item["significant"] = not spreads or abs(delta) > max(spreads)
                item["better"] = (delta < 0) == lower_better if delta else None
            out.append(item)
        rows.append({"metric": metric_type, "label": label, "unit": unit, "cells": out})
    return rows


def _by_key(document: dict[str, Any] | None, names: dict[str, str | None] | None = None) -> dict[str, dict[str, Any]]:
    """The document's layers by key; with `names` (old key -> key in the other checkpoint), layers fused into one
    are merged: costs and shares added, the merged keys listed."""
    out: dict[str, dict[str, Any]] = {}
    for entry in (document or {}).get("layers") or []:
        key = (names or {}).get(entry["key"], entry["key"]) or entry["key"]
        if key not in out:
            out[key] = dict(entry) | {"merged": [] if key == entry["key"] else [entry["key"]]}
            continue
        merged = out[key]
        for field in ("cost", "share_pct", "spread_ms"):  # spreads added: an upper bound for the merged layer
            if entry.get(field) is not None:
                merged[field] = (merged.get(field) or 0) + entry[field]
        merged["merged"] = [*merged["merged"], entry["key"]]
    return out


def _nsr(cell: dict[str, Any] | None, reference: bool) -> float | None:
    """Noise-to-signal ratio (linear) of a per-layer SNR cell; 0 for identical (and for the reference itself)."""
    if reference or (cell is not None and cell.get("identical")):
        return 0.0
    if cell is None or cell.get("snr_db") is None:
        return None
    return float(10.0 ** (-float(cell["snr_db"]) / 10.0))


# A layer SNR at or above this is float32 rounding (a re-associated sum, a folded BN), not a loss worth listing.
ROUNDING_DB = 100.0


def _snr_drops(base: dict[str, Any], other: dict[str, Any], names: dict[str, str | None],
               limit: int) -> list[dict[str, Any]]:
    """Layers whose SNR against INPUT_MODEL is lower in `other` than in `base`, by how much noise they gained (the
    rise of the noise-to-signal ratio: a drop from identical to 40 dB ranks below one from 30 to 10 dB)."""
    if base.get("snr") is None or other.get("snr") is None:
        return []
    before = {(names.get(k, k) or k): v for k, v in base["snr"].items()}
    drops = []
    for key, cell in other["snr"].items():
        old = before.get(key)
        nsr_a, nsr_b = _nsr(old, bool(base.get("snr_reference"))), _nsr(cell, bool(other.get("snr_reference")))
        if nsr_a is None or nsr_b is None or nsr_b <= max(nsr_a, 10.0 ** (-ROUNDING_DB / 10.0)):
            continue  # no drop, or one within float32 rounding
        identical_a = bool(base.get("snr_reference")) or bool((old or {}).get("identical"))
        a, b = None if identical_a else (old or {}).get("snr_db"), cell.get("snr_db")
        drops.append({"key": key, "class": cell.get("class"), "before": a, "before_identical": identical_a,
                      "after": b, "delta": None if a is None or b is None else round(float(b) - float(a), 3),
                      "noise_gain": nsr_b - nsr_a})
    drops.sort(key=lambda d: -d["noise_gain"])
    return drops[:limit]


def _significant(delta: float, a: dict[str, Any] | None, b: dict[str, Any] | None, field: str) -> bool | None:
    """A layer's change against the measured spread of its time on either side (the larger IQR), as for the totals;
    an estimate's change always counts. None when the sides are compared by share and one was measured (a share
    carries no spread of its own)."""
    spreads = [float(x["spread_ms"]) for x in (a, b) if x and x.get("spread_ms") is not None]
    if not spreads:
        return True
    if field != "cost":
        return None
    return abs(delta) > max(spreads)


def layer_diff(base: dict[str, Any], other: dict[str, Any], limit: int = 10) -> dict[str, Any]:
    """Layers whose cost changed most, layers that moved between NPU/delegate and CPU, layers whose SNR dropped.
    Keys are matched through the checkpoints' maps from INPUT_MODEL (lineage.py): a BN fused into its conv is
    compared as part of that conv, not shown as removed."""
    from np_optimizer.layers.lineage import translate

    base_layers = (base.get("layers") or {}).get("layers") or []
    known = {e["key"] for e in base_layers} | set(base.get("placement") or {}) | set(base.get("snr") or {})
    names = translate(known, base.get("module_map") or {}, other.get("module_map") or {})
    first, second = _by_key(base.get("layers"), names), _by_key(other.get("layers"))
    same_unit = ((base.get("layers") or {}).get("cost") or {}).get("unit") == \
        ((other.get("layers") or {}).get("cost") or {}).get("unit")
    changes: list[dict[str, Any]] = []
    for key in sorted(set(first) | set(second)) if first and second else ():  # costs on both sides, or no diff
        a, b = first.get(key), second.get(key)
        cost_a, cost_b = (a or {}).get("cost"), (b or {}).get("cost")
        if cost_a is None and cost_b is None:
            continue
        field = "cost" if same_unit else "share_pct"
        va, vb = (a or {}).get(field), (b or {}).get(field)
        delta = float(vb or 0) - float(va or 0)
        changes.append({"key": key, "class": (b or a or {}).get("class"), "before": va, "after": vb, "delta": delta,
                        "field": field, "only_in": None if a and b else ("after" if b else "before"),
                        "merged": [m for m in (a or {}).get("merged") or [] if m != key],
                        "significant": _significant(delta, a, b, field)})
    changes.sort(key=lambda c: -abs(c["delta"]))
    placements = {}
    for old, where in (base.get("placement") or {}).items():
        key = names.get(old) or old
        after = (other.get("placement") or {}).get(key)
        if after is not None and after != where and key not in placements:
            placements[key] = {"key": key, "before": where, "after": after}
    return {"cost_changes": changes[:limit], "cost_field": "cost" if same_unit else "share_pct",
            "placement_changes": list(placements.values()), "snr_drops": _snr_drops(base, other, names, limit),
            "matched": {old: new for old, new in names.items() if new is not None and new != old}}
