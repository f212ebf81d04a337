"""The per-layer profile of an MLIA round on an Ethos-U device: Vela's per-layer rows (cycles, share, placement,
MACs and utilisation, SRAM/DRAM/flash access cycles, staging memory) keyed by module path, the CPU ops of the compiled
program beside them, and the coverage of the round's totals. No torch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from np_optimizer.backends.ethos_u import PARTITION_DEBUG
from np_optimizer.layers.coverage import coverage_of
from np_optimizer.layers.files import LAYERS_SCHEMA, aggregate
from np_optimizer.layers.graph import GRAPH_FILE
from np_optimizer.layers.vela import DEBUG_FILE, join_rows, read_debug_info, read_per_layer_csv

__all__ = ["ethos_u_layers"]


def _per_layer_csv(estimate: dict[str, Any]) -> Path | None:
    folder = estimate.get("artifacts_dir")
    found = sorted(Path(folder).glob("*_per-layer.csv")) if folder else []
    return found[0] if found else None


def _read_graph(compiled_dir: Path) -> dict[str, Any]:
    path = compiled_dir / GRAPH_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        data = {}
    return data if isinstance(data, dict) else {}


def _partition_debug(compiled_dir: Path, estimate: dict[str, Any], partitions: int,
                     warnings: list[str]) -> list[dict[str, Any]] | None:
    """The Arm debug information of the partition `estimate` was made from: its own file (debug_<tag>.json, named
    like its .tosa), else, for a single partition, the compile's debug.json. A compile of several partitions without
    the per-partition files (an older np) gives none rather than the last partition's, which would key this
    partition's rows to the wrong modules."""
    folder = compiled_dir / "ethos_u"
    tag = estimate.get("partition_tag")
    path = folder / PARTITION_DEBUG.format(tag=tag) if tag else None
    if path is None or not path.is_file():
        path = folder / DEBUG_FILE if partitions == 1 else None
    if path is None or not path.is_file():
        if partitions > 1:
            warnings.append(f"No Arm debug information of its own for {estimate.get('tosa_file') or 'a partition'} "
                            "(compiled by an older np): its rows keep their TOSA names. Compile again: "
                            "`np profile CHECKPOINT --force`.")
        return None
    try:
        return read_debug_info(path)
    except (OSError, ValueError) as exc:
        warnings.append(f"The compile's Arm debug information {path.name} is unreadable ({exc}); rows keep TOSA names.")
        return None


_MACS_SLACK = 1.10  # Vela's count and the graph's agree on the layers np tests (conv, depthwise, linear); 10% spare


def _unkey_impossible_macs(rows: list[dict[str, Any]], graph: dict[str, Any]) -> list[str]:
    """Rows whose Vela MACs a layer cannot have computed (more than the graph counts for that module) lose the key:
    they keep their TOSA name, with a warning, rather than put another layer's work on this one."""
    computed: dict[str, int] = {}
    for op in graph.get("ops") or []:
        computed[str(op.get("key"))] = computed.get(str(op.get("key")), 0) + int(op.get("macs") or 0)

    def too_many(macs: int, key: str) -> bool:
        return bool(computed.get(key)) and macs > computed[key] * _MACS_SLACK

    notes: list[str] = []

    def unkey(row: dict[str, Any]) -> None:
        notes.append(f"Vela row {row['raw_id']} counts {int(row.get('macs') or 0):,} MACs, more than {row['key']} "
                     f"computes ({computed[row['key']]:,}): it keeps its TOSA name, not that layer's.")
        row.update(key=row["raw_id"], module=None, family=row.get("op_family"), **{"class": None})

    keyed = [r for r in rows if r.get("module") is not None]
    for row in keyed:  # first the rows that alone exceed their layer, then layers whose rows together still do
        if too_many(int(row.get("macs") or 0), row["key"]):
            unkey(row)
    claimed: dict[str, int] = {}
    for row in keyed:
        if row.get("module") is not None:
            claimed[row["key"]] = claimed.get(row["key"], 0) + int(row.get("macs") or 0)
    for row in keyed:
        if row.get("module") is not None and too_many(claimed[row["key"]], row["key"]):
            unkey(row)
    return notes


def ethos_u_layers(estimates: list[dict[str, Any]], compiled_dir: Path | None, *, total_cycles: float,
                   estimated_compiled: bool) -> dict[str, Any]:
    """The layers document of one round (files.py's shape). `estimated_compiled`: MLIA estimated the compile's own
    .tosa (else MLIA's int8 version of the float .pt2, which has no debug information of ours)."""
    warnings: list[str] = []
    rows: list[dict[str, Any]] = []
    no_debug = "no debug information was recorded with the compile" if estimated_compiled else \
        "MLIA quantized and compiled this float checkpoint itself, without ExecuTorch's debug information"
    for index, estimate in enumerate(estimates):
        path = _per_layer_csv(estimate)
        if path is None:
            warnings.append(f"MLIA wrote no Vela per-layer CSV for partition {index}: its layers are not listed.")
            continue
        events = _partition_debug(compiled_dir, estimate, len(estimates), warnings) \
            if compiled_dir and estimated_compiled else None
        joined, notes = join_rows(read_per_layer_csv(path, index), events, no_debug=no_debug)
        rows += joined
        warnings += notes
    graph = _read_graph(compiled_dir) if compiled_dir and estimated_compiled else {}
    warnings += _unkey_impossible_macs(rows, graph)
    for op in graph.get("ops") or []:
        if not op.get("delegated") and not op.get("op_family", "").endswith(("quantize_per_tensor",)):
            rows.append({k: op.get(k) for k in ("key", "module", "class", "family", "op_family", "overhead")}
                        | {"placement": "CPU", "raw_id": op.get("id"), "graph_macs": op.get("macs"),
                           "cycles": None})
    row_cycles = sum(int(r["cycles"]) for r in rows if r.get("cycles") is not None)
    if rows and row_cycles != int(total_cycles):
        warnings.append(f"Vela's per-layer cycles add up to {row_cycles:,}, MLIA's total is {int(total_cycles):,}.")
    coverage = coverage_of(graph) if graph else None
    if coverage is None and not estimated_compiled:
        dropped = [p for e in estimates for p in (e.get("pt2") or {}).get("dropped_partitions", [])]
        coverage = {"npu_op_share_pct": None, "npu_mac_share_pct": None, "partial": bool(dropped),
                    "reason": "MLIA's own int8 version of the float checkpoint" + (
                        f"; {len(dropped)} partition(s) not estimated" if dropped else ""), "left_out": []}
    first = estimates[0] if estimates else {}
    return {
        "schema_version": LAYERS_SCHEMA, "result_kind": "estimated",
        "cost": {"field": "cycles", "unit": "cycles", "total": total_cycles, "row_sum": row_cycles,
                 "clock_hz": first.get("core_clock_hz"),
                 "source": f"Vela {first.get('vela_version')} per-layer CSV (Op Cycles) through MLIA "
                           f"{first.get('mlia_version')}, {first.get('target_profile')}"},
        "key": "module path + class + op family from nn_module_stack (ExecuTorch Arm debug information); "
               "overhead ops with no module are attributed to the producing layer",
        "coverage": coverage, "layers": aggregate(rows, "cycles"), "rows": rows, "warnings": warnings,
        "_graph": graph,  # for the caller's MAC comparison; not written
    }
