"""Shared helpers of the benchmarks: a throwaway workspace and timing of whole commands."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["workspace", "np_command", "timed", "spread"]

# Python puts this folder first on sys.path, where bench/profile.py would shadow the standard library's `profile`
# (which torch imports): drop it now that this module is loaded.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]


def workspace() -> Path:
    """A fresh workspace in a temporary folder, with a private estimate cache."""
    from np_optimizer import api

    root = Path(tempfile.mkdtemp(prefix="np-bench-")) / "ws"
    os.environ["NP_CACHE_DIR"] = str(root.parent / "cache")
    api.workspace_init(root)
    return root


def np_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "np_optimizer", *args]


def timed(command: list[str], cwd: Path) -> float:
    """Wall seconds of one run of `command` in a fresh process; a failure stops the benchmark."""
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=os.environ.copy())
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return elapsed


def spread(samples: list[float]) -> str:
    """median [min..max] of a few samples."""
    return f"{statistics.median(samples):.2f} s [{min(samples):.2f}..{max(samples):.2f}]"
