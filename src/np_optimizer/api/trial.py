"""One trial of np sweep, the worker's side: np run of the trial's experiment, then (with the sweep's `measure_on`)
np profile of its last checkpoint on that device, over this API; then its figures, read where it ran. The local pool
runs `main` in a child process (forked by its warm host, which ran `warm()` once; or `python -m
np_optimizer.api.trial JOB_JSON`): JSON lines out, the last one its TrialResult; a Ray task calls `run_trial` in the
task's process (sweep/worker.py: the protocol)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from np_optimizer.errors import ValidationFailed
from np_optimizer.records.parts import ErrorRecord
from np_optimizer.records.status import RoundStatus, RunStatus
from np_optimizer.records.sweep import TrialError, TrialJob, TrialResult
from np_optimizer.sweep.worker import Emit, Worker, job_of, progress_line, result_line

if TYPE_CHECKING:
    from np_optimizer.backends.base import Backend

__all__ = ["run_trial", "main", "warm", "prime", "rehearse", "WORKER"]


def measuring_method(device_name: str) -> str:
    """The device's method that measures (np profile -d DEVICE --method it)."""
    from np_optimizer.devices import get_device

    device = get_device(device_name)
    return next((m.method for m in device.methods if m.result_kind == "measured"), device.methods[0].method)


def _error(record: ErrorRecord | None, default: str) -> TrialError:
    if record is None:
        return TrialError(default)
    return TrialError(record.message or default, record.hint, record.code)


def _steps_and_measurement(job: TrialJob, emit: Emit) -> TrialError | None:
    """Run the experiment (unless `measure_only`), then measure its last checkpoint on `measure_on`: the error that
    stopped the trial, or None."""
    from np_optimizer.api.profile import profile
    from np_optimizer.api.run import run

    folder = str(job.experiment_dir)
    if not job.measure_only:
        summary = run(experiment=folder, retry=job.retry, profile_method=job.method, progress=emit)
        if summary.error is not None:
            return _error(summary.error, "the run failed")
        if summary.status != RunStatus.SUCCESS:
            failed = [p for p in summary.profile if p.status != RoundStatus.SUCCESS]
            return _error(failed[0].error if failed else None, "a profiling round failed")
    if job.measure_on:
        emit(f"measuring on {job.measure_on}")
        measured = profile(["OUTPUT_MODEL"], experiment=folder, device=job.measure_on,
                               method=measuring_method(job.measure_on))
        failed_rounds = [r for r in measured.results if r.status != RoundStatus.SUCCESS]
        if failed_rounds:
            return _error(failed_rounds[0].error, f"the measurement on {job.measure_on} failed")
    return None


def run_trial(job: TrialJob, emit: Emit = lambda _text: None) -> TrialResult:
    """Run the trial to its end and report it: success with the figures of its last checkpoint (the sweep's metrics,
    as its report gives them), or failed with the error that stopped it. Never raises for the trial's failures."""
    from np_optimizer.sweep.values import trial_values
    from np_optimizer.workspace import Experiment

    started = time.monotonic()
    result = TrialResult(job.experiment_dir.name, RunStatus.FAILED)
    try:
        error = _steps_and_measurement(job, emit)
        if error is not None:
            result = replace(result, error=error)
        else:
            try:
                got = trial_values(Experiment(job.experiment_dir), job.metrics, job.measure_on)
            except Exception as exc:  # noqa: BLE001 - a damaged report fails the trial, not the sweep
                result = replace(result, error=TrialError(f"its report cannot be read: {exc}"))
            else:
                result = replace(result, status=RunStatus.SUCCESS, checkpoint=got.checkpoint, figures=got.figures,
                                 notes=got.notes, caveats=got.caveats)
    except ValidationFailed as exc:  # the trial's run.yaml breaks a rule of the device or model: say which
        errors = [i for i in exc.issues if not i.is_warning]
        first = errors[0] if errors else None
        result = replace(result, error=TrialError(f"run.yaml: {first.message}" if first else exc.message,
                                                  first.hint if first else exc.hint, exc.code))
    except Exception as exc:  # noqa: BLE001 - any failure is the trial's, recorded with its reason; the sweep goes on
        result = replace(result, error=_error(ErrorRecord.of(exc), "failed"))
    return replace(result, duration_s=round(time.monotonic() - started, 3))


WORKER = Worker("np_optimizer.api.trial", run_trial)


def warm() -> None:
    """Import once what trials need, in the local pool's warm host (sweep/host.py), which then forks a child per
    trial (about 6 s of imports a trial saves). Imports only: no torch op runs here (prime() traces, in one thread),
    so no thread pool exists when the host forks. A backend's own tools (Ethos-U's, MLIA) are prime()'s, imported
    once the first trial says which backend the sweep uses."""
    import importlib

    for name in ("torch", "torch.export._trace", "executorch.exir", "executorch.devtools", "executorch.runtime",
                 "executorch.extension.pybindings.portable_lib", "executorch.extension.flat_tensor.serialize.serialize",
                 "executorch.backends.xnnpack.partition.xnnpack_partitioner",
                 "executorch.backends.xnnpack.quantizer.xnnpack_quantizer", "np_optimizer.api.run",
                 "np_optimizer.api.profile", "np_optimizer.backends.xnnpack", "np_optimizer.backends.ethos_u",
                 "np_optimizer.pipeline.steps.graph_optimize", "np_optimizer.pipeline.steps.graph_quantize",
                 "np_optimizer.pipeline.steps.advanced_quantize", "np_optimizer.quantize.pt2e",
                 "np_optimizer.layers.numerics", "np_optimizer.runner.profiling_phase", "np_optimizer.profiler.session",
                 "np_optimizer.profiler.methods.mlia", "np_optimizer.profiler.methods.on_device",
                 "np_optimizer.profiler.measure.local", "np_optimizer.report.model", "np_optimizer.sweep.values"):
        importlib.import_module(name)
    _look_up_once()


def _look_up_once() -> None:
    """What every trial would look up again, looked up in the host (files read, no torch op; each kept by a
    per-process cache the children inherit): the versions the step and compile keys carry."""
    from np_optimizer.backends import backends
    from np_optimizer.versions import tool_version

    for name in {"torch", "torchao", "executorch", *(tool for b in backends() for tool in b.tool_versions)}:
        tool_version(name)


_PRIMED: set[str] = set()  # the backends this process primed for


def prime(argv: list[str]) -> None:
    """In the warm host, before its first fork and right after each fork (for the trial `argv` asks for), and in a Ray
    worker process before each task (sweep/ray_pool.py), once per backend: what every later trial on the trial's
    backend would do again. A backend MLIA estimates: its modules and MLIA's imported (`_for_mlia`); one
    with `trace_once` (XNNPACK's pattern graphs, 8 to 12 s a trial): traced in one intra-op thread so that the fork
    stays safe (backends/traced_once.py; RuntimeError when a thread was left running: the host forks nothing more).
    A sweep imports only its own backend's tools (Ethos-U's and MLIA's: 3 to 5 s an XNNPACK sweep no longer pays)."""
    from np_optimizer.backends.traced_once import in_one_thread

    backend = _backend_of(argv)
    if backend is None or backend.name in _PRIMED:
        return
    _PRIMED.add(backend.name)
    if backend.mlia_estimable:
        _for_mlia(backend.preload)
    if backend.trace_once is not None:
        in_one_thread(backend.trace_once)


_REHEARSED: set[str] = set()  # the backends this process rehearsed


def rehearse(argv: list[str]) -> None:
    """In the warm host only, once, right after its first fork (beside that trial, on the core it leaves; a local
    measurement waits for it: busy.py), for a backend that asks for it (Backend.rehearse): a small model quantized
    in each scheme and lowered (compile/rehearsal.py), so that what torch and ExecuTorch build on a first call
    (tables, caches, lazy imports) is built once here and every trial forked later starts with it: about 0.4 s a
    sample_cpu trial. In one intra-op thread, as `prime`'s traces (RuntimeError when a thread was left running)."""
    from np_optimizer.backends.traced_once import in_one_thread
    from np_optimizer.compile.rehearsal import rehearse_lowering

    backend = _backend_of(argv)
    if backend is None or not backend.rehearse or backend.name in _REHEARSED:
        return
    _REHEARSED.add(backend.name)
    in_one_thread(lambda: rehearse_lowering(backend))


def _backend_of(argv: list[str]) -> Backend | None:
    """The backend of the trial `argv` asks for; None when its project cannot be read (the trial says why itself)."""
    from np_optimizer.backends import get_backend
    from np_optimizer.devices import get_device
    from np_optimizer.workspace import Experiment

    try:
        return get_backend(get_device(Experiment(job_of(argv[0]).experiment_dir).project.device_name).backend)
    except Exception:  # noqa: BLE001 - a trial whose project cannot be read says so itself, in its child
        return None


def _for_mlia(preload: Callable[[], None] | None) -> None:
    """Imports only (no torch op): the backend's own modules and MLIA's; then MLIA's resource folders looked up (an
    Ethos-U compile key reads MLIA's target profile, which walks the file list of every installed distribution: about
    4 s that each sample_npu trial paid in its reused INPUT_MODEL's compile-cache hit, under load). Optional: a trial
    that needs one missing says so itself."""
    import contextlib
    import importlib

    with contextlib.suppress(Exception):
        if preload is not None:
            preload()
    for name in ("executorch.backends.arm.quantizer", "mlia.backend.vela.compiler", "mlia.target.registry"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    with contextlib.suppress(Exception):
        from mlia.utils.filesystem import get_mlia_resource_dirs

        get_mlia_resource_dirs()


def main(argv: list[str] | None = None) -> int:
    job = job_of((sys.argv[1:] if argv is None else argv)[0])
    # the run sends the libraries' output to its log by fd; the lines keep their own copy of stdout
    lines = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")

    def emit(text: str) -> None:
        lines.write(progress_line(text))
        lines.flush()

    lines.write(result_line(run_trial(job, emit)))
    lines.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
