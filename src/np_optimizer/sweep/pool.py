"""The local pool: each trial in a child process of its own (`python -m np_optimizer.sweep.trial`), its progress
read back as JSON lines. A child dies with the sweep (processes.dies_with_parent), so a killed sweep leaves no trial behind
holding its experiment's lock."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from np_optimizer.processes import dies_with_parent

__all__ = ["TrialJob", "TrialEvent", "Pool", "LocalPool", "default_workers", "threads_per_trial", "TRIAL_MEMORY_BYTES"]

TRIAL_MEMORY_BYTES = 2 * 1024 ** 3  # a trial's peak (torch, ExecuTorch, Vela) on the sample models, with headroom


@dataclass(frozen=True)
class TrialJob:
    number: int
    experiment_dir: Path
    method: str | None = None
    retry: bool = False  # reuse the finished steps (a trial that was running when the sweep stopped)
    measure_on: str | None = None  # then measure the last checkpoint on this device


@dataclass(frozen=True)
class TrialEvent:
    number: int
    kind: str  # progress | done
    text: str = ""
    done: dict[str, Any] = field(default_factory=dict)  # status, error, duration_s (kind done)


class Pool(Protocol):
    slots: int

    def submit(self, job: TrialJob) -> None: ...

    def poll(self, timeout: float) -> list[TrialEvent]: ...

    def running(self) -> int: ...

    def close(self) -> None: ...


def threads_per_trial(workers: int, measures_here: bool) -> int | None:
    """torch threads per trial when trials run side by side and none of them measures here."""
    if workers <= 1 or measures_here:
        return None
    return max(1, len(os.sched_getaffinity(0)) // workers)


def default_workers(measured_on_host: bool) -> tuple[int, str]:
    """How many trials at once, and why: one per core while memory allows; one when trials measure on this machine
    (a measurement beside another trial's compile would time the compile too)."""
    cores = len(os.sched_getaffinity(0))
    try:
        pages, size = os.sysconf("SC_AVPHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        by_memory = max(1, int(pages * size // TRIAL_MEMORY_BYTES))
    except (ValueError, OSError):
        by_memory = cores
    if measured_on_host:
        return 1, "trials measure on this machine: one at a time, so no compile runs beside a measurement"
    workers = max(1, min(cores, by_memory))
    return workers, f"{cores} cores, memory for {by_memory} trials of about 2 GiB"


class LocalPool:
    def __init__(self, workers: int, threads: int | None = None) -> None:
        """`threads`: torch's intra-op threads per trial (OMP_NUM_THREADS), so parallel trials do not oversubscribe
        the cores; None leaves the default (a trial that measures on this machine must time as np run does)."""
        self.slots = workers
        self.threads = threads
        self._events: queue.Queue[TrialEvent] = queue.Queue()
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    def submit(self, job: TrialJob) -> None:
        command = [sys.executable, "-m", "np_optimizer.sweep.trial", str(job.experiment_dir)]
        if job.method:
            command += ["--method", job.method]
        if job.retry:
            command.append("--retry")
        if job.measure_on:
            command += ["--measure-on", job.measure_on]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if self.threads is not None:
            env["OMP_NUM_THREADS"] = str(self.threads)
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                 env=env, preexec_fn=dies_with_parent())  # noqa: PLW1509 - only prctl, no locks
        self._children[job.number] = child
        assert child.stdout is not None
        threading.Thread(target=self._read, args=(job.number, child, child.stdout), daemon=True).start()

    def _read(self, number: int, child: subprocess.Popen[bytes], stream: IO[bytes]) -> None:
        done: dict[str, Any] | None = None
        for raw in stream:
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            if event.get("event") == "progress":
                self._events.put(TrialEvent(number, "progress", str(event.get("text", ""))))
            elif event.get("event") == "done":
                done = event
        code = child.wait()
        if done is None:  # killed, out of memory, or a crash before the trial could say so
            why = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
            done = {"status": "failed", "error": {"message": f"the trial's process ended without a result ({why})",
                                                  "hint": "See the experiment's logs/execution.log."}}
        self._events.put(TrialEvent(number, "done", done=done))

    def poll(self, timeout: float) -> list[TrialEvent]:
        out = []
        try:
            out.append(self._events.get(timeout=timeout))
            while True:
                out.append(self._events.get_nowait())
        except queue.Empty:
            pass
        for event in out:
            if event.kind == "done":
                self._children.pop(event.number, None)
        return out

    def running(self) -> int:
        return len(self._children)

    def close(self) -> None:
        for child in self._children.values():
            with contextlib.suppress(ProcessLookupError):
                child.terminate()
        for child in self._children.values():
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
        self._children.clear()
