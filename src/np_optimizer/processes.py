"""Is a process still the one we recorded? Pid plus start time, so a reused pid is not mistaken for it.

Used by the run lock (workspace/run_lock.py) and the device queue (profiler/measure/device_queue.py), which both
record who holds them and must tell a live holder from a dead one.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["start_ticks", "pid_alive"]


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
