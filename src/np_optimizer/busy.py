"""A process working beside a sweep's trials on this machine says so, and a measurement here waits until it is done.

The sweep's warm host rehearses a backend's lowering after it forked the first trial (sweep/host.py): seconds of CPU
on the core the trial does not use, which a measurement running meanwhile would time too. So the host holds an
exclusive flock on the file $NP_BUSY_LOCK names (the pool makes it, sweep/warm.py) from before its first fork until the
rehearsal ends, and a local measurement (profiler/measure/local.py) waits for that lock before it starts. Nothing
waits when the variable is unset or its file is gone (the sweep closed), and never longer than MAX_WAIT_S.

The holder unlocks with LOCK_UN, not by closing: a child forked while it held the lock shares its descriptor's lock,
and closing the holder's copy alone would leave the file locked by the child's.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time

from np_optimizer.locks import flock_within

__all__ = ["BUSY_ENV", "MAX_WAIT_S", "hold_busy", "release_busy", "wait_while_busy"]

BUSY_ENV = "NP_BUSY_LOCK"
MAX_WAIT_S = 300.0


def wait_while_busy(max_wait_s: float = MAX_WAIT_S) -> float:
    """Wait until no process holds $NP_BUSY_LOCK's file (at most `max_wait_s`); the seconds waited."""
    path = os.environ.get(BUSY_ENV)
    if not path:
        return 0.0
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return 0.0
    started = time.monotonic()
    try:
        flock_within(fd, False, max_wait_s)
    finally:
        os.close(fd)  # the shared lock, when taken, goes with it
    return time.monotonic() - started


def hold_busy() -> int | None:
    """Lock $NP_BUSY_LOCK's file exclusively: its descriptor, for release_busy; None when there is none to lock."""
    path = os.environ.get(BUSY_ENV)
    if not path:
        return None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        os.close(fd)
        return None
    return fd


def release_busy(fd: int | None) -> None:
    """Unlock (for every process sharing the descriptor's lock) and close."""
    if fd is None:
        return
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)
    with contextlib.suppress(OSError):
        os.close(fd)
