"""The worker: everything that touches torch and the runtime, in order (model file, imports, inputs, load, runs),
each step's results sent as events. Run under the supervisor (events as JSON lines on its private stdout) or alone
with --no-guard (events kept, the document printed here)."""

from __future__ import annotations

import gc
import os
import signal
import traceback

from .document import assemble
from .inputs import build_inputs, check_inputs, describe, make_inputs, method_inputs
from .load import import_runtime, load_method
from .memory import memory_section, read_status, reset_hwm
from .options import Options
from .parent import set_death_signal
from .protocol import Emitter, MeasureError, error_dict, exit_code, now_stamp, print_doc, private_stdout
from .pte import find_plan, model_section
from .timing import timed_runs
from .trace import traced_pass  # at import: a forked worker must not read the archive again (it may be gone)


def run_worker(o: Options, em: Emitter) -> None:
    """Measure; results go out through `em`, failures as MeasureError."""
    em.emit({"ev": "start", "t": now_stamp()})
    path = os.path.abspath(o.pte)
    if not os.path.isfile(path):
        raise MeasureError("file_not_found", "model file not found: %s" % path, path=path)
    model, pte_info = model_section(path, o.method)
    em.emit({"ev": "model", "model": model})

    runtime = import_runtime(o.threads)
    warnings = runtime.warnings
    em.emit({"ev": "runtime", "runtime": runtime.info, "import_ms": runtime.import_ms})

    # inputs are built before the memory baseline, so they do not count as the model's memory
    plan = find_plan(pte_info, o.method)
    inputs, source = build_inputs(o.inputs, o.input_spec, plan, o.method, o.seed, o.int_range)

    # load, with the resident high-water mark reset just before
    gc.collect()
    hwm_problem = reset_hwm()
    if hwm_problem:
        warnings.append(hwm_problem + "; memory deltas are not available")
    st_base = read_status()
    method, load = load_method(runtime, path, o.method, pte_info)
    st_load = read_status()

    expected = method_inputs(method.method_meta())
    if inputs is None:  # no .pte parse: build from the runtime's metadata (after the baseline!)
        warnings.append("inputs were built after the memory baseline (the .pte could not be parsed)")
        inputs = make_inputs([(m["shape"], m["dtype"]) for m in expected], o.seed, o.int_range)
    warnings += check_inputs(inputs, expected, plan, o.method)
    em.emit({"ev": "loaded", "load": load, "inputs": [dict(describe(t), source=source) for t in inputs],
             "expected_inputs": expected, "warnings": warnings}, force=True)

    # measurement, bounded by the timeout; the high-water mark is reset again so it covers executions only
    gc.collect()
    reset_hwm()
    st_pre = read_status()
    runs = timed_runs(method, inputs, warmup=o.warmup, runs=o.runs, timeout=o.timeout, em=em)
    st_exec = read_status()

    import torch

    outputs = [describe(t) if isinstance(t, torch.Tensor) else {"type": type(t).__name__}
               for t in runs.last_outputs or []]
    em.emit({"ev": "end", "partial": runs.partial, "partial_reason": runs.partial_reason,
             "warmup_done": runs.warmup_done, "runs_done": runs.runs_done, "measure_ms": runs.measure_ms,
             "measure_start": runs.measure_start, "measure_end": now_stamp(),
             "memory": memory_section(st_base, st_load, st_pre, st_exec, hwm_problem), "outputs": outputs},
            force=True)
    if o.trace_runs and not runs.partial:  # after the timed runs, so they stay untraced; within the same timeout
        trace = traced_pass(runtime.module, path, o.method, inputs, o.trace_runs, o.timeout - runs.measure_ms / 1e3)
        em.emit({"ev": "trace", "trace": trace}, force=True)


def main_worker(o: Options) -> int:
    """Under the supervisor: events out as JSON lines, every failure reported as an "error" event."""
    em = Emitter(private_stdout())
    try:
        run_worker(o, em)
        em.flush()
        return 0
    except BaseException as e:  # report everything, even KeyboardInterrupt
        err = error_dict(e)
        if err["kind"] == "internal":
            traceback.print_exc()
        em.emit({"ev": "error", "error": err}, force=True)
        return exit_code(err["kind"])


def main_direct(o: Options) -> int:
    """--no-guard: measure in this process and print the document (a hung call hangs it)."""
    started = now_stamp()
    set_death_signal(signal.SIGTERM)  # no supervisor to stop it: it ends with its requester
    out = private_stdout()
    em = Emitter(None)
    try:
        run_worker(o, em)
        doc = assemble(o, em.events, started)
        rc = 0
    except BaseException as e:
        err = error_dict(e)
        doc = assemble(o, em.events, started, error=err)
        rc = exit_code(err["kind"])
    doc["exit_code"] = rc
    print_doc(doc, out, o.pretty)
    return rc
