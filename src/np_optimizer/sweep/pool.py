"""The local pool: each trial in a child process of its own, its progress and its result read back as JSON lines
(worker.py). The children are forked by the pool's warm host (host.py, warm.py), which imported torch, ExecuTorch and
np's run path once, so a trial pays no imports; where no host can run, each trial is a fresh `python -m <worker>`
process (said once, as a warning). When the trials measure on this machine, the warm pool also starts one warm
measuring process for the sweep (profiler/measure/warm.py) and hands its socket to every trial, so a trial's
measurement forks its worker from it instead of the trial importing torch and the runtime for its own (2 to 8 s).
A child dies with the sweep (processes.dies_with_parent, through the host too), so a killed sweep leaves no trial
behind holding its experiment's lock; the measuring process dies with it too (its death signal)."""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Protocol

from np_optimizer.logs import get_logger
from np_optimizer.processes import interrupt_deferred
from np_optimizer.profiler.measure import script_archive
from np_optimizer.profiler.measure.warm import SHARED_ENV, start_warm, stop_warm_processes, warm_socket
from np_optimizer.records.sweep import TrialJob, TrialResult
from np_optimizer.sweep.warm import HostUnavailable, WarmHost, warm_turned_off
from np_optimizer.sweep.worker import TrialProcess, Worker, job_line, read_events, start

__all__ = ["TrialJob", "TrialEvent", "Pool", "LocalPool", "default_workers", "threads_per_trial", "TRIAL_MEMORY_BYTES"]

TRIAL_MEMORY_BYTES = 2 * 1024 ** 3  # a trial's peak (torch, ExecuTorch, Vela) on the sample models, with headroom


@dataclass(frozen=True)
class TrialEvent:
    number: int
    kind: str  # progress | done
    text: str = ""
    result: TrialResult | None = None  # kind done: how the trial ended


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
    def __init__(self, workers: int, worker: Worker, threads: int | None = None, *, warm: bool | None = None,
                 measures_here: bool = False) -> None:
        """`worker`: what runs each trial; `threads`: torch's intra-op threads per trial (OMP_NUM_THREADS), so
        parallel trials do not oversubscribe the cores; None leaves the default (a trial that measures on this
        machine must time as np run does). `warm`: fork the trials from a warm host (default: unless
        $NP_SWEEP_WARM=0); False starts a fresh process per trial, each measuring with its own warm measuring
        process. `measures_here`: the trials measure on this machine (a warm pool shares one measuring process)."""
        self.slots = workers
        self.worker = worker
        self.threads = threads
        self.warm = not warm_turned_off() if warm is None else warm
        self.measures_here = measures_here
        self.host: WarmHost | None = None
        self._events: queue.Queue[TrialEvent] = queue.Queue()
        self._children: dict[int, TrialProcess] = {}
        if self.warm:  # started now, waited for at the first submit: their imports overlap the sweep's set-up
            self._spawn()

    def _spawn(self) -> None:
        """Start the warm host (and the warm measuring process) without waiting for their imports."""
        if self.measures_here:  # its imports overlap the host's
            with interrupt_deferred():
                start_warm(sys.executable, script_archive())
        try:
            self.host = WarmHost(self.worker.module, self.threads, wait=False)
        except HostUnavailable as exc:
            self._cold(str(exc))

    def _warm_host(self) -> WarmHost | None:
        """The running host, started now if needed and waited for (outside interrupt_deferred: its imports take
        seconds, and a Ctrl+C meanwhile must stop the sweep); None, and one warning, when it cannot serve: fresh
        processes then."""
        if self.warm and self.host is not None and not self.host.alive():
            self.host.close()  # it died (out of memory?): its trials ended as killed; a new one takes over
            self.host = None
        if self.warm and self.host is None:
            self._spawn()
        if self.warm and self.host is not None:
            try:
                self.host.ready()  # its imports (started with the pool, or just now)
            except HostUnavailable as exc:
                self._cold(str(exc))
        return self.host if self.warm else None

    def _cold(self, why: str) -> None:
        if self.host is not None:
            self.host.close()
        self.warm, self.host = False, None
        get_logger("Sweep").warning(f"The sweep's warm trial host is not available ({why}): each trial starts a "
                                    "fresh process, which imports torch and ExecuTorch again (5 to 11 s a trial).")

    def _shared_measuring(self) -> dict[str, str]:
        """The environment that hands the sweep's warm measuring process to a trial (started again if it died);
        empty when the trials do not measure here or it cannot run (each trial then starts its own)."""
        socket_path = warm_socket(sys.executable, script_archive()) if self.measures_here else None
        return {SHARED_ENV: socket_path} if socket_path else {}

    def submit(self, job: TrialJob) -> None:
        host = self._warm_host()
        shared = self._shared_measuring() if host is not None else {}
        with interrupt_deferred():  # a Ctrl+C inside the fork would be swallowed: taken once the child is ours
            child: TrialProcess | None = None
            if host is not None:
                try:
                    child = host.start(job.number, [job_line(job)], self.threads, shared)
                except HostUnavailable as exc:
                    self._cold(str(exc))
            if child is None:
                child = start(self.worker, job, self.threads)
            self._children[job.number] = child
            threading.Thread(target=self._read, args=(job, child), daemon=True).start()

    def _read(self, job: TrialJob, child: TrialProcess) -> None:
        result = read_events(job, child, lambda text: self._events.put(TrialEvent(job.number, "progress", text)))
        self._events.put(TrialEvent(job.number, "done", result=result))

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

    def processes(self) -> dict[int, int]:
        """The running trials' process ids, by trial number."""
        return {number: child.pid for number, child in self._children.items()}

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
        if self.host is not None:
            self.host.close()
        if self.measures_here:  # the sweep's measuring process ends with it (started again on demand)
            stop_warm_processes()
