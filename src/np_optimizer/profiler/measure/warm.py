"""np's warm measuring process on this machine (measure_pte/zygote.py): started at the first local measurement of
an np process, kept until it ends, so that each later measurement forks a worker with torch and the runtime already
imported instead of importing them again (about 2 s per measured checkpoint).

np run starts it at the beginning of a run that will measure here (`start_warm`), so that its imports overlap the
steps on the other core instead of delaying the first measurement.

A process can hand its warm measuring process to the processes it starts: $NP_MEASURE_WARM_SOCKET (SHARED_ENV) names
its socket, and a process that has it set uses that one instead of starting its own (np sweep's local pool does so, so
its trials share one measuring process per sweep instead of importing torch and the runtime once per trial: each
measurement is still a fresh worker forked for it alone). The process that started it stops it (or dies with it).

$NP_MEASURE_WARM=0 turns it off (every worker is then a fresh process, as over SSH). If the warm process cannot be
started or dies, measuring goes on with fresh processes: it is a speed-up, never a requirement.
"""

from __future__ import annotations

import atexit
import os
import selectors
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from np_optimizer.files import owned_temp_dir
from np_optimizer.profiler.measure.measure_pte.parent import dies_with_parent
from np_optimizer.profiler.measure.measure_pte.zygote import ZYGOTE_FLAG

__all__ = ["start_warm", "warm_socket", "stop_warm_processes", "SHARED_ENV"]

SHARED_ENV = "NP_MEASURE_WARM_SOCKET"  # the socket of a warm measuring process another np process started and shares

_READY_TIMEOUT_S = 300.0  # imports on a loaded machine


@dataclass
class _Warm:
    proc: subprocess.Popen[bytes]
    socket: str
    folder: Path
    archive: Path  # the script it runs: a new archive (the old one removed by a temp cleaner) means a new process
    ready: bool = False  # it printed "ready": its imports worked


_running: dict[str, _Warm] = {}


def _ready(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the process printed "ready" (its imports worked) within the time allowed."""
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout=_READY_TIMEOUT_S):
        return False
    return proc.stdout.readline().strip() == b"ready"


def _turned_off() -> bool:
    return os.environ.get("NP_MEASURE_WARM", "1") == "0"


def _shared(python: str) -> str | None:
    """The socket of the warm measuring process handed down to this process (SHARED_ENV), for this Python only."""
    path = os.environ.get(SHARED_ENV)
    return path if path and python == sys.executable else None


def start_warm(python: str, archive: Path) -> None:
    """Start `python`'s warm measuring process without waiting for it (a no-op when it runs, is shared with this
    process by the one that started it, or is turned off)."""
    if _turned_off() or _shared(python):
        return
    warm = _running.get(python)
    if warm is not None and warm.proc.poll() is None and warm.archive == archive:
        return
    if warm is not None:
        _stop(python)
    folder = owned_temp_dir("np-warm-")  # short: a Unix socket path has at most 107 bytes
    socket_path = str(folder / "zygote.sock")
    try:
        proc = subprocess.Popen([python, str(archive), ZYGOTE_FLAG, socket_path], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                preexec_fn=dies_with_parent(signal.SIGTERM))
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        return
    _running[python] = _Warm(proc, socket_path, folder, archive)


def warm_socket(python: str, archive: Path) -> str | None:
    """The socket of `python`'s warm measuring process, started now if needed; None when there is none."""
    if _turned_off():  # a process started before it was turned off is not used either
        return None
    shared = _shared(python)
    if shared:  # gone (its owner ended)? the supervisor then starts a fresh worker
        return shared if os.path.exists(shared) else None
    start_warm(python, archive)
    warm = _running.get(python)
    if warm is None:
        return None
    if not warm.ready:
        warm.ready = _ready(warm.proc)
        if not warm.ready:
            _stop(python)
            return None
    return warm.socket


def _stop(python: str) -> None:
    warm = _running.pop(python, None)
    if warm is None:
        return
    try:
        if warm.proc.stdin is not None:
            warm.proc.stdin.close()  # its signal to end
        warm.proc.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        warm.proc.kill()
        warm.proc.wait()
    shutil.rmtree(warm.folder, ignore_errors=True)


def stop_warm_processes() -> None:
    for python in list(_running):
        _stop(python)


atexit.register(stop_warm_processes)
