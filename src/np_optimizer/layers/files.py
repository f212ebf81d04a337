"""The per-layer file of one profile round (`layers.json` in the round's artifacts folder), referenced from the
round's record (`artifacts["layers"]`), so report.json and job.json stay small. Read without torch.

    {"schema_version": 1, "checkpoint", "device", "method", "result_kind",
     "cost": {"unit": "cycles" | "ms", "total": ..., "source": ...},
     "coverage": {...} (coverage.py), "layers": [one per key, costliest first], "rows": [the tool's rows, keyed],
     "warnings": [...]}
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from np_optimizer.errors import NotFoundError
from np_optimizer.files import CorruptFileError, read_json, write_text
from np_optimizer.records.parts import Fidelity
from np_optimizer.records.results import ProfileResult

__all__ = ["LAYERS_FILE", "LAYERS_SCHEMA", "aggregate", "read_layers", "write_layers", "layers_path", "read_numerics",
           "SENSITIVITY_FILE", "read_sensitivity"]

LAYERS_FILE = "layers.json"
SENSITIVITY_FILE = "layers_sensitivity.json"  # graph_quantize's `sensitivity:` (pipeline/sensitivity.py)
LAYERS_SCHEMA = 1
_SUMMED = ("cycles", "npu_cycles", "sram_access_cycles", "dram_access_cycles", "on_chip_flash_access_cycles",
           "off_chip_flash_access_cycles", "macs", "graph_macs", "time_ms")


def aggregate(rows: Iterable[dict[str, Any]], cost_field: str) -> list[dict[str, Any]]:
    """One entry per layer key: costs summed (overhead rows' cost also kept apart), staging as the maximum, MAC
    utilisation weighted by cycles, placement as the set of targets, the raw ids kept. Costliest first."""
    layers: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry = layers.setdefault(row["key"], {
            "key": row["key"], "module": row.get("module"), "class": row.get("class"), "family": row.get("family"),
            "placement": [], "overhead_cost": 0, "rows": 0, "raw_ids": [], "op_families": [], "_util": 0.0})
        entry["rows"] += 1
        for name in _SUMMED:
            if row.get(name) is not None:
                entry[name] = entry.get(name, 0) + row[name]
        cost = row.get(cost_field)
        if row.get("overhead") and cost:
            entry["overhead_cost"] += cost
        if row.get("staging_bytes") is not None:
            entry["staging_bytes"] = max(entry.get("staging_bytes", 0), row["staging_bytes"])
        if row.get("util_mac_pct") is not None and row.get("cycles"):
            entry["_util"] += row["util_mac_pct"] * row["cycles"]
        where = row.get("placement")
        if where and where not in entry["placement"]:
            entry["placement"].append(where)
        for value, field in ((row.get("raw_id"), "raw_ids"), (row.get("op_family"), "op_families")):
            if value and value not in entry[field]:
                entry[field].append(value)
    total = sum(e.get(cost_field) or 0 for e in layers.values())
    out = []
    for entry in layers.values():
        util = entry.pop("_util")
        if entry.get("cycles"):
            entry["util_mac_pct"] = round(util / entry["cycles"], 3)
        cost = entry.get(cost_field)
        entry["cost"] = cost
        entry["share_pct"] = round(100.0 * cost / total, 3) if cost is not None and total else None
        entry["placement"] = "+".join(sorted(entry["placement"])) or None
        out.append(entry)
    out.sort(key=lambda e: (-(e["cost"] if e["cost"] is not None else -1), e["key"]))
    return out


def layers_path(experiment: Path, result: ProfileResult) -> Path | None:
    """The per-layer file a round's record references (paths are relative to the experiment), if it has one."""
    name = result.artifacts.get("layers")
    return experiment / name if name else None


def read_layers(path: Path) -> dict[str, Any]:
    """A layers.json, checked for its schema; a missing or damaged one is a clear NotFoundError."""
    if not path.is_file():
        raise NotFoundError(f"The per-layer file {path} is missing.", hint="Profile the checkpoint again "
                            "(np profile CHECKPOINT --force).", code="NP-RPT-404")
    try:
        data = read_json(path)
    except CorruptFileError as exc:
        raise NotFoundError(f"The per-layer file {path} is unreadable: {exc}", hint="Profile the checkpoint again "
                            "(np profile CHECKPOINT --force).", code="NP-RPT-404") from exc
    if int(data.get("schema_version") or 0) > LAYERS_SCHEMA or not isinstance(data.get("layers"), list):
        raise NotFoundError(f"The per-layer file {path} is of another np version.", hint="Profile the checkpoint "
                            "again with this np (np profile CHECKPOINT --force).", code="NP-RPT-404")
    return data


def write_layers(work_dir: Path, document: dict[str, Any]) -> str:
    """Write a round's layers.json (atomically) into its folder; returns the name its record references."""
    work_dir.mkdir(parents=True, exist_ok=True)
    write_text(work_dir / LAYERS_FILE, json.dumps(document, indent=1))
    return LAYERS_FILE


def read_numerics(experiment: Path, fidelity: Fidelity | None) -> tuple[dict[str, Any] | None, str | None]:
    """The job's per-layer SNR file (numerics.py's layers_snr.json) its fidelity references, or None with no
    warning when the job has none (INPUT_MODEL, a job of an older np), or None with a warning when it is unreadable."""
    name = fidelity.layers.file if fidelity is not None and fidelity.layers is not None else None
    if not name:
        return None, None
    try:
        data = read_json(experiment / name)
    except (OSError, CorruptFileError) as exc:
        return None, f"The per-layer SNR file {name} is unreadable ({exc}): no per-layer SNR shown."
    if int(data.get("schema_version") or 0) > 1 or not isinstance(data.get("layers"), list):
        return None, f"The per-layer SNR file {name} is of another np version: no per-layer SNR shown."
    return data, None


def read_sensitivity(job_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    """A job's layers_sensitivity.json (in its artifacts), or None (a job that did not ask for one), or None with a
    warning when it is unreadable or of another np version."""
    path = job_dir / "artifacts" / SENSITIVITY_FILE
    if not path.is_file():
        return None, None
    try:
        data = read_json(path)
    except (OSError, CorruptFileError) as exc:
        return None, f"The sensitivity file {path.name} is unreadable ({exc}): no per-format columns shown."
    if int(data.get("schema_version") or 0) > 1 or not isinstance(data.get("layers"), list):
        return None, f"The sensitivity file {path.name} is of another np version: no per-format columns shown."
    return data, None
