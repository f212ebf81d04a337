"""One measurement at a time per device, for all np processes of the user, with a visible FIFO queue.

    with DeviceLock("host", expected_s=12.0, label="input_model (pid 4242)", on_status=show) as lock:
        ...measure...          # no other np process measures on this device meanwhile

Files, in `cache_root() / "queue"` ($NP_CACHE_DIR honoured), per device key K:
  K.lock          fcntl.flock(LOCK_EX) on it. The kernel drops the lock when the holder dies (even kill -9), so a
                  dead holder never blocks.
  K.holder.json   written by the holder: pid, label, started_at, expected_s, expected_end. Trusted only while that
                  pid lives.
  K.queue/*.json  one file per waiting job (pid, its start time, enqueued_ns, expected_s, label). Entries whose pid is
                  gone, or was reused (start time differs), are deleted by whoever sees them.
  K.history.json  startup overheads and latencies of earlier measurements, for the expected duration.

flock is not FIFO, so only the oldest live waiter tries the lock; a later job cannot overtake. A waiting job reports
through `on_status(QueueStatus)`: "waiting" (on entry and whenever its place changes; estimated wait = the holder's
remaining expected time + the expected time of each job ahead), "wait_exceeds_estimate" (the wait passed the estimate
plus a slack; again each time the wait doubles), then "acquired". Limit: per machine (a state dir on NFS shared by
several machines is not supported).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["DeviceLock", "QueueStatus", "LockTimeout", "queue_dir", "device_key", "expected_duration",
           "record_duration"]

DEFAULT_OVERHEAD_S = 8.0  # interpreter + torch import + load under load, before any history exists
UNKNOWN_LATENCY_GUESS_S = 5.0  # the measuring part when this .pte was never measured here (capped by the timeout)
_HISTORY_KEEP = 8
_HISTORY_MODELS = 64


def queue_dir() -> Path:
    from np_optimizer.profiler.cache import cache_root

    return cache_root() / "queue"


def device_key(device: str) -> str:
    key = re.sub(r"[^A-Za-z0-9._@-]+", "_", device).strip("_")
    return key[:120] or "device"


def _proc_start(pid: int) -> int | None:
    """Start time of a process in clock ticks since boot (field 22 of /proc/<pid>/stat), or None."""
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
        return int(data.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def pid_alive(pid: int, start: int | None = None) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as exc:
        if exc.errno == errno.ESRCH:
            return False  # EPERM: it exists, it is just not ours
    if start is not None:
        now = _proc_start(pid)
        if now is not None and now != start:
            return False  # the pid was reused by another process
    return True


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


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
    _fd: int | None = field(default=None, repr=False)
    _entry: Path | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.key = device_key(self.device)
        self.dir = Path(self.directory) if self.directory else queue_dir()
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
            entry = _read_json(path)
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
        record = _read_json(self.holder_path)
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

    def acquire(self, timeout: float | None = None) -> DeviceLock:
        self.queue_path.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        me = {"pid": os.getpid(), "pid_start": _proc_start(os.getpid()), "host": socket.gethostname(),
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
            if self.acquired_at is None and self._fd is not None:
                os.close(self._fd)
                self._fd = None
            raise

    def _try_lock(self) -> bool:
        assert self._fd is not None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            return False

    def _took_lock(self, me: dict[str, Any], waited: float, immediate: bool) -> None:
        self.acquired_at = time.time()
        self.waited_s = waited
        _write_json(self.holder_path, {"pid": me["pid"], "pid_start": me["pid_start"], "host": me["host"],
                                       "label": self.label, "started_at": self.acquired_at,
                                       "expected_s": self.expected_s,
                                       "expected_end": self.acquired_at + self.expected_s})
        self._drop_entry()
        self.on_status(QueueStatus("acquired", self.device, waited_s=waited, immediate=immediate))

    def update_expected(self, remaining_s: float) -> None:
        """Holder: revise the expected remaining time (waiters see it in their next estimate)."""
        record = _read_json(self.holder_path) or {}
        if record.get("pid") == os.getpid():
            record["expected_end"] = time.time() + remaining_s
            _write_json(self.holder_path, record)

    def _drop_entry(self) -> None:
        if self._entry is not None:
            self._entry.unlink(missing_ok=True)
            self._entry = None

    def release(self) -> None:
        if self._fd is None:
            return
        record = _read_json(self.holder_path)
        if record and record.get("pid") == os.getpid():
            self.holder_path.unlink(missing_ok=True)
        self.released_at = time.time()
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

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
    history = _read_json(_history_path(device, directory)) or {}
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
    history = _read_json(path) or {}
    history["overhead_s"] = ([*history.get("overhead_s", []), round(overhead_s, 3)])[-_HISTORY_KEEP:]
    latencies = dict(history.get("latency_ms") or {})
    if pte_sha256 and latency_ms is not None:
        latencies.pop(pte_sha256, None)
        latencies[pte_sha256] = latency_ms
    history["latency_ms"] = dict(list(latencies.items())[-_HISTORY_MODELS:])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_json(path, history)
    except OSError:
        pass
