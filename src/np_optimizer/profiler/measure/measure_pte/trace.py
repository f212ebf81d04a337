"""The traced pass: after the timed runs (so they stay untraced), the program loaded again with ExecuTorch's event
tracer on, run a few times, and its ETDump sent back inside the document (base64), so the same bytes come home from
this machine, an SSH device or a farm board. Each traced call is also timed as the timed runs time theirs
(perf_counter_ns around `method(inputs)`): that time minus the trace's Method::execute is the time outside execute
(the binding's argument and output handling) that no event shows. A runtime built without the tracer writes no
ETDump: that is said, never faked."""

from __future__ import annotations

import base64
import gc
import os
import tempfile
import time
from typing import Any, Sequence

from .protocol import Json

_MAX_ETDUMP_BYTES = 32 << 20  # a document is one JSON line; beyond this the pass says so instead
WARMUP = 3  # loaded anew, the program packs weights and fills caches in its first calls: traced, the reader skips them


def traced_pass(runtime_module: Any, path: str, method_name: str, inputs: Sequence[Any], runs: int,
                seconds_left: float) -> Json:
    """The "trace" section: {"runs", "warmup", "ms", "call_ns" (each call after the warm-up ones, as timed_runs
    times it), "etdump_b64" (all calls, the warm-up ones first)} or {"runs": 0, "unavailable": reason}."""
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
    clock = time.perf_counter_ns
    start = time.perf_counter()
    calls = []
    gc_was = gc.isenabled()
    gc.disable()  # as in the timed runs: no collector pause inside a call
    try:
        for _ in range(WARMUP):
            method(inputs)
        for _ in range(runs):
            a = clock()
            method(inputs)
            calls.append(clock() - a)
            if time.perf_counter() - start >= seconds_left:
                break
    finally:
        if gc_was:
            gc.enable()
    done = len(calls)
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
    return {"runs": done, "warmup": WARMUP, "ms": elapsed, "call_ns": calls,
            "etdump_b64": base64.b64encode(data).decode("ascii")}
