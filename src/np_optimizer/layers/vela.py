"""Ethos-U per layer: Vela's per-layer CSV (written by MLIA beside its estimate) joined to the user's modules through
ExecuTorch's Arm debug information (`debug.json`, schema `executorch/backends/arm/debug/schema.py`). No torch.

Vela names each row of its per-layer CSV by the output tensor of the (fused) operation, which is the name of the TOSA
op that produced it (`tosa_rescale_default_2`); Vela's own splits add a suffix (`..._transpose`, `..._reducesum`).
debug.json maps each TOSA op name to the `nn_module_stack` of the aten node it was lowered from.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from np_optimizer.layers.keys import ROOT, LayerKey, assign_keys, is_overhead, op_family
from np_optimizer.records import to_dict

__all__ = ["VelaRow", "read_per_layer_csv", "read_debug_info", "join_rows", "DEBUG_FILE"]

DEBUG_FILE = "debug.json"

# Vela per-layer CSV column -> (np field, cast)
_COLUMNS: dict[str, tuple[str, type]] = {
    "Original Operator": ("tosa_op", str), "NNG Operator": ("vela_op", str), "Target": ("placement", str),
    "Staging Usage": ("staging_bytes", int), "Op Cycles": ("cycles", int), "NPU": ("npu_cycles", int),
    "SRAM AC": ("sram_access_cycles", int), "DRAM AC": ("dram_access_cycles", int),
    "OnFlash AC": ("on_chip_flash_access_cycles", int), "OffFlash AC": ("off_chip_flash_access_cycles", int),
    "MAC Count": ("macs", int), "Util% (MAC)": ("util_mac_pct", float), "Name": ("raw_id", str),
}


@dataclass(frozen=True)
class VelaRow:
    partition: int
    values: dict[str, Any]

    @property
    def raw_id(self) -> str:
        return str(self.values.get("raw_id", ""))


def _cast(kind: type, text: str) -> Any:
    if kind is str:
        return text
    try:
        return kind(float(text)) if kind is int else kind(text)
    except ValueError:
        return None


def read_per_layer_csv(path: Path, partition: int = 0) -> list[VelaRow]:
    """Rows of Vela's `<model>_per-layer.csv`, in Vela's order, with the columns np keeps (unit: cycles, bytes)."""
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = {"Op Cycles", "Name"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path.name} is not a Vela per-layer CSV (no {sorted(missing)} columns)")
        return [VelaRow(partition, {field: _cast(kind, row.get(column) or ("" if kind is str else "0"))
                                    for column, (field, kind) in _COLUMNS.items() if column in row})
                for row in reader]


def read_debug_info(path: Path) -> list[dict[str, Any]]:
    """debug.json events in the order the TOSA graph was built (topological)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError(f"{path.name} is not ExecuTorch Arm debug information (expected a list of events)")
    return [e for e in data if isinstance(e, dict)]


def _debug_keys(events: list[dict[str, Any]], root_class: str) -> dict[str, LayerKey]:
    """Key of every TOSA op name in debug.json. Events carry no edges, so an overhead op with no module goes to the
    op before it (the nearest producer in build order)."""
    ops = []
    previous: list[str] = []
    for event in events:
        tosa = event.get("tosa_info") or {}
        aten = event.get("aten_info") or {}
        name = str(tosa.get("node_name") or aten.get("node_name") or "")
        if not name:
            continue
        op = str(aten.get("operator_name") or tosa.get("operator_name") or name)
        torch_info = event.get("torch_info") or {}
        ops.append((name, op, torch_info.get("nn_module_stack"), list(previous), torch_info.get("torch_fn")))
        previous = [name]
    return assign_keys(ops, root_class)


def _lookup(name: str, keys: dict[str, LayerKey]) -> tuple[LayerKey | None, str | None]:
    """The key of a Vela row name: exact, else the longest TOSA name it extends (Vela's `_transpose` suffixes)."""
    if name in keys:
        return keys[name], name
    best = max((k for k in keys if name.startswith(k + "_")), key=len, default=None)
    return (keys[best], best) if best else (None, None)


_NO_DEBUG = "no debug information was recorded with the compile"


def join_rows(rows: list[VelaRow], events: list[dict[str, Any]] | None, root_class: str = "model", *,
              no_debug: str = _NO_DEBUG) -> tuple[list[dict[str, Any]], list[str]]:
    """Each Vela row with its layer key; rows whose name debug.json does not know keep their raw id as the key.
    `no_debug`: why there is no debug information, when `events` is None."""
    keys = _debug_keys(events, root_class) if events else {}
    out: list[dict[str, Any]] = []
    unmatched: list[str] = []
    for row in rows:
        key, tosa_name = _lookup(row.raw_id, keys)
        family = op_family(str(row.values.get("tosa_op") or row.values.get("vela_op") or ""))
        # Vela's own splits (the Transpose before a ReduceSum) are data movement whatever op they serve, and so is a
        # node the Arm backend rewrote (executorch 1.5 runs a pad as a CONV2D that keeps the pad's name). Other names
        # say nothing: Vela names a row by its output tensor, often a rescale or reshape fused into a real op.
        named = op_family(str(tosa_name or row.raw_id))
        overhead = is_overhead(family) or is_overhead(op_family(str(row.values.get("vela_op") or ""))) or \
            "pad" in named
        if key is None:
            unmatched.append(row.raw_id)
            key = LayerKey(ROOT, "?", row.raw_id)
            fields: dict[str, str | None] = {"key": row.raw_id, "module": None, "class": None, "family": family}
        else:
            fields = dict(to_dict(key))
        out.append({**fields, "op_family": family, "overhead": overhead, "partition": row.partition,
                    "raw_id": row.raw_id, "tosa_name": tosa_name, **{k: v for k, v in row.values.items()
                                                                    if k != "raw_id"}})
    warnings = []
    if unmatched:
        why = no_debug if not events else \
            "their TOSA names are not in the compile's debug information"
        warnings.append(f"{len(unmatched)} of {len(rows)} Vela rows are keyed by their TOSA name only ({why}): "
                        f"{', '.join(sorted(set(unmatched))[:5])}{' ...' if len(set(unmatched)) > 5 else ''}")
    return out, warnings
