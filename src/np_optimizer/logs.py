"""Run logs in the spec's format, `YYYY-MM-DD HH:MM.SS [INFO ] [Module] message`, to the console and a log file.

np's own loggers (`np.<Module>`) reach both; the libraries' loggers, Python warnings and native prints reach the log
file only, so the console shows what the user needs.
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

__all__ = ["get_logger", "phase_banner", "run_logging", "quiet_native_output", "LogFormatter", "DONE"]

DONE = 25
logging.addLevelName(DONE, "DONE")
_LEVELS = {"DEBUG": "DEBUG", "INFO": "INFO ", "WARNING": "WARN ", "ERROR": "ERROR", "CRITICAL": "ERROR",
           "DONE": "DONE "}
_BANNER = "=" * 60


class LogFormatter(logging.Formatter):
    """`2026-08-20 15:40.01 [INFO ] [Profiler] Compiling: input_model` (local time, '.' before seconds)."""

    def __init__(self, *, tracebacks: bool = True) -> None:
        super().__init__(datefmt="%Y-%m-%d %H:%M.%S")
        self.tracebacks = tracebacks  # the log file keeps them; the console shows the one-line message

    def format(self, record: logging.LogRecord) -> str:
        module = record.name.split(".", 1)[1] if record.name.startswith("np.") else record.name
        stamp = self.formatTime(record, self.datefmt)
        level = _LEVELS.get(record.levelname, record.levelname[:5].ljust(5))
        text = record.getMessage()
        if getattr(record, "banner", False):
            return text
        if self.tracebacks and record.exc_info and record.levelno >= logging.ERROR:
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
        self.setFormatter(LogFormatter(tracebacks=False))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._write(self.format(record))
        except Exception:  # a broken console must not break a run
            self.handleError(record)


@contextlib.contextmanager
def run_logging(log_file: Path, console_write: Callable[[str], None] | None) -> Iterator[None]:
    """Send np's log lines to the console and `log_file`, and everything else (libraries, warnings) to the file only."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    file_handler = logging.FileHandler(log_file, encoding="utf-8")
    file_handler.setFormatter(LogFormatter())
    file_handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    np_logger = logging.getLogger("np")
    console = _ConsoleHandler(console_write) if console_write else None
    saved = (root.level, np_logger.level, np_logger.propagate, list(root.handlers))
    for handler in list(root.handlers):  # libraries may have attached console handlers; keep them off the console
        root.removeHandler(handler)
    root.addHandler(file_handler)
    root.setLevel(logging.INFO)
    np_logger.setLevel(logging.DEBUG)
    np_logger.propagate = True
    if console:
        np_logger.addHandler(console)
    logging.captureWarnings(True)
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        try:
            yield
        finally:
            logging.captureWarnings(False)
            if console:
                np_logger.removeHandler(console)
            root.removeHandler(file_handler)
            file_handler.close()
            root.setLevel(saved[0])
            np_logger.setLevel(saved[1])
            np_logger.propagate = saved[2]
            for handler in saved[3]:
                root.addHandler(handler)


@contextlib.contextmanager
def quiet_native_output(log_file: Path | None) -> Iterator[None]:
    """Send what is printed to fds 1 and 2 (cpuinfo lines, Vela tables, stray prints) to the log file instead.

    sys.stdout and sys.stderr are pointed at the redirected fds for the block, so libraries that capture output by
    file descriptor (MLIA does) work even when the caller's streams have none (pytest, notebooks). The run's console
    writes through its own dup'ed fd and is not affected.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    target: IO[bytes] = open(log_file, "ab") if log_file else open(os.devnull, "wb")  # noqa: SIM115
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
