"""Import torch and the ExecuTorch runtime, size its thread pool, load the program and the method; a load that
fails becomes one error kind (invalid_pte, backend_not_registered, method_not_found, load_failed)."""

from __future__ import annotations

import platform
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Tuple

from .protocol import Json, MeasureError


@dataclass
class Runtime:
    module: Any  # the runtime's pybindings module (no type stubs for it)
    info: Json  # the document's "runtime" section
    import_ms: float
    registered: Optional[List[str]]  # backend ids, when the runtime can list them
    warnings: List[str] = field(default_factory=list)


# The runtime's extension itself, by the names ExecuTorch releases gave it: `executorch.runtime` pulls in
# executorch.exir (and torchao), ~140 MB and seconds more, and so does the `portable_lib` wrapper of releases whose
# extension is `_C` (it imports executorch.exir for a warning class: 3 s of CPU on a 2-core machine, per process).
_PYBINDINGS = ("executorch.extension.pybindings._portable_lib", "executorch.extension.pybindings._C",
               "executorch.extension.pybindings.portable_lib")


def _import_pybindings() -> Tuple[Any, str]:
    """The runtime's extension module and its name (torch imported first: the extension links libtorch)."""
    import importlib

    first: Optional[ImportError] = None
    for name in _PYBINDINGS:
        try:
            return importlib.import_module(name), name
        except ImportError as e:
            first = first or e
    raise MeasureError("runtime_missing", "this Python has no ExecuTorch runtime (%s): %s" % (sys.executable, first))


def _register_quantized_kernels() -> bool:
    """Load ExecuTorch's quantized kernels into the runtime (q/dq left outside a delegate, the quantized embedding
    kernels `embedding_byte` / `embedding_4bit`): the pybindings alone lack them, and a program that uses them fails
    to load ("Missing operator"). False when this install has no such library."""
    try:
        import executorch.kernels.quantized  # noqa: F401
    except Exception:
        return False
    return True


def _executorch_version() -> Optional[str]:
    try:
        from executorch.version import __version__

        return str(__version__)
    except Exception:
        pass
    try:
        from importlib.metadata import version

        return version("executorch")
    except Exception:
        return None


def _optional(fn: Callable[[], Any]) -> Any:
    """fn(), or None when it fails: introspection that older runtimes lack."""
    try:
        return fn()
    except Exception:
        return None


def import_runtime(threads: Optional[int]) -> Runtime:
    """torch first (the pybindings link libtorch), then the runtime; a missing one is runtime_missing."""
    t0 = time.perf_counter()
    try:
        import torch
    except ImportError as e:
        raise MeasureError("runtime_missing", "this Python has no torch (%s): %s" % (sys.executable, e))
    info: Json = {"torch_version": getattr(torch, "__version__", None)}
    rt, info["api"] = _import_pybindings()
    info["quantized_kernels"] = _register_quantized_kernels()
    import_ms = (time.perf_counter() - t0) * 1e3
    info["executorch_version"] = _executorch_version()
    info["python_version"] = platform.python_version()
    info["python_implementation"] = platform.python_implementation()
    info["python_executable"] = sys.executable
    registered: Optional[List[str]] = _optional(lambda: list(rt._get_registered_backend_names()))
    info["registered_backends"] = registered
    warnings = []
    threads_default = _optional(lambda: rt._threadpool_get_thread_count())
    if threads:
        # must happen before the method is loaded: XNNPACK keeps the pool it was initialised with
        # (resetting after load crashed the process in executorch 1.4.1)
        if hasattr(rt, "_unsafe_reset_threadpool"):
            rt._unsafe_reset_threadpool(int(threads))
        else:
            warnings.append("--threads ignored: this runtime has no _unsafe_reset_threadpool")
    info["threads"] = _optional(lambda: rt._threadpool_get_thread_count())
    info["threads_default"] = threads_default
    info["threads_requested"] = threads
    return Runtime(module=rt, info=info, import_ms=import_ms, registered=registered, warnings=warnings)


def classify_load_error(exc: BaseException, pte_info: Optional[Json], registered: Optional[List[str]]) -> MeasureError:
    msg = "%s: %s" % (type(exc).__name__, exc)
    missing: List[str] = []
    if pte_info and registered is not None:
        for p in pte_info["execution_plans"]:
            missing += [d for d in p["delegates"] if d not in registered and d not in missing]
    if missing:
        return MeasureError("backend_not_registered",
                            "backend(s) %s used by the .pte are not registered in this runtime "
                            "(registered: %s)" % (", ".join(missing), ", ".join(registered or [])),
                            missing_backends=missing, registered_backends=registered, runtime_error=msg)
    if pte_info is None:
        return MeasureError("invalid_pte", "the file is not a valid ExecuTorch program: " + msg)
    return MeasureError("load_failed", msg)


def load_method(runtime: Runtime, path: str, method_name: str, pte_info: Optional[Json]) -> Tuple[Any, Json]:
    """The loaded method and the document's load timings (program, method, both)."""
    load_program = getattr(runtime.module, "_load_program", None)
    t0 = time.perf_counter()
    try:
        if load_program is None:
            raise AttributeError("this runtime has no _load_program")
        program = load_program(path)
    except Exception as e:
        raise classify_load_error(e, pte_info, runtime.registered)
    t1 = time.perf_counter()
    names: List[str] = []
    try:
        names = [program.get_method_name(i) for i in range(program.num_methods())]
    except Exception:
        pass
    if names and method_name not in names:
        raise MeasureError("method_not_found",
                           "method %r not in the program (methods: %s)" % (method_name, ", ".join(names)))
    try:
        method = program.load_method(method_name)
    except Exception as e:
        raise classify_load_error(e, pte_info, runtime.registered)
    t2 = time.perf_counter()
    load = {"load_program_ms": (t1 - t0) * 1e3, "load_method_ms": (t2 - t1) * 1e3, "load_ms": (t2 - t0) * 1e3}
    return method, load
