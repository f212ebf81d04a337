"""The experiment's result files: NN_<step>/job.json (one job each: the truth) and report.json (an index of them).

Each job.json is authoritative for its step: the job record and every profile round of its checkpoint, inline and
post hoc. report.json holds the experiment's own state (status, what the run lists to profile) and, rebuilt from the
job files, the pipeline rows, the current run's inline results, the post-hoc rounds and a copy of every job record
(`job_records`). Every write takes the one experiment lock, writes the job file (atomic rename) and then rebuilds
report.json from the job files (atomic rename); readers rebuild the same way in memory, so a process killed between
the two renames leaves nothing that disagrees: the next writer derives report.json from the jobs again.

Reading never writes: the read methods (read_job, jobs, read_report, read_meta) rename and rewrite nothing. A damaged
job.json reads from its copy in report.json (or, with none, shows as a "damaged" job naming the file) and a damaged
report.json is rebuilt in memory, each with a warning. The writing methods repair first, under the lock (recover):
a damaged job.json with an intact copy is set aside (renamed `job.json.corrupt-<time>`, never deleted) and restored
from the copy, a damaged report.json is set aside and rebuilt, a damaged meta.json is set aside and restored from
report.json's experiment part. A file from a newer np is refused with a clear error, never renamed away. The
warnings go to the `np.Store` logger, which the CLI shows on the console for every command.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Union

from np_optimizer.files import CorruptFileError, file_lock, read_json, write_json
from np_optimizer.records import SCHEMA_VERSION, EvaluationResult, JobRecord, ProfileResult, to_dict
from np_optimizer.records.parts import CompileSummary
from np_optimizer.records.status import CompileStatus
from np_optimizer.workspace.damaged import (
    DAMAGED,
    JobFile,
    check_version,
    damaged_job,
    job_copy_in,
    read_job_file,
    set_aside,
    warn_once,
)
from np_optimizer.workspace.layout import Experiment
from np_optimizer.workspace.shapes import shape_problem

__all__ = ["ExperimentStore", "empty_report", "pipeline_entry"]

# Fault injection for the crash-consistency test: NP_FAULT=after-job-write kills this process right after a job.json
# rename and before report.json's (the window a crash could hit).
_FAULT_ENV = "NP_FAULT"
_held: dict[Path, int] = {}  # experiment folders whose lock this process holds, with the nesting depth


def empty_report(exp: Experiment) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "experiment": {"name": exp.name, "status": "created"},
        "pipeline": {"input_model": None, "steps": []},
        "profile": {"enabled": False, "listed": [], "results": []},
        "post_hoc": [],
    }


def pipeline_entry(record: JobRecord) -> dict[str, Any]:
    """The report.json row of a job: status, checkpoint, lowering and fidelity (no profile results: those are apart)."""
    compiled = record.compile
    return {
        "job": record.name, "step_type": record.step_type, "step_index": record.step_index,
        "checkpoint": record.checkpoint, "status": record.status, "started_at": record.started_at,
        "ended_at": record.ended_at, "duration_s": record.duration_s,
        "output": to_dict(record.output) if record.output else None,
        "lowering": to_dict(compiled.only(CompileSummary.INDEX_KEYS)) if compiled.lowered else None,
        "lowering_failed": compiled.status == CompileStatus.FAILED,
        "lowering_unsupported": compiled.status == CompileStatus.UNSUPPORTED,
        "fidelity": to_dict(record.fidelity), "warnings": list(record.warnings),
        "errors": [to_dict(e) for e in record.errors],
    }


# report.json's own parts that the rebuild reads (the rest is rebuilt from the job files)
_REPORT_SHAPE: dict[str, Any] = {"experiment": dict[str, Any], "profile": dict[str, Any],
                                 "post_hoc": list[ProfileResult]}
_PROFILE_SHAPE: dict[str, Any] = {"results": list[ProfileResult], "listed": list[Any], "enabled": bool,
                                  "started_at": Union[str, None]}
# meta.json's fields that np reads
_META_SHAPE: dict[str, Any] = {"status": str, "pid": Union[int, None], "name": str, "project": str,
                               "created_at": Union[str, None], "updated_at": Union[str, None],
                               "started_at": Union[str, None], "ended_at": Union[str, None],
                               "duration_s": Union[float, None], "device": Union[str, None]}


def _fields_problem(data: dict[str, Any], shape: dict[str, Any], where: str = "") -> str | None:
    for key, hint in shape.items():
        if key in data:
            problem = shape_problem(hint, data[key], f"{where}{key}")
            if problem:
                return problem
    return None


def _report_problem(data: dict[str, Any]) -> str | None:
    problem = _fields_problem(data, _REPORT_SHAPE)
    if problem is None and isinstance(data.get("profile"), dict):
        problem = _fields_problem(data["profile"], _PROFILE_SHAPE, "profile.")
    return problem


def _rebuild_evaluation(stored: Any, jobs: list[JobRecord]) -> dict[str, Any]:
    """report.json's `evaluation`: the latest run's inline result per checkpoint, and every post-hoc round."""
    own = dict(stored) if isinstance(stored, dict) else {}
    since = str(own.get("started_at") or "")
    rounds = sorted((to_dict(r) for j in jobs for r in j.evaluation), key=lambda r: str(r.get("started_at") or ""))
    latest: dict[str, dict[str, Any]] = {}
    for r in rounds:
        if r.get("trigger") == "RUN_INLINE" and str(r.get("started_at") or "") >= since:
            latest[str(r.get("checkpoint"))] = r
    return {"enabled": bool(own.get("enabled")), "listed": list(own.get("listed") or []),
            "started_at": own.get("started_at"), "results": list(latest.values()),
            "post_hoc": [r for r in rounds if r.get("trigger") == "POSTHOC"]}


class ExperimentStore:
    def __init__(self, experiment: Experiment) -> None:
        self.experiment = experiment

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The one experiment lock every write of job.json, report.json and meta.json takes; taken once per process
        when calls nest (flock on a second descriptor of the same file would wait for itself)."""
        key = self.experiment.root.resolve()
        if _held.get(key, 0):
            _held[key] += 1
            try:
                yield
            finally:
                _held[key] -= 1
            return
        with file_lock(key / "experiment"):
            _held[key] = 1
            try:
                yield
            finally:
                _held.pop(key, None)

    # -- job.json: the truth ---------------------------------------------------------------------------------------

    def job_dir(self, name: str) -> Path:
        return self.experiment.root / name

    def job_file(self, name: str) -> Path:
        return self.job_dir(name) / "job.json"

    def read_job(self, name: str) -> JobRecord | None:
        """The job's record, or None when there is none. Nothing is renamed or rewritten: a damaged job.json reads from
        its copy in report.json, with a warning (None without a copy); one from a newer np raises StoreError."""
        path = self.job_file(name)
        if not path.exists():
            return None
        found = read_job_file(path)
        return found.record if found.record is not None else self._copy_of(found, self._stored_report())

    def jobs(self, stored: dict[str, Any] | None = None) -> list[JobRecord]:
        """Every job in step order; a damaged job.json without a copy in report.json (`stored`: read when not given)
        is a "damaged" row naming it."""
        stored = self._stored_report() if stored is None else stored
        out = []
        for path in sorted(self.experiment.root.glob("[0-9][0-9]_*/job.json")):
            found = read_job_file(path)
            record = found.record or self._copy_of(found, stored)
            out.append(record or damaged_job(path, found.problem or "unreadable"))
        return out

    def _copy_of(self, found: JobFile, stored: dict[str, Any]) -> JobRecord | None:
        """The job's record as report.json's copy holds it (a reader's fallback for a damaged job.json)."""
        record = job_copy_in(stored, found.path.parent.name)
        if record is not None:
            warn_once(f"{found.path} could not be read ({found.problem}); shown from its copy in report.json. The next "
                      "command that writes results (np run, np profile, np evaluate) restores it.")
        else:
            warn_once(f"{found.path} could not be read ({found.problem}) and report.json holds no copy of it; the step "
                      "shows as damaged. `np run --retry` runs it again.")
        return record

    def recover(self) -> None:
        """Repair what the readers only work around, under the experiment lock: each damaged job.json with a copy in
        report.json is set aside and restored from it; a damaged report.json is set aside and rebuilt (the next write
        of it). A damaged job.json without a copy stays where it is (the views name it) until its step runs again."""
        with self.locked():
            stored = self._stored_report(repair=True)
            for path in sorted(self.experiment.root.glob("[0-9][0-9]_*/job.json")):
                found = read_job_file(path)
                record = job_copy_in(stored, path.parent.name) if found.record is None else None
                if record is not None:
                    set_aside(path, found.problem or "unreadable", "restored from its copy in report.json")
                    write_json(path, to_dict(record))

    def write_job(self, record: JobRecord) -> None:
        with self.locked():
            self.recover()
            path = self.job_file(record.name)
            found = read_job_file(path) if path.exists() else None
            if found is not None and found.record is None:  # damaged with no copy: kept beside
                set_aside(path, found.problem or "unreadable", "is replaced by this run's record")
            write_json(self.job_file(record.name), to_dict(record))
            self._after_job_write()
            self._write_report(self._rebuild(self._stored_report()))

    def add_job_profile(self, name: str, result: ProfileResult) -> bool:
        """Append a profile round to job `name` (and the index); False when the job has no job.json."""
        with self.locked():
            self.recover()
            return self._add_job_profile(name, result)

    def _add_job_profile(self, name: str, result: ProfileResult) -> bool:
        """Under the lock, after recover() (the callers')."""
        record = read_job_file(self.job_file(name)).record if self.job_file(name).exists() else None
        if record is None:
            return False
        data = to_dict(record)
        data.setdefault("profile", []).append(to_dict(result))
        write_json(self.job_file(name), data)
        self._after_job_write()
        return True

    def add_job_evaluation(self, result: EvaluationResult) -> bool:
        """Append an evaluation (inline or post hoc) to its job's job.json and rebuild the index; False without a job."""
        with self.locked():
            self.recover()
            path = self.job_file(result.job)
            record = read_job_file(path).record if path.exists() else None
            if record is None:
                return False
            data = to_dict(record)
            data.setdefault("evaluation", []).append(to_dict(result))
            write_json(self.job_file(result.job), data)
            self._after_job_write()
            self._write_report(self._rebuild(self._stored_report()))
            return True

    def _after_job_write(self) -> None:
        if os.environ.get(_FAULT_ENV) == "after-job-write":
            os.kill(os.getpid(), signal.SIGKILL)

    # -- report.json: the index ------------------------------------------------------------------------------------

    def read_report(self) -> dict[str, Any]:
        """report.json as rebuilt from the job files, in memory (what every view reads); nothing is written. A stored
        index that lags behind its jobs (a process was killed between the two writes) is rewritten by the next
        writer."""
        return self._rebuild(self._stored_report())

    def update_report(self, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Apply `change` to the experiment's own state in report.json, under the experiment lock; the parts that
        come from the job files are rebuilt afterwards, so a change to them does not stick."""
        with self.locked():
            self.recover()
            current = self._rebuild(self._stored_report())
            change(current)
            rebuilt = self._rebuild(current)
            self._write_report(rebuilt)
            return rebuilt

    def add_post_hoc(self, result: ProfileResult) -> None:
        with self.locked():
            self.recover()
            stored = self._stored_report()
            if not self._add_job_profile(result.job, result):  # no job file: the round lives in the index only
                stored.setdefault("post_hoc", []).append(to_dict(result))
            self._write_report(self._rebuild(stored))

    def set_inline_result(self, result: ProfileResult) -> None:
        """Record a round of np run's Profiling phase: the latest per checkpoint is the run's result."""
        with self.locked():
            self.recover()
            stored = self._stored_report()
            if not self._add_job_profile(result.job, result):  # its step never ran: no job file to hold it
                stored.setdefault("profile", {}).setdefault("results", []).append(to_dict(result))
            self._write_report(self._rebuild(stored))

    def _stored_report(self, *, repair: bool = False) -> dict[str, Any]:
        """report.json's stored parts; a damaged one reads as empty, with a warning (set aside when `repair`)."""
        path = self.experiment.report_file
        if not path.exists():
            return empty_report(self.experiment)
        try:
            data = read_json(path)
            check_version(path, data)
            problem = _report_problem(data)
        except CorruptFileError as exc:
            problem = exc.reason
        if problem is None:
            return dict(data)
        if repair and path.exists():
            set_aside(path, problem, "is rebuilt from the job files")  # it is an index: the job files rebuild it
        else:
            warn_once(f"{path} could not be read ({problem}); the views are rebuilt from the job files. The next "
                      "command that writes results sets it aside and writes a new one.")
        rebuilt = empty_report(self.experiment)
        rebuilt["profile"]["enabled"] = True  # unknown: the jobs' inline rounds show (the latest per checkpoint)
        return rebuilt

    def _write_report(self, report: dict[str, Any]) -> None:
        write_json(self.experiment.report_file, report)

    def _rebuild(self, stored: dict[str, Any]) -> dict[str, Any]:
        """The index from the job files, keeping the experiment's own state and rounds whose job has no file."""
        jobs = self.jobs(stored)
        names = {j.name for j in jobs if j.status != DAMAGED}  # a damaged job's rounds in the index are kept
        report = {**empty_report(self.experiment), **stored, "schema_version": SCHEMA_VERSION}
        report["pipeline"] = {
            "input_model": next((pipeline_entry(j) for j in jobs if j.step_type == "input_model"), None),
            "steps": sorted((pipeline_entry(j) for j in jobs if j.step_type != "input_model"),
                            key=lambda s: s.get("step_index", 0)),
        }
        profile = dict(stored.get("profile") or {})
        since = str(profile.get("started_at") or "")  # the Profiling phase of the latest run
        inline = [r for r in profile.get("results", []) if r.get("job") not in names]
        inline += [p for j in jobs for p in (to_dict(r) for r in j.profile) if p.get("trigger") == "RUN_INLINE"]
        inline = [r for r in inline if str(r.get("started_at") or "") >= since]
        latest: dict[str, dict[str, Any]] = {}
        for r in sorted(inline, key=lambda r: str(r.get("started_at") or "")):
            latest.pop(str(r.get("checkpoint")), None)  # re-inserted: a checkpoint profiled again moves to the end
            latest[str(r.get("checkpoint"))] = r
        profile["results"] = list(latest.values()) if profile.get("enabled", True) else []
        report["profile"] = {"enabled": False, "listed": [], **profile}
        post_hoc = [r for r in stored.get("post_hoc", []) if r.get("job") not in names]
        post_hoc += [p for j in jobs for p in (to_dict(r) for r in j.profile) if p.get("trigger") == "POSTHOC"]
        report["post_hoc"] = sorted(post_hoc, key=lambda r: str(r.get("started_at") or ""))
        report["evaluation"] = _rebuild_evaluation(stored.get("evaluation"), jobs)
        report["job_records"] = {j.name: to_dict(j) for j in jobs if j.status != DAMAGED}  # the second copy
        return report

    # -- meta.json -------------------------------------------------------------------------------------------------

    def read_meta(self) -> dict[str, Any]:
        """meta.json for reading (nothing is renamed or rewritten): {} when there is none; a damaged one reads from
        report.json's copy of the experiment's state (status "unknown" without one), with a warning."""
        path = self.experiment.meta_file
        if not path.exists():
            return {}
        meta, problem = self._meta_file()
        if problem is None:
            return meta
        copy = _meta_copy(self._stored_report())
        if copy:
            warn_once(f"{path} could not be read ({problem}); the experiment's state is shown from its copy in "
                      "report.json. The next `np run` sets it aside and restores it.")
            return copy
        warn_once(f"{path} could not be read ({problem}); the experiment's status is unknown. The next `np run` "
                  "sets it aside and writes a new one.")
        return {"status": "unknown (meta.json unreadable)"}

    def _meta_file(self) -> tuple[dict[str, Any], str | None]:
        path = self.experiment.meta_file
        try:
            meta = read_json(path)
            check_version(path, meta)
            return meta, _fields_problem(meta, _META_SHAPE)
        except CorruptFileError as exc:
            return {}, exc.reason
        except OSError as exc:
            return {}, f"cannot be read: {exc.strerror or exc}"

    def update_meta(self, **fields: Any) -> None:
        """Update meta.json's fields; a damaged one is set aside and restored from report.json's copy first."""
        path = self.experiment.meta_file
        with self.locked():
            meta, problem = self._meta_file() if path.exists() else ({}, None)
            if problem:
                copy = _meta_copy(self._stored_report())
                set_aside(path, problem, "restored from report.json's copy" if copy else "replaced")
                meta = copy
            meta.update(fields)
            meta["updated_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            write_json(path, meta)


def _meta_copy(stored: dict[str, Any]) -> dict[str, Any]:
    """meta.json's fields as report.json's experiment part holds them ({} when it holds none)."""
    experiment = stored.get("experiment") or {}
    if not experiment.get("status") or experiment.get("status") == "created":
        return {}
    copy = {"schema_version": SCHEMA_VERSION, **{k: experiment[k] for k in _META_SHAPE if k in experiment}}
    return copy if not _fields_problem(copy, _META_SHAPE) else {}

