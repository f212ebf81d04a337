"""The per-layer views, from stored files only (no torch): the top-N layers of one checkpoint, and the N-way compare
of checkpoints with the layer diff.

Significance: an estimate is deterministic (same input, same tool: same number), so any change is significant; a
measured latency carries its spread, and a change no larger than the larger IQR of the two is "not significant".
"""

from __future__ import annotations

from typing import Any

__all__ = ["top_layers", "TOTALS", "compare_totals", "layer_diff"]

# (metric type, label, unit shown, lower is better)
TOTALS: tuple[tuple[str, str, str, bool], ...] = (
    ("LATENCY", "Latency", "ms", True), ("MEMORY", "Memory", "MB", True),
    ("MODEL_WEIGHT_MEMORY", "Weights", "B", True), ("MACS", "MACs", "MACs", True), ("SNR", "SNR", "dB", False),
    ("PTE_SIZE", "PTE size", "B", True), ("DELEGATED_SHARE", "Delegated ops", "%", False),
)


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
            if cell is None or cell.get("value") is None:
                out.append(None)
                continue
            item = dict(cell)
            if index and base is not None and base.get("value") is not None:
                delta = float(cell["value"]) - float(base["value"])
                spreads = [s for s in (base.get("spread"), cell.get("spread")) if s is not None]
                item["delta"] = delta
                item["delta_pct"] = 100.0 * delta / float(base["value"]) if base["value"] else None
                item["significant"] = not spreads or abs(delta) > max(spreads)
                item["better"] = (delta < 0) == lower_better if delta else None
            out.append(item)
        rows.append({"metric": metric_type, "label": label, "unit": unit, "cells": out})
    return rows


def _by_key(document: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {entry["key"]: entry for entry in (document or {}).get("layers") or []}


def layer_diff(base: dict[str, Any], other: dict[str, Any], limit: int = 10) -> dict[str, Any]:
    """Layers whose cost changed most, layers that moved between NPU/delegate and CPU, layers whose SNR dropped."""
    first, second = _by_key(base.get("layers")), _by_key(other.get("layers"))
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
                        "field": field, "only_in": None if a and b else ("after" if b else "before")})
    changes.sort(key=lambda c: -abs(c["delta"]))
    placements = {}
    for key, where in (base.get("placement") or {}).items():
        after = (other.get("placement") or {}).get(key)
        if after is not None and after != where:
            placements[key] = {"key": key, "before": where, "after": after}
    snr_a, snr_b = base.get("snr") or {}, other.get("snr") or {}
    drops = sorted(({"key": k, "before": snr_a.get(k), "after": v, "delta": v - snr_a[k]} for k, v in snr_b.items()
                    if k in snr_a and v is not None and snr_a[k] is not None), key=lambda d: d["delta"])
    return {"cost_changes": changes[:limit], "cost_field": "cost" if same_unit else "share_pct",
            "placement_changes": list(placements.values()), "snr_drops": drops[:limit]}
