"""The ETRecord of a compiled program, made when asked for (np export --level inspect), not at every compile.

ExecuTorch's Inspector joins a measured round's ETDump (trace.etdp) to the graph through an ETRecord. np's own
per-layer views read the trace map the compile writes (layers/trace_map.py) and never an ETRecord, so the compile makes
none: generate_etrecord deep-copies the edge program and saving one serialises two programs, about 0.5 s of CPU per
compile of bench/run_overhead.py's ResNet-18 (and 5 to 25 MB in each compile folder and cache entry). Made here it
costs one more lowering of the checkpoint (about the compile's own time, compile.json's `seconds`). The lowering is
reproducible (one .pt2 gives the same .pte bytes in any folder), and the .pte this lowering gives is checked against
the compiled one, so the ETRecord describes the very .pte that was measured.
"""

from __future__ import annotations

import hashlib
import io
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from np_optimizer.adapters.torch_private import lean_lowering
from np_optimizer.backends import get_backend
from np_optimizer.devices import Device
from np_optimizer.errors import CompileError, UnsupportedError
from np_optimizer.files import write_bytes

__all__ = ["ETRECORD_FILE", "check_etrecord", "write_etrecord"]

ETRECORD_FILE = "model.etrecord"


def check_etrecord(device: Device) -> None:
    """Raise when np makes no ETRecord for the device's backend (before anything is written)."""
    if get_backend(device.backend).lower_with_etrecord is None:
        raise UnsupportedError(f"np makes no ETRecord for {device.name} ({device.backend}): ExecuTorch's Inspector "
                               "reads the ETDump of a program measured on this machine's runtime.",
                               hint="Export with --level deploy or result; on an Ethos-U device, np report --layers "
                                    "shows Vela's per-layer figures.", code="NP-CFG-422")


def write_etrecord(program_path: Path, device: Device, pte_sha256: str, path: Path, *,
                   portable: Callable[[str], str] | None = None) -> Path:
    """Lower the .pt2 at `program_path` for `device` again, keeping the ETRecord, and write it to `path` (atomic);
    a lowering whose .pte is not the compiled one (`pte_sha256`) is an error, not an ETRecord of another program.
    `portable` rewrites each node's stack trace first (the ETRecord stores them, with the absolute paths of the
    model's source and of torch's modules; the .pte holds none, so its bytes stay the same)."""
    from np_optimizer.graph.program_io import load_program

    check_etrecord(device)
    backend = get_backend(device.backend)
    assert backend.lower_with_etrecord is not None
    program = load_program(program_path)
    if portable is not None:
        _rewrite_stack_traces(program, portable)
    with tempfile.TemporaryDirectory(prefix="np-etrecord-") as work, lean_lowering():  # as the compile lowers
        lowered = backend.lower_with_etrecord(program, device.mlia_target, Path(work))
        config = backend.executorch_config() if backend.executorch_config else None
        executorch_program = lowered.edge.to_executorch(config=config)
        got = hashlib.sha256(executorch_program.buffer).hexdigest()
        if got != pte_sha256:
            raise CompileError(f"Lowering {program_path.name} again gave another .pte ({got[:12]}) than the compiled "
                               f"one ({pte_sha256[:12]}): its ETRecord would describe another program.",
                               hint="The tools changed since it was compiled: run the experiment again with "
                                    "`np run --force`, then export.")
        buffer = io.BytesIO()
        executorch_program.get_etrecord().save(buffer)
    write_bytes(path, buffer.getvalue())
    return path


def _rewrite_stack_traces(program: Any, rewrite: Callable[[str], str]) -> None:
    for module in program.graph_module.modules():  # control flow's submodules too
        graph = getattr(module, "graph", None)
        for node in graph.nodes if graph is not None else ():
            trace = node.meta.get("stack_trace")
            if isinstance(trace, str):
                node.meta["stack_trace"] = rewrite(trace)
