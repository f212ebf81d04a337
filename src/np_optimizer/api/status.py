"""API: np status (jobs, their state, and the experiment's measurements) and np export."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from np_optimizer.errors import ConfigError, NotFoundError, UsageError
from np_optimizer.files import write_json
from np_optimizer.logs import libraries_log
from np_optimizer.records import JobRecord, to_dict
from np_optimizer.records.state import JobState, Lowering, MeasurementState, StatusRecord
from np_optimizer.records.status import CompileStatus, ExperimentStatus, JobStatus
from np_optimizer.workspace import Experiment, resolve_experiment
from np_optimizer.workspace.store import ExperimentStore

if TYPE_CHECKING:
    from np_optimizer.devices import Device
    from np_optimizer.records import ExportRecord
    from np_optimizer.workspace.portable import MachinePaths

__all__ = ["status", "export", "EXPORT_LEVELS"]

EXPORT_LEVELS = ("deploy", "inspect", "result")


def _alive(pid: int | None) -> bool:
    from np_optimizer.processes import pid_alive

    return pid is not None and pid > 0 and pid_alive(pid)


def _make_folder(target: Path) -> None:
    """The export folder, or a ConfigError saying why it cannot be one (a file there or in its path, no permission)."""
    if target.exists() and not target.is_dir():
        raise ConfigError(f"The export folder {target} is a file.", hint="Pass -o/--output a folder (new or "
                          "existing); the file was not changed.", code="NP-CFG-400")
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"np cannot create the export folder {target}: {exc.strerror or exc}.",
                          hint="Pass -o/--output a folder you can write to.", code="NP-CFG-400") from None


def _lowered_later(store: ExperimentStore, job: JobRecord, device_name: str) -> tuple[Lowering, str]:
    """The lowering of a job np run did not lower: the one np profile made since, if any; and why."""
    from np_optimizer.compile import compile_dir, find_compiled  # (hashing and the tools' wrappers: when needed)
    from np_optimizer.devices import get_device

    device = get_device(device_name)
    found = find_compiled(compile_dir(store.job_dir(job.name), device), device,
                          str(job.output.sha256 if job.output else None))
    if found is not None:
        return found.status, "lowered by np profile" + (f": {found.reason}" if found.reason else "")
    return "not lowered", "not listed under profile: (np profile lowers it)"


def status(*, experiment: str | None = None, project: str | None = None, logs: bool = False,
           cwd: Path | None = None) -> StatusRecord:
    """Each job's state; a job left in_progress by a process that is gone is reported as interrupted."""
    exp = resolve_experiment(experiment, project, cwd or Path.cwd())
    store = ExperimentStore(exp)
    meta = store.read_meta()  # a damaged meta.json reads as "unknown", with a warning; nothing is renamed
    state = str(meta.get("status", ExperimentStatus.CREATED))
    if state == ExperimentStatus.RUNNING and not _alive(meta.get("pid")):
        state = ExperimentStatus.INTERRUPTED
    listed, index = store.read_jobs_and_index()  # each file read once: the jobs, and the rounds the index picks
    jobs = []
    for job in listed:
        job_state = job.status
        if job_state == JobStatus.IN_PROGRESS and not _alive(job.pid):
            job_state = JobStatus.INTERRUPTED
        lowering: Lowering | None = job.compile.status
        reason = job.compile.reason
        if not job.compile.lowered and job.status.done:  # np run lowers only what profile: lists
            lowering, reason = _lowered_later(store, job, exp.project.device_name)
        jobs.append(JobState(name=job.name, step_type=job.step_type, step_index=job.step_index,
                             checkpoint=job.checkpoint, status=job_state, duration_s=job.duration_s,
                             started_at=job.started_at, ended_at=job.ended_at, lowering=lowering,
                             lowering_reason=reason, errors=job.errors, reused_from=job.reused_from))
    measurements = [MeasurementState(checkpoint=r.checkpoint, trigger=r.trigger, status=r.status, method=r.method,
                                     result_kind=r.result_kind, device=r.device, started_at=r.started_at,
                                     measurement_id=r.measurement_id)
                    for r in (*index.profile.results, *index.post_hoc)]
    log_text = exp.log_file.read_text(encoding="utf-8", errors="replace") if logs and exp.log_file.exists() else None
    return StatusRecord(exp.name, state, tuple(jobs), tuple(measurements), log_text)


def export(*, level: str = "deploy", output: Path | None = None, experiment: str | None = None,
           project: str | None = None, cwd: Path | None = None) -> ExportRecord:
    """deploy: the final checkpoint's .pte for the project's device. inspect: plus its ETRecord (made now: one more
    lowering, compile/etrecord.py) and the ETDump of its latest measured round, for ExecuTorch's Inspector. result:
    plus report.json, meta.json, jobs.json, the configs and logs/execution.log. Written to `output` (default
    <experiment>/export/<level>)."""
    if level not in EXPORT_LEVELS:
        raise UsageError(f"Unknown export level '{level}'.", hint=f"Levels: {', '.join(EXPORT_LEVELS)}.",
                         code="NP-EXP-400")
    from np_optimizer.api.experiments import output_checkpoint
    from np_optimizer.compile import compile_dir, find_compiled
    from np_optimizer.devices import get_device
    from np_optimizer.records import ExportRecord  # (np status defines only its own records: records/state.py)

    exp = resolve_experiment(experiment, project, cwd or Path.cwd())
    store = ExperimentStore(exp)

    final = output_checkpoint(exp)
    last = next((j for j in store.jobs() if j.checkpoint == final and j.status.done), None)
    if last is None or not last.output:
        raise NotFoundError(f"Nothing to export: the final checkpoint {final} has not finished.",
                            hint="Run the experiment with `np run` (or `np run --retry`).", code="NP-EXP-404")
    device = get_device(exp.project.device_name)
    compiled_dir = compile_dir(store.job_dir(last.name), device)
    record = find_compiled(compiled_dir, device, last.output.sha256)
    if record is None or record.status != CompileStatus.OK or not record.pte_file:
        reason = record.reason if record else "no intact compiled .pte"
        raise NotFoundError(f"{last.checkpoint} has no usable .pte for {device.name} ({reason}).",
                            hint="Check `np status`; a float checkpoint cannot be lowered to an NPU. "
                            "`np run --retry` compiles it again if its .pte is missing or damaged.", code="NP-EXP-412")
    if level == "inspect":  # refused before anything is written
        from np_optimizer.compile.etrecord import check_etrecord

        check_etrecord(device)
    target = (output or exp.root / "export" / level).resolve()
    _make_folder(target)
    files = [target / "model.pte"]
    shutil.copy2(compiled_dir / record.pte_file, files[0])
    if level == "inspect":
        files += _export_inspect(exp, last, device, record.pte_sha256 or "", target)
    if level == "result":
        files += _export_records(exp, store, target)
    return ExportRecord(level=level, folder=str(target), checkpoint=last.checkpoint, job=last.name, device=device.name,
                        files=tuple(str(f) for f in files))


def _export_inspect(exp: Experiment, job: JobRecord, device: Device, pte_sha256: str, target: Path) -> list[Path]:
    """The ETRecord of the exported .pte, lowered again from the job's .pt2, and the ETDump of the checkpoint's latest
    traced round (a measured round on a CPU device), when there is one."""
    import functools
    import warnings

    from np_optimizer.compile.etrecord import ETRECORD_FILE, write_etrecord
    from np_optimizer.logs import quiet_native_output
    from np_optimizer.workspace.portable import portable_stack_trace

    assert job.output is not None
    program = exp.root / job.name / job.output.file
    with warnings.catch_warnings(), quiet_native_output(None):  # the libraries' words, as np run keeps them off
        warnings.simplefilter("ignore")                          # the console (np export writes no log)
        files = [write_etrecord(program, device, pte_sha256, target / ETRECORD_FILE,
                                portable=functools.partial(portable_stack_trace, _machine_paths(exp)))]
    traced = [r for r in job.profile if r.artifacts.get("trace") and r.checkpoint_sha256 == job.output.sha256]
    etdump = exp.root / traced[-1].artifacts["trace"] if traced else None
    if etdump is not None and etdump.is_file():
        files.append(target / etdump.name)
        shutil.copy2(etdump, files[-1])
    return files


def _machine_paths(exp: Experiment) -> MachinePaths:
    """This machine's folders that exported files name by placeholder (workspace/portable.py)."""
    from np_optimizer.workspace.portable import machine_paths

    workspace = exp.project.workspace
    return machine_paths(experiment=exp.root, workspace=workspace.root if workspace else None, extra=_model_folder(exp))


def _export_records(exp: Experiment, store: ExperimentStore, target: Path) -> list[Path]:
    """The records, configs and logs, with this machine's folders replaced by placeholders (workspace/portable.py):
    what is handed over names no home, workspace, cache or virtual environment."""
    from np_optimizer.files import read_json, write_text

    paths = _machine_paths(exp)
    files: list[Path] = []
    for name in ("report.json", "meta.json"):
        if (exp.root / name).exists():
            write_json(target / name, paths.json(read_json(exp.root / name)))
            files.append(target / name)
    write_json(target / "jobs.json", paths.json([to_dict(j) for j in store.jobs()]))
    files.append(target / "jobs.json")
    texts = [exp.root / "run.yaml", exp.root / "run.detail.yaml", exp.log_file, libraries_log(exp.log_file)]
    for source in texts:  # the configs, then np's log lines and what the libraries printed
        if source.exists():
            dest = target / ("logs" if source.parent == exp.log_file.parent else "") / source.name
            dest.parent.mkdir(exist_ok=True)
            write_text(dest, paths.text(source.read_text(encoding="utf-8", errors="replace")))
            files.append(dest)
    return files


def _model_folder(exp: Experiment) -> list[tuple[str, str]]:
    """Where the project's model came from, when it was a file of this machine (its source names it)."""
    source = str((exp.project.info.get("model") or {}).get("source") or "")
    path = source.rsplit(":", 1)[0] if source.count(":") else source
    return [(str(Path(path).parent), "<model-source>")] if os.path.isabs(path) else []
