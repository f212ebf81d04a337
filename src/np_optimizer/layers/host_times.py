"""Per-layer times of a measured round on a CPU target: the ETDump of the traced runs (etdump.py), joined to the
layers through the compile's trace map (trace_map.py) and layer file (graph.py). No torch.

How an event finds its layer:
- a kernel outside any delegate (OPERATOR_CALL): its instruction's debug handle names the graph node;
- an op inside an XNNPACK delegate: its events carry only a name ("Convolution (NHWC, F32) IGEMM #1"), in run
  order, so the k-th event of a delegate call is the delegate's k-th serialized node, checked by kind; that node's
  debug handle names the graph node. A node the delegate inserted (a layout transpose, a convert) is given to the
  layer that produced its input, else to the one that reads its output (its time is that layer's overhead);
- what no layer owns stays a row of its own: the delegate's time between its ops, and the runtime's framing
  (Method::execute minus its instructions). Nothing is spread over the layers.

Each row's time is its median over the traced runs; a layer's time is the median of its per-run sums, with the
interquartile range as its spread.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from np_optimizer.layers.files import LAYERS_SCHEMA, aggregate

__all__ = ["host_layers", "DELEGATE_OVERHEAD", "RUNTIME_FRAMING", "UNMATCHED"]

DELEGATE_OVERHEAD = "(delegate overhead)"
RUNTIME_FRAMING = "(runtime framing)"
UNMATCHED = "(delegate op not matched to a layer)"
_KEY_FIELDS = ("key", "module", "class", "family")

# XNNPACK node type -> the words its runtime operators' names start with (lower case)
_KINDS = {
    "Conv2d": ("convolution",), "DepthwiseConv2d": ("convolution",), "ConvTranspose2d": ("deconvolution",),
    "FullyConnected": ("fully connected",), "StaticTranspose": ("transpose",),
    "StaticReshape": ("static reshape", "copy", "reshape"), "GlobalAvgPooling2d": ("mean", "global average"),
    "AvgPooling2d": ("average pooling",), "MaxPooling2d": ("max pooling", "argmax"), "Add": ("add",),
    "Multiply": ("multiply",), "Subtract": ("subtract",), "Div": ("divide",), "Convert": ("convert",),
    "Softmax": ("softmax",), "Clamp": ("clamp",), "Sigmoid": ("sigmoid",), "Concatenate2": ("concatenate", "copy"),
    "Concatenate3": ("concatenate", "copy"), "Concatenate4": ("concatenate", "copy"),
}


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _iqr(values: Sequence[float]) -> float:
    ordered = sorted(values)
    if len(ordered) < 4:
        return ordered[-1] - ordered[0] if ordered else 0.0
    return ordered[(3 * len(ordered)) // 4] - ordered[len(ordered) // 4]


def _fits(event_name: str, node_type: str | None) -> bool:
    words = _KINDS.get(str(node_type or "").removeprefix("XNN"))
    return words is None or event_name.lower().startswith(words)


def _align(events: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> list[int | None]:
    """The node index of each delegate event: one to one when the counts agree, else in order by kind."""
    if len(events) == len(nodes):
        return list(range(len(nodes)))
    out: list[int | None] = []
    next_node = 0
    for event in events:
        found = next((k for k in range(next_node, len(nodes)) if _fits(str(event["delegate_op"]), nodes[k]["type"])),
                     None)
        out.append(found)
        if found is not None:
            next_node = found + 1
    return out


class _Rows:
    """Row descriptions (layer key fields, op family, placement, tool op name) by row id."""

    def __init__(self, trace: dict[str, Any], graph: dict[str, Any]) -> None:
        self.instructions = {int(i["id"]): i for i in trace.get("instructions") or []}
        ops = graph.get("ops") or []
        self.kernel_ops: dict[Any, dict[str, Any]] = {o["handle"]: o for o in ops if not o.get("delegated") and o.get("handle") is not None}
        self.delegate_ops: dict[tuple[Any, Any], dict[str, Any]] = {(o.get("delegate"), o["handle"]): o for o in ops
                             if o.get("delegated") and o.get("handle") is not None}
        self.meta: dict[str, dict[str, Any]] = {}

    def _add(self, row_id: str, fields: dict[str, Any]) -> str:
        self.meta.setdefault(row_id, fields)
        return row_id

    def unowned(self, key: str, placement: str) -> str:
        return self._add(f"{key}|{placement}", {"key": key, "module": None, "class": None, "family": "overhead",
                                                "op_family": None, "overhead": False, "unowned": True,
                                                "placement": placement, "raw_id": key})

    def kernel(self, instruction: dict[str, Any]) -> str:
        op = next((self.kernel_ops[h] for h in instruction.get("handles") or [] if h in self.kernel_ops), None)
        name = str(instruction.get("op"))
        if op is None:
            return self._add(f"kernel|{instruction['id']}", {"key": name, "module": None, "class": None,
                                                             "family": name, "op_family": name, "overhead": False,
                                                             "placement": "CPU (portable)", "raw_id": name})
        return self._add(f"kernel|{instruction['id']}", {**{f: op.get(f) for f in _KEY_FIELDS},
                                                         "op_family": op.get("op_family"),
                                                         "overhead": bool(op.get("overhead")),
                                                         "placement": "CPU (portable)", "raw_id": name,
                                                         "graph_macs": op.get("macs")})

    def _owner(self, delegate: Any, nodes: list[dict[str, Any]], index: int) -> dict[str, Any] | None:
        """The graph op a delegate node comes from; for a node the delegate inserted, its producer's (else its
        first consumer's)."""
        seen: set[int] = set()
        while index not in seen:
            seen.add(index)
            node = nodes[index]
            op = self.delegate_ops.get((delegate, node.get("handle")))
            if op is not None:
                return op
            inputs = node.get("inputs") or []
            producer = next((k for k, n in enumerate(nodes) if inputs and n.get("output") == inputs[0]), None)
            if producer is None:
                break
            index = producer
        node = nodes[index]
        consumer = next((k for k, n in enumerate(nodes) if node.get("output") in (n.get("inputs") or [])
                         and self.delegate_ops.get((delegate, n.get("handle"))) is not None), None)
        if consumer is None:
            return None
        found: dict[str, Any] | None = self.delegate_ops.get((delegate, nodes[consumer].get("handle")))
        return found

    def delegate_op(self, instruction: dict[str, Any], index: int | None, event_name: str, placement: str) -> str:
        nodes = instruction.get("ops") or []
        if index is None:
            return self.unowned(UNMATCHED, placement)
        owner = self._owner(instruction.get("delegate"), nodes, index)
        if owner is None:
            return self.unowned(UNMATCHED, placement)
        node = nodes[index]
        own = self.delegate_ops.get((instruction.get("delegate"), node.get("handle"))) is owner
        kind = str(node.get("type") or "").removeprefix("XNN").lower()
        return self._add(f"delegate|{instruction['id']}|{index}", {
            **{f: owner.get(f) for f in _KEY_FIELDS}, "op_family": owner.get("op_family") if own else kind,
            "overhead": bool(owner.get("overhead")) or not own, "placement": placement, "raw_id": event_name,
            "graph_macs": owner.get("macs") if own else None})


def _one_run(events: list[dict[str, Any]], rows: _Rows) -> tuple[dict[str, float], float | None]:
    """Nanoseconds per row id in one traced run, and its Method::execute time."""
    spent: dict[str, float] = defaultdict(float)
    pending: list[dict[str, Any]] = []
    instructions_ns = 0.0
    execute = None
    for event in events:
        if event["delegate_op"]:
            pending.append(event)
            continue
        name = event["name"]
        instruction = rows.instructions.get(int(event["instruction"] or 0))
        if name == "DELEGATE_CALL":
            inner = [e for e in pending if e["instruction"] == event["instruction"]]
            pending = []
            placement = str((instruction or {}).get("backend") or "delegate").removesuffix("Backend").upper()
            nodes = (instruction or {}).get("ops")
            if instruction is None or nodes is None:
                spent[rows.unowned(UNMATCHED, placement)] += event["ns"]
            else:
                for item, index in zip(inner, _align(inner, nodes)):
                    spent[rows.delegate_op(instruction, index, str(item["delegate_op"]), placement)] += item["ns"]
                spent[rows.unowned(DELEGATE_OVERHEAD, placement)] += event["ns"] - sum(e["ns"] for e in inner)
            instructions_ns += event["ns"]
        elif name == "OPERATOR_CALL" and instruction is not None:
            spent[rows.kernel(instruction)] += event["ns"]
            instructions_ns += event["ns"]
        elif name == "Method::execute":
            execute = float(event["ns"])
    if execute is not None:
        spent[rows.unowned(RUNTIME_FRAMING, "runtime")] += execute - instructions_ns
    return spent, execute


def host_layers(traced: list[list[dict[str, Any]]], trace: dict[str, Any], graph: dict[str, Any], *,
                untraced_median_ms: float | None, tool: str) -> dict[str, Any]:
    """The layers document of one measured round (files.py's shape), cost field `time_ms`.

    Long because: the per-run sums, the row and layer medians, the two add-up ratios and the tracing cost are
    computed together from the same runs.
    """
    rows = _Rows(trace, graph)
    per_run = [(spent, execute) for spent, execute in (_one_run(events, rows) for events in traced)
               if execute is not None]
    warnings: list[str] = []
    samples: dict[str, list[float]] = defaultdict(list)
    by_key: dict[str, list[float]] = defaultdict(list)
    for spent, _execute in per_run:
        keys: dict[str, float] = defaultdict(float)
        for row_id in rows.meta:
            ms = spent.get(row_id, 0.0) / 1e6
            samples[row_id].append(ms)
            keys[rows.meta[row_id]["key"]] += ms
        for key, ms in keys.items():
            by_key[key].append(ms)
    out_rows = [{**meta, "time_ms": _median(samples[row_id]), "runs": len(samples[row_id])}
                for row_id, meta in rows.meta.items() if samples[row_id]]
    layers = aggregate(out_rows, "time_ms")
    for entry in layers:
        values = by_key[entry["key"]]
        entry["time_ms"] = entry["cost"] = _median(values)
        entry["spread_ms"] = _iqr(values)
        entry["runs"] = len(values)
        entry["unowned"] = entry["key"] in (DELEGATE_OVERHEAD, RUNTIME_FRAMING, UNMATCHED)
    executes = [execute / 1e6 for _spent, execute in per_run]
    traced_median = _median(executes) if executes else None
    row_sum = sum(e["cost"] for e in layers)
    layer_sum = sum(e["cost"] for e in layers if not e["unowned"])
    for entry in layers:
        entry["share_pct"] = round(100.0 * entry["cost"] / row_sum, 3) if row_sum else None
    layers.sort(key=lambda e: (-e["cost"], e["key"]))
    ratios = {
        "rows_vs_traced_execute": row_sum / traced_median if traced_median else None,
        "layers_vs_untraced_median": layer_sum / untraced_median_ms if untraced_median_ms else None,
        "tracing_cost_pct": 100.0 * (traced_median / untraced_median_ms - 1.0)
        if traced_median and untraced_median_ms else None,
    }
    if ratios["rows_vs_traced_execute"] is not None and abs(ratios["rows_vs_traced_execute"] - 1.0) > 0.02:
        warnings.append(f"The rows' medians add up to {100 * ratios['rows_vs_traced_execute']:.1f}% of the traced "
                        "runs' median time (more than 2% off): the runs varied; compare shares, or trace more runs "
                        "(num_layer_executions).")
    if not per_run:
        warnings.append("The ETDump held no complete traced run: no per-layer times.")
    return {
        "schema_version": LAYERS_SCHEMA, "result_kind": "measured",
        "cost": {"field": "time_ms", "unit": "ms", "total": traced_median, "row_sum": row_sum,
                 "source": f"ETDump of {len(per_run)} traced runs after the timed ones ({tool} event tracer; medians "
                           "per row; XNNPACK times its ops in whole microseconds)"},
        "traced_runs": len(per_run), "ratios": ratios,
        "key": "module path + class + op family from nn_module_stack, through the compile's debug handles; an op a "
               "delegate inserted belongs to the layer that produced its input",
        "coverage": None, "layers": layers, "rows": out_rows, "warnings": warnings,
    }
