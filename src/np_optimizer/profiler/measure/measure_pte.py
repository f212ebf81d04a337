#!/usr/bin/env python3
"""Measure an ExecuTorch .pte on this machine and print ONE JSON document on stdout.

Standalone on purpose: it only needs the Python standard library, plus torch and the
ExecuTorch runtime (pip package `executorch`) on the device.  It is copied to remote devices
and run there, so it imports nothing of the project.  Python >= 3.8.

    python3 measure_pte.py model.pte [--warmup 3] [--runs 30] [--timeout 60] [--threads N]
        [--method forward] [--input-spec 1x3x224x224:float32,1x10:int64] [--seed 0]
        [--inputs inputs.pt|inputs.npy|inputs.npz] [--no-guard]

What is timed: each `method(inputs)` call (the same call as `executorch.runtime.Method.execute`)
with time.perf_counter_ns around it and nothing else inside the timed region.

The timeout bounds the measurement only (warm-up + timed runs), not the imports or the load.
When it expires the runs done so far are returned with "partial": true.

Process layout (default): a small supervisor process starts a worker process (this same file with
--_worker).  The worker imports torch and the runtime, loads, runs, and sends events (JSON lines,
flushed at most every 0.5 s so the supervisor wakes up rarely) to the supervisor.  The runtime holds
the GIL during an execute call, so only a separate process can stop a call that hangs and still
report the samples taken before it.  --no-guard runs everything in one process.

Exit codes: 0 ok (also partial), 2 usage, 3 file not found, 4 runtime missing (no torch/executorch
in this Python), 5 load failed (invalid .pte, backend not registered, method missing), 6 input
error, 7 execute failed, 8 hung (an execute call or the load did not return), 9 worker crashed,
10 internal error, 11 interrupted (SIGINT/SIGTERM/SIGHUP before any sample; after some samples the
result comes back as partial).  On error stdout holds {"ok": false, "error": {"kind", "message", ...}, ...}.
"""
import os
import sys

# Run by path, Python puts this file's folder first on sys.path; inside the np package that folder holds queue.py and
# stats.py, which would shadow the standard library's `queue` (torch imports it). Drop it before anything else.
if __name__ == "__main__" and sys.path and os.path.abspath(sys.path[0] or ".") == \
        os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import argparse  # noqa: E402
import datetime  # noqa: E402
import gc  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import socket  # noqa: E402
import struct  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

SCHEMA = "np.measure_pte/1"

EXIT = {
    "ok": 0,
    "usage": 2,
    "file_not_found": 3,
    "runtime_missing": 4,
    "invalid_pte": 5,
    "backend_not_registered": 5,
    "method_not_found": 5,
    "load_failed": 5,
    "input_error": 6,
    "execute_failed": 7,
    "hung": 8,
    "worker_crashed": 9,
    "internal": 10,
    "interrupted": 11,
}

# ScalarType codes of executorch/schema/scalar_type.fbs
SCALAR_TYPES = {
    0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32",
    7: "float64", 11: "bool", 12: "qint8", 13: "quint8", 14: "qint32", 15: "bfloat16",
    16: "quint4x2", 17: "quint2x4", 22: "bits16", 23: "float8_e5m2", 24: "float8_e4m3fn",
    25: "float8_e5m2fnuz", 26: "float8_e4m3fnuz", 27: "uint16", 28: "uint32", 29: "uint64",
}
DTYPE_ALIASES = {
    "float": "float32", "f32": "float32", "fp32": "float32", "half": "float16", "f16": "float16",
    "fp16": "float16", "double": "float64", "f64": "float64", "bf16": "bfloat16", "int": "int32",
    "i32": "int32", "long": "int64", "i64": "int64", "i8": "int8", "u8": "uint8", "i16": "int16",
    "short": "int16",
}
FLOAT_DTYPES = ("float32", "float16", "float64", "bfloat16")

DEFINITIONS = {
    "baseline_rss_bytes": "VmRSS of the measuring process just before the program is loaded (after "
                          "Python, torch and the runtime are imported and the inputs are built); the "
                          "high-water mark is reset here by writing 5 to /proc/self/clear_refs",
    "load_peak_delta_bytes": "VmHWM after loading the program and the method, minus the baseline",
    "after_load_rss_delta_bytes": "VmRSS after loading, minus the baseline (what the load keeps)",
    "execute_peak_delta_bytes": "VmHWM after all warm-up and timed runs, minus the baseline; the mark is "
                                "reset again right after the load, so this covers executions only",
    "execute_peak_above_loaded_bytes": "VmHWM after the runs minus VmRSS after the load: what executing "
                                       "adds on top of the loaded program",
    "after_execute_rss_delta_bytes": "VmRSS after the runs, minus the baseline",
    "peak_delta_bytes": "max(load_peak_delta_bytes, execute_peak_delta_bytes): the resident high-water "
                        "mark of loading plus running the model above the process baseline",
    "after_execute_anon_delta_bytes": "RssAnon after the runs minus RssAnon at the baseline: heap and "
                                      "anonymous mappings (activations, XNNPACK workspace, packed weights)",
    "after_execute_file_delta_bytes": "RssFile after the runs minus RssFile at the baseline: file pages, i.e. "
                                      "the mmapped .pte and code pages of the runtime libraries touched for "
                                      "the first time (about 2 MB even for a trivial model on x86 here)",
}


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------
def now_stamp():
    t = time.time()
    iso = datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat()
    return {"iso": iso, "epoch": t}


class MeasureError(Exception):
    def __init__(self, kind, message, **detail):
        Exception.__init__(self, message)
        self.kind = kind
        self.message = message
        self.detail = detail


def read_status():
    """Memory lines of /proc/self/status, in kB. Empty dict where there is no procfs."""
    out = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
                    out[key] = int(line.split()[1])
    except OSError:
        pass
    return out


def reset_hwm():
    """Reset VmHWM to the current RSS. Returns None on success or the reason it failed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return None
    except OSError as e:
        return "cannot write /proc/self/clear_refs: %s" % e


def cpu_model():
    model = None
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if ":" not in line:
                    continue
                k, v = [s.strip() for s in line.split(":", 1)]
                if k in ("model name", "Model", "Hardware", "CPU implementer", "CPU part",
                         "Processor", "cpu model") and k not in info:
                    info[k] = v
    except OSError:
        pass
    model = info.get("model name") or info.get("cpu model") or info.get("Processor")
    if not model:
        try:
            out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 universal_newlines=True, timeout=5, env=dict(os.environ, LC_ALL="C")).stdout
            for line in out.splitlines():
                if line.strip().startswith("Model name:"):
                    model = line.split(":", 1)[1].strip()
                    break
        except Exception:
            pass
    if not model and info.get("CPU implementer") == "0x41":
        arm_parts = {"0xd03": "Cortex-A53", "0xd04": "Cortex-A35", "0xd05": "Cortex-A55",
                     "0xd07": "Cortex-A57", "0xd08": "Cortex-A72", "0xd09": "Cortex-A73",
                     "0xd0a": "Cortex-A75", "0xd0b": "Cortex-A76", "0xd0d": "Cortex-A77",
                     "0xd41": "Cortex-A78", "0xd46": "Cortex-A510", "0xd47": "Cortex-A710",
                     "0xd4d": "Cortex-A715", "0xd80": "Cortex-A520", "0xd81": "Cortex-A720",
                     "0xd0c": "Neoverse-N1", "0xd40": "Neoverse-V1", "0xd49": "Neoverse-N2"}
        model = arm_parts.get(info.get("CPU part", "").lower())
    return model or platform.processor() or None


def host_info():
    def read(p):
        try:
            with open(p, "rb") as f:
                return f.read().decode("utf-8", "replace").strip("\x00\n ") or None
        except OSError:
            return None
    try:
        affinity = len(os.sched_getaffinity(0))
    except Exception:
        affinity = None
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "machine": platform.machine(),
        "system": platform.system(),
        "kernel": platform.release(),
        "cpu_count": os.cpu_count(),
        "cpus_allowed": affinity,
        "device_model": read("/proc/device-tree/model"),
        "cpufreq_governor": read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "loadavg_at_start": load,
    }


# --------------------------------------------------------------------------------------------
# .pte reader (flatbuffer, schema executorch/schema/program.fbs, file identifier ET12), no deps
# --------------------------------------------------------------------------------------------
class _FB(object):
    def __init__(self, buf):
        self.b = buf

    def u8(self, o):
        return self.b[o]

    def u16(self, o):
        return struct.unpack_from("<H", self.b, o)[0]

    def u32(self, o):
        return struct.unpack_from("<I", self.b, o)[0]

    def i32(self, o):
        return struct.unpack_from("<i", self.b, o)[0]

    def field(self, table, idx):
        """Position of field idx of the table at `table`, or None when absent."""
        vt = table - self.i32(table)
        vt_size = self.u16(vt)
        slot = 4 + 2 * idx
        if slot >= vt_size:
            return None
        off = self.u16(vt + slot)
        return table + off if off else None

    def ref(self, pos):
        return pos + self.u32(pos)

    def vec(self, table, idx):
        """(start, length) of a vector field, or (0, 0)."""
        p = self.field(table, idx)
        if p is None:
            return 0, 0
        v = self.ref(p)
        return v + 4, self.u32(v)

    def tables(self, table, idx):
        start, n = self.vec(table, idx)
        return [self.ref(start + 4 * i) for i in range(n)]

    def string(self, table, idx):
        start, n = self.vec(table, idx)
        if n == 0 and self.field(table, idx) is None:
            return None
        return bytes(self.b[start:start + n]).decode("utf-8", "replace")

    def scalars(self, table, idx, fmt, size):
        start, n = self.vec(table, idx)
        return list(struct.unpack_from("<%d%s" % (n, fmt), self.b, start)) if n else []

    def scalar(self, table, idx, fmt, default=0):
        p = self.field(table, idx)
        return struct.unpack_from("<" + fmt, self.b, p)[0] if p is not None else default


def read_pte_info(path):
    """Execution plans of a .pte: names, inputs, delegates (backend ids), operators and
    non_const_buffer_sizes (planned memory), read from the flatbuffer without torch."""
    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 8:
            raise ValueError("file too short (%d bytes) to be a .pte" % len(head))
        ident = head[4:8]
        if ident != b"ET12":
            raise ValueError("not an ExecuTorch program: file identifier %r, expected b'ET12'" % ident)
        size = None
        if head[8:12] == b"eh00":
            size = struct.unpack_from("<Q", head, 16)[0]
        f.seek(0)
        buf = f.read(size) if size else f.read()
    fb = _FB(buf)
    root = fb.ref(0)
    plans = []
    for plan in fb.tables(root, 1):  # Program.execution_plan
        # ExecutionPlan: 0 name, 1 container_meta_type, 2 values, 3 inputs, 4 outputs, 5 chains,
        # 6 operators, 7 delegates, 8 non_const_buffer_sizes, 9 non_const_buffer_device
        values = fb.tables(plan, 2)

        def tensor_info(vidx):
            ev = values[vidx]
            vtype = fb.scalar(ev, 0, "B")  # EValue.val_type (union); 5 = Tensor
            if vtype != 5:
                return {"kind": {1: "none", 2: "int", 3: "bool", 4: "double", 6: "string"}.get(vtype, str(vtype))}
            t = fb.ref(fb.field(ev, 1))
            st = fb.scalar(t, 0, "b")
            return {"kind": "tensor", "dtype": SCALAR_TYPES.get(st, str(st)),
                    "shape": fb.scalars(t, 2, "i", 4),
                    "shape_dynamism": {0: "static", 1: "dynamic_bound", 2: "dynamic_unbound"}.get(
                        fb.scalar(t, 8, "b"), "?")}
        sizes = fb.scalars(plan, 8, "q", 8)
        plans.append({
            "name": fb.string(plan, 0),
            "inputs": [tensor_info(i) for i in fb.scalars(plan, 3, "i", 4)],
            "outputs": [tensor_info(i) for i in fb.scalars(plan, 4, "i", 4)],
            "operators": sorted(set("%s.%s" % (fb.string(o, 0), fb.string(o, 1) or "default")
                                    for o in fb.tables(plan, 6))),
            "delegates": [fb.string(d, 0) for d in fb.tables(plan, 7)],
            "non_const_buffer_sizes": sizes,
            # index 0 is reserved (always 0), the planned buffers are sizes[1:]
            "planned_arena_bytes": sum(sizes[1:]),
        })
    return {"program_version": fb.scalar(root, 0, "I"), "execution_plans": plans,
            "flatbuffer_bytes": len(buf)}


# --------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------
def norm_dtype(name):
    name = name.strip().lower().replace("torch.", "")
    return DTYPE_ALIASES.get(name, name)


def parse_input_spec(text):
    """'1x3x64x64:float32,2x4:int64' -> [([1,3,64,64],'float32'), ([2,4],'int64')]"""
    specs = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        shape_s, _, dtype = part.partition(":")
        dtype = norm_dtype(dtype or "float32")
        shape_s = shape_s.strip().lower()
        try:
            shape = [] if shape_s in ("", "scalar", "[]") else [int(d) for d in shape_s.split("x")]
        except ValueError:
            raise MeasureError("usage", "bad --input-spec entry %r: shape must look like 1x3x224x224" % part)
        specs.append((shape, dtype))
    return specs


def torch_dtype(torch, name):
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise MeasureError("input_error", "unsupported input dtype %r" % name)
    return dt


def make_inputs(torch, specs, seed, int_range):
    g = torch.Generator().manual_seed(seed)
    lo, hi = int_range
    out = []
    for shape, dtype in specs:
        dt = torch_dtype(torch, dtype)
        if dtype in FLOAT_DTYPES:
            t = torch.randn(shape, generator=g, dtype=torch.float32).to(dt)
        elif dtype == "bool":
            t = torch.randint(0, 2, shape, generator=g).to(torch.bool)
        else:
            t = torch.randint(lo, hi, shape, generator=g).to(dt)
        out.append(t.contiguous())
    return out


def load_inputs_file(torch, path):
    if not os.path.isfile(path):
        raise MeasureError("file_not_found", "inputs file not found: %s" % path, path=path)
    low = path.lower()
    try:
        if low.endswith((".npy", ".npz")):
            import numpy as np
            data = np.load(path, allow_pickle=False)
            arrays = [data[k] for k in data.files] if low.endswith(".npz") else [data]
            return [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except MeasureError:
        raise
    except ImportError as e:
        raise MeasureError("input_error", "reading %s needs numpy: %s" % (path, e))
    except Exception as e:
        raise MeasureError("input_error", "cannot read inputs file %s: %s: %s" % (path, type(e).__name__, e))
    if isinstance(obj, torch.Tensor):
        obj = [obj]
    if isinstance(obj, dict):
        obj = list(obj.values())
    if not isinstance(obj, (list, tuple)) or not all(isinstance(t, torch.Tensor) for t in obj):
        raise MeasureError("input_error", "inputs file %s must hold a tensor or a list/tuple of tensors" % path)
    return [t.contiguous() for t in obj]


def describe(torch, t):
    return {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""), "nbytes": t.numel() * t.element_size()}


# --------------------------------------------------------------------------------------------
# events: the worker's results travel as events, so one assembly serves both process layouts
# --------------------------------------------------------------------------------------------
class Emitter(object):
    """Collects events; with a stream, flushes them as JSON lines at most every `period` s."""

    def __init__(self, stream=None, period=0.5):
        self.stream = stream
        self.period = period
        self.pending = []
        self.events = []
        self.last = time.monotonic()
        self.ppid = os.getppid()

    def emit(self, ev, force=False):
        self.events.append(ev)
        if self.stream is not None:
            self.pending.append(ev)
            if force or time.monotonic() - self.last >= self.period:
                self.flush()

    def flush(self):
        if self.stream is None or not self.pending:
            return
        self.stream.write("".join(json.dumps(e) + "\n" for e in self.pending))
        self.stream.flush()
        self.pending = []
        self.last = time.monotonic()
        if os.getppid() != self.ppid:  # supervisor gone (ssh dropped): stop
            os._exit(EXIT["internal"])


def classify_load_error(exc, pte_info, registered):
    msg = "%s: %s" % (type(exc).__name__, exc)
    missing = []
    if pte_info and registered is not None:
        for p in pte_info["execution_plans"]:
            missing += [d for d in p["delegates"] if d not in registered and d not in missing]
    if missing:
        return MeasureError("backend_not_registered",
                            "backend(s) %s used by the .pte are not registered in this runtime "
                            "(registered: %s)" % (", ".join(missing), ", ".join(registered)),
                            missing_backends=missing, registered_backends=registered, runtime_error=msg)
    if pte_info is None:
        return MeasureError("invalid_pte", "the file is not a valid ExecuTorch program: " + msg)
    return MeasureError("load_failed", msg)


def run_worker(args, em):
    """Everything that touches torch and the runtime. Sends events through `em`."""
    started = now_stamp()
    em.emit({"ev": "start", "t": started})
    path = os.path.abspath(args.pte)
    if not os.path.isfile(path):
        raise MeasureError("file_not_found", "model file not found: %s" % path, path=path)
    model = {"path": path, "size_bytes": os.path.getsize(path), "method": args.method}
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    model["sha256"] = h.hexdigest()
    pte_info = None
    try:
        pte_info = read_pte_info(path)
        model["pte"] = pte_info
    except Exception as e:
        model["pte_parse_error"] = "%s: %s" % (type(e).__name__, e)
    em.emit({"ev": "model", "model": model})

    # ---- imports: torch first (the pybindings link libtorch), then the runtime's extension
    # directly: `executorch.runtime` pulls in executorch.exir (and torchao), ~140 MB and seconds more
    t0 = time.perf_counter()
    try:
        import torch
    except ImportError as e:
        raise MeasureError("runtime_missing", "this Python has no torch (%s): %s" % (sys.executable, e))
    runtime = {"torch_version": getattr(torch, "__version__", None)}
    try:
        import executorch.extension.pybindings._portable_lib as rt
        runtime["api"] = "executorch.extension.pybindings._portable_lib"
    except ImportError as e:
        try:
            from executorch.extension.pybindings import portable_lib as rt
            runtime["api"] = "executorch.extension.pybindings.portable_lib"
        except ImportError:
            raise MeasureError("runtime_missing",
                               "this Python has no ExecuTorch runtime (%s): %s" % (sys.executable, e))
    import_ms = (time.perf_counter() - t0) * 1e3
    try:
        from executorch.version import __version__ as et_version
    except Exception:
        et_version = None
        try:
            from importlib.metadata import version
            et_version = version("executorch")
        except Exception:
            pass
    runtime["executorch_version"] = et_version
    runtime["python_version"] = platform.python_version()
    runtime["python_implementation"] = platform.python_implementation()
    runtime["python_executable"] = sys.executable
    registered = None
    try:
        registered = list(rt._get_registered_backend_names())
    except Exception:
        pass
    runtime["registered_backends"] = registered
    warnings = []
    threads_default = None
    try:
        threads_default = rt._threadpool_get_thread_count()
    except Exception:
        pass
    if args.threads:
        # must happen before the method is loaded: XNNPACK keeps the pool it was initialised with
        # (resetting after load crashed the process in executorch 1.4.1)
        if hasattr(rt, "_unsafe_reset_threadpool"):
            rt._unsafe_reset_threadpool(int(args.threads))
        else:
            warnings.append("--threads ignored: this runtime has no _unsafe_reset_threadpool")
    try:
        runtime["threads"] = rt._threadpool_get_thread_count()
    except Exception:
        runtime["threads"] = None
    runtime["threads_default"] = threads_default
    runtime["threads_requested"] = args.threads
    em.emit({"ev": "runtime", "runtime": runtime, "import_ms": import_ms})

    # ---- inputs, built before the memory baseline
    plan = None
    if pte_info:
        plan = next((p for p in pte_info["execution_plans"] if p["name"] == args.method), None)
    if args.inputs:
        inputs = load_inputs_file(torch, args.inputs)
        source = "file:" + os.path.abspath(args.inputs)
    else:
        if args.input_spec:
            specs = parse_input_spec(args.input_spec)
            source = "spec"
        elif plan is not None:
            specs = []
            for i, inp in enumerate(plan["inputs"]):
                if inp["kind"] != "tensor":
                    raise MeasureError("input_error", "input %d of %s is a %s, not a tensor: give --inputs"
                                       % (i, args.method, inp["kind"]))
                specs.append((inp["shape"], inp["dtype"]))
            source = "pte"
        else:
            specs = None
            source = "method_meta"
        inputs = make_inputs(torch, specs, args.seed, args.int_range) if specs is not None else None

    # ---- load, with the resident high-water mark reset just before
    gc.collect()
    hwm_problem = reset_hwm()
    if hwm_problem:
        warnings.append(hwm_problem + "; memory deltas are not available")
    st_base = read_status()
    t0 = time.perf_counter()
    try:
        program = rt._load_program(path) if hasattr(rt, "_load_program") else None
    except Exception as e:
        raise classify_load_error(e, pte_info, registered)
    t1 = time.perf_counter()
    names = []
    try:
        names = [program.get_method_name(i) for i in range(program.num_methods())]
    except Exception:
        pass
    if names and args.method not in names:
        raise MeasureError("method_not_found",
                           "method %r not in the program (methods: %s)" % (args.method, ", ".join(names)))
    try:
        method = program.load_method(args.method)
    except Exception as e:
        raise classify_load_error(e, pte_info, registered)
    t2 = time.perf_counter()
    st_load = read_status()
    load = {"load_program_ms": (t1 - t0) * 1e3, "load_method_ms": (t2 - t1) * 1e3, "load_ms": (t2 - t0) * 1e3}

    meta = method.method_meta()
    meta_inputs = []
    for i in range(meta.num_inputs()):
        ti = meta.input_tensor_meta(i)
        meta_inputs.append({"shape": list(ti.sizes()), "dtype": SCALAR_TYPES.get(ti.dtype(), str(ti.dtype()))})
    if inputs is None:  # no .pte parse: build from the runtime's metadata (after the baseline!)
        warnings.append("inputs were built after the memory baseline (the .pte could not be parsed)")
        inputs = make_inputs(torch, [(m["shape"], m["dtype"]) for m in meta_inputs], args.seed, args.int_range)
    if len(inputs) != len(meta_inputs):
        raise MeasureError("input_error",
                           "method %s takes %d inputs, %d given" % (args.method, len(meta_inputs), len(inputs)),
                           expected=meta_inputs)
    for i, (t, m) in enumerate(zip(inputs, meta_inputs)):
        d = describe(torch, t)
        if d["dtype"] != m["dtype"]:
            raise MeasureError("input_error",
                               "input %d: dtype %s given, the method expects %s" % (i, d["dtype"], m["dtype"]),
                               expected=meta_inputs)
        static = plan is not None and i < len(plan["inputs"]) and plan["inputs"][i].get("shape_dynamism") == "static"
        if d["shape"] != m["shape"] and static:
            raise MeasureError("input_error", "input %d: shape %s given, the method's input is static with shape %s"
                               % (i, d["shape"], m["shape"]), expected=meta_inputs)
        if d["shape"] != m["shape"]:
            warnings.append("input %d: shape %s differs from the planned shape %s (fine only for a dynamic shape)"
                            % (i, d["shape"], m["shape"]))
    em.emit({"ev": "loaded", "load": load, "inputs": [dict(describe(torch, t), source=source) for t in inputs],
             "expected_inputs": meta_inputs, "warnings": warnings}, force=True)

    # ---- measurement, bounded by the timeout
    gc.collect()
    reset_hwm()
    st_pre = read_status()
    gc_was = gc.isenabled()
    gc.disable()  # no collector pause inside a timed call
    clock = time.perf_counter_ns
    timeout_ns = int(args.timeout * 1e9)
    m_start = now_stamp()
    t_begin = clock()
    deadline = t_begin + timeout_ns
    partial, reason = False, None
    warm_done = runs_done = 0
    out = None
    try:
        for _ in range(args.warmup):
            a = clock()
            out = method(inputs)
            b = clock()
            warm_done += 1
            em.emit({"ev": "w", "ms": (b - a) / 1e6})
            if b >= deadline:
                partial, reason = True, "timeout of %g s expired during warm-up" % args.timeout
                break
        if not partial:
            for _ in range(args.runs):
                a = clock()
                out = method(inputs)
                b = clock()
                runs_done += 1
                em.emit({"ev": "s", "ms": (b - a) / 1e6})
                if b >= deadline and runs_done < args.runs:
                    partial, reason = True, "timeout of %g s expired" % args.timeout
                    break
    except Exception as e:
        raise MeasureError("execute_failed", "%s: %s" % (type(e).__name__, e),
                           warmup_done=warm_done, runs_done=runs_done)
    finally:
        if gc_was:
            gc.enable()
    t_end = clock()
    st_exec = read_status()
    outputs = []
    for o in out or []:
        outputs.append(describe(torch, o) if isinstance(o, torch.Tensor) else {"type": type(o).__name__})

    memory = {"source": "/proc/self/status VmRSS/VmHWM after writing 5 to /proc/self/clear_refs"}
    if st_base and not hwm_problem:
        kb = 1024
        base = st_base["VmRSS"]
        memory.update({
            "baseline_rss_bytes": base * kb,
            "load_peak_delta_bytes": (st_load["VmHWM"] - base) * kb,
            "after_load_rss_delta_bytes": (st_load["VmRSS"] - base) * kb,
            "execute_peak_delta_bytes": (st_exec["VmHWM"] - base) * kb,
            "execute_peak_above_loaded_bytes": (st_exec["VmHWM"] - st_load["VmRSS"]) * kb,
            "after_execute_rss_delta_bytes": (st_exec["VmRSS"] - base) * kb,
        })
        memory["peak_delta_bytes"] = max(memory["load_peak_delta_bytes"], memory["execute_peak_delta_bytes"])
        if "RssAnon" in st_base and "RssAnon" in st_exec:
            memory["after_execute_anon_delta_bytes"] = (st_exec["RssAnon"] - st_base["RssAnon"]) * kb
            memory["after_execute_file_delta_bytes"] = (st_exec["RssFile"] - st_base["RssFile"]) * kb
        memory["definitions"] = DEFINITIONS
    else:
        memory["available"] = False
    memory["status_kb"] = {"baseline": st_base, "after_load": st_load, "before_execute": st_pre,
                           "after_execute": st_exec}
    em.emit({"ev": "end", "partial": partial, "partial_reason": reason, "warmup_done": warm_done,
             "runs_done": runs_done, "measure_ms": (t_end - t_begin) / 1e6, "measure_start": m_start,
             "measure_end": now_stamp(), "memory": memory, "outputs": outputs}, force=True)


# --------------------------------------------------------------------------------------------
# assembly of the one JSON document
# --------------------------------------------------------------------------------------------
def config_of(args):
    return {"warmup": args.warmup, "runs": args.runs, "timeout_s": args.timeout, "threads": args.threads,
            "method": args.method, "seed": args.seed, "input_spec": args.input_spec, "inputs_file": args.inputs,
            "int_range": list(args.int_range), "guard": not args.no_guard}


def assemble(args, events, started, error=None, runtime_log=None, extra_partial_reason=None):
    doc = {"schema": SCHEMA, "ok": error is None}
    doc["config"] = config_of(args)
    warm, samples = [], []
    end = None
    warnings = []
    for ev in events:
        k = ev.get("ev")
        if k == "w":
            warm.append(ev["ms"])
        elif k == "s":
            samples.append(ev["ms"])
        elif k == "model":
            doc["model"] = ev["model"]
            plans = ev["model"].get("pte", {}).get("execution_plans", [])
            plan = next((p for p in plans if p["name"] == args.method), None)
            if plan is not None:
                doc["planned_memory"] = {
                    "activation_arena_bytes": plan["planned_arena_bytes"],
                    "non_const_buffer_sizes": plan["non_const_buffer_sizes"],
                    "source": "execution_plan[%s].non_const_buffer_sizes of the .pte flatbuffer; "
                              "entry 0 is reserved, the arena is the sum of the others; XNNPACK's own "
                              "workspace and packed weights are not included" % plan["name"],
                }
        elif k == "runtime":
            doc["runtime"] = ev["runtime"]
            doc.setdefault("load", {})["import_ms"] = ev["import_ms"]
        elif k == "loaded":
            doc.setdefault("load", {}).update(ev["load"])
            doc["inputs"] = ev["inputs"]
            doc["expected_inputs"] = ev["expected_inputs"]
            warnings += ev["warnings"]
        elif k == "end":
            end = ev
    doc["host"] = host_info()
    if error is None:
        doc["warmup_ms"] = warm
        doc["samples_ms"] = samples
        doc["warmup_asked"] = args.warmup
        doc["warmup_done"] = len(warm)
        doc["runs_asked"] = args.runs
        doc["runs_done"] = len(samples)
        if end is not None:
            doc["partial"] = end["partial"]
            doc["partial_reason"] = end["partial_reason"]
            doc["measure_ms"] = end["measure_ms"]
            doc["memory"] = end["memory"]
            doc["outputs"] = end["outputs"]
        else:  # the supervisor stopped a hung worker
            doc["partial"] = True
            doc["partial_reason"] = extra_partial_reason
            doc["memory"] = {"available": False, "reason": "the worker was stopped before it could report memory"}
        if samples:
            s = sorted(samples)
            doc["quick"] = {"median_ms": s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2,
                            "min_ms": s[0], "note": "use stats.summarize on samples_ms for the full summary"}
    else:
        doc["error"] = error
        if warm or samples:
            doc["warmup_ms"], doc["samples_ms"] = warm, samples
    if warnings:
        doc["warnings"] = warnings
    ts = {"start": started, "end": now_stamp()}
    if end is not None:
        ts["measure_start"], ts["measure_end"] = end["measure_start"], end["measure_end"]
    doc["timestamps"] = ts
    if runtime_log is not None:
        doc["runtime_log"] = runtime_log
    return doc


def log_tail(text, n=40):
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-n:]


def error_dict(e):
    if isinstance(e, MeasureError):
        d = {"kind": e.kind, "message": e.message}
        d.update(e.detail)
        return d
    return {"kind": "internal", "message": "%s: %s" % (type(e).__name__, e)}


def print_doc(doc, out, pretty=False):
    out.write(json.dumps(doc, indent=1 if pretty else None) + "\n")
    out.flush()


def private_stdout():
    """Keep the real stdout for our JSON only; anything else printing to fd 1 goes to stderr."""
    fd = os.dup(1)
    os.dup2(2, 1)
    return os.fdopen(fd, "w")


# --------------------------------------------------------------------------------------------
# process layouts
# --------------------------------------------------------------------------------------------
def main_worker(args):
    stream = private_stdout()
    em = Emitter(stream)
    try:
        run_worker(args, em)
        em.flush()
        return 0
    except BaseException as e:  # report everything, even KeyboardInterrupt
        err = error_dict(e)
        if err["kind"] == "internal":
            import traceback
            traceback.print_exc()
        em.emit({"ev": "error", "error": err}, force=True)
        return EXIT.get(err["kind"], 10)


def main_direct(args):
    started = now_stamp()
    out = private_stdout()
    em = Emitter(None)
    try:
        run_worker(args, em)
        doc = assemble(args, em.events, started)
        rc = 0
    except BaseException as e:
        err = error_dict(e)
        doc = assemble(args, em.events, started, error=err)
        rc = EXIT.get(err["kind"], 10)
    doc["exit_code"] = rc
    print_doc(doc, out, args.pretty)
    return rc


def main_supervisor(args, argv):
    import selectors
    import signal
    started = now_stamp()
    out = sys.stdout
    errf = tempfile.TemporaryFile(mode="w+b")
    cmd = [sys.executable, os.path.abspath(__file__), "--_worker"] + list(argv)
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errf)
    events = []
    worker_error = None
    loaded_at = None
    buf = b""
    hung = None
    interrupted = []

    def on_signal(signum, frame):
        interrupted.append(signum)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        try:
            signal.signal(s, on_signal)
        except (ValueError, OSError):
            pass
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    started_mono = time.monotonic()
    while True:
        now = time.monotonic()
        if loaded_at is None:
            limit = started_mono + args.load_timeout
            what = "the load did not finish within --load-timeout %g s" % args.load_timeout
        else:
            limit = loaded_at + args.timeout + args.kill_grace
            what = ("an execute call did not return: stopped %g s after the timeout of %g s"
                    % (args.kill_grace, args.timeout))
        if interrupted:
            hung = "interrupted by signal %d" % interrupted[0]
            break
        if now >= limit:
            hung = what
            break
        ready = sel.select(timeout=min(1.0, limit - now))
        if not ready:
            continue
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                ev = json.loads(line.decode("utf-8"))
            except ValueError:
                continue
            if ev.get("ev") == "loaded":
                loaded_at = time.monotonic()
            if ev.get("ev") == "error":
                worker_error = ev["error"]
            events.append(ev)
    if hung is not None:
        proc.kill()
    try:
        rc_worker = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc_worker = proc.wait()
    errf.seek(0)
    log_text = errf.read().decode("utf-8", "replace")
    errf.close()
    if log_text:
        sys.stderr.write(log_text)
        sys.stderr.flush()
    tail = log_tail(log_text)
    have_end = any(e.get("ev") == "end" for e in events)
    if worker_error is not None:
        if worker_error["kind"] in ("load_failed", "invalid_pte", "backend_not_registered", "execute_failed"):
            worker_error["runtime_log"] = [ln for ln in tail if "cpuinfo" not in ln][-10:]
        doc = assemble(args, events, started, error=worker_error, runtime_log=tail)
        rc = EXIT.get(worker_error["kind"], 10)
    elif have_end:
        doc = assemble(args, events, started, runtime_log=tail)
        rc = 0
    elif hung is not None and loaded_at is not None:
        doc = assemble(args, events, started, runtime_log=tail, extra_partial_reason=hung)
        doc.setdefault("warnings", []).append(hung)
        rc = 0
        if not (doc["runs_done"] or doc["warmup_done"]):
            kind = "interrupted" if interrupted else "hung"
            doc = assemble(args, events, started, error={"kind": kind, "message": hung}, runtime_log=tail)
            rc = EXIT[kind]
    elif hung is not None:
        kind = "interrupted" if interrupted else "hung"
        doc = assemble(args, events, started, error={"kind": kind, "message": hung}, runtime_log=tail)
        rc = EXIT[kind]
    else:
        sig = -rc_worker if rc_worker < 0 else None
        msg = ("the measuring process died with signal %d" % sig) if sig else \
              ("the measuring process exited with code %d without a result" % rc_worker)
        doc = assemble(args, events, started, runtime_log=tail,
                       error={"kind": "worker_crashed", "message": msg, "returncode": rc_worker,
                              "runtime_log": tail[-10:]})
        rc = EXIT["worker_crashed"]
    doc["exit_code"] = rc
    print_doc(doc, out, args.pretty)
    return rc


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise MeasureError("usage", message)


def int_range(text):
    lo, _, hi = text.partition(":")
    return (int(lo), int(hi))


def build_parser():
    p = _Parser(description=__doc__.split("\n\n")[0])
    p.add_argument("pte", help="the .pte file")
    p.add_argument("--warmup", type=int, default=3, help="warm-up calls, not timed into samples (3)")
    p.add_argument("--runs", type=int, default=30, help="timed calls (30)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds for warm-up + runs; load excluded (60)")
    p.add_argument("--threads", type=int, default=None, help="runtime thread pool size (default: the runtime's)")
    p.add_argument("--method", default="forward")
    p.add_argument("--input-spec", default=None, help="e.g. 1x3x224x224:float32,1x8:int64 (default: from the .pte)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated inputs (0)")
    p.add_argument("--int-range", type=int_range, default=(0, 10), help="LO:HI of generated integer inputs (0:10)")
    p.add_argument("--inputs", default=None, help=".pt (tensor or list of tensors), .npy or .npz file")
    p.add_argument("--no-guard", action="store_true", help="one process: no supervisor (a hung call hangs)")
    p.add_argument("--kill-grace", type=float, default=10.0,
                   help="supervisor: seconds past the timeout before a hung call is killed")
    p.add_argument("--load-timeout", type=float, default=600.0, help="supervisor: seconds allowed for imports + load")
    p.add_argument("--pretty", action="store_true", help="indent the JSON document")
    p.add_argument("--_worker", action="store_true", help=argparse.SUPPRESS)
    return p


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    started = now_stamp()
    try:
        args = build_parser().parse_args(argv)
        if args.warmup < 0 or args.runs < 1 or args.timeout <= 0:
            raise MeasureError("usage", "need --warmup >= 0, --runs >= 1, --timeout > 0")
        if args.threads is not None and args.threads < 1:
            raise MeasureError("usage", "--threads must be >= 1")
    except MeasureError as e:
        doc = {"schema": SCHEMA, "ok": False, "error": error_dict(e),
               "timestamps": {"start": started, "end": now_stamp()},
               "exit_code": EXIT["usage"]}
        print_doc(doc, sys.stdout)
        return EXIT["usage"]
    if args._worker:
        return main_worker(args)
    if args.no_guard:
        return main_direct(args)
    return main_supervisor(args, [a for a in argv if a != "--_worker"])


if __name__ == "__main__":
    sys.exit(main())
