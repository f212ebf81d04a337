"""Per-layer times of a measured round on a CPU target: the ETDump of the traced runs (etdump.py), joined to the
layers through the compile's trace map (trace_map.py) and layer file (graph.py). No torch.

How an event finds its layer:
- a kernel outside any delegate (OPERATOR_CALL): its instruction's debug handle names the graph node;
- an op inside an XNNPACK delegate: its events carry only a name ("Convolution (NHWC, F32) IGEMM #1"), in run
  order, so the k-th event of a delegate call is the delegate's k-th serialized node, checked by kind; that node's
  debug handle names the graph node. A node the delegate inserted (a layout transpose, a convert) is given to the
  layer that produced its input, else to the one that reads its output (its time is that layer's overhead);
- what no layer owns stays a row of its own: the delegate's time between its ops, the runtime's framing
  (Method::execute minus its instructions), and the time outside execute (each traced call as the timed runs time
  it, minus its Method::execute: the binding's argument and output handling). Nothing is spread over the layers.

How each time is obtained (a row's and a layer's `estimator`, ESTIMATORS):
- XNNPACK reports each op's time truncated to whole microseconds (XNNPACK's runtime profiling), so every reading is
  short by a fraction of a microsecond, and a sub-microsecond op reads 0. The delegate call itself is timed in
  nanoseconds: what its op readings leave of it is the truncated fractions and the delegate's own overhead. Each op
  gets half a microsecond of that remainder (the mean loss of truncation), at most an equal share of it, and the rest
  stays the delegate-overhead row. The sum is the delegate call either way.
- Every row's time is its mean over the typical runs: the half whose call time (else execute time) is closest to
  its median. A mean resolves what whole-us steps would snap a median to (the run-to-run jitter dithers the steps);
  the band leaves out the preempted and the cold runs a plain mean would take in; and since each run's rows add up to
  its call, the rows' means add up to the band's mean call time, which is near the median. A row's spread is its
  interquartile range over all runs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from np_optimizer.layers.files import LAYERS_SCHEMA, aggregate

__all__ = ["host_layers", "DELEGATE_OVERHEAD", "RUNTIME_FRAMING", "OUTSIDE_EXECUTE", "UNMATCHED", "estimate"]

DELEGATE_OVERHEAD = "(delegate overhead)"
RUNTIME_FRAMING = "(runtime framing)"
OUTSIDE_EXECUTE = "(outside execute)"
UNMATCHED = "(delegate op not matched to a layer)"
OUTSIDE_ID = f"{OUTSIDE_EXECUTE}|runtime"  # its row id (_Rows.unowned)
# why the rows no layer owns are not on the accelerator either: they are not operators (np report --layers' `reason`)
RUNTIME_REASONS = {
    RUNTIME_FRAMING: "not an operator: the runtime's own work inside Method::execute, between its instructions",
    OUTSIDE_EXECUTE: "not an operator: each call's time outside Method::execute (inputs in, outputs out)",
}
_UNOWNED = (DELEGATE_OVERHEAD, RUNTIME_FRAMING, OUTSIDE_EXECUTE, UNMATCHED)
TRUNCATION_NS = 500.0  # XNNPACK truncates each op's time to whole microseconds: half of one is the mean loss
_KEY_FIELDS = ("key", "module", "class", "family")

# XNNPACK node type -> the words its runtime operators' names start with (lower case); a 1x1 convolution runs as a
# fully connected operator
_KINDS = {
    "Conv2d": ("convolution", "fully connected"), "DepthwiseConv2d": ("convolution",), "ConvTranspose2d": ("deconvolution",),
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


_TYPICAL = "over the typical runs (the half of the traced calls nearest their median)"
ESTIMATORS = {
    "mean": f"mean {_TYPICAL} of nanosecond events",
    "mean+trunc": f"mean {_TYPICAL} of XNNPACK's whole-us readings, each op plus its truncation share (up to 0.5 us "
                  "of what the readings leave of the delegate call's nanosecond time)",
    "remainder": f"mean {_TYPICAL} of what the delegate call leaves after its ops' readings and truncation shares",
    "call-execute": f"mean {_TYPICAL} of each call's time (timed as the latency is) minus its Method::execute",
    "call-execute (medians)": "the traced calls' median time minus Method::execute's median (the ETDump holds another "
                              "number of runs than were timed)",
}


def typical(totals: Sequence[float]) -> list[int]:
    """The half of the runs whose total is closest to the totals' median (all of them when fewer than 4): on a busy
    machine the run times can be bimodal, where a band between the quartiles would mix the two."""
    if len(totals) < 4:
        return list(range(len(totals)))
    middle = _median(totals)
    return sorted(sorted(range(len(totals)), key=lambda k: abs(totals[k] - middle))[:(len(totals) + 1) // 2])


def estimate(values: Sequence[float], band: Sequence[int], whole_us: bool) -> tuple[float, str]:
    """A row's time (its mean over the typical runs `band`) and its estimator's code."""
    return sum(values[k] for k in band) / len(band), "mean+trunc" if whole_us else "mean"


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

    def unowned(self, key: str, placement: str, whole_us: bool = False) -> str:
        return self._add(f"{key}|{placement}", {"key": key, "module": None, "class": None, "family": "overhead",
                                                "op_family": None, "overhead": False, "unowned": True,
                                                "placement": placement, "raw_id": key, "whole_us": whole_us})

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
            return self.unowned(UNMATCHED, placement, whole_us=True)
        owner = self._owner(instruction.get("delegate"), nodes, index)
        if owner is None:
            return self.unowned(UNMATCHED, placement, whole_us=True)
        node = nodes[index]
        own = self.delegate_ops.get((instruction.get("delegate"), node.get("handle"))) is owner
        kind = str(node.get("type") or "").removeprefix("XNN").lower()
        return self._add(f"delegate|{instruction['id']}|{index}", {
            **{f: owner.get(f) for f in _KEY_FIELDS}, "op_family": owner.get("op_family") if own else kind,
            "overhead": bool(owner.get("overhead")) or not own, "placement": placement, "raw_id": event_name,
            "graph_macs": owner.get("macs") if own else None, "whole_us": True})


def _delegate_call(spent: dict[str, float], rows: _Rows, event: dict[str, Any], inner: list[dict[str, Any]],
                   instruction: dict[str, Any]) -> None:
    """One delegate call's time over its ops' rows: each op's whole-us reading plus its truncation share (half a
    microsecond, at most an equal share of what the readings leave of the call); the rest is the overhead row."""
    placement = str(instruction.get("backend") or "delegate").removesuffix("Backend").upper()
    left = max(0.0, float(event["ns"]) - sum(e["ns"] for e in inner))
    share = min(TRUNCATION_NS, left / len(inner)) if inner else 0.0
    for item, index in zip(inner, _align(inner, instruction["ops"])):
        spent[rows.delegate_op(instruction, index, str(item["delegate_op"]), placement)] += item["ns"] + share
    spent[rows.unowned(DELEGATE_OVERHEAD, placement)] += event["ns"] - sum(e["ns"] for e in inner) - share * len(inner)


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
            if instruction is None or instruction.get("ops") is None:
                placement = str((instruction or {}).get("backend") or "delegate").removesuffix("Backend").upper()
                spent[rows.unowned(UNMATCHED, placement)] += event["ns"]
            else:
                _delegate_call(spent, rows, event, inner, instruction)
            instructions_ns += event["ns"]
        elif name == "OPERATOR_CALL" and instruction is not None:
            spent[rows.kernel(instruction)] += event["ns"]
            instructions_ns += event["ns"]
        elif name == "Method::execute":
            execute = float(event["ns"])
    if execute is not None:
        spent[rows.unowned(RUNTIME_FRAMING, "runtime")] += execute - instructions_ns
    return spent, execute


def _outside_execute(rows: _Rows, runs: list[tuple[dict[str, float], float | None]],
                     calls_ns: Sequence[float] | None) -> str | None:
    """Add each run's time outside Method::execute (its call's time minus its execute) to the runs; the estimator's
    code, or None when the measuring script timed no calls (an older np's)."""
    if not calls_ns:
        return None
    rows.unowned(OUTSIDE_EXECUTE, "runtime")  # its row, OUTSIDE_ID
    if len(calls_ns) == len(runs):  # one ETDump run per call, in order
        for (spent, execute), call in zip(runs, calls_ns):
            if execute is not None:
                spent[OUTSIDE_ID] = max(0.0, float(call) - execute)
        return "call-execute"
    executes = [execute for _spent, execute in runs if execute is not None]
    if executes:
        gap = max(0.0, _median([float(c) for c in calls_ns]) - _median(executes))
        for spent, _execute in runs:
            spent[OUTSIDE_ID] = gap
    return "call-execute (medians)"


def host_layers(traced: list[list[dict[str, Any]]], trace: dict[str, Any], graph: dict[str, Any], *,
                untraced_median_ms: float | None, tool: str,
                calls_ns: Sequence[float] | None = None) -> dict[str, Any]:
    """The layers document of one measured round (files.py's shape), cost field `time_ms`. `calls_ns`: each traced
    call's time as the timed runs time theirs (the measuring script's trace section), for the outside-execute row.

    Long because: the per-run sums, each row's and layer's estimate, the add-up ratios and the tracing cost are
    computed together from the same runs.
    """
    rows = _Rows(trace, graph)
    all_runs = [_one_run(events, rows) for events in traced]
    outside = _outside_execute(rows, all_runs, calls_ns)
    per_run = [(spent, execute) for spent, execute in all_runs if execute is not None]
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
    whole_keys = {meta["key"] for meta in rows.meta.values() if meta.get("whole_us")}
    calls = [execute + spent.get(OUTSIDE_ID, 0.0) for spent, execute in per_run]  # ns; execute alone without calls
    band = typical(calls)
    special = {DELEGATE_OVERHEAD: "remainder", OUTSIDE_EXECUTE: outside}
    out_rows = []
    for row_id, meta in rows.meta.items():
        if samples[row_id]:
            time_ms, how = estimate(samples[row_id], band, bool(meta.get("whole_us")))
            out_rows.append({**meta, "time_ms": time_ms, "runs": len(samples[row_id]),
                             "estimator": special.get(meta["key"]) or how})
    layers = aggregate(out_rows, "time_ms")
    for entry in layers:
        values = by_key[entry["key"]]
        time_ms, how = estimate(values, band, entry["key"] in whole_keys)
        entry["time_ms"] = entry["cost"] = time_ms
        entry["estimator"] = special.get(entry["key"]) or how
        entry["spread_ms"] = _iqr(values)
        entry["runs"] = len(values)
        entry["unowned"] = entry["key"] in _UNOWNED
    executes = [execute / 1e6 for _spent, execute in per_run]
    traced_median = _median(executes) if executes else None
    row_sum = sum(e["cost"] for e in layers)
    inside_sum = row_sum - sum(e["cost"] for e in layers if e["key"] == OUTSIDE_EXECUTE)
    layer_sum = sum(e["cost"] for e in layers if not e["unowned"])
    for entry in layers:
        entry["share_pct"] = round(100.0 * entry["cost"] / row_sum, 3) if row_sum else None
    layers.sort(key=lambda e: (-e["cost"], e["key"]))
    ratios = {
        "rows_vs_traced_execute": inside_sum / traced_median if traced_median else None,
        "layers_vs_untraced_median": layer_sum / untraced_median_ms if untraced_median_ms else None,
        "rows_vs_untraced_median": row_sum / untraced_median_ms if untraced_median_ms and outside else None,
        "tracing_cost_pct": 100.0 * (traced_median / untraced_median_ms - 1.0)
        if traced_median and untraced_median_ms else None,
    }
    if ratios["rows_vs_traced_execute"] is not None and abs(ratios["rows_vs_traced_execute"] - 1.0) > 0.02:
        warnings.append(f"The rows inside execute add up to {100 * ratios['rows_vs_traced_execute']:.1f}% of the "
                        "traced runs' median execute time (more than 2% off): the runs varied; compare shares, or "
                        "trace more runs (num_layer_executions).")
    off = ratios["rows_vs_untraced_median"]
    if off is not None and abs(off - 1.0) > 0.15:
        warnings.append(f"The rows add up to {100 * off:.0f}% of the untraced median latency (more than 15% off): the "
                        "machine's load changed between the timed and the traced runs, or tracing costs that much on "
                        "this model; compare shares, or profile again (np profile CHECKPOINT --force).")
    if not per_run:
        warnings.append("The ETDump held no complete traced run: no per-layer times.")
    used = sorted({str(e["estimator"]) for e in layers})
    return {
        "schema_version": LAYERS_SCHEMA, "result_kind": "measured",
        "cost": {"field": "time_ms", "unit": "ms", "total": _median(calls) / 1e6 if calls else None,
                 "execute_median": traced_median, "row_sum": row_sum, "typical_runs": len(band),
                 "source": f"the traced calls' median: ETDump of {len(per_run)} traced runs after the timed ones "
                           f"({tool} event tracer; XNNPACK times its ops in whole microseconds)"
                           + ("" if outside else "; no time outside execute: the measuring script timed no calls"),
                 "estimators": {code: ESTIMATORS[code] for code in used if code in ESTIMATORS}},
        "traced_runs": len(per_run), "ratios": ratios,
        "key": "module path + class + op family from nn_module_stack, through the compile's debug handles; an op a "
               "delegate inserted belongs to the layer that produced its input",
        "coverage": None, "layers": layers, "rows": out_rows, "warnings": warnings,
    }
