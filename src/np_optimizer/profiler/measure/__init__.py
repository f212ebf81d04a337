"""The measuring core of the on-device method: run a compiled .pte with the ExecuTorch runtime and read its figures.

    measure_pte/     the measuring script, a package of its own (stdlib at import; torch + executorch runtime on the
                     device). Shipped as one zipapp (script_archive), so it imports nothing from np_optimizer.
    local.py         run it in a fresh subprocess with this venv's Python            (transport "local subprocess")
    ssh.py           run it on a remote device over one SSH connection            (transport "ssh user@host:port")
    stats.py         summary statistics of the latency samples, outliers, warnings
    device_queue.py  one measurement per device at a time, for all np processes of the user, with a visible queue

This module stays light (stdlib only): `np devices ls` and friends import the profiler package without torch.
"""

from __future__ import annotations

import atexit
import json
import shutil
import threading
import zipapp
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from np_optimizer.errors import CODES, EXIT_NETWORK, DeviceUnreachableError, MeasureError
from np_optimizer.files import owned_temp_dir

__all__ = ["Measurement", "measure_failure", "MeasureOptions", "script_archive", "script_args", "failure_from_doc",
           "parse_document", "ARCHIVE_NAME"]

ARCHIVE_NAME = "measure_pte.pyz"
_SCRIPT_PACKAGE = "measure_pte"  # the subpackage shipped in the archive, under the same name

# Error kinds of the measuring script (its EXIT table, measure_pte/protocol.py) meaning "the runtime cannot load the
# .pte".
_LOAD_KINDS = ("invalid_pte", "backend_not_registered", "method_not_found", "load_failed")


@dataclass(frozen=True)
class MeasureOptions:
    """What one measurement is asked to do (the profile options of run.detail.yaml, plus threads)."""

    num_executions: int = 30
    timeout_s: float = 60.0
    warmup: int = 3
    threads: int | None = None
    kill_grace_s: float = 10.0  # a call that hangs past timeout + grace is killed; the samples so far are kept
    load_timeout_s: float = 300.0  # imports + load of the program, not counted in the timeout
    trace_runs: int = 0  # traced runs after the timed ones (per-layer times from an ETDump); 0: none


@dataclass
class Measurement:
    """The measuring script's JSON document and how it was obtained."""

    doc: dict[str, Any]
    transport: str  # "local subprocess" | "ssh user@host:port"
    wall_s: float  # the whole subprocess or SSH call, imports and upload included
    python: str
    stderr_tail: list[str] = field(default_factory=list)


def measure_failure(code: str, message: str, hint: str, *, kind: str, doc: dict[str, Any] | None = None,
                    stderr_tail: list[str] | None = None) -> MeasureError | DeviceUnreachableError:
    """The error of a measurement that gave no result: a DeviceUnreachableError (exit 4) when the code says the device
    could not be reached, else a MeasureError. Either keeps the error kind, the script's document when there is one
    (it is kept in the job folder) and the tail of stderr."""
    cls = DeviceUnreachableError if CODES[code].exit_code == EXIT_NETWORK else MeasureError
    return cls(message, hint=hint, code=code, kind=kind, doc=doc, stderr_tail=stderr_tail)


_archive_lock = threading.Lock()
_archive: Path | None = None


def _is_script_file(path: PurePath) -> bool:
    return path.parts[0] == _SCRIPT_PACKAGE and path.suffix == ".py"


def script_archive() -> Path:
    """The measuring script as one zipapp (`python measure_pte.pyz model.pte ...`), the same file for local runs and
    for SSH devices. Built from the measure_pte package on first use into a temp folder removed at exit, then reused
    by this process."""
    global _archive
    with _archive_lock:
        if _archive is None or not _archive.is_file():  # a temp cleaner may have removed it
            folder = owned_temp_dir("np-measure-script-")
            atexit.register(shutil.rmtree, folder, ignore_errors=True)
            target = folder / ARCHIVE_NAME
            zipapp.create_archive(Path(__file__).parent, target, main=f"{_SCRIPT_PACKAGE}.__main__:run",
                                  filter=_is_script_file, compressed=True)
            _archive = target
        return _archive


def script_args(options: MeasureOptions) -> list[str]:
    """Command-line options of the measuring script for `options` (the .pte path comes first, added by the caller)."""
    args = ["--warmup", str(options.warmup), "--runs", str(options.num_executions),
            "--timeout", f"{options.timeout_s:g}",
            "--kill-grace", f"{options.kill_grace_s:g}", "--load-timeout", f"{options.load_timeout_s:g}"]
    if options.threads:
        args += ["--threads", str(options.threads)]
    if options.trace_runs:
        args += ["--trace-runs", str(options.trace_runs)]
    return args


def parse_document(stdout: str) -> dict[str, Any] | None:
    """The one JSON document the measuring script prints (the last line that parses as a JSON object)."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict):
                return doc
    return None


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[0] if lines else ""


def failure_from_doc(doc: dict[str, Any], *, where: str, python: str, pte_name: str,
                     stderr_tail: list[str] | None = None) -> MeasureError | DeviceUnreachableError:
    """The np error for a document with ok=false, by the script's error kind."""
    error = doc.get("error") or {}
    kind = str(error.get("kind") or "internal")
    detail = _first_line(error.get("message") or "no message")

    def failure(code: str, message: str, hint: str) -> MeasureError | DeviceUnreachableError:
        return measure_failure(code, message, hint, kind=kind, doc=doc, stderr_tail=stderr_tail)

    if kind == "runtime_missing":
        return failure("NP-DEV-424", f"The Python {python} on {where} has no ExecuTorch runtime: {detail}",
                       "Install torch and executorch (1.5.1) into that Python, or set `python:` for the device in "
                       "devices.yaml to one that has them.")
    if kind == "backend_not_registered":
        return failure("NP-RUN-500", f"The ExecuTorch runtime on {where} cannot load {pte_name}: {detail}",
                       "This program needs a backend that only its target's firmware runs (e.g. an Ethos-U NPU); "
                       "profile it with --method mlia.")
    if kind in _LOAD_KINDS:
        return failure("NP-RUN-500", f"The ExecuTorch runtime on {where} cannot load {pte_name}: {detail}",
                       "The .pte is damaged or was made by another ExecuTorch version; delete the job's compiled_* "
                       "folder so np compiles it again (runtime log lines are in measurement.json).")
    if kind == "input_error":
        return failure("NP-RUN-422", f"Inputs for {pte_name} could not be built on {where}: {detail}",
                       "The program's inputs are not plain tensors of a fixed shape; see measurement.json.")
    if kind == "file_not_found":
        return failure("NP-RUN-404", f"{pte_name} was not found on {where}: {detail}",
                       "Compile the checkpoint again (np profile compiles when the .pte is missing).")
    if kind == "hung":
        return failure("NP-RUN-504", f"The measurement on {where} did not return: {detail}",
                       "An execute call hung before any run finished; check the device's load and the runtime log in "
                       "measurement.json.")
    return failure("NP-RUN-501", f"The measurement on {where} failed ({kind}): {detail}",
                   "See the runtime log lines in measurement.json and the run's log file.")
