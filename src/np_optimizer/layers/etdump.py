"""Read an ETDump (the runtime's event trace) without importing ExecuTorch: the flatc binary and the ETDump schema
that ship in the executorch wheel turn it into JSON (executorch.devtools would import torch, seconds per round).

    runs(data) -> one list per traced execute call of {"name", "instruction", "delegate_op", "ns"}

A trace that cannot be read raises RuntimeError; the caller turns it into a warning (a view never fails a round).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["runs"]


def _executorch_dir() -> Path:
    spec = importlib.util.find_spec("executorch")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("ExecuTorch is not installed here, so the ETDump cannot be read")
    return Path(list(spec.submodule_search_locations)[0])


def _decode(data: bytes) -> dict[str, Any]:
    root = _executorch_dir()
    flatc, schemas = root / "data" / "bin" / "flatc", root / "devtools" / "etdump"
    with tempfile.TemporaryDirectory(prefix="np-etdump-") as folder:
        work = Path(folder)
        for schema in schemas.glob("*.fbs"):
            shutil.copy(schema, work / schema.name)
        (work / "trace.bin").write_bytes(data)
        proc = subprocess.run([str(flatc), "--json", "--defaults-json", "--strict-json", "--size-prefixed", "-o",
                               folder, str(work / "etdump_schema_flatcc.fbs"), "--", str(work / "trace.bin")],
                              capture_output=True, text=True, timeout=120)
        out = work / "trace.json"
        if proc.returncode != 0 or not out.is_file():
            raise RuntimeError(f"flatc could not decode the ETDump: {proc.stderr.strip()[-300:]}")
        decoded: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
        return decoded


def runs(data: bytes) -> list[list[dict[str, Any]]]:
    """The profile events of each traced execute call, in the order the runtime logged them (an instruction's inner
    delegate ops before its DELEGATE_CALL, a kernel's native_call_* before its OPERATOR_CALL, Method::execute last).
    Durations are ticks, which ExecuTorch's Linux platform layer counts in nanoseconds."""
    out = []
    for run in _decode(data).get("run_data") or []:
        if run.get("name") != "Execute":
            continue
        events = []
        for event in run.get("events") or []:
            profile = event.get("profile_event")
            if not profile:
                continue
            events.append({"name": profile.get("name") or None, "instruction": profile.get("instruction_id"),
                           "delegate_op": profile.get("delegate_debug_id_str") or None,
                           "ns": int(profile.get("end_time", 0)) - int(profile.get("start_time", 0))})
        out.append(events)
    return out
