"""The run lock: one `np run` per experiment at a time, and no `np profile` beside it.

    with run_lock(experiment, "np run", exclusive=True):      # np profile: exclusive=False
        ...

`np run` takes it exclusively; `np profile` takes it shared, so post-hoc rounds may run side by side (the device queue
orders their measurements) while neither a second `np run` nor an `np profile` starts beside an `np run`, which
compiles over the .pte files the others would measure. `np report` and `np status` never take it. A command that
finds the experiment busy does not wait: it raises NP-EXP-423 (exit 3) naming each process in the way, by pid and
start time.

It is an flock on `<experiment>/.run.lock`, so the kernel drops it when its holder dies (even kill -9): a lock left by
a dead process is never an obstacle. Who holds it is recorded in `<experiment>/.run-holders/<pid>.json` (pid, the
process's start time in clock ticks since boot from /proc/<pid>/stat, the command, when it took the lock). A record
whose pid is gone, or now belongs to another process (same pid, another start time: a reused pid), is stale: it is
never named, and whoever sees it deletes it. The descriptor is not inherited by child processes (PEP 446).
Taken again in the same process (nested calls), it is shared with the outer holder, not waited for.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from np_optimizer.errors import ConfigError
from np_optimizer.files import write_json
from np_optimizer.processes import pid_alive, start_ticks
from np_optimizer.workspace.layout import Experiment

__all__ = ["run_lock", "run_lock_holders", "wait_until_free", "describe_holders", "RunHolder", "LOCK_FILE", "HOLDERS_DIR"]

LOCK_FILE = ".run.lock"
HOLDERS_DIR = ".run-holders"
BUSY_CODE = "NP-EXP-423"
_RECORD_WAIT_S = 1.0  # how long a refused command waits for the holder's record (it writes it right after locking)


@dataclass(frozen=True)
class RunHolder:
    """A live process holding an experiment's run lock."""

    pid: int
    command: str  # "np run" | "np profile"
    exclusive: bool
    started: float  # the process's start, wall clock (epoch s)

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started))
        return f"{self.command} (pid {self.pid}, started {when})"


@dataclass
class _Held:
    fd: int
    exclusive: bool
    depth: int
    record: Path


_held: dict[Path, _Held] = {}


def _boot_time() -> float | None:
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _started(ticks: int | None, fallback: float) -> float:
    """The process's start as wall-clock time, from its start ticks; `fallback` when /proc cannot say."""
    boot = _boot_time()
    if ticks is None or boot is None:
        return fallback
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def _record(path: Path) -> dict[str, Any] | None:
    """A holder record, or None (then deleted) when it is damaged: a record is only ever a hint."""
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        data = None
    pid, start, when = (data.get(k) for k in ("pid", "pid_start", "locked_at")) if isinstance(data, dict) else \
        (None, None, None)
    if (isinstance(data, dict) and isinstance(pid, int) and not isinstance(pid, bool)
            and (start is None or isinstance(start, int)) and isinstance(data.get("command"), str)
            and isinstance(when, (int, float)) and math.isfinite(when)):
        return data
    with contextlib.suppress(OSError):
        path.unlink()
    return None


def run_lock_holders(root: Path) -> list[RunHolder]:
    """The live processes recorded as holding the run lock of the experiment at `root`; stale records (a dead
    process, a reused pid) are deleted."""
    out: list[RunHolder] = []
    try:
        paths = sorted((root / HOLDERS_DIR).glob("*.json"))
    except OSError:
        return out
    for path in paths:
        data = _record(path)
        if data is None:
            continue
        pid, start = int(data["pid"]), data.get("pid_start")
        if not pid_alive(pid, start):
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        out.append(RunHolder(pid, str(data["command"]), bool(data.get("exclusive")),
                             _started(start, float(data["locked_at"]))))
    return out


def describe_holders(holders: list[RunHolder]) -> tuple[str, str]:
    """Who holds a run lock, for a message ("np run (pid 12, started ...); ..."), and the pids for `kill`."""
    if not holders:
        return "another np process (it has not said which yet)", "<pid>"
    return "; ".join(h.describe() for h in holders), " ".join(str(h.pid) for h in holders)


def _busy(experiment: Experiment, command: str, exclusive: bool) -> ConfigError:
    """The error for a command refused: who is in the way, and what to do."""
    deadline = time.monotonic() + _RECORD_WAIT_S
    holders = run_lock_holders(experiment.root)
    while not holders and time.monotonic() < deadline:  # the holder locked, and is writing its record
        time.sleep(0.05)
        holders = run_lock_holders(experiment.root)
    who, kill = describe_holders(holders)
    need = "needs the experiment alone" if exclusive else "cannot run beside it (it may compile the programs again)"
    return ConfigError(f"Experiment {experiment.name} is busy: {who} is using it, and {command} {need}.",
                       hint=f"Wait until it ends (`np status` shows its progress; `np report` works meanwhile), or "
                            f"stop it (`kill {kill}`); then run {command} again.", code=BUSY_CODE)


def _try_flock(fd: int, exclusive: bool) -> bool:
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise


@contextlib.contextmanager
def run_lock(experiment: Experiment, command: str, *, exclusive: bool) -> Iterator[None]:
    """Hold the experiment's run lock (exclusive for np run, shared for np profile) for the duration of the block;
    raises ConfigError NP-EXP-423 at once when another process is in the way."""
    root = experiment.root.resolve()
    held = _held.get(root)
    if held is not None:  # nested in this process: the outer holder's lock serves
        if exclusive and not held.exclusive:
            if not _try_flock(held.fd, True):
                raise _busy(experiment, command, exclusive)
            held.exclusive = True
        held.depth += 1
        try:
            yield
        finally:
            held.depth -= 1
        return
    try:
        fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise ConfigError(f"The run lock {root / LOCK_FILE} cannot be opened: {exc.strerror or exc}.",
                          hint="Check the experiment folder's permissions.") from exc
    try:
        try:
            locked = _try_flock(fd, exclusive)
        except OSError as exc:
            raise ConfigError(f"The run lock {root / LOCK_FILE} cannot be taken: {exc.strerror or exc}.",
                              hint="Keep the workspace on a local file system that supports flock.") from exc
        if not locked:
            raise _busy(experiment, command, exclusive)
        record = root / HOLDERS_DIR / f"{os.getpid()}.json"
        _held[root] = _Held(fd, exclusive, 1, record)
        run_lock_holders(root)  # clears the records of dead holders
        with contextlib.suppress(OSError):  # the record only names the holder; the lock works without it
            write_json(record, {"pid": os.getpid(), "pid_start": start_ticks(os.getpid()), "command": command,
                                "exclusive": exclusive, "locked_at": time.time()})
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                record.unlink()
    finally:
        _held.pop(root, None)
        os.close(fd)  # the kernel unlocks


def wait_until_free(root: Path, timeout_s: float, poll_s: float = 0.1) -> bool:
    """Wait up to `timeout_s` until no process holds the run lock of the experiment at `root` (tried, then let go at
    once); False when it is still held. For a process that just lost its holder: a killed np's children take a
    moment to die."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fd = os.open(root / LOCK_FILE, os.O_RDWR)
        except OSError:  # never locked (no file), or a file that cannot be opened: run_lock itself will say why
            return True
        try:
            if _try_flock(fd, True):
                return True
        except OSError:
            return True
        finally:
            os.close(fd)
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
