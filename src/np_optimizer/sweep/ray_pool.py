"""The Ray pool: each trial's compute (np run of its experiment) as a plain Ray task on an existing cluster, with the
`Pool` interface of pool.py. Imported only by `np sweep --ray` (it is the one module that imports Ray).

No file system is shared: the task gets the bytes it needs (the project without its other experiments, the workspace
marker and devices.yaml, and the trial's experiment folder as it is now), runs the trial in a temporary workspace on
its node, and returns the experiment folder after the run as bytes, which replace the project's folder here. A task
whose worker or node dies is retried elsewhere by Ray (`max_retries`); from the same inputs, so a trial is recorded
once. Measurements never run on a Ray node: a trial that measures is measured here afterwards, one at a time, through
np's device queue (the worker's child process, with the job's `measure_only`).

At connect every alive node is asked for its versions of np (and a digest of its source files) and of the libraries
behind the figures; a difference is NP-SWP-503 naming the node, the package and both versions.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import platform
import queue
import shutil
import socket
import subprocess
import tarfile
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from np_optimizer.errors import NetworkError
from np_optimizer.records.codec import from_dict, to_dict
from np_optimizer.records.status import RunStatus
from np_optimizer.records.sweep import TrialJob, TrialResult
from np_optimizer.sweep.pool import TRIAL_MEMORY_BYTES, TrialEvent
from np_optimizer.sweep.worker import Worker, failed_result, job_line, read_events, start
from np_optimizer.workspace import WORKSPACE_FILE, Project

__all__ = ["RayPool", "node_versions", "CHECKED_PACKAGES"]

CHECKED_PACKAGES = ("torch", "executorch", "torchao", "mlia", "ethos-u-vela")
MAX_RETRIES = 2  # a task whose worker or node dies runs again elsewhere, twice at most
_CODE = "NP-SWP-503"
_HINT_VERSIONS = ("Install the same np and library versions on every node (pip install -r requirements.lock and the "
                  "same np), then restart Ray there; or run the sweep here without --ray.")


# -- both sides --------------------------------------------------------------------------------------------------


def _np_source_digest() -> str:
    """A digest of np's own files: two installs of one np version built from different code differ here. Read at
    each ask, never kept: a long-lived Ray worker must answer for the files as they are now."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
            digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def node_versions() -> dict[str, str]:
    """What must match on every node: python, np (version and source digest) and the libraries behind the figures."""
    from np_optimizer.versions import np_version, tool_version

    return {"python": platform.python_version(), "np": np_version(), "np source": _np_source_digest(),
            **{name: tool_version(name) for name in CHECKED_PACKAGES}}


def _pack(entries: list[tuple[Path, str]]) -> bytes:
    """A tar (uncompressed: models and programs hardly compress) of files and folders under the given names."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path, name in entries:
            tar.add(path, arcname=name)
    return buffer.getvalue()


def _unpack(data: bytes, into: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        tar.extractall(into, filter="data")  # no absolute paths, no links out of `into`


# -- the node's side -------------------------------------------------------------------------------------------------


def _node_task(project_files: bytes, experiment_files: bytes, where: tuple[str, str, str], job: TrialJob,
               run: Worker) -> tuple[dict[str, Any], bytes, str]:
    """Run one trial's steps on a Ray node: (its TrialResult as JSON, its experiment folder after the run as a tar,
    the node's IP). Its figures are the node's; a trial that measures is measured (and its figures read) here."""
    import ray

    workspace, project, experiment = where
    with tempfile.TemporaryDirectory(prefix="np-sweep-ray-") as tmp:
        root = Path(tmp) / workspace
        _unpack(project_files, root)
        _unpack(experiment_files, root / project)
        folder = root / project / experiment
        job = replace(job, experiment_dir=folder, measure_on=None)
        _prime(run, job)
        result = run.run(job, lambda _text: None)
        return to_dict(result), _pack([(folder, experiment)]), str(cast(Any, ray.util).get_node_ip_address())


def _prime(run: Worker, job: TrialJob) -> None:
    """The worker module's `prime(argv)` (api/trial.py), as the local pool's warm host calls it: what every trial on
    the job's backend would compute again (XNNPACK's pattern graphs, the quantizer's conv-bn patterns behind a memo),
    computed once per Ray worker process (prime itself remembers the backends it primed), which runs task after task.
    Never the trial's failure: a prime that fails leaves each trial to trace for itself."""
    import importlib

    with contextlib.suppress(Exception):
        prime = getattr(importlib.import_module(run.module), "prime", None)
        if callable(prime):
            prime([job_line(job)])


# -- the driver's side -----------------------------------------------------------------------------------------------


def _check_reachable(address: str) -> None:
    """Ray retries an unreachable head for minutes: a plain TCP connect first says so in seconds."""
    if address in ("auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=5):
            return
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
        raise NetworkError(f"The Ray cluster at {address} cannot be reached ({reason}).",
                           hint="Check the head's address and port (ray status on the head prints it), that Ray runs "
                                "there, and that no firewall is in the way; or run the sweep here without --ray.",
                           code=_CODE) from None


def _task_failure(exc: BaseException) -> str:
    """A one-line reason for a trial whose Ray task failed after its retries."""
    import ray.exceptions as rex

    first = (str(exc).strip().splitlines() or [""])[-1][:200]
    if isinstance(exc, rex.OutOfMemoryError):
        return f"the trial's Ray worker ran out of memory (after {MAX_RETRIES} retries)"
    if isinstance(exc, rex.NodeDiedError | rex.ObjectLostError | rex.OwnerDiedError):
        return f"the Ray node running the trial was lost (after {MAX_RETRIES} retries): {type(exc).__name__}"
    if isinstance(exc, rex.WorkerCrashedError):
        return f"the trial's Ray worker died (after {MAX_RETRIES} retries)"
    if isinstance(exc, rex.TaskCancelledError):
        return "the trial's Ray task was cancelled"
    if isinstance(exc, rex.RayTaskError):
        cause = exc.cause if isinstance(exc.cause, BaseException) else exc
        return f"the trial's Ray task raised {type(cause).__name__}: {first}"
    return f"the trial's Ray task failed: {type(exc).__name__}: {first}"


class RayPool:
    """Trials as Ray tasks on the cluster at `address` (host:port of the head, ray://host:port, or auto)."""

    def __init__(self, address: str, project: Project, worker: Worker, *, measure_on: str | None = None) -> None:
        import logging

        import ray

        _check_reachable(address)
        try:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING,
                     configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise NetworkError(f"Ray cannot connect to the cluster at {address}: {str(exc).splitlines()[0]}",
                               hint="Give the head's GCS address (host:6379), start Ray on this machine first (ray "
                                    "start --address=HEAD:6379), or use the Ray Client (ray://HEAD:10001).",
                               code=_CODE) from None
        self.address, self.project, self.worker, self.measure_on = address, project, worker, measure_on
        try:
            nodes = [n for n in cast(Any, ray).nodes() if n.get("Alive")]
            self._check_versions(nodes)
            self.slots, self._memory = self._size(nodes)
        except BaseException:
            ray.shutdown()
            raise
        self._remote = ray.remote(num_cpus=1, memory=self._memory, max_retries=MAX_RETRIES)(_node_task)
        self._project_ref: Any = None  # the project's files, put in the object store once
        self._tasks: dict[Any, TrialJob] = {}  # object ref -> its job
        self._events: queue.Queue[TrialEvent] = queue.Queue()
        self._measures: queue.Queue[tuple[TrialJob, TrialResult | None]] = queue.Queue()
        self._measuring: set[int] = set()
        self._child: subprocess.Popen[bytes] | None = None
        self._closed = False
        self._measurer: threading.Thread | None = None

    # connect -------------------------------------------------------------------------------------------------------

    def _check_versions(self, nodes: list[dict[str, Any]]) -> None:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ask = ray.remote(num_cpus=0, max_retries=0)(node_versions)
        pending = [(f"{n['NodeManagerAddress']} (node {str(n['NodeID'])[:8]})", ask.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()) for n in nodes]
        answers: list[tuple[str, dict[str, str]]] = []
        for node, ref in pending:
            try:
                answers.append((node, ray.get(ref, timeout=120)))
            except ray.exceptions.GetTimeoutError:
                raise NetworkError(f"Ray node {node} did not say its versions within 120 s.",
                                   hint="Check the node (ray status); a node that starts no Python worker may lack "
                                        "np: " + _HINT_VERSIONS, code=_CODE) from None
            except ray.exceptions.RayError as exc:
                cause = getattr(exc, "cause", None) or exc
                raise NetworkError(f"Ray node {node} cannot run np: {type(cause).__name__}: "
                                   f"{(str(cause).strip().splitlines() or [''])[-1][:200]}",
                                   hint=_HINT_VERSIONS, code=_CODE) from None
        here = node_versions()  # after the nodes: the files read here and there as close in time as can be
        for node, theirs in answers:
            for package, version in here.items():
                if theirs.get(package) != version:
                    what = "np's source files (one np version, other code)" if package == "np source" else package
                    raise NetworkError(f"Ray node {node} runs {what} {theirs.get(package, 'not installed')}, this "
                                       f"machine {version}.", hint=_HINT_VERSIONS, code=_CODE)

    def _size(self, nodes: list[dict[str, Any]]) -> tuple[int, int]:
        """(trials at once, memory each asks): one per CPU, within memory when a node has a trial's worth."""
        cpus = [int(n.get("Resources", {}).get("CPU", 0)) for n in nodes]
        memory = [int(n.get("Resources", {}).get("memory", 0)) for n in nodes]
        if sum(cpus) == 0:
            raise NetworkError(f"The Ray cluster at {self.address} has no CPU for trials.",
                               hint="Add worker nodes with CPUs (ray start --address=HEAD:6379 on each).", code=_CODE)
        if max(memory, default=0) < TRIAL_MEMORY_BYTES:  # no node could take a trial asking for it: ask for none
            return max(1, sum(cpus)), 0
        return max(1, sum(min(c, m // TRIAL_MEMORY_BYTES) for c, m in zip(cpus, memory, strict=True))), \
            TRIAL_MEMORY_BYTES

    # the pool ------------------------------------------------------------------------------------------------------

    def _project_files(self) -> Any:
        import ray

        if self._project_ref is None:
            root = self.project.root
            workspace = self.project.workspace
            entries: list[tuple[Path, str]] = []
            if workspace is not None:
                entries += [(workspace.root / name, name) for name in (WORKSPACE_FILE, "devices.yaml")
                            if (workspace.root / name).is_file()]
            for child in sorted(root.iterdir()):  # project.json, model/, datasets; not the experiments nor sweep/
                experiment = child.is_dir() and ((child / "run.yaml").exists() or (child / "meta.json").exists())
                if not experiment and child.name != "sweep" and not child.name.startswith("."):
                    entries.append((child, f"{root.name}/{child.name}"))
            self._project_ref = ray.put(_pack(entries))
        return self._project_ref

    def submit(self, job: TrialJob) -> None:
        folder = job.experiment_dir
        where = (self.project.root.parent.name, self.project.root.name, folder.name)
        ref = self._remote.remote(self._project_files(), _pack([(folder, folder.name)]), where, job, self.worker)
        self._tasks[ref] = job
        self._events.put(TrialEvent(job.number, "progress", "queued on the Ray cluster"))

    def _collect(self, ref: Any) -> None:
        import ray

        job = self._tasks.pop(ref)
        try:
            data, files, node = ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - the trial fails with the reason; the sweep goes on
            self._events.put(TrialEvent(job.number, "done", result=failed_result(
                job, _task_failure(exc), "See the Ray cluster's logs (ray logs), or run the sweep here without --ray.",
                code=_CODE)))
            return
        result = replace(from_dict(TrialResult, data), node=node)
        try:
            _replace_folder(job.experiment_dir, files)
        except (OSError, tarfile.TarError) as exc:
            result = replace(failed_result(job, f"the trial's results from Ray node {node} cannot be written here: "
                                                f"{exc}", f"Check that {job.experiment_dir.parent} is writable and has "
                                                          "space.", duration_s=result.duration_s), node=node)
        measure_on = job.measure_on if job.measure_on is not None else self.measure_on
        if result.status == RunStatus.SUCCESS and measure_on:
            self._events.put(TrialEvent(job.number, "progress", f"ran on node {node}; waiting to measure here"))
            self._measuring.add(job.number)
            self._measures.put((replace(job, measure_on=measure_on, measure_only=True), result))
            if self._measurer is None:
                self._measurer = threading.Thread(target=self._measure_loop, daemon=True)
                self._measurer.start()
        else:
            self._events.put(TrialEvent(job.number, "done", result=result))

    def _measure_loop(self) -> None:
        """Measure finished trials here, one at a time (a measurement beside another would time both)."""
        while not self._closed:
            job, ran = self._measures.get()
            if self._closed or ran is None:
                break
            try:
                measured = self._measure(job)
            except OSError as exc:  # no process could start: the trial fails, the sweep goes on
                measured = failed_result(job, f"the measurement on {job.measure_on} could not start: {exc}")
            total = (ran.duration_s or 0) + (measured.duration_s or 0)
            self._events.put(TrialEvent(job.number, "done", result=replace(measured, duration_s=round(total, 3),
                                                                             node=ran.node)))
            self._measuring.discard(job.number)  # after: the driver must never see 0 running with a result unread

    def _measure(self, job: TrialJob) -> TrialResult:
        """The worker's child measures the trial's last checkpoint here and reads its figures (with the measured
        round)."""
        child = start(self.worker, job)
        self._child = child
        try:
            return read_events(job, child, lambda text: self._events.put(TrialEvent(job.number, "progress", text)),
                               what=f"the measurement on {job.measure_on}")
        finally:
            self._child = None

    def poll(self, timeout: float) -> list[TrialEvent]:
        import ray

        deadline = time.monotonic() + timeout
        while True:
            if self._tasks:
                ready, _ = ray.wait(list(self._tasks), num_returns=len(self._tasks), timeout=0)
                for ref in ready:
                    self._collect(ref)
            out: list[TrialEvent] = []
            with contextlib.suppress(queue.Empty):
                while True:
                    out.append(self._events.get_nowait())
            left = deadline - time.monotonic()
            if out or left <= 0:
                return out
            if self._tasks:
                ray.wait(list(self._tasks), num_returns=1, timeout=min(left, 0.2))
            else:
                with contextlib.suppress(queue.Empty):
                    self._events.put(self._events.get(timeout=min(left, 0.2)))

    def running(self) -> int:
        return len(self._tasks) + len(self._measuring)

    def close(self) -> None:
        import ray

        self._closed = True
        self._measures.put((TrialJob(-1, Path()), None))  # wakes the measuring thread so that it ends
        child = self._child
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                child.terminate()
        for ref in list(self._tasks):
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        self._tasks.clear()
        self._measuring.clear()
        ray.shutdown()


def _replace_folder(folder: Path, files: bytes) -> None:
    """The experiment folder becomes the one in `files`: unpacked beside it, then swapped in by renames, so the
    folder is either the old one or the whole new one."""
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.ray-", dir=folder.parent))
    try:
        _unpack(files, staging)
        old = folder.with_name(f".{folder.name}.old-{os.getpid()}-{time.monotonic_ns()}")
        if folder.exists():
            folder.rename(old)
        (staging / folder.name).rename(folder)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
