"""Method `on-device`: measured latency and memory of the compiled .pte, with the ExecuTorch runtime.

On `host` the measuring script runs in a fresh subprocess of this venv's Python; on a device with an SSH destination
in devices.yaml it runs with the device's Python over SSH. Each measurement holds the device's queue lock (one
measurement per device at a time, across np processes; on host the measuring process holds it too, so the device is
free only when that process is gone); the measuring processes die with np, here and on SSH devices. The timeout
bounds the measurement only, never the wait.
Latency is the mean of the timed runs (the spec's "average latency"), with median, percentiles and spread beside it;
memory is the resident high-water mark above the measuring process's baseline. Static counts (weights, MACs,
parameters) come from the checkpoint's job record and are labelled as such. Results are never cached.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

from np_optimizer.backends import get_backend
from np_optimizer.errors import DeviceUnreachableError, MeasureError, UnsupportedError
from np_optimizer.files import CorruptFileError, read_json, write_bytes, write_text
from np_optimizer.layers.graph import GRAPH_FILE
from np_optimizer.layers.trace_map import TRACE_FILE as TRACE_MAP
from np_optimizer.metrics import UNITS
from np_optimizer.metrics import MetricType as M
from np_optimizer.profiler.measure import Measurement, MeasureOptions
from np_optimizer.profiler.measure.device_queue import QueueStatus, expected_duration, record_duration
from np_optimizer.profiler.measure.local import measure_local
from np_optimizer.profiler.measure.queues import Slot, queue_for
from np_optimizer.profiler.measure.ssh import measure_remote, target_for
from np_optimizer.profiler.measure.stats import summarize
from np_optimizer.profiler.methods.base import register_method
from np_optimizer.profiler.request import MethodOutput, ProfileRequest
from np_optimizer.records import MetricValue
from np_optimizer.records.status import CompileStatus

__all__ = ["profile", "measure_options"]

RAW_FILE = "measurement.json"
_KIND = "measured"
_STAT_WARNINGS = ("high spread", "the first timed run")  # the stats findings shown as warnings (outliers stay in extras)


def measure_options(options: dict[str, Any]) -> MeasureOptions:
    """The run.detail.yaml profile options (num_executions, timeout, warmup, num_layer_executions; threads
    optional) with defaults."""
    def pick(name: str, default: Any) -> Any:
        value = options.get(name)
        return default if value is None else value

    threads = options.get("threads")
    return MeasureOptions(num_executions=max(1, int(pick("num_executions", 30))),
                          timeout_s=max(0.001, float(pick("timeout", 60))), warmup=max(0, int(pick("warmup", 3))),
                          threads=int(threads) if threads else None,
                          trace_runs=max(0, int(pick("num_layer_executions", 10))))


def _precheck(request: ProfileRequest) -> None:
    """Raise the np error that says why this request cannot be measured at all."""
    device, compiled = request.device, request.compiled
    backend = compiled.backend or device.backend
    if not (device.backend_spec.runs_on_host and get_backend(backend).runs_on_host):
        raise UnsupportedError(f"The on-device method measures programs an ExecuTorch runtime np can start; "
                               f"{request.checkpoint} for {device.name} is a {backend} program, which only the NPU's "
                               "firmware runs.", hint=f"Use --method mlia for {device.name}.", code="NP-PRF-422")
    if compiled.status != CompileStatus.OK or request.pte_path is None:
        raise UnsupportedError(f"{request.checkpoint} has no runnable .pte for {device.name} (compile status "
                               f"{compiled.status}{': ' + compiled.reason if compiled.reason else ''}).",
                               hint="See the compile section of the result and logs/execution.log.", code="NP-PRF-422")
    if not device.local and request.remote is None:
        raise UnsupportedError(f"Method 'on-device' on '{device.name}' needs an SSH destination for the device.",
                               hint=f"Add `devices: {{{device.name}: {{ssh: user@host, python: /path/to/python}}}}` to "
                               "the workspace's devices.yaml, or use --method mlia.", code="NP-PRF-424")
    if not request.pte_path.is_file():
        raise MeasureError(f"The compiled program {request.pte_path} is missing.", hint="Run the command again: np "
                           "compiles the checkpoint when its .pte is missing.", code="NP-RUN-404",
                           kind="file_not_found")


class _QueueReporter:
    """Turns queue events into the lines the user sees (through request.queue_notice) and the result's warnings."""

    def __init__(self, request: ProfileRequest, device: str) -> None:
        self.notice = request.queue_notice or request.log.info
        self.device = device
        self.warnings: list[str] = []

    def __call__(self, status: QueueStatus) -> None:
        if status.event == "waiting":
            holder = status.holder or {}
            busy = f"busy with {holder.get('label') or 'pid ' + str(holder.get('pid'))}" if holder else "being released"
            late = "; that job is past its expected end" if status.holder_overdue else ""
            self.notice(f"Device {self.device} is {busy}: this measurement is number {status.place} in the queue, "
                        f"estimated wait {status.estimated_wait_s:.0f} s{late}. The timeout starts when it runs.")
        elif status.event == "wait_exceeds_estimate":
            text = (f"The wait for device {self.device} ({status.waited_s:.0f} s) has grown beyond the estimate of "
                    f"{status.estimated_wait_s:.0f} s (place {status.place}; new estimate "
                    f"{status.new_estimate_s:.0f} s more): the job ahead takes longer than expected.")
            self.notice(f"Warning: {text}")
            self.warnings.append(text)
        elif status.event == "acquired" and not status.immediate:
            self.notice(f"Device {self.device} is free after {status.waited_s:.1f} s in the queue; measuring now.")


def _lock(request: ProfileRequest, options: MeasureOptions, reporter: _QueueReporter) -> Slot:
    """The device's queue slot (this machine's lock, or a farm place), with this measurement's expected duration for
    the jobs that queue behind it."""
    expected_s, _how = expected_duration(reporter.device, request.compiled.pte_sha256, runs=options.num_executions,
                                         warmup=options.warmup, timeout_s=options.timeout_s)
    label = f"{request.checkpoint.lower()} of {request.job} (np pid {os.getpid()})"
    remote = None if request.device.local else request.remote
    return queue_for(remote).make(reporter.device, remote, expected_s, label, reporter)


def _measure(request: ProfileRequest, options: MeasureOptions, lock: Slot) -> Measurement:
    assert request.pte_path is not None
    if request.device.local:
        fd = lock.fileno()
        return measure_local(request.pte_path, options, hold_fds=() if fd is None else (fd,))
    remote = lock.remote
    assert remote is not None
    return measure_remote(target_for(remote), request.pte_path, options, python=remote.python,
                          work_dir=remote.work_dir, device=request.device.name)


def _remember(device: str, request: ProfileRequest, measurement: Measurement) -> None:
    """Startup overhead and median latency, for the expected duration the next queued job announces."""
    doc = measurement.doc
    measure_s = float(doc.get("measure_ms") or 0.0) / 1000.0
    record_duration(device, request.compiled.pte_sha256, overhead_s=max(0.0, measurement.wall_s - measure_s),
                    latency_ms=(doc.get("quick") or {}).get("median_ms"))


def _static_metrics(request: ProfileRequest, warnings: list[str]) -> list[MetricValue]:
    stats = request.program_stats or {}
    origin = f"recorded by job {request.job} for this checkpoint"
    out: list[MetricValue] = []
    for metric, key, source in (
        (M.MODEL_WEIGHT_MEMORY, "weight_bytes", f"static count, not measured: bytes of the checkpoint's constant "
                                                f"tensors (weights and buffers of the .pt2), {origin}"),
        (M.MACS, "macs", f"static count of the exported graph, not measured, {origin}"),
        (M.PARAMS, "params", f"static count of the exported graph, not measured, {origin}"),
    ):
        if stats.get(key) is None:
            warnings.append(f"{metric} not given: the job record of {request.checkpoint} has no {key} "
                            "(it is a static count np takes from there, not a measurement).")
            continue
        out.append(MetricValue(str(metric), float(stats[key]), UNITS[metric], source=source))
    return out


def _memory(doc: dict[str, Any]) -> dict[str, Any]:
    memory = dict(doc.get("memory") or {})
    memory.pop("status_kb", None)  # raw /proc lines stay in measurement.json
    planned = doc.get("planned_memory") or {}
    if planned:
        memory["planned_activation_arena_bytes"] = planned.get("activation_arena_bytes")
        memory["planned_activation_arena_source"] = (
            "static, from the .pte's memory plan (" + str(planned.get("source")) + "); XNNPACK's workspace, "
            "packed weights and the intermediates inside a delegate are not included")
    if "after_execute_anon_delta_bytes" in memory:
        memory["split"] = "anon = heap and anonymous mappings (activations, XNNPACK workspace, packed weights); " \
                          "file = mapped .pte and first-touched code pages of the runtime (about 2 MB floor)"
    return memory


def _build(request: ProfileRequest, options: MeasureOptions, measurement: Measurement, lock: Slot,
           warnings: list[str]) -> MethodOutput:
    """The measuring script's document as metrics, extras and provenance.

    Long because: every number carries its provenance (runtime, host, runs done and asked, warm-up, threads), read
    from one document in one place.
    """
    doc = measurement.doc
    runtime, host = doc.get("runtime") or {}, doc.get("host") or {}
    done, asked = int(doc.get("runs_done") or 0), int(doc.get("runs_asked") or options.num_executions)
    warm_done = int(doc.get("warmup_done") or 0)
    threads = runtime.get("threads")
    version = runtime.get("executorch_version")
    where = request.device.name if request.device.local else f"{request.device.name} ({measurement.transport[4:]})"
    if lock.place:
        where = f"{request.device.name}, labgrid place {lock.place.get('place')} ({measurement.transport[4:]})"
    metrics: list[MetricValue] = []
    extras: dict[str, Any] = {}
    partial = bool(doc.get("partial"))
    if partial:
        warnings.append(f"Partial result: {doc.get('partial_reason') or 'the measurement stopped early'}, after "
                        f"{done} of {asked} timed runs; the statistics use the {done} runs done.")
    samples = doc.get("samples_ms") or []
    if samples:
        summary = summarize(samples, doc.get("warmup_ms"))
        warnings += [w[0].upper() + w[1:] + "." for w in summary["warnings"] if w.startswith(_STAT_WARNINGS)]
        extras["latency_ms"] = {k: v for k, v in summary.items() if k != "warnings"}
        runs = f"{done} of {asked} timed runs" + (" (partial: timeout)" if partial else "")
        metrics.append(MetricValue(str(M.LATENCY), summary["avg"], UNITS[M.LATENCY], stat="avg",
                                   source=f"measured on {where}: mean of {runs} after {warm_done} warm-up runs, "
                                          f"ExecuTorch {version} runtime, {threads} threads"))
    else:
        warnings.append(f"{M.LATENCY} not given: no timed run finished before the timeout of {options.timeout_s:g} s "
                        f"({warm_done} of {options.warmup} warm-up runs done).")
    memory = _memory(doc)
    extras["memory"] = memory
    if memory.get("peak_delta_bytes") is not None:
        metrics.append(MetricValue(str(M.MEMORY), memory["peak_delta_bytes"] / (1024 * 1024), UNITS[M.MEMORY],
                                   stat="peak", source="measured: resident high-water mark (VmHWM) of the measuring "
                                   "process above its baseline (RSS after imports and inputs, "
                                   f"{memory.get('baseline_rss_bytes', 0) / 2**20:.0f} MB, not included), over load "
                                   "+ execution; /proc/self/status after clear_refs"))
    else:
        warnings.append(f"{M.MEMORY} not given: {memory.get('reason') or 'the device has no /proc/self/clear_refs'}.")
    metrics += _static_metrics(request, warnings)
    warnings += [str(w) for w in doc.get("warnings") or []]
    stamps = doc.get("timestamps") or {}
    start = (stamps.get("measure_start") or {}).get("epoch") or lock.acquired_at
    end = (stamps.get("measure_end") or {}).get("epoch") or lock.released_at
    extras["measured_window"] = {"start": start, "end": end}
    extras["device_lock_window"] = {"start": lock.acquired_at, "end": lock.released_at,
                                    "clock": "this machine's wall clock (epoch s); measured_window uses the device's"}
    extras["load_ms"] = (doc.get("load") or {}).get("load_ms")
    extras["inputs"] = {"tensors": doc.get("inputs"), "how": "random normal floats / integers in [0, 10), seed 0, "
                        "shapes and dtypes from the .pte's execution plan; the same inputs for every run"}
    provenance = {
        "tool": "executorch runtime", "tool_version": version, "runtime_api": runtime.get("api"),
        "torch": runtime.get("torch_version"), "threads": threads, "cpu_model": host.get("cpu_model"),
        "hostname": host.get("hostname"), "machine": host.get("machine"), "device_model": host.get("device_model"),
        "python": runtime.get("python_version"), "python_executable": runtime.get("python_executable"),
        "runs_done": done, "runs_asked": asked, "warmup_done": warm_done, "warmup_asked": options.warmup,
        "timeout_s": options.timeout_s, "transport": measurement.transport,
        "worker_start": doc.get("worker_start"), "loadavg_at_start": host.get("loadavg_at_start"), "timed": "each execute call, perf_counter_ns",
    }
    if lock.place:
        provenance["farm"] = _farm_record(lock)
        for error in lock.place.get("release_errors") or []:
            warnings.append(f"The farm place {lock.place.get('place')} may still be held: {error}; release it with "
                            f"`labgrid-client -p {lock.place.get('place')} release`.")
    return MethodOutput(result_kind=_KIND, metrics=metrics, extras=extras, provenance=provenance,
                        warnings=list(dict.fromkeys(warnings)), partial=partial, artifacts={"raw": RAW_FILE},
                        timings=_timings(lock, measurement))


def _farm_record(lock: Slot) -> dict[str, Any]:
    """Where a farm round ran: the place, its exporter and tags, the coordinator and labgrid's version."""
    place = lock.place
    farm = lock.remote.farm if lock.remote is not None else None
    return {"engine": "labgrid", "labgrid_version": place.get("labgrid_version"), "place": place.get("place"),
            "exporter": place.get("exporter"), "tags": place.get("tags"), "owner": place.get("owner"),
            "coordinator": farm.coordinator if farm else None, "requested_tags": farm.tag_dict if farm else None,
            "waited_s": round(lock.waited_s, 3), "reservation": place.get("token")}


def _timings(lock: Slot, measurement: Measurement | None) -> dict[str, float]:
    out = {"queue_wait_s": round(float(lock.waited_s), 3)}
    if measurement is not None:
        doc = measurement.doc
        out["measure_s"] = round(float(doc.get("measure_ms") or 0.0) / 1000.0, 3)
        out["load_s"] = round(float((doc.get("load") or {}).get("load_ms") or 0.0) / 1000.0, 3)
        out["process_s"] = round(measurement.wall_s, 3)
    return out


def _write_raw(request: ProfileRequest, doc: dict[str, Any] | None) -> dict[str, str]:
    if doc is None:
        return {}
    request.work_dir.mkdir(parents=True, exist_ok=True)
    write_text(request.work_dir / RAW_FILE, json.dumps(doc, indent=1))
    return {"raw": RAW_FILE}


def _no_layer_costs(result: dict[str, Any]) -> str | None:
    if (result.get("artifacts") or {}).get("layers"):
        return None
    why = (result.get("extras") or {}).get("layer_times_unavailable")
    return why or "this round traced no runs (num_layer_executions: 0, or a round of an older np)"


TRACE_FILE = "trace.etdp"


def _layer_times(request: ProfileRequest, doc: dict[str, Any], options: MeasureOptions,
                 warnings: list[str]) -> tuple[dict[str, str], dict[str, Any]]:
    """The traced pass's ETDump (taken out of the document) written to the round's folder, and the per-layer times
    joined from it: (artifacts, extras). What cannot be had is said once, never faked."""
    from np_optimizer.layers.files import write_layers

    trace = doc.pop("trace", None)
    if not options.trace_runs:
        return {}, {}
    version = (doc.get("runtime") or {}).get("executorch_version")
    if not trace or not trace.get("etdump_b64"):
        why = (trace or {}).get("unavailable") or "the measuring script ran no traced pass (the timed runs were partial)"
        text = (f"No per-layer times: {why}. The ExecuTorch runtime on {request.device.name} is {version}; per-layer "
                "times need one built with the event tracer (the pip wheels of executorch 1.5.1 and later on Linux).")
        warnings.append(text)
        return {}, {"layer_times_unavailable": text}
    request.work_dir.mkdir(parents=True, exist_ok=True)
    data = base64.b64decode(trace["etdump_b64"])
    write_bytes(request.work_dir / TRACE_FILE, data)
    try:
        from np_optimizer.layers.etdump import runs
        from np_optimizer.layers.host_times import host_layers

        warmup = int(trace.get("warmup") or 0)  # the traced pass's warm-up calls, first in the ETDump
        document = host_layers(runs(data)[warmup:], read_json(request.compiled_dir / TRACE_MAP),
                               read_json(request.compiled_dir / GRAPH_FILE),
                               untraced_median_ms=(doc.get("quick") or {}).get("median_ms"),
                               tool=f"ExecuTorch {version}", calls_ns=trace.get("call_ns"))
    except (OSError, ValueError, KeyError, RuntimeError, CorruptFileError) as exc:
        text = f"No per-layer times: the trace could not be joined to the layers ({type(exc).__name__}: {exc})."
        warnings.append(text)
        return {"trace": TRACE_FILE}, {"layer_times_unavailable": text}
    document.update(checkpoint=request.checkpoint, device=request.device.name, method="on-device")
    warnings += document["warnings"]
    summary = {"traced_runs": document["traced_runs"], **document["ratios"], "traced_ms": trace.get("ms")}
    return {"trace": TRACE_FILE, "layers": write_layers(request.work_dir, document)}, {"layer_times": summary}


@register_method("on-device", cacheable=False, no_layer_costs=_no_layer_costs)
def profile(request: ProfileRequest) -> MethodOutput:
    """Measure the compiled .pte on the request's device (host or SSH); a failure raises one clear np error."""
    _precheck(request)
    options = measure_options(request.options)
    device = "host" if request.device.local else request.device.name
    reporter = _QueueReporter(request, device)
    transport = "local subprocess" if request.device.local or request.remote is None else \
        f"ssh {request.remote.destination}:{request.remote.port}"
    if request.remote is not None and request.remote.farm is not None and not request.device.local:
        transport = f"labgrid farm {request.remote.farm.coordinator} (a place tagged " + \
            ", ".join(f"{k}={v}" for k, v in request.remote.farm.tags) + ")"
    lock = _lock(request, options, reporter)
    try:
        with lock:  # held around the measurement only; the timeout starts inside
            measurement = _measure(request, options, lock)
    except (MeasureError, DeviceUnreachableError) as failure:
        # what the failed round keeps besides the error: the script's document, the log tail, where it ran
        failure.context = {"warnings": reporter.warnings, "artifacts": _write_raw(request, failure.doc),
                           "extras": {"failure_kind": failure.kind, "log_tail": failure.stderr_tail[-10:]},
                           "provenance": {"tool": "executorch runtime", "transport": transport,
                                          "runs_asked": options.num_executions, "timeout_s": options.timeout_s,
                                          **({"farm": _farm_record(lock)} if lock.place else {})},
                           "timings": _timings(lock, None)}
        raise
    _remember(device, request, measurement)
    artifacts, extras = _layer_times(request, measurement.doc, options, reporter.warnings)
    _write_raw(request, measurement.doc)
    output = _build(request, options, measurement, lock, reporter.warnings)
    output.artifacts.update(artifacts)
    output.extras.update(extras)
    return output
