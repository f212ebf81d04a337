"""Run logs in the spec's format, `YYYY-MM-DD HH:MM.SS [INFO ] [Module] message`, to the console and a log file.

np's own loggers (`np.<Module>`) reach the console and `logs/execution.log`, which holds np's lines only. What the
libraries say (their loggers, Python warnings such as FutureWarning and DeprecationWarning, and whatever they print
on fds 1 and 2: torchao's optional-kernel messages, the runtime's cpuinfo lines) goes to `logs/libraries.log` beside
it, never to the console.

A line logged with `exc_info` carries its traceback in execution.log always, and on the console only when
`set_debug(True)` (np --debug, or NP_DEBUG=1).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

__all__ = ["get_logger", "phase_banner", "run_logging", "quiet_native_output", "LogFormatter", "DONE", "set_debug",
           "debug_enabled", "libraries_log", "LIBRARIES_LOG"]

DONE = 25
logging.addLevelName(DONE, "DONE")
_LEVELS = {"DEBUG": "DEBUG", "INFO": "INFO ", "WARNING": "WARN ", "ERROR": "ERROR", "CRITICAL": "ERROR",
           "DONE": "DONE "}
_BANNER = "=" * 60
LIBRARIES_LOG = "libraries.log"
_debug = False


def set_debug(enabled: bool) -> None:
    """Show the tracebacks of lines logged with exc_info on the console too (np --debug)."""
    global _debug
    _debug = bool(enabled)


def debug_enabled() -> bool:
    return _debug


def libraries_log(log_file: Path) -> Path:
    """Where library output goes for a run logging to `log_file`: libraries.log beside it."""
    return log_file.with_name(LIBRARIES_LOG)


class LogFormatter(logging.Formatter):
    """`2026-08-20 15:40.01 [INFO ] [Profiler] Compiling: input_model` (local time, '.' before seconds)."""

    def __init__(self, *, tracebacks: bool | None = True) -> None:
        super().__init__(datefmt="%Y-%m-%d %H:%M.%S")
        # True: always (the log file); None: only under set_debug(True) (the console)
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        module = record.name.split(".", 1)[1] if record.name.startswith("np.") else record.name
        stamp = self.formatTime(record, self.datefmt)
        level = _LEVELS.get(record.levelname, record.levelname[:5].ljust(5))
        text = record.getMessage()
        if getattr(record, "banner", False):
            return text
        show = _debug if self.tracebacks is None else self.tracebacks
        if show and record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return f"{stamp} [{level}] [{module}] {text}"


def get_logger(module: str) -> logging.Logger:
    """The logger of one np module, shown as `[Module]` in log lines."""
    return logging.getLogger(f"np.{module}")


def phase_banner(logger: logging.Logger, number: int, title: str) -> None:
    text = f"{_BANNER}\n[Phase {number}] {title}\n{_BANNER}"
    logger.info(text, extra={"banner": True})


class _ConsoleHandler(logging.Handler):
    def __init__(self, write: Callable[[str], None]) -> None:
        super().__init__(level=logging.INFO)
        self._write = write
        self.setFormatter(LogFormatter(tracebacks=None))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._write(self.format(record))
        except Exception:  # a broken console must not break a run
            self.handleError(record)


@contextlib.contextmanager
def run_logging(log_file: Path, console_write: Callable[[str], None] | None) -> Iterator[None]:
    """np's log lines to the console and `log_file` (execution.log); the libraries' loggers and Python warnings to
    libraries.log beside it only."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    np_file = logging.FileHandler(log_file, encoding="utf-8")
    np_file.setFormatter(LogFormatter())
    np_file.setLevel(logging.DEBUG)
    lib_file = logging.FileHandler(libraries_log(log_file), encoding="utf-8")
    lib_file.setFormatter(LogFormatter())
    lib_file.setLevel(logging.DEBUG)
    root = logging.getLogger()
    np_logger = logging.getLogger("np")
    console = _ConsoleHandler(console_write) if console_write else None
    saved = (root.level, np_logger.level, np_logger.propagate, list(root.handlers))
    for handler in list(root.handlers):  # libraries may have attached console handlers; keep them off the console
        root.removeHandler(handler)
    root.addHandler(lib_file)
    root.setLevel(logging.INFO)
    np_logger.addHandler(np_file)
    np_logger.setLevel(logging.DEBUG)
    np_logger.propagate = False  # np's lines stay out of libraries.log
    if console:
        np_logger.addHandler(console)
    logging.captureWarnings(True)  # py.warnings -> root -> libraries.log
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        try:
            yield
        finally:
            logging.captureWarnings(False)
            if console:
                np_logger.removeHandler(console)
            np_logger.removeHandler(np_file)
            root.removeHandler(lib_file)
            np_file.close()
            lib_file.close()
            root.setLevel(saved[0])
            np_logger.setLevel(saved[1])
            np_logger.propagate = saved[2]
            for handler in saved[3]:
                root.addHandler(handler)


@contextlib.contextmanager
def quiet_native_output(log_file: Path | None) -> Iterator[None]:
    """Send what is printed to fds 1 and 2 (cpuinfo lines, Vela tables, stray prints) to libraries.log beside
    `log_file` (the run's execution.log) instead; with no log file, nowhere.

    sys.stdout and sys.stderr are pointed at the redirected fds for the block, so libraries that capture output by
    file descriptor (MLIA does) work even when the caller's streams have none (pytest, notebooks). The run's console
    writes through its own dup'ed fd and is not affected.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
    target: IO[bytes] = open(libraries_log(log_file), "ab") if log_file else open(os.devnull, "wb")  # noqa: SIM115
    saved = (os.dup(1), os.dup(2))
    saved_streams = (sys.stdout, sys.stderr)
    try:
        os.dup2(target.fileno(), 1)
        os.dup2(target.fileno(), 2)
        sys.stdout = open(1, "w", buffering=1, closefd=False, encoding="utf-8", errors="replace")  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False, encoding="utf-8", errors="replace")  # noqa: SIM115
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        sys.stdout, sys.stderr = saved_streams
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
        target.close()
