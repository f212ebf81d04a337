"""How much of the model a total covers. An Ethos-U estimate covers the ops inside the NPU delegates only: the ops
left to the CPU were never estimated, so a latency, memory or MAC total of such a checkpoint is partial and must
say so wherever it is shown (the metric carries `coverage`, the table marks the cell, a warning names the layers).
No torch: reads the compile's layers_graph.json."""

from __future__ import annotations

from collections import Counter
from typing import Any

__all__ = ["coverage_of", "macs_disagreement", "PARTIAL_METRICS", "PARTIAL_MARK", "coverage_text", "left_out_warning", "BOUNDARY_OPS"]

# Metrics that describe the NPU part only when part of the model stays on the CPU.
PARTIAL_METRICS = frozenset({"LATENCY", "MEMORY", "MACS", "MODEL_WEIGHT_MEMORY", "NPU_CYCLES", "TOTAL_CYCLES",
                             "INFERENCES_PER_SECOND"})
PARTIAL_MARK = "(NPU part)"
# The delegate's own input/output (de)quantization runs on the CPU in every int8 program: not a layer left out.
BOUNDARY_OPS = ("quantize_per_tensor", "dequantize_per_tensor")


def _boundary(op: dict[str, Any]) -> bool:
    return any(b in str(op.get("op", "")) for b in BOUNDARY_OPS)


def coverage_of(graph: dict[str, Any]) -> dict[str, Any] | None:
    """NPU op share and MAC share of a lowered program (np's graph MAC count on both sides of the ratio), and the
    layers whose ops stayed outside the delegates; None when the compile recorded no layers."""
    ops = graph.get("ops") or []
    if not ops:
        return None
    delegated = [o for o in ops if o.get("delegated")]
    outside = [o for o in ops if not o.get("delegated") and not _boundary(o)]
    macs_total = sum(int(o.get("macs") or 0) for o in ops)
    macs_in = sum(int(o.get("macs") or 0) for o in delegated)
    left: dict[str, dict[str, Any]] = {}
    for op in outside:
        entry = left.setdefault(op["key"], {"key": op["key"], "module": op.get("module"), "class": op.get("class"),
                                            "ops": Counter(), "macs": 0})
        entry["ops"][op.get("op_family", op.get("op"))] += 1
        entry["macs"] += int(op.get("macs") or 0)
    return {
        "ops_delegated": len(delegated), "ops_total": len(ops),
        "npu_op_share_pct": round(100.0 * len(delegated) / len(ops), 2),
        "macs_delegated": macs_in, "macs_total": macs_total,
        "npu_mac_share_pct": round(100.0 * macs_in / macs_total, 2) if macs_total else None,
        "partial": bool(outside) or not delegated,
        "left_out": [{**e, "ops": dict(e["ops"])} for e in left.values()],
        "boundary_ops": sum(1 for o in ops if not o.get("delegated") and _boundary(o)),
        "convention": "ops: ops inside the NPU delegates / all ops of the compiled program (the delegate's boundary "
                      "quantize/dequantize included); MACs: " + str(graph.get("macs_convention", "np graph count")),
    }


def coverage_text(coverage: dict[str, Any]) -> str:
    """`partial: NPU part only (37 of 846 ops, 4.4%; 31.0% of MACs)`, the `coverage` a partial metric carries."""
    if coverage.get("npu_op_share_pct") is None:
        return f"partial: NPU part only ({coverage.get('reason', 'coverage unknown')})"
    macs = coverage.get("npu_mac_share_pct")
    return (f"partial: NPU part only ({coverage['ops_delegated']} of {coverage['ops_total']} ops, "
            f"{coverage['npu_op_share_pct']:.1f}%" + (f"; {macs:.1f}% of MACs" if macs is not None else "") + ")")


def macs_disagreement(tool_macs: float, graph: dict[str, Any], rows: list[dict[str, Any]],
                      threshold: float = 0.10) -> tuple[dict[str, Any], str | None]:
    """Vela's nn_macs beside np's graph count of the same program, and a warning naming the layer families that
    account for the difference when the two differ by more than `threshold` (per family: Vela's MACs of the rows of
    that family against np's count of the ops of that family)."""
    np_macs = sum(int(o.get("macs") or 0) for o in graph.get("ops") or [])
    facts: dict[str, Any] = {"vela_nn_macs": tool_macs, "np_graph_macs": np_macs,
                             "np_convention": graph.get("macs_convention")}
    if not np_macs or not tool_macs or abs(tool_macs - np_macs) <= threshold * max(tool_macs, np_macs):
        return facts, None
    by_family: dict[str, list[float]] = {}
    for op in graph.get("ops") or []:
        by_family.setdefault(str(op.get("family")), [0.0, 0.0])[1] += int(op.get("macs") or 0)
    for row in rows:
        if row.get("macs") is not None:
            by_family.setdefault(str(row.get("family")), [0.0, 0.0])[0] += float(row["macs"])
    gaps = sorted(by_family.items(), key=lambda kv: -abs(kv[1][0] - kv[1][1]))[:4]
    facts["by_family"] = {k: {"vela": v[0], "np": v[1]} for k, v in by_family.items()}
    named = ", ".join(f"{family} (Vela {v[0]:,.0f}, np {v[1]:,.0f})" for family, v in gaps if v[0] != v[1])
    return facts, (f"MACs differ by {abs(tool_macs - np_macs) / max(tool_macs, np_macs):.0%} between Vela's nn_macs "
                   f"({tool_macs:,.0f}, the MACs column here) and np's graph count ({np_macs:,.0f}, the MACs column "
                   f"on CPU devices): mostly {named}. Vela also counts the work of ops it lowers to the NPU's MAC "
                   "units (pads, pooling, elementwise), np counts conv and matmul-family ops only.")


def left_out_warning(coverage: dict[str, Any], limit: int = 8) -> str:
    left = coverage.get("left_out") or []
    names = ", ".join(f"{e['key']} ({', '.join(sorted(e['ops']))})" for e in left[:limit])
    more = f" and {len(left) - limit} more" if len(left) > limit else ""
    return (f"The estimate covers the NPU part only ({coverage_text(coverage).split('(', 1)[1].rstrip(')')}): "
            f"latency, memory and MACs leave out {len(left)} layer(s) that run on the CPU: {names}{more}. "
            "These totals are marked (NPU part); `np report --layers` lists the layers.")
