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
from typing import Any, List, Sequence

from .protocol import Json

_MAX_ETDUMP_BYTES = 32 << 20  # a document is one JSON line; beyond this the pass says so instead
# Loaded anew, the program runs slow for its first calls (weights packed, caches filled: a 25 us CNN took 200 us a
# call for its first 2 ms): warm-up calls, traced (the reader skips them), at least 3 and 20 ms, at most 200 calls.
WARMUP_CALLS, WARMUP_S, WARMUP_MAX = 3, 0.020, 200
# A tiny model's traced calls are given at least 50 ms (up to ten times the runs asked): whole-us readings need many
# runs for their mean, and a few runs can all fall in one slow moment of a busy machine.
TRACED_S, TRACED_MAX_FACTOR = 0.050, 10


def traced_pass(runtime_module: Any, path: str, method_name: str, inputs: Sequence[Any], runs: int,
                seconds_left: float) -> Json:
    """The "trace" section: {"runs" (`runs` or more: TRACED_S), "warmup", "ms", "call_ns" (each call after the
    warm-up ones, as timed_runs times it), "etdump_b64" (all calls, the warm-up ones first)} or {"runs": 0,
    "unavailable": reason}."""
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
    calls: List[int] = []
    gc_was = gc.isenabled()
    gc.disable()  # as in the timed runs: no collector pause inside a call
    try:
        warm = 0
        while warm < WARMUP_MAX and (warm < WARMUP_CALLS or time.perf_counter() - start < WARMUP_S) \
                and time.perf_counter() - start < seconds_left:
            method(inputs)
            warm += 1
        traced_start = time.perf_counter()
        while len(calls) < runs or (len(calls) < TRACED_MAX_FACTOR * runs
                                    and time.perf_counter() - traced_start < TRACED_S):
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
    return {"runs": done, "warmup": warm, "ms": elapsed, "call_ns": calls,
            "etdump_b64": base64.b64encode(data).decode("ascii")}
