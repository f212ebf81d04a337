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
Taken again in the same thread (nested calls), it is shared with the outer holder, not waited for. The lock, the
records and the nesting are locks.py's; this module names the holders and says what to do.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from np_optimizer.errors import ConfigError
from np_optimizer.locks import FileLock, holders_of
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


def run_lock_holders(root: Path) -> list[RunHolder]:
    """The live processes recorded as holding the run lock of the experiment at `root`; stale records (a dead
    process, a reused pid) are deleted."""
    out: list[RunHolder] = []
    for holder in holders_of(root / HOLDERS_DIR):
        command = holder.info.get("command")
        if isinstance(command, str):
            out.append(RunHolder(holder.pid, command, holder.exclusive, _started(holder.pid_start, holder.locked_at)))
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


@contextlib.contextmanager
def run_lock(experiment: Experiment, command: str, *, exclusive: bool) -> Iterator[None]:
    """Hold the experiment's run lock (exclusive for np run, shared for np profile) for the duration of the block;
    raises ConfigError NP-EXP-423 at once when another process is in the way."""
    root = experiment.root.resolve()
    lock = FileLock(root / LOCK_FILE, holders=root / HOLDERS_DIR, info={"command": command}, mode=0o644)
    try:
        locked = lock.acquire(exclusive=exclusive, timeout=0)
    except OSError as exc:
        lock.release()
        if exc.filename is not None:  # os.open names the file; flock does not
            raise ConfigError(f"The run lock {root / LOCK_FILE} cannot be opened: {exc.strerror or exc}.",
                              hint="Check the experiment folder's permissions.") from exc
        raise ConfigError(f"The run lock {root / LOCK_FILE} cannot be taken: {exc.strerror or exc}.",
                          hint="Keep the workspace on a local file system that supports flock.") from exc
    if not locked:
        lock.release()
        raise _busy(experiment, command, exclusive)
    try:
        yield
    finally:
        lock.release()


def wait_until_free(root: Path, timeout_s: float, poll_s: float = 0.1) -> bool:
    """Wait up to `timeout_s` until no process holds the run lock of the experiment at `root` (tried, then let go at
    once); False when it is still held. For a process that just lost its holder: a killed np's children take a
    moment to die."""
    if not (root / LOCK_FILE).exists():  # never locked
        return True
    lock = FileLock(root / LOCK_FILE)
    try:
        return lock.acquire(exclusive=True, timeout=timeout_s, poll_s=poll_s)
    except OSError:  # a file that cannot be opened: run_lock itself will say why
        return True
    finally:
        lock.release()
