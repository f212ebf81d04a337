"""The traced pass: after the timed runs (so they stay untraced), the program loaded again with ExecuTorch's event
tracer on, run a few times, and its ETDump sent back inside the document (base64), so the same bytes come home from
this machine, an SSH device or a farm board. A runtime built without the tracer writes no ETDump: that is said,
never faked."""

from __future__ import annotations

import base64
import os
import tempfile
import time
from typing import Any, Sequence

from .protocol import Json

_MAX_ETDUMP_BYTES = 32 << 20  # a document is one JSON line; beyond this the pass says so instead


def traced_pass(runtime_module: Any, path: str, method_name: str, inputs: Sequence[Any], runs: int,
                seconds_left: float) -> Json:
    """The "trace" section: {"runs", "ms", "etdump_b64"} or {"runs": 0, "unavailable": reason}."""
    load_program = getattr(runtime_module, "_load_program", None)
    if load_program is None:
        return {"runs": 0, "unavailable": "this runtime has no _load_program"}
    if seconds_left <= 0:
        return {"runs": 0, "unavailable": "the timeout expired before the traced pass"}
    try:
        program = load_program(path, enable_etdump=True, debug_buffer_size=0)
    except TypeError:
        return {"runs": 0, "unavailable": "this runtime's loader takes no enable_etdump (too old)"}
    method = program.load_method(method_name)
    start = time.perf_counter()
    done = 0
    for _ in range(runs):
        method(inputs)
        done += 1
        if time.perf_counter() - start >= seconds_left:
            break
    elapsed = (time.perf_counter() - start) * 1e3
    folder = tempfile.mkdtemp(prefix="np-trace-")
    etdump, debug = os.path.join(folder, "trace.etdp"), os.path.join(folder, "trace.debug")
    try:
        program.write_etdump_result_to_file(etdump, debug)
        data = open(etdump, "rb").read() if os.path.isfile(etdump) else b""
    except Exception as e:  # the pybindings raise when the runtime was built without the event tracer
        return {"runs": 0, "unavailable": "no ETDump: %s: %s" % (type(e).__name__, e)}
    finally:
        for name in (etdump, debug):
            if os.path.exists(name):
                os.remove(name)
        os.rmdir(folder)
    if not data:
        return {"runs": 0, "unavailable": "the runtime wrote an empty ETDump (built without the event tracer)"}
    if len(data) > _MAX_ETDUMP_BYTES:
        return {"runs": 0, "unavailable": "the ETDump is %d bytes, over the %d the document carries"
                % (len(data), _MAX_ETDUMP_BYTES)}
    return {"runs": done, "ms": elapsed, "etdump_b64": base64.b64encode(data).decode("ascii")}
