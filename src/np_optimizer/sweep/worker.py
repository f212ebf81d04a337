"""What runs a trial, and how the pools talk to it. The worker (np_optimizer.api.trial: np run, then np profile of
the last checkpoint, over the API) stands a floor above the sweep, so the pools are given it (`Worker`) instead of
importing it: the local pool runs `<worker.module>.main([the TrialJob as JSON])` in a child forked by its warm host
(host.py), or `python -m <worker.module> <the TrialJob as JSON>` where there is none, and reads JSON lines back
(progress, then one TrialResult); a Ray task calls `worker.run` in its own process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any, Protocol

from np_optimizer.processes import dies_with_parent
from np_optimizer.records.codec import from_dict, to_dict
from np_optimizer.records.status import RunStatus
from np_optimizer.records.sweep import TrialError, TrialJob, TrialResult

__all__ = ["Emit", "Worker", "TrialProcess", "failed_result", "job_line", "job_of", "progress_line", "result_line", "start",
           "read_events"]

Emit = Callable[[str], None]  # a progress line of the running trial


@dataclass(frozen=True)
class Worker:
    """The trial's worker: `run(job, emit)` in this process (a Ray task's), `module` as a child process. The module's
    `main([JOB_JSON])` prints progress_line()s, then one result_line(); the local pool's warm host (host.py) imports it,
    calls its `warm()` when it has one (imports only: no torch op), calls `main` in a child forked per trial and, before
    its first fork and after each, its `prime(argv)` when it has one (host.py: what later trials would compute again,
    computed once, in one thread), and right after its first fork its `rehearse(argv)` when it has one."""

    module: str  # run as `python -m module JOB_JSON`, or main([JOB_JSON]) in a child of the warm host
    run: Callable[[TrialJob, Emit], TrialResult]


class TrialProcess(Protocol):
    """What the pools use of a trial's process: a Popen, or a child of the warm host (warm.ForkedTrial)."""

    @property
    def pid(self) -> int: ...

    @property
    def stdout(self) -> IO[bytes] | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


def failed_result(job: TrialJob, message: str, hint: str | None = None, *, code: str | None = None,
                  duration_s: float | None = None) -> TrialResult:
    return TrialResult(job.experiment_dir.name, RunStatus.FAILED, duration_s=duration_s,
                       error=TrialError(message, hint, code))


def job_line(job: TrialJob) -> str:
    return json.dumps(to_dict(job))


def job_of(text: str) -> TrialJob:
    return from_dict(TrialJob, json.loads(text))


def progress_line(text: str) -> str:
    return json.dumps({"event": "progress", "text": text}) + "\n"


def result_line(result: TrialResult) -> str:
    return json.dumps({"event": "done", "result": to_dict(result)}) + "\n"


def start(worker: Worker, job: TrialJob, threads: int | None = None) -> subprocess.Popen[bytes]:
    """The worker's child process for `job`, dying with this one; `threads`: its torch threads (OMP_NUM_THREADS)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    return subprocess.Popen([sys.executable, "-m", worker.module, job_line(job)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env,
                            preexec_fn=dies_with_parent())  # noqa: PLW1509 - only prctl, no locks


def read_events(job: TrialJob, child: TrialProcess, on_progress: Emit, *,
                what: str = "the trial's process") -> TrialResult:
    """Read the child's lines to its end: progress to `on_progress`; its result, or a failed one when it ended
    without saying (killed, out of memory, a crash before the worker could answer)."""
    stream: IO[bytes] | None = child.stdout
    assert stream is not None
    result: TrialResult | None = None
    for raw in stream:
        try:
            event: dict[str, Any] = json.loads(raw)
            if event.get("event") == "progress":
                on_progress(str(event.get("text", "")))
            elif event.get("event") == "done":
                result = from_dict(TrialResult, event["result"])
        except (ValueError, TypeError, KeyError, AttributeError):
            continue  # not one of the worker's lines
    code = child.wait()
    if result is None:
        why = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        return failed_result(job, f"{what} ended without a result ({why})",
                             "See the experiment's logs/execution.log.")
    return result
