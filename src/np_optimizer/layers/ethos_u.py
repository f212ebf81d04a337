"""The per-layer profile of an MLIA round on an Ethos-U device: Vela's per-layer rows (cycles, share, placement,
MACs and utilisation, SRAM/DRAM/flash access cycles, staging memory) keyed by module path, the CPU ops of the compiled
program beside them, and the coverage of the round's totals. No torch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from np_optimizer.files import write_text
from np_optimizer.layers.coverage import coverage_of
from np_optimizer.layers.files import LAYERS_FILE, LAYERS_SCHEMA, aggregate
from np_optimizer.layers.graph import GRAPH_FILE
from np_optimizer.layers.vela import DEBUG_FILE, join_rows, read_debug_info, read_per_layer_csv

__all__ = ["ethos_u_layers", "write_layers"]


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


def ethos_u_layers(estimates: list[dict[str, Any]], compiled_dir: Path | None, *, total_cycles: float,
                   estimated_compiled: bool) -> dict[str, Any]:
    """The layers document of one round (files.py's shape). `estimated_compiled`: MLIA estimated the compile's own
    .tosa (else MLIA's int8 version of the float .pt2, which has no debug information of ours)."""
    warnings: list[str] = []
    rows: list[dict[str, Any]] = []
    debug = compiled_dir / "ethos_u" / DEBUG_FILE if compiled_dir and estimated_compiled else None
    events = None
    if debug is not None and debug.is_file():
        try:
            events = read_debug_info(debug)
        except (OSError, ValueError) as exc:
            warnings.append(f"The compile's Arm debug information is unreadable ({exc}); rows keep TOSA names.")
    if len(estimates) > 1 and events is not None:
        warnings.append("ExecuTorch writes the Arm debug information of the last NPU partition only: rows of the "
                        "other partitions may keep their TOSA names.")
    no_debug = "no debug information was recorded with the compile" if estimated_compiled else \
        "MLIA quantized and compiled this float checkpoint itself, without ExecuTorch's debug information"
    for index, estimate in enumerate(estimates):
        path = _per_layer_csv(estimate)
        if path is None:
            warnings.append(f"MLIA wrote no Vela per-layer CSV for partition {index}: its layers are not listed.")
            continue
        joined, notes = join_rows(read_per_layer_csv(path, index), events, no_debug=no_debug)
        rows += joined
        warnings += notes
    graph = _read_graph(compiled_dir) if compiled_dir and estimated_compiled else {}
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


def write_layers(work_dir: Path, document: dict[str, Any]) -> str:
    work_dir.mkdir(parents=True, exist_ok=True)
    write_text(work_dir / LAYERS_FILE, json.dumps(document, indent=1))
    return LAYERS_FILE
