"""Host per op: a traced pass over a .pte with ETDump enabled, read back with ExecuTorch's Inspector and an ETRecord
of the compile, joined to module paths. The trace perturbs timing, so a headline latency never comes from here: it
comes from untraced timed runs; this pass says where the time goes. Needs torch and ExecuTorch.

    etrecord_lowering(program, path) -> (executorch program, ETRecord written)   at compile time (XNNPACK)
    traced_ops(pte, etrecord, inputs, runs, work_dir) -> rows keyed like every other per-layer row
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from np_optimizer.errors import UnsupportedError
from np_optimizer.layers.keys import LayerKey, module_of, op_family
from np_optimizer.records import to_dict
from np_optimizer.versions import tool_version

__all__ = ["traced_ops"]


def _key(event: Any) -> tuple[LayerKey | None, str]:
    hierarchy = getattr(event, "module_hierarchy", None)
    stack = hierarchy if isinstance(hierarchy, dict) else None
    if stack is None and isinstance(hierarchy, list) and hierarchy:
        stack = hierarchy[-1] if isinstance(hierarchy[-1], dict) else None
    found = module_of(stack)
    ops = list(getattr(event, "op_types", None) or [])
    family = op_family(ops[0]) if ops else op_family(str(event.name))
    if found is None:
        return None, family
    return LayerKey(found[0], found[1], family), family


def traced_ops(pte: Path, etrecord: Path, inputs: tuple[Any, ...], runs: int, work_dir: Path) -> list[dict[str, Any]]:
    """Per op and per delegate call: p50, p90 (ms) and count over `runs` traced runs, with its layer key (from the
    ETRecord's nn_module_stack through the Inspector), the event name and debug handles kept as raw ids."""
    from executorch.devtools import Inspector
    from executorch.extension.pybindings.portable_lib import _load_for_executorch

    work_dir.mkdir(parents=True, exist_ok=True)
    module = _load_for_executorch(str(pte), enable_etdump=True, debug_buffer_size=1 << 22)
    for _ in range(runs):
        module.forward(list(inputs))
    etdump = work_dir / "run.etdp"
    if module.has_etdump():
        module.write_etdump_result_to_file(str(etdump), str(work_dir / "run.debug"))
    if not etdump.is_file():  # the pip runtime has the API but records nothing
        raise UnsupportedError(
            f"The ExecuTorch runtime here (executorch {tool_version('executorch')}) was built without the event "
            "tracer, so it records no per-op times (ETDump).", hint="Per-op timing needs a runtime built with "
            "EXECUTORCH_ENABLE_EVENT_TRACER=ON; the headline latency is unaffected.", code="NP-PRF-422")
    inspector = Inspector(etdump_path=str(etdump), etrecord=str(etrecord))
    rows: list[dict[str, Any]] = []
    for block in inspector.event_blocks:
        if block.name != "Execute":
            continue
        for event in block.events:
            perf = getattr(event, "perf_data", None)
            if perf is None or event.name in ("Method::execute", "Program::load_method"):
                continue
            key, family = _key(event)
            fields: dict[str, str | None] = dict(to_dict(key)) if key else {
                "key": str(event.name), "module": None, "class": None, "family": family}
            rows.append({**fields, "op_family": family, "raw_id": str(event.name),
                         "debug_handles": getattr(event, "debug_handles", None),
                         "placement": event.delegate_backend_name or "CPU (portable)",
                         "time_ms": float(perf.p50), "p90_ms": float(perf.p90), "count": len(perf.raw),
                         "overhead": False})
    return rows
