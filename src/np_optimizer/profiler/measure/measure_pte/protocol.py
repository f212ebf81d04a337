"""The wire format: error kinds and their exit codes, the worker's JSON-lines events, the one printed document.

The worker's results travel as events (one JSON object each), so one assembly (document.py) serves both process
layouts: with the supervisor they cross a pipe as JSON lines, with --no-guard they stay in the Emitter's list.
"""

from __future__ import annotations

import datetime
import json
import os
import time
from typing import IO, Any, Dict, List, Optional

SCHEMA = "np.measure_pte/1"

# Error kind -> exit code. np reads the kind from the document (profiler/measure/__init__.py, failure_from_doc).
EXIT: Dict[str, int] = {
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

# An event, or a section of the document: plain JSON objects. typing.Dict, not dict[...]: this line runs on the
# device's Python, which may be 3.8.
Json = Dict[str, Any]


def exit_code(kind: str) -> int:
    """The exit code of an error kind; an unknown kind is an internal error."""
    return EXIT.get(kind, EXIT["internal"])


def now_stamp() -> Json:
    t = time.time()
    iso = datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat()
    return {"iso": iso, "epoch": t}


class MeasureError(Exception):
    """A failure with its error kind (a key of EXIT) and extra fields for the document's "error" section."""

    def __init__(self, kind: str, message: str, **detail: Any) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.detail = detail


def error_dict(e: BaseException) -> Json:
    """The document's "error" section for any exception; anything not a MeasureError is internal."""
    if isinstance(e, MeasureError):
        d: Json = {"kind": e.kind, "message": e.message}
        d.update(e.detail)
        return d
    return {"kind": "internal", "message": "%s: %s" % (type(e).__name__, e)}


class Emitter:
    """Collects events; with a stream, flushes them as JSON lines at most every `period` s (so the supervisor wakes
    up rarely)."""

    def __init__(self, stream: Optional[IO[str]] = None, period: float = 0.5) -> None:
        self.stream = stream
        self.period = period
        self.pending: List[Json] = []
        self.events: List[Json] = []
        self.last = time.monotonic()
        self.ppid = os.getppid()

    def emit(self, ev: Json, force: bool = False) -> None:
        self.events.append(ev)
        if self.stream is not None:
            self.pending.append(ev)
            if force or time.monotonic() - self.last >= self.period:
                self.flush()

    def flush(self) -> None:
        if self.stream is None or not self.pending:
            return
        self.stream.write("".join(json.dumps(e) + "\n" for e in self.pending))
        self.stream.flush()
        self.pending = []
        self.last = time.monotonic()
        if os.getppid() != self.ppid:  # supervisor gone (ssh dropped): stop
            os._exit(EXIT["internal"])


def print_doc(doc: Json, out: IO[str], pretty: bool = False) -> None:
    out.write(json.dumps(doc, indent=1 if pretty else None) + "\n")
    out.flush()


def private_stdout() -> IO[str]:
    """Keep the real stdout for our JSON only; anything else printing to fd 1 (the runtime's native log) goes to
    stderr."""
    fd = os.dup(1)
    os.dup2(2, 1)
    return os.fdopen(fd, "w")
