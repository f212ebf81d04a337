"""The supervisor: a small process that starts the worker (this same code, with --_worker), reads its events, and
kills it when the load outlives --load-timeout or a call outlives the timeout plus --kill-grace. The runtime holds
the GIL during an execute call, so only a separate process can stop a call that hangs and still report the samples
taken before it.

The measuring processes die with their requester (parent.py): when the process that started the supervisor is gone
(np killed, or the SSH bootstrap gone with its connection), the supervisor is told by a death signal (Linux) or sees
it in its event loop (at most a second later), kills its worker and exits; a worker whose supervisor dies is killed
by the kernel. So a killed np never leaves a measurement running on a device that the queue already gave to the
next one."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import IO, Any, List, Optional, Sequence

from .document import assemble, log_tail
from .options import WORKER_FLAG, Options
from .parent import ParentWatch, dies_with_parent, set_death_signal
from .protocol import EXIT, Json, exit_code, now_stamp
from .zygote import start_forked

_LOAD_KINDS_WITH_LOG = ("load_failed", "invalid_pte", "backend_not_registered", "execute_failed")


def self_command() -> List[str]:
    """How a fresh Python runs this same code: the zipapp by its path, else this package with -m."""
    archive = getattr(globals().get("__loader__"), "archive", None)  # zipimport's loader knows its archive
    if archive:
        return [os.path.abspath(archive)]
    return ["-m", __name__.rpartition(".")[0]]


@dataclass
class Watch:
    """What the supervisor saw of one worker."""

    events: List[Json] = field(default_factory=list)
    worker_error: Optional[Json] = None
    loaded_at: Optional[float] = None  # time.monotonic() of the "loaded" event
    hung: Optional[str] = None  # why the worker was stopped
    interrupted: List[int] = field(default_factory=list)  # signals received
    orphaned: bool = False  # the process that asked for this measurement is gone

    def take(self, line: bytes) -> None:
        try:
            ev = json.loads(line.decode("utf-8"))
        except ValueError:
            return
        if ev.get("ev") == "loaded":
            self.loaded_at = time.monotonic()
        if ev.get("ev") == "error":
            self.worker_error = ev["error"]
        self.events.append(ev)


def _catch_signals(watch: Watch) -> None:
    def on_signal(signum: int, frame: Optional[FrameType]) -> None:
        watch.interrupted.append(signum)

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        try:
            signal.signal(s, on_signal)
        except (ValueError, OSError):
            pass


def _watch(stdout: IO[bytes], o: Options, watch: Watch, parent: ParentWatch) -> None:
    """Read events until the worker closes its stdout, a deadline passes (watch.hung says which), a signal comes or
    the requester is gone. A signal wakes the wait at once (signal.set_wakeup_fd), so the worker stops right away."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    try:
        previous = signal.set_wakeup_fd(wake_w)
    except ValueError:  # not the main thread: signals are still seen, within a second
        previous = None
    try:
        _read_events(stdout, o, watch, parent, wake_r)
    finally:
        if previous is not None:
            signal.set_wakeup_fd(previous)
        os.close(wake_r)
        os.close(wake_w)


def _read_events(stdout: IO[bytes], o: Options, watch: Watch, parent: ParentWatch, wake: int) -> None:
    sel = selectors.DefaultSelector()
    sel.register(stdout, selectors.EVENT_READ)
    sel.register(wake, selectors.EVENT_READ)
    started_mono = time.monotonic()
    buf = b""
    while True:
        now = time.monotonic()
        if watch.loaded_at is None:
            limit = started_mono + o.load_timeout
            what = "the load did not finish within --load-timeout %g s" % o.load_timeout
        else:
            limit = watch.loaded_at + o.timeout + o.kill_grace
            what = ("an execute call did not return: stopped %g s after the timeout of %g s"
                    % (o.kill_grace, o.timeout))
        if parent.gone():
            watch.orphaned = True
            watch.hung = "the process that asked for this measurement (pid %d) is gone" % parent.parent
            break
        if watch.interrupted:
            watch.hung = "interrupted by signal %d" % watch.interrupted[0]
            break
        if now >= limit:
            watch.hung = what
            break
        ready = [key.fileobj for key, _mask in sel.select(timeout=min(1.0, limit - now))]
        if wake in ready:  # a signal came: the checks above say what to do
            try:
                os.read(wake, 512)
            except OSError:
                pass
        if stdout not in ready:
            continue
        chunk = os.read(stdout.fileno(), 65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            watch.take(line)


def _verdict(o: Options, watch: Watch, started: Json, rc_worker: int, tail: List[str]) -> Json:
    """The document for what the worker reported, or for how it ended when it could not report."""
    events, worker_error, hung = watch.events, watch.worker_error, watch.hung
    stopped_kind = "interrupted" if watch.interrupted or watch.orphaned else "hung"
    if worker_error is not None:
        if worker_error["kind"] in _LOAD_KINDS_WITH_LOG:
            worker_error["runtime_log"] = [ln for ln in tail if "cpuinfo" not in ln][-10:]
        doc = assemble(o, events, started, error=worker_error, runtime_log=tail)
        rc = exit_code(worker_error["kind"])
    elif any(e.get("ev") == "end" for e in events):
        doc = assemble(o, events, started, runtime_log=tail)
        rc = 0
    elif hung is not None and watch.loaded_at is not None:
        # stopped during the runs: the samples so far are a partial result, unless there are none
        doc = assemble(o, events, started, runtime_log=tail, extra_partial_reason=hung)
        doc.setdefault("warnings", []).append(hung)
        rc = 0
        if not (doc["runs_done"] or doc["warmup_done"]):
            doc = assemble(o, events, started, error={"kind": stopped_kind, "message": hung}, runtime_log=tail)
            rc = EXIT[stopped_kind]
    elif hung is not None:
        doc = assemble(o, events, started, error={"kind": stopped_kind, "message": hung}, runtime_log=tail)
        rc = EXIT[stopped_kind]
    else:
        sig = -rc_worker if rc_worker < 0 else None
        msg = ("the measuring process died with signal %d" % sig) if sig else \
              ("the measuring process exited with code %d without a result" % rc_worker)
        doc = assemble(o, events, started, runtime_log=tail,
                       error={"kind": "worker_crashed", "message": msg, "returncode": rc_worker,
                              "runtime_log": tail[-10:]})
        rc = EXIT["worker_crashed"]
    doc["exit_code"] = rc
    return doc


def _write(stream: IO[str], text: str) -> None:
    """Write to a stream whose reader may be gone (np killed, connection dropped): nobody to tell, so say nothing,
    and point the descriptor at /dev/null so the interpreter's exit does not complain either."""
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
        except (OSError, ValueError):
            pass


def main_supervisor(o: Options, argv: Sequence[str]) -> int:
    """Run the worker with `argv` (this run's arguments), print the one document, return its exit code."""
    started = now_stamp()
    parent = ParentWatch()
    watch = Watch()
    _catch_signals(watch)  # before the death signal, so that it is handled (it stops the worker) from the start
    set_death_signal(signal.SIGTERM)
    errf = tempfile.TemporaryFile(mode="w+b")  # the worker's stderr: the runtime's native log
    proc: Any = start_forked(o.zygote, argv, errf) if o.zygote else None  # a warm start (zygote.py)
    forked = proc is not None
    if proc is None:
        cmd = [sys.executable, *self_command(), WORKER_FLAG, *argv]
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errf,
                                preexec_fn=dies_with_parent(signal.SIGKILL))
    if proc.stdout is None:
        raise RuntimeError("the worker's stdout is not a pipe")
    _watch(proc.stdout, o, watch, parent)
    if watch.hung is not None:
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
        _write(sys.stderr, log_text)
    doc = _verdict(o, watch, started, rc_worker, log_tail(log_text))
    doc["worker_start"] = ("forked from np's warm measuring process (torch and the runtime imported once)" if forked
                           else "a fresh process")
    _write(sys.stdout, json.dumps(doc, indent=1 if o.pretty else None) + "\n")
    return int(doc["exit_code"])
