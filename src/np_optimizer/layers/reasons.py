"""Why layers left the accelerator, from the compile's layers_graph.json (each op of work outside the delegates
carries its partitioner's reason, layers/graph.py): the reason per layer key for the per-layer views, and the one
summary line per checkpoint of np run's log and np report (how many ops left, their share of the cost where it is
known, the costliest with its reason, what to do). No torch."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

__all__ = ["layer_reasons", "left_ops", "cpu_summary", "advice", "read_graph", "compiled_summary"]


def read_graph(path: Path | None) -> dict[str, Any]:
    """A compile's layers_graph.json; {} when it is missing or unreadable (the views then show no reasons)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path is not None and path.is_file() else {}
    except (OSError, ValueError):
        data = {}
    return data if isinstance(data, dict) else {}


def left_ops(graph: dict[str, Any]) -> list[dict[str, Any]]:
    """The ops of work the lowering left outside its delegates (the ones with a reason: no placeholder, parameter or
    boundary quantize/dequantize), in graph order."""
    return [o for o in graph.get("ops") or [] if not o.get("delegated") and o.get("reason")]


def layer_reasons(graph: dict[str, Any]) -> dict[str, str]:
    """Per layer key, why its ops left the accelerator: the distinct reasons of its ops, the costliest op's (by
    MACs) first."""
    by_key: dict[str, list[tuple[int, int, str]]] = {}
    for index, op in enumerate(left_ops(graph)):
        by_key.setdefault(str(op.get("key")), []).append((-int(op.get("macs") or 0), index, str(op["reason"])))
    out = {}
    for key, found in by_key.items():
        reasons = list(dict.fromkeys(reason for _macs, _index, reason in sorted(found)))
        out[key] = "; ".join(reasons)
    return out


# What to change, by what the reason says: (pattern of the reason, advice). The first match wins.
_ADVICE: tuple[tuple[str, str], ...] = (
    (r"(?i)ceil mode", "pool with ceil_mode=False (pad the input if the last, partial window matters)"),
    (r"(?i)keepdim=true", "take the mean with keepdim=True, then flatten or squeeze its result"),
    (r"(?i)avgpool2d|avg_pool2d", "pool with a kernel the target takes (one that tiles the feature map, within the "
     "limits the reason names), or write the pooling as a mean over the pooled dimensions (torch.mean), which "
     "lowers whole"),
    (r"(?i)not (been |marked as )?quantized|float|fp32", "quantize the layer (graph_quantize), or check why the "
     "quantizer left it float"),
    (r"torch\.bool (input|output)", "the target has no boolean tensors: make the mask a constant (a fixed sequence "
     "length), or compute it outside the model"),
    (r"(?i)not included in BaseTOSASupportList", "replace the op with ones the Arm backend lowers (ExecuTorch's "
     "backends/arm/operator_support lists them), or move it out of the model (pre- or post-processing)"),
    (r"(?i)^no xnnpack kernel for", "replace the op with one XNNPACK runs, or move it out of the model (pre- or "
     "post-processing); else it runs on ExecuTorch's portable kernel"),
)


def advice(reason: str, accelerator: str) -> str:
    """What to do about a layer that left the accelerator for `reason`; where a graph_optimize rewrite answers the
    reason (graph/rewrites/), it is named, for a run that does not have the step."""
    from np_optimizer.graph.rewrites import rewrite_for

    text = next((text for pattern, text in _ADVICE if re.search(pattern, reason)),
                f"change the layer to meet the condition the reason names, so that {accelerator} takes it")
    rewrite = rewrite_for(reason)
    if rewrite is not None:
        text += (f"; graph_optimize's rewrite {rewrite.name} does this for {rewrite.scope} (add `- graph_optimize: "
                 "null` to run.yaml's steps if the run has none)")
    return text


def _cost_share(graph: dict[str, Any], doc: dict[str, Any] | None) -> tuple[str | None, dict[str, float]]:
    """The left ops' share of the round's cost, when the round costed them (a measured host round does; an Ethos-U
    estimate never does: Vela sees the NPU part only), and each left layer's cost."""
    reasons = layer_reasons(graph)
    cost = (doc or {}).get("cost") or {}
    field, unit, total = cost.get("field"), cost.get("unit"), cost.get("total")
    costs: dict[str, float] = {}
    for row in (doc or {}).get("rows") or []:
        key, value = str(row.get("key")), row.get(field) if field else None
        if key in reasons and "CPU" in str(row.get("placement") or "") and isinstance(value, (int, float)):
            costs[key] = costs.get(key, 0.0) + float(value)
    if not costs or not isinstance(total, (int, float)) or not total or unit == "MACs":
        return None, costs
    what = "of the measured time" if unit == "ms" else f"of the {unit}"
    return f"{100.0 * sum(costs.values()) / float(total):.1f}% {what}", costs


def cpu_summary(graph: dict[str, Any], doc: dict[str, Any] | None = None) -> str | None:
    """One line: how many ops left the accelerator, their share of the cost (else of the MACs), the costliest of them
    with its reason, and what to do; None when nothing left it or the compile recorded no reasons (an older np)."""
    left = left_ops(graph)
    if not left:
        return None
    accelerator = str(graph.get("accelerator") or "the delegate")
    everything = not any(o.get("delegated") for o in graph.get("ops") or [])  # nothing delegated: a float program
    share, costs = _cost_share(graph, doc)
    if share is None:
        macs_total = sum(int(o.get("macs") or 0) for o in graph.get("ops") or [])
        macs = sum(int(o.get("macs") or 0) for o in left)
        share = f"{100.0 * macs / macs_total:.1f}% of the MACs" if macs else "none of the MACs np counts"
        if not everything and doc is not None and (doc.get("cost") or {}).get("unit") == "cycles":
            share += ", not estimated"  # Vela estimates the NPU part only
    if costs:
        key = max(costs, key=lambda k: costs[k])
        costliest = next(o for o in left if str(o.get("key")) == key)
    else:
        costliest = min(left, key=lambda o: (-int(o.get("macs") or 0), left.index(o)))
    reason = str(costliest["reason"]).rstrip(". ")
    what = costliest.get("class") if costliest.get("module") else None  # a model-level op: its op, not the model
    name = f"{costliest.get('key')} ({what or costliest.get('op')})"
    ops = f"all {len(left)} ops" if everything and len(left) > 1 else f"{len(left)} op" + ("s" if len(left) != 1 else "")
    return (f"{ops} left {accelerator} ({share}); costliest: {name}: {reason}. "
            f"To do: {advice(reason, accelerator)}.")


def compiled_summary(graph_file: Path, layers_file: Path | None = None) -> str | None:
    """cpu_summary of a compile folder's layers_graph.json and, when the round wrote one, its layers.json."""
    graph = read_graph(graph_file)
    doc = read_graph(layers_file) if layers_file is not None else None
    return cpu_summary(graph, doc or None)
