"""Processes: whether a recorded process is still alive, a long tool run watched in a child process, and the garbage
collector's pace during a run (`fewer_collections`).

Is a process still the one we recorded? Pid plus start time, so a reused pid is not mistaken for it. Used by the lock
module's holder records (locks.py: the run lock names its holders) and the device queue
(profiler/measure/device_queue.py), which must tell a live holder from a dead one.

A watched run (`run_watched(work, watch, first_stage)`): `work` runs in a child forked from this process (torch and
the program already in memory, so no import or reload), which says what it is doing through `stage(text)` (the
Ethos-U lowering: TOSA lowering, then Vela, per partition; MLIA's estimate); the parent shows the stage and the
elapsed seconds on the progress line every second, logs a line every minute, and at the time limit kills the child
(its process group) and raises TimeLimitError naming the stage, the time and the option that raises the limit. Why a
child: a lowering or an estimate is one long call into torch, ExecuTorch and Vela that no thread can interrupt; a
process can be killed, and whatever it left half-done dies with it. The child runs torch on one thread (an OpenMP
pool the parent used is not usable after fork: the child's first parallel region would hang), sends np's log lines to
the files only (the console belongs to the parent) and dies with the parent (PR_SET_PDEATHSIG).

Dying with the parent (`dies_with_parent()`, a Popen preexec_fn, also called by the forked child): every child np
starts (a watched run, the factory check, a sweep's trials) is killed by the kernel when np dies, even by kill -9, so
none is left holding an experiment's run lock. prctl is looked up before the fork (the child only calls it), and a
parent that died between fork and prctl is caught by the reparenting check: that child exits at once. The measuring
script (profiler/measure/measure_pte/parent.py) has its own copy: it runs on devices without np.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import pickle
import select
import signal
import struct
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from np_optimizer.errors import TimeLimitError, ToolError

__all__ = ["start_ticks", "pid_alive", "Watch", "run_watched", "stage", "dies_with_parent", "sticky_interrupt",
           "interrupt_deferred", "raise_if_interrupted"]

_T = TypeVar("_T")


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_ticks(pid: int) -> int | None:
    """When the process started, in clock ticks since boot (field 22 of /proc/<pid>/stat), or None."""
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields else None
    except (ValueError, IndexError):
        return None


def pid_alive(pid: int, start: int | None = None) -> bool:
    """Whether `pid` is the same live process that started at `start` (not a zombie, not a reused pid)."""
    fields = _stat_fields(pid)
    if fields is None:
        if Path("/proc/self/stat").exists():
            return False  # /proc works: no such process
        try:  # no /proc: the pid alone
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if fields[0] in ("Z", "X"):
        return False
    now = start_ticks(pid)
    return start is None or now is None or now == start


# ---------------------------------------------------------------------------------------------------------------------
# A tool run watched in a child process
# ---------------------------------------------------------------------------------------------------------------------


def _nothing(_text: str) -> None:
    return None


@dataclass(frozen=True)
class Watch:
    """How a long tool run is shown and bounded.

    `label` names what runs ("graph_quantize: lowering for alif_e8"), `option` the setting that raises `limit_s`
    ("run.detail.yaml profile[1].time_limit"), `rerun` what to do after raising it; `code` is the error code of a
    stopped run (NP-CMP-504 for a lowering, NP-PRF-504 for an estimate)."""

    limit_s: float
    label: str
    option: str
    progress: Callable[[str], None] = _nothing
    log: logging.Logger | None = None
    code: str = "NP-TOOL-504"
    rerun: str = "run the command again"
    log_every_s: float = 60.0


_stage_sink: Callable[[str], None] | None = None


def stage(text: str) -> None:
    """Say what the watched run is doing now ("Vela, partition tag1"); outside a watched child, nothing happens."""
    if _stage_sink is not None:
        _stage_sink(text)


def run_watched(work: Callable[[], _T], watch: Watch, first_stage: str) -> _T:
    """`work()` in a child process, its stage and elapsed time shown, stopped at the watch's time limit.

    Returns what `work` returned (it must pickle); raises what it raised (rebuilt in this process, its traceback as a
    note), TimeLimitError when the limit stopped it, ToolError when the child died without a word (out of memory,
    killed from outside). Where there is no fork, `work` runs here, unwatched.
    """
    if not hasattr(os, "fork"):
        return work()
    die_with_us = dies_with_parent()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's side (its coverage is not collected); never returns
        os.close(read_fd)
        _child(work, write_fd, die_with_us)
    os.close(write_fd)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # also done by the child: whichever runs first, the group exists before a kill
    started = time.monotonic()
    state = {"stage": first_stage, "logged": started}
    reaped = False
    try:
        message = _wait(read_fd, pid, watch, started, state)
        _, status = os.waitpid(pid, 0)
        reaped = True
    finally:
        os.close(read_fd)
        if not reaped:  # stopped at the limit, Ctrl+C, or a bug here: the child must not outlive the wait
            _kill(pid)
    if message is None:
        how = f"signal {-os.waitstatus_to_exitcode(status)}" if os.WIFSIGNALED(status) else \
            f"exit code {os.waitstatus_to_exitcode(status)}"
        raise ToolError(f"{watch.label}: its process ended without a result ({how}) during {state['stage']}.",
                        hint="The machine may have run out of memory (see `dmesg`); the log file has what the tool "
                        "printed.", code="NP-TOOL-500")
    if message[0] == "ok":
        result: _T = message[1]
        return result
    raise _rebuilt(message)


def _wait(read_fd: int, pid: int, watch: Watch, started: float, state: dict[str, Any]) -> tuple[Any, ...] | None:
    """Read the child's messages until it closes the pipe (its result, or None), ticking every second; at the time
    limit, raise TimeLimitError (the caller kills the child)."""
    buffer = b""
    result: tuple[Any, ...] | None = None
    while True:
        elapsed = time.monotonic() - started
        _tick(watch, state, elapsed)
        if elapsed >= watch.limit_s:
            raise TimeLimitError(
                f"{watch.label} was stopped after {elapsed:.0f} s, during {state['stage']}: its time limit is "
                f"{watch.limit_s:g} s ({watch.option}).",
                hint=f"Raise the time limit ({watch.option}) to, for instance, {max(2 * watch.limit_s, 600):g} s, then "
                f"{watch.rerun}. "
                "What finished before it is kept.", code=watch.code, stage=str(state["stage"]),
                elapsed_s=round(elapsed, 1), limit_s=watch.limit_s, option=watch.option)
        ready, _, _ = select.select([read_fd], [], [], max(0.05, min(1.0, watch.limit_s - elapsed)))
        if not ready:
            continue
        chunk = os.read(read_fd, 1 << 16)
        if not chunk:
            return result
        buffer += chunk
        while len(buffer) >= 8 and len(buffer) >= 8 + struct.unpack("!Q", buffer[:8])[0]:
            size = struct.unpack("!Q", buffer[:8])[0]
            message = pickle.loads(buffer[8:8 + size])
            buffer = buffer[8 + size:]
            if message[0] == "stage":
                state["stage"] = message[1]
                _tick(watch, state, time.monotonic() - started)
            else:
                result = message


def _tick(watch: Watch, state: dict[str, Any], elapsed: float) -> None:
    watch.progress(f"{watch.label} ({elapsed:.0f} s, limit {watch.limit_s:g} s): {state['stage']}")
    now = time.monotonic()
    if watch.log is not None and now - state["logged"] >= watch.log_every_s:
        state["logged"] = now
        watch.log.info(f"{watch.label}: {state['stage']}, still running after {elapsed:.0f} s (stops at "
                       f"{watch.limit_s:g} s: {watch.option})")


def _kill(pid: int) -> None:
    """SIGKILL the child's process group (whatever it started dies too), else the child alone; then reap it."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _send(fd: int, message: tuple[Any, ...]) -> None:
    data = pickle.dumps(message)
    view = memoryview(struct.pack("!Q", len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _portable(exc: BaseException) -> tuple[Any, ...]:
    """An exception as the parent can rebuild it: its class, args and attributes when they pickle, else its text."""
    trace = "".join(traceback.format_exception(exc))
    for candidate in ((type(exc), exc.args, dict(vars(exc))), (type(exc), exc.args, {})):
        try:
            data = pickle.dumps(candidate)
            _from_parts(pickle.loads(data))
            return ("error", data, trace)
        except Exception:
            continue
    return ("error", None, trace, f"{type(exc).__name__}: {exc}")


def _from_parts(parts: tuple[type[BaseException], tuple[Any, ...], dict[str, Any]]) -> BaseException:
    cls, args, attributes = parts
    exc = cls.__new__(cls, *args)
    exc.args = args
    exc.__dict__.update(attributes)
    return exc


def _rebuilt(message: tuple[Any, ...]) -> BaseException:
    exc = _from_parts(pickle.loads(message[1])) if message[1] is not None else RuntimeError(message[3])
    exc.add_note(f"Raised in the watched child process:\n{message[2]}")
    return exc


def _child(work: Callable[[], Any], write_fd: int, die_with_us: Callable[[], None]) -> None:  # pragma: no cover
    global _stage_sink
    code = 0
    try:
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)  # its own group: the parent kills it with whatever it started; Ctrl+C reaches the parent
        die_with_us()
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(1)  # the parent's OpenMP pool does not exist here: a parallel region would hang
        np_logger = logging.getLogger("np")
        for handler in list(np_logger.handlers):  # the parent owns the console (a live display may hold its lock)
            if not isinstance(handler, logging.FileHandler):
                np_logger.removeHandler(handler)
        _stage_sink = lambda text: _send(write_fd, ("stage", text))  # noqa: E731
        try:
            result = work()
        except BaseException as exc:  # SystemExit from Vela, KeyboardInterrupt, anything: the parent decides
            _send(write_fd, _portable(exc))
        else:
            try:
                _send(write_fd, ("ok", result))
            except Exception as exc:  # a result that does not pickle is the caller's bug: say so
                _send(write_fd, _portable(exc))
    except BaseException:
        code = 70
    finally:
        os._exit(code)


_PR_SET_PDEATHSIG = 1
_prctl: Callable[..., Any] | None = None
_prctl_looked_up = False


def _lookup_prctl() -> Callable[..., Any] | None:
    """libc's prctl on Linux, looked up once, in the parent: a child between fork and exec must not load anything."""
    global _prctl, _prctl_looked_up
    if not _prctl_looked_up:
        _prctl_looked_up = True
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                _prctl = ctypes.CDLL(None, use_errno=True).prctl
            except (ImportError, OSError, AttributeError):  # a Python without ctypes, a libc without prctl
                _prctl = None
    return _prctl


def dies_with_parent() -> Callable[[], None]:
    """A function for the child to call (Popen's preexec_fn, or first thing after os.fork): the kernel SIGKILLs the
    child when this process dies; if this process died already, between the fork and that call, the child exits."""
    parent = os.getpid()
    prctl = _lookup_prctl()

    def in_child() -> None:  # pragma: no cover - runs in the child
        if prctl is not None:
            with contextlib.suppress(OSError, ValueError, TypeError):
                prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # the death signal came too late: the parent is gone already
            os._exit(1)

    return in_child


# -- Ctrl+C that is not lost --------------------------------------------------------------------------------------

_interrupt_pending = False  # a Ctrl+C arrived under sticky_interrupt and has not been raised yet
_interrupt_deferred = False  # inside interrupt_deferred: a Ctrl+C waits for the block's end


@contextlib.contextmanager
def sticky_interrupt() -> Any:
    """Ctrl+C during the block is never lost. Python swallows a KeyboardInterrupt raised inside an at-fork handler
    (it prints "Exception ignored in ..." and goes on), and a sweep is often starting a trial's process when the user
    presses Ctrl+C: a fork wrapped in `interrupt_deferred` takes it after the fork, and `raise_if_interrupted` raises
    one that was swallowed anyway at the next safe point. Nothing changes where SIGINT is ignored (a background job)
    or off the main thread."""
    global _interrupt_pending
    import threading

    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous == signal.SIG_IGN:
        yield
        return

    def on_sigint(_signum: int, _frame: Any) -> None:
        global _interrupt_pending
        _interrupt_pending = True
        if not _interrupt_deferred:
            raise KeyboardInterrupt

    _interrupt_pending = False
    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _interrupt_pending = False


@contextlib.contextmanager
def interrupt_deferred() -> Any:
    """A Ctrl+C that arrives inside the block (a fork and the bookkeeping of its child) is raised at its end."""
    global _interrupt_deferred
    outer = _interrupt_deferred
    _interrupt_deferred = True
    try:
        yield
    finally:
        _interrupt_deferred = outer
    if not outer:
        raise_if_interrupted()


def raise_if_interrupted() -> None:
    """Raise the KeyboardInterrupt of a Ctrl+C that was deferred or swallowed (see sticky_interrupt); never while an
    exception is already on its way up (a finally block's clean-up is not cut short)."""
    global _interrupt_pending
    if _interrupt_pending and sys.exc_info()[0] is None:
        _interrupt_pending = False
        raise KeyboardInterrupt


YOUNG_COLLECTION_EVERY = 10_000  # allocations between young-generation collections during a run (Python's default: 700)


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Young-generation garbage collections every YOUNG_COLLECTION_EVERY allocations instead of every 700, for the
    duration (the old thresholds restored after). torch.export and ExecuTorch's passes allocate millions of
    short-lived objects, and with torch loaded each collection walks many survivors: the bench's hand-written
    lowering script spent 3.4 of its 27.5 CPU-s collecting, 1.7 of 24.5 with this. Only when collections happen
    changes, never what is kept."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], YOUNG_COLLECTION_EVERY), old[1], old[2])
    try:
        yield
    finally:
        gc.set_threshold(*old)
