"""Measure a .pte on this machine: the measuring script (the zipapp of measure_pte/, as shipped to SSH devices) in a
fresh subprocess, run by this venv's Python.

A fresh process per measurement, because the memory figures are high-water marks of the measuring process (a
process that already ran other programs would report their peaks) and because a hung execute call can only be
stopped from outside (the runtime holds the GIL). The script's own supervisor does that stopping; the subprocess
timeout here is a last guard against a wedged supervisor.

The measuring processes die with np (measure_pte/parent.py), and the supervisor inherits the device queue's lock
(`hold_fds`): the kernel releases it only when np and the supervisor have both closed it, so after a kill -9 of np
the next measurement gets the device once the supervisor has stopped its worker, not before.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from np_optimizer.busy import wait_while_busy
from np_optimizer.profiler.measure import (
    Measurement,
    MeasureOptions,
    failure_from_doc,
    measure_failure,
    parse_document,
    script_archive,
    script_args,
)
from np_optimizer.profiler.measure.warm import start_warm, warm_socket

__all__ = ["measure_local", "prewarm_local_measuring", "TRANSPORT"]

TRANSPORT = "local subprocess"
_GUARD_MARGIN_S = 60.0


def _tail(text: str, n: int = 40) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()][-n:]


def prewarm_local_measuring() -> None:
    """Start the warm measuring process now (np run, before its steps): its imports then overlap the steps."""
    start_warm(sys.executable, script_archive())


def measure_local(pte: Path, options: MeasureOptions, *, python: str | None = None,
                  where: str = "this machine (host)", hold_fds: Sequence[int] = ()) -> Measurement:
    """Run the measuring script on `pte`; returns its document, or raises MeasureError or DeviceUnreachableError
    (document attached when there is one). A timeout that expires is not a failure: the document says partial.
    `hold_fds` (the device lock's descriptor) stay open in the measuring process until it exits."""
    python = python or sys.executable
    wait_while_busy()  # a sweep's warm host rehearsing beside this trial (busy.py): its CPU is not this model's time
    archive = script_archive()
    cmd = [python, str(archive), str(pte), *script_args(options)]
    warm = warm_socket(python, archive)
    if warm is not None:  # the worker is forked from np's warm measuring process (warm.py)
        cmd += ["--zygote", warm]
    guard = options.load_timeout_s + options.timeout_s + options.kill_grace_s + _GUARD_MARGIN_S
    # The runtime's native log goes to stderr; keep it off the user's console (it is kept in the document).
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=guard, env=env,
                              pass_fds=tuple(hold_fds))
    except FileNotFoundError as exc:
        raise measure_failure("NP-DEV-426", f"Python {python} was not found on {where}: {exc}",
                             "Check the Python used for measuring.", kind="python_not_found") from exc
    except subprocess.TimeoutExpired as exc:
        raise measure_failure("NP-RUN-504", f"The measuring process on {where} gave no answer within {guard:g} s.",
                             "The load or a run hung; see the run's log file.", kind="timeout",
                             stderr_tail=_tail(str(exc.stderr or ""))) from exc
    wall = time.monotonic() - start
    tail = _tail(proc.stderr)
    doc = parse_document(proc.stdout)
    if doc is None:
        last = tail[-1] if tail else f"exit code {proc.returncode}"
        raise measure_failure("NP-RUN-501", f"The measuring process on {where} printed no result: {last}",
                             "See the run's log file; the measuring script may be damaged (reinstall np).",
                             kind="protocol", stderr_tail=tail)
    if not doc.get("ok"):
        raise failure_from_doc(doc, where=where, python=python, pte_name=pte.name, stderr_tail=tail)
    return Measurement(doc=doc, transport=TRANSPORT, wall_s=wall, python=python, stderr_tail=tail)
