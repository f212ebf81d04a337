"""Dying with the parent. A measurement whose requester is gone (np killed, even with kill -9, or the SSH bootstrap
gone with its connection) must stop at once: nobody reads its result, and the device queue, whose lock died with
np, would let the next measurement start beside it.

    set_death_signal(sig)     Linux: the kernel sends `sig` to this process when its parent dies (prctl
                              PR_SET_PDEATHSIG); False where that is not available
    dies_with_parent(sig)     a Popen preexec_fn: the same for a child, with no gap between fork and exec
    ParentWatch().gone()      the portable check: this process has been reparented since it started

The supervisor uses all three: a death signal for itself (it arrives as SIGTERM, handled like Ctrl+C), one for its
worker (SIGKILL: the worker holds the GIL in execute calls, and has nothing to report), and the check in its event
loop where prctl does not exist.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Optional

_PR_SET_PDEATHSIG = 1
_prctl: Optional[Callable[..., Any]] = None
_prctl_looked_up = False


def _lookup() -> Optional[Callable[..., Any]]:
    """libc's prctl, looked up once (before any fork: a preexec_fn must not import)."""
    global _prctl, _prctl_looked_up
    if not _prctl_looked_up:
        _prctl_looked_up = True
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                _prctl = ctypes.CDLL(None, use_errno=True).prctl
            except (ImportError, OSError, AttributeError):  # a Python built without ctypes, a libc without prctl
                _prctl = None
    return _prctl


def set_death_signal(signum: int) -> bool:
    """Have the kernel send `signum` to this process when its parent dies; False when it cannot."""
    prctl = _lookup()
    if prctl is None:
        return False
    try:
        return int(prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0)) == 0
    except (OSError, ValueError, TypeError):
        return False


def dies_with_parent(signum: int) -> Callable[[], None]:
    """A preexec_fn for Popen: the child gets `signum` when the calling process dies; if that already happened
    between fork and prctl, the child exits at once."""
    parent = os.getpid()
    _lookup()

    def preexec() -> None:
        set_death_signal(signum)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


class ParentWatch:
    """Whether the process that started this one is gone (this one was reparented to init or a subreaper)."""

    def __init__(self) -> None:
        self.parent = os.getppid()

    def gone(self) -> bool:
        return os.getppid() != self.parent
