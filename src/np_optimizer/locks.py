"""Every lock np takes: an flock on a file, shared or exclusive; waited for, tried once, or waited for up to a timeout;
re-entrant within a thread; its holders recorded where a caller must name them.

    with hold(path, exclusive=False, timeout=0):           # LockBusy at once when another process is in the way
        ...
    lock = FileLock(path, holders=folder, info={"command": "np run"})
    if lock.acquire(exclusive=True, timeout=5.0):          # False: still held elsewhere after 5 s
        ...; lock.release()

Its users, each a thin caller with its own messages: the store's experiment lock and a compile folder's lock
(files.file_lock), the run lock (workspace/run_lock.py: np run exclusive, np profile shared, NP-EXP-423 naming the
holders), the sweep lock (sweep/driver.py: one np sweep per project, NP-SWP-409), and the per-device measurement queue
(profiler/measure/device_queue.py: its FIFO order on top of one exclusive lock per device).

Why flock: the kernel drops it when its holder dies (even kill -9), so a dead holder is never an obstacle; a holder
record is only a hint, trusted while its process lives (pid + start time, processes.pid_alive), and deleted by whoever
finds it stale or damaged. The descriptor is not inherited by child processes (PEP 446) unless a caller hands it on
(the device queue passes it to the measuring process, so the device stays locked until both are gone): that is why
releasing closes the descriptor and never calls LOCK_UN, which would unlock it for the child too.

Nesting: taken again by the same thread (nested calls), the lock is the outer one's, counted, and the OS lock is taken
once (a second descriptor of the same file would wait for the first); a shared lock nested inside asks for exclusive
is converted, and stays exclusive until the outer one lets go. Another thread of the same process waits as another
process does (its own descriptor). A forked child starts with its parent's holdings (its descriptors are the same).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from np_optimizer.processes import pid_alive, start_ticks

__all__ = ["FileLock", "Holder", "LockBusy", "hold", "holders_of", "flock_within"]

POLL_S = 0.05  # how often a lock with a timeout is tried again (flock itself has no timeout)


class LockBusy(Exception):
    """Another process holds the lock (tried once, or the timeout expired); callers turn it into their own np error."""

    def __init__(self, path: Path, waited_s: float) -> None:
        super().__init__(f"{path} is locked by another process (waited {waited_s:.1f} s)")
        self.path = path
        self.waited_s = waited_s


@dataclass(frozen=True)
class Holder:
    """A live process recorded as holding a lock: its pid and start time (clock ticks since boot, None where /proc
    cannot say), whether it holds it exclusively, when it took it (epoch s), and what its caller recorded beside."""

    pid: int
    pid_start: int | None
    exclusive: bool
    locked_at: float
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Held:
    """One OS lock this thread holds, shared by the FileLock objects nested on it."""

    fd: int
    exclusive: bool
    depth: int
    record: Path | None


_held: dict[tuple[int, str], _Held] = {}
_held_guard = threading.Lock()


def flock_within(fd: int, exclusive: bool, timeout: float | None, poll_s: float = POLL_S) -> bool:
    """Take the flock on `fd`: wait (timeout None), try once (0) or poll until `timeout` s; False when it stays busy."""
    kind = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    if timeout is None:
        fcntl.flock(fd, kind)
        return True
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(poll_s, left))


def _read_holder(path: Path) -> Holder | None:
    """The holder in a record file; None (and the file deleted) when it is damaged or its process is gone."""
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        data = None
    holder: Holder | None = None
    if isinstance(data, dict):
        pid, start, when = data.get("pid"), data.get("pid_start"), data.get("locked_at")
        if (isinstance(pid, int) and not isinstance(pid, bool) and (start is None or isinstance(start, int))
                and isinstance(when, (int, float)) and not isinstance(when, bool) and math.isfinite(when)):
            info = {k: v for k, v in data.items() if k not in ("pid", "pid_start", "exclusive", "locked_at")}
            holder = Holder(pid, start, bool(data.get("exclusive")), float(when), info)
    if holder is None or not pid_alive(holder.pid, holder.pid_start):
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    return holder


def holders_of(folder: Path) -> list[Holder]:
    """The live processes recorded in `folder` (one `<pid>.json` each) as holding its lock, by pid; stale records (a
    dead process, a reused pid) and damaged ones are deleted."""
    try:
        paths = sorted(folder.glob("*.json"))
    except OSError:
        return []
    return sorted((h for p in paths if (h := _read_holder(p)) is not None), key=lambda h: h.pid)


def _write_record(path: Path, data: dict[str, Any]) -> None:
    """Write a holder record by rename (never half a record); best effort: the lock works without it."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)


class FileLock:
    """An flock on `path` (created with `mode` when missing). With `holders`, a folder, the process that takes it
    records itself there (`<pid>.json`: pid, pid_start, `info`, exclusive, locked_at) until it lets go."""

    def __init__(self, path: Path, *, holders: Path | None = None, info: Mapping[str, Any] | None = None,
                 mode: int = 0o666) -> None:
        self.path = Path(path)
        self.holders_dir = holders
        self.info = dict(info or {})
        self.mode = mode
        self._key = (threading.get_ident(), str(self.path.resolve()))
        self._held: _Held | None = None
        self._fd: int | None = None  # opened by a try that failed, kept for the next try

    @property
    def held(self) -> bool:
        return self._held is not None

    def fileno(self) -> int | None:
        """The locked descriptor while this lock is held (a child that inherits it keeps the lock until it exits)."""
        return self._held.fd if self._held is not None else None

    def holders(self) -> list[Holder]:
        """The live holders recorded for this lock (none without a holders folder)."""
        return holders_of(self.holders_dir) if self.holders_dir is not None else []

    def open(self) -> int:
        """Open (create) the lock file now, so that a path where no lock file can be fails before any wait (the next
        `acquire` uses this descriptor)."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, self.mode)
        return self._fd

    def acquire(self, *, exclusive: bool = True, timeout: float | None = None, poll_s: float = POLL_S) -> bool:
        """Take the lock: wait for it (timeout None), try once (0), or wait up to `timeout` s. True when held, False
        when another process still holds it (nothing is then left open). Raises OSError when the file cannot be opened
        or locked."""
        if self._held is not None:
            raise RuntimeError(f"{self.path} is already held by this FileLock")
        self._key = (threading.get_ident(), str(self.path.resolve()))
        outer = _held.get(self._key)
        if outer is not None:  # nested in this thread: the outer holder's lock serves
            if exclusive and not outer.exclusive:
                if not flock_within(outer.fd, True, timeout, poll_s):
                    # a failed conversion may have dropped the shared lock (Linux removes it first): take it back
                    fcntl.flock(outer.fd, fcntl.LOCK_SH)
                    return False
                outer.exclusive = True
            outer.depth += 1
            self._held = outer
            return True
        fd = self.open()
        try:
            locked = flock_within(fd, exclusive, timeout, poll_s)
        except BaseException:
            self.release()
            raise
        if not locked:
            self.release()  # closes the descriptor: a lock not taken holds nothing
            return False
        self._fd = None  # now the held lock's
        record = self.holders_dir / f"{os.getpid()}.json" if self.holders_dir is not None else None
        self._held = _Held(fd, exclusive, 1, record)
        with _held_guard:
            _held[self._key] = self._held
        if record is not None:
            assert self.holders_dir is not None
            holders_of(self.holders_dir)  # clears the records of dead holders
            _write_record(record, {"pid": os.getpid(), "pid_start": start_ticks(os.getpid()), **self.info,
                                   "exclusive": exclusive, "locked_at": time.time()})
        return True

    def release(self) -> None:
        """Let go (the OS lock only when the outermost holder lets go: its descriptor is closed), or close a descriptor
        `open` left; releasing twice does nothing."""
        held, self._held = self._held, None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if held is None:
            return
        held.depth -= 1
        if held.depth > 0:
            return
        with _held_guard:
            if _held.get(self._key) is held:
                del _held[self._key]
        if held.record is not None:
            with contextlib.suppress(OSError):
                held.record.unlink()
        os.close(held.fd)  # the kernel unlocks (once no child holds a copy of it)

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


@contextlib.contextmanager
def hold(path: Path, *, exclusive: bool = True, timeout: float | None = None, holders: Path | None = None,
         info: Mapping[str, Any] | None = None, mode: int = 0o666) -> Iterator[FileLock]:
    """Hold the lock on `path` for the block (see FileLock.acquire for `timeout`); LockBusy when it stays busy."""
    lock = FileLock(path, holders=holders, info=info, mode=mode)
    started = time.monotonic()
    try:
        if not lock.acquire(exclusive=exclusive, timeout=timeout):
            raise LockBusy(lock.path, time.monotonic() - started)
        yield lock
    finally:
        lock.release()
