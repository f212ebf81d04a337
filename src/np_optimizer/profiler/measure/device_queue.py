"""One measurement at a time per device, for all np processes of the user, with a visible FIFO queue.

    with DeviceLock("host", expected_s=12.0, label="input_model (pid 4242)", on_status=show) as lock:
        ...measure...          # no other np process measures on this device meanwhile

Files, in queue_dir() (one folder per user, whatever the estimate cache's folder: $NP_QUEUE_DIR, else
/tmp/np-queue-<uid>, mode 0700), per device key K:
  K.lock          an exclusive flock on it (locks.FileLock). The kernel drops the lock when the holder dies (even
                  kill -9), so a dead holder never blocks. The local measuring process inherits it (local.py): the
                  device is free again only when np and its measurement are both gone.
  K.holder.json   written by the holder: pid, label, started_at, expected_s, expected_end. Trusted only while that
                  pid lives.
  K.queue/*.json  one file per waiting job (pid, its start time, enqueued_ns, expected_s, label). Entries whose pid is
                  gone, or was reused (start time differs), are deleted by whoever sees them.
  K.history.json  startup overheads and latencies of earlier measurements, for the expected duration.
A file that does not read back as a valid record (damaged, or JSON of another shape) is a warned miss: it is
deleted with a warning and written anew when next needed.

flock is not FIFO, so only the oldest live waiter tries the lock; a later job cannot overtake. A waiting job reports
through `on_status(QueueStatus)`: "waiting" (on entry and whenever its place changes; estimated wait = the holder's
remaining expected time + the expected time of each job ahead), "wait_exceeds_estimate" (the wait passed the estimate
plus a slack; again each time the wait doubles), then "acquired". Limit: per machine (a state dir on NFS shared by
several machines is not supported).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from np_optimizer.errors import ConfigError
from np_optimizer.locks import FileLock
from np_optimizer.processes import pid_alive, start_ticks
from np_optimizer.profiler.measure.queue_files import (
    discard as _discard,
)
from np_optimizer.profiler.measure.queue_files import (
    number as _number,
)
from np_optimizer.profiler.measure.queue_files import (
    read_record as _read_record,
)
from np_optimizer.profiler.measure.queue_files import (
    valid_entry as _valid_entry,
)
from np_optimizer.profiler.measure.queue_files import (
    valid_history as _valid_history,
)
from np_optimizer.profiler.measure.queue_files import (
    valid_holder as _valid_holder,
)
from np_optimizer.profiler.measure.queue_files import (
    write_json as _write_json,
)

__all__ = ["DeviceLock", "QueueStatus", "LockTimeout", "queue_dir", "device_key", "expected_duration",
           "record_duration", "QUEUE_DIR_ENV"]

QUEUE_DIR_ENV = "NP_QUEUE_DIR"

DEFAULT_OVERHEAD_S = 8.0  # interpreter + torch import + load under load, before any history exists
UNKNOWN_LATENCY_GUESS_S = 5.0  # the measuring part when this .pte was never measured here (capped by the timeout)
_HISTORY_KEEP = 8
_HISTORY_MODELS = 64


_log = logging.getLogger("np.DeviceQueue")


def queue_dir() -> Path:
    """The user's one queue folder: $NP_QUEUE_DIR (tests), else /tmp/np-queue-<uid>. Not under the estimate cache
    ($NP_CACHE_DIR), nor under $XDG_RUNTIME_DIR or $TMPDIR: those differ between shells, cron jobs and SSH sessions
    of the same user, and two folders would mean two queues for one device."""
    override = os.environ.get(QUEUE_DIR_ENV)
    if override:
        return Path(override)
    return Path("/tmp") / f"np-queue-{os.getuid()}"


def _private_dir(path: Path, *, follow_links: bool) -> None:
    """Create `path` (mode 0700), or check that it is a folder of this user's and make it 0700: other users must not
    see nor plant queue files (/tmp is shared, so there a link is refused too)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
        info = path.stat() if follow_links else path.lstat()
    except OSError as exc:
        raise ConfigError(f"The device queue folder {path} cannot be used: {exc.strerror or exc}.",
                          hint=f"Free or fix it, or set {QUEUE_DIR_ENV} to a private folder.") from exc
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ConfigError(f"The device queue folder {path} is not a folder of this user's (a link, a file, or "
                          "another user's folder).", hint=f"Remove it, or set {QUEUE_DIR_ENV} to a private folder.")
    if stat.S_IMODE(info.st_mode) != 0o700:
        path.chmod(0o700)


def device_key(device: str) -> str:
    key = re.sub(r"[^A-Za-z0-9._@-]+", "_", device).strip("_")
    return key[:120] or "device"


def _public(entry: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if entry is None else {k: v for k, v in entry.items() if not k.startswith("_")}


class LockTimeout(Exception):
    pass


@dataclass(frozen=True)
class QueueStatus:
    event: str  # "waiting" | "wait_exceeds_estimate" | "acquired"
    device: str
    place: int = 0  # 1 = next to run
    estimated_wait_s: float = 0.0
    waited_s: float = 0.0
    holder: dict[str, Any] | None = None
    ahead: tuple[dict[str, Any], ...] = ()
    holder_overdue: bool = False
    new_estimate_s: float | None = None
    immediate: bool = False


@dataclass
class DeviceLock:
    device: str
    expected_s: float
    label: str | None = None
    on_status: Callable[[QueueStatus], None] = lambda _status: None
    directory: Path | None = None
    poll_s: float = 0.2
    warn_slack_s: float = 1.0  # the wait may pass the estimate by max(slack, ratio * estimate) before a warning
    warn_slack_ratio: float = 0.0
    waited_s: float = 0.0
    acquired_at: float | None = None  # wall clock (epoch s)
    released_at: float | None = None
    remote: Any = None  # queues.Slot: the destination to measure on (a local lock does not change it)
    place: dict[str, Any] = field(default_factory=dict)  # queues.Slot: only a farm slot names a place
    _lock: FileLock | None = field(default=None, repr=False)
    _entry: Path | None = field(default=None, repr=False)
    _record: dict[str, Any] | None = field(default=None, repr=False)  # the holder record this process wrote

    def __post_init__(self) -> None:
        self.key = device_key(self.device)
        self.dir = Path(self.directory) if self.directory else queue_dir()
        self._default_dir = not self.directory and not os.environ.get(QUEUE_DIR_ENV)
        self.lock_path = self.dir / f"{self.key}.lock"
        self.holder_path = self.dir / f"{self.key}.holder.json"
        self.queue_path = self.dir / f"{self.key}.queue"

    def _entries(self) -> list[dict[str, Any]]:
        """Live waiting entries, oldest first; stale ones are deleted on sight."""
        out: list[dict[str, Any]] = []
        host = socket.gethostname()
        try:
            paths = list(self.queue_path.glob("*.json"))
        except OSError:
            return out
        for path in paths:
            entry = _read_record(path, "queue entry", _valid_entry)
            if entry is None:
                continue
            if entry.get("host") == host and not pid_alive(int(entry["pid"]), entry.get("pid_start")):
                path.unlink(missing_ok=True)
                continue
            entry["_path"] = str(path)
            out.append(entry)
        out.sort(key=lambda e: (e["enqueued_ns"], e["pid"]))
        return out

    def holder(self) -> dict[str, Any] | None:
        """The holder's record while a live process holds the lock, else None."""
        record = _read_record(self.holder_path, "holder record", _valid_holder)
        if record is None:
            return None
        if record.get("host") == socket.gethostname() and not pid_alive(int(record["pid"]), record.get("pid_start")):
            return None
        return record

    @staticmethod
    def estimate(ahead: list[dict[str, Any]], holder: dict[str, Any] | None) -> tuple[float, bool]:
        """(estimated wait, holder overdue): the holder's remaining expected time + each job ahead's expected time."""
        now = time.time()
        remaining, overdue = 0.0, False
        if holder is not None:
            remaining = float(holder.get("expected_end", now)) - now
            if remaining < 0:
                overdue, remaining = True, 0.0
        return remaining + sum(float(e.get("expected_s", 0)) for e in ahead), overdue

    def fileno(self) -> int | None:
        """The locked descriptor while this process holds the device: a child that inherits it keeps the device
        locked until it exits too (local.py hands it to the measuring process)."""
        if self._lock is None or self.acquired_at is None or self.released_at is not None:
            return None
        return self._lock.fileno()

    def _open(self) -> FileLock:
        """Make the folders and the lock file, replacing whatever damaged thing stands where they belong."""
        _private_dir(self.dir, follow_links=not self._default_dir)
        if self.queue_path.exists() and not self.queue_path.is_dir():
            _discard(self.queue_path, "queue folder", "a file where a folder belongs")
        self.queue_path.mkdir(exist_ok=True)
        if self.lock_path.is_dir() and not self.lock_path.is_symlink():
            _discard(self.lock_path, "lock file", "a folder where a file belongs")
        lock = FileLock(self.lock_path, mode=0o600)
        lock.open()  # an unusable lock file fails here, before the job queues
        return lock

    def acquire(self, timeout: float | None = None) -> DeviceLock:
        self._lock = self._open()
        me = {"pid": os.getpid(), "pid_start": start_ticks(os.getpid()), "host": socket.gethostname(),
              "enqueued_ns": time.time_ns(), "enqueued_at": time.time(), "expected_s": self.expected_s,
              "label": self.label}
        self._entry = self.queue_path / f"{me['enqueued_ns']}-{me['pid']}.json"
        _write_json(self._entry, me)
        t0 = time.monotonic()
        last_place: int | None = None
        warned_at: float | None = None
        deadline_s = 0.0  # waited_s by which the last estimate said we would run
        first = True
        try:
            while True:
                entries = self._entries()
                mine = [i for i, e in enumerate(entries) if e["_path"] == str(self._entry)]
                if not mine:  # our entry vanished (judged stale by mistake?): put it back
                    _write_json(self._entry, me)
                    continue
                index = mine[0]
                if index == 0 and self._try_lock():
                    self._took_lock(me, time.monotonic() - t0, first)
                    return self
                ahead = entries[:index]
                holder = self.holder()
                place = index + 1
                waited = time.monotonic() - t0
                if place != last_place:
                    estimate, overdue = self.estimate(ahead, holder)
                    deadline_s = waited + estimate
                    self.on_status(QueueStatus("waiting", self.device, place, estimate, waited, _public(holder),
                                               tuple(p for e in ahead if (p := _public(e))), overdue))
                    last_place, warned_at = place, None
                slack = max(self.warn_slack_s, self.warn_slack_ratio * deadline_s)
                if waited > deadline_s + slack and (warned_at is None or waited > 2 * warned_at):
                    estimate, overdue = self.estimate(ahead, holder)
                    self.on_status(QueueStatus("wait_exceeds_estimate", self.device, place, deadline_s, waited,
                                               _public(holder), holder_overdue=overdue, new_estimate_s=estimate))
                    warned_at = waited
                if timeout is not None and waited > timeout:
                    raise LockTimeout(f"waited {waited:.1f} s for device {self.device} (place {place})")
                first = False
                time.sleep(self.poll_s)
        except BaseException:
            self._drop_entry()
            if self.acquired_at is None and self._lock is not None:
                self._lock.release()  # the descriptor of the tries
                self._lock = None
            raise

    def _try_lock(self) -> bool:
        assert self._lock is not None
        return self._lock.acquire(exclusive=True, timeout=0)

    def _took_lock(self, me: dict[str, Any], waited: float, immediate: bool) -> None:
        self.acquired_at = time.time()
        self.waited_s = waited
        self._record = {"pid": me["pid"], "pid_start": me["pid_start"], "host": me["host"], "label": self.label,
                        "started_at": self.acquired_at, "expected_s": self.expected_s,
                        "expected_end": self.acquired_at + self.expected_s}
        if self.holder_path.is_dir() and not self.holder_path.is_symlink():
            _discard(self.holder_path, "holder record", "a folder where a file belongs")
        _write_json(self.holder_path, self._record)
        self._drop_entry()
        self.on_status(QueueStatus("acquired", self.device, waited_s=waited, immediate=immediate))

    def update_expected(self, remaining_s: float) -> None:
        """Holder: revise the expected remaining time (waiters see it in their next estimate)."""
        if self._record is not None and self.fileno() is not None:
            self._record["expected_end"] = time.time() + remaining_s
            _write_json(self.holder_path, self._record)

    def _drop_entry(self) -> None:
        if self._entry is not None:
            self._entry.unlink(missing_ok=True)
            self._entry = None

    def release(self) -> None:
        """Let go of the device. The lock's descriptor is closed, never unlocked (locks.py): a child that still holds
        it keeps the device; the kernel unlocks when the last descriptor is closed."""
        if self._lock is None:
            return
        record = _read_record(self.holder_path, "holder record", _valid_holder)
        if record and record.get("pid") == os.getpid():
            self.holder_path.unlink(missing_ok=True)
        self.released_at = time.time()
        self._lock.release()
        self._lock = None

    def __enter__(self) -> DeviceLock:
        return self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def _history_path(device: str, directory: Path | None) -> Path:
    return (directory or queue_dir()) / f"{device_key(device)}.history.json"


def expected_duration(device: str, pte_sha256: str | None, *, runs: int, warmup: int, timeout_s: float,
                      directory: Path | None = None) -> tuple[float, str]:
    """(seconds, how it was estimated) of a measurement: the device's usual startup overhead plus the runs at this
    .pte's last known latency (capped by the timeout); rough guesses where nothing was measured yet."""
    history = _read_record(_history_path(device, directory), "history", _valid_history) or {}
    overheads = [float(x) for x in history.get("overhead_s", [])]
    overhead = sorted(overheads)[len(overheads) // 2] if overheads else DEFAULT_OVERHEAD_S
    latency_ms = (history.get("latency_ms") or {}).get(pte_sha256 or "")
    if latency_ms is not None:
        measuring = min(timeout_s, (runs + warmup) * float(latency_ms) / 1000.0)
        how = "from earlier measurements of this .pte on this device"
    else:
        measuring = min(timeout_s, UNKNOWN_LATENCY_GUESS_S)
        how = "rough: this .pte was not measured on this device before"
    return overhead + measuring, how


def record_duration(device: str, pte_sha256: str | None, *, overhead_s: float, latency_ms: float | None,
                    directory: Path | None = None) -> None:
    """Remember a measurement's startup overhead and median latency for later estimates (best effort)."""
    path = _history_path(device, directory)
    history = _read_record(path, "history", _valid_history) or {}
    history["overhead_s"] = ([*history.get("overhead_s", []), round(overhead_s, 3)])[-_HISTORY_KEEP:]
    latencies = dict(history.get("latency_ms") or {})
    if pte_sha256 and latency_ms is not None and _number(latency_ms):
        latencies.pop(pte_sha256, None)
        latencies[pte_sha256] = latency_ms
    history["latency_ms"] = dict(list(latencies.items())[-_HISTORY_MODELS:])
    try:
        _private_dir(path.parent, follow_links=directory is not None or bool(os.environ.get(QUEUE_DIR_ENV)))
        _write_json(path, history)
    except (OSError, ConfigError):
        pass
