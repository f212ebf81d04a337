"""The experiment's result files: NN_<step>/job.json (one job each: the truth), report.json (an index of them) and
meta.json (the experiment's state). ExperimentStore is their one writer, through a few verbs:

    create_experiment       meta.json of a new experiment (np experiments create, a sweep's trial)
    start_run, end_run      the experiment's state: meta.json and report.json's `experiment` part, under one lock
    start_profiling,        np run's Profiling phase (what it lists, since when) or none
      disable_profiling
    start_evaluation        np run's Evaluation phase
    write_job               a job's record
    add_profile_round       a profile round (inline or post hoc) of a job's checkpoint
    add_evaluation          an evaluation (inline or post hoc) of a job's checkpoint

Each job.json is authoritative for its step: the job record and every profile round and evaluation of its checkpoint.
report.json is `to_dict(build_index(jobs, state))` (records/index.py): the experiment's own state (index_file.py)
and, rebuilt from the job files, the pipeline rows, the run's latest results, the post-hoc rounds and a copy of every
job record (`job_records`). Every write takes the one experiment lock, writes the job file (atomic rename) and then
report.json (atomic rename); readers build the index the same way in memory, so a process killed between the two
renames leaves nothing that disagrees: the next writer derives report.json from the jobs again.

Reading never writes: the read methods (read_job, jobs, read_index, read_report, read_meta) rename and rewrite
nothing. A damaged job.json reads from its copy in report.json (or, with none, shows as a "damaged" job naming the
file) and a damaged report.json is rebuilt in memory, each with a warning. The writing methods repair first, under the
lock (recover): a damaged job.json with an intact copy is set aside (renamed `job.json.corrupt-<time>`, never
deleted) and restored from the copy, a damaged report.json is set aside and rebuilt, a damaged meta.json is set aside
and restored from report.json's experiment part. A file from a newer np is refused with a clear error, never renamed
away. The warnings go to the `np.Store` logger, which the CLI shows on the console for every command.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from np_optimizer.files import file_lock, write_json
from np_optimizer.records import EvaluationResult, JobRecord, ProfileResult, to_dict
from np_optimizer.records.index import (
    EvaluationPhase,
    ExperimentPart,
    IndexState,
    ProfilingPhase,
    ReportIndex,
    build_index,
)
from np_optimizer.workspace.damaged import JobFile, damaged_job, job_copy_in, read_job_file, set_aside, warn_once
from np_optimizer.workspace.index_file import state_of, stored_report
from np_optimizer.workspace.layout import Experiment, utc_now
from np_optimizer.workspace.meta_file import meta_copy, new_meta, read_meta_file, with_fields

__all__ = ["ExperimentStore"]

# Fault injection for the crash-consistency test: NP_FAULT=after-job-write kills this process right after a job.json
# rename and before report.json's (the window a crash could hit).
_FAULT_ENV = "NP_FAULT"


class ExperimentStore:
    def __init__(self, experiment: Experiment) -> None:
        self.experiment = experiment

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The one experiment lock every write of job.json, report.json and meta.json takes; taken once per thread
        when calls nest (locks.py counts them)."""
        with file_lock(self.experiment.root.resolve() / "experiment"):
            yield

    # -- reading: nothing is renamed or rewritten ------------------------------------------------------------------

    def job_dir(self, name: str) -> Path:
        return self.experiment.root / name

    def job_file(self, name: str) -> Path:
        return self.job_dir(name) / "job.json"

    def read_job(self, name: str) -> JobRecord | None:
        """The job's record, or None when there is none. A damaged job.json reads from its copy in report.json, with a
        warning (None without a copy); one from a newer np raises StoreError."""
        path = self.job_file(name)
        if not path.exists():
            return None
        found = read_job_file(path)
        return found.record if found.record is not None else self._copy_of(found, stored_report(self.experiment))

    def jobs(self, stored: dict[str, Any] | None = None) -> list[JobRecord]:
        """Every job in step order; a damaged job.json without a copy in report.json (`stored`: read when not given)
        is a "damaged" row naming it."""
        stored = stored_report(self.experiment) if stored is None else stored
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

    def read_index(self) -> ReportIndex:
        """report.json as built from the job files and the stored state, in memory. A stored index that lags behind
        its jobs (a process was killed between the two writes) is rewritten by the next writer."""
        return self.read_jobs_and_index()[1]

    def read_jobs_and_index(self) -> tuple[list[JobRecord], ReportIndex]:
        """`jobs()` and `read_index()` from one read of each file (np status shows both)."""
        stored = stored_report(self.experiment)
        jobs = self.jobs(stored)
        return jobs, build_index(jobs, state_of(self.experiment, stored))

    def read_report(self) -> dict[str, Any]:
        """read_index as report.json spells it: the dict view every report renderer reads."""
        return to_dict(self.read_index())

    def read_meta(self) -> dict[str, Any]:
        """meta.json: {} when there is none; a damaged one reads from report.json's copy of the experiment's state
        (status "unknown" without one), with a warning."""
        path = self.experiment.meta_file
        if not path.exists():
            return {}
        meta, problem = read_meta_file(path)
        if problem is None:
            return meta
        copy = meta_copy(state_of(self.experiment, stored_report(self.experiment)).experiment)
        if copy:
            warn_once(f"{path} could not be read ({problem}); the experiment's state is shown from its copy in "
                      "report.json. The next `np run` sets it aside and restores it.")
            return copy
        warn_once(f"{path} could not be read ({problem}); the experiment's status is unknown. The next `np run` "
                  "sets it aside and writes a new one.")
        return {"status": "unknown (meta.json unreadable)"}

    # -- writing: under the experiment lock, after repairing ---------------------------------------------------------

    def recover(self) -> None:
        """Repair what the readers only work around, under the experiment lock: each damaged job.json with a copy in
        report.json is set aside and restored from it; a damaged report.json is set aside and rebuilt (the next write
        of it). A damaged job.json without a copy stays where it is (the views name it) until its step runs again."""
        with self.locked():
            stored = stored_report(self.experiment, repair=True)
            for path in sorted(self.experiment.root.glob("[0-9][0-9]_*/job.json")):
                found = read_job_file(path)
                record = job_copy_in(stored, path.parent.name) if found.record is None else None
                if record is not None:
                    set_aside(path, found.problem or "unreadable", "restored from its copy in report.json")
                    write_json(path, to_dict(record))

    def create_experiment(self, *, project: str, device: str, sweep_trial: int | None = None) -> None:
        """meta.json of a new experiment (status "created"); an experiment that has one keeps it (a resumed sweep
        writes its trials' folders again)."""
        with self.locked():
            if not self.experiment.meta_file.exists():
                meta = new_meta(name=self.experiment.name, project=project, device=device, created_at=utc_now(),
                                sweep_trial=sweep_trial)
                write_json(self.experiment.meta_file, meta)

    def start_run(self, *, project: str, device: str, runtime: str, backend: str) -> None:
        """np run (this process) starts: status "running" in meta.json and report.json's experiment part (which
        forgets the last run's end)."""
        now = utc_now()
        with self._state() as (stored, state):
            self._write_meta(stored, status="running", pid=os.getpid(), started_at=now, device=device)
            experiment = ExperimentPart(name=self.experiment.name, project=project, device=device, runtime=runtime,
                                        backend=backend, status="running", started_at=now)
            self._write_index(stored, replace(state, experiment=experiment))

    def end_run(self, status: str, *, duration_s: float | None = None) -> None:
        """np run ends (success, failed, interrupted): meta.json and report.json's experiment part say so."""
        now = utc_now()
        with self._state() as (stored, state):
            timing = {} if duration_s is None else {"duration_s": duration_s}
            self._write_meta(stored, status=status, ended_at=now, pid=None, **timing)
            self._write_index(stored, replace(state, experiment=replace(state.experiment, status=status, ended_at=now)))

    def start_profiling(self, listed: Sequence[str], *, method: str | None) -> None:
        """np run's Profiling phase begins: its results are the inline rounds from now on."""
        with self._state() as (stored, state):
            phase = ProfilingPhase(enabled=True, listed=tuple(listed), method=method, started_at=utc_now())
            self._write_index(stored, replace(state, profiling=phase))

    def disable_profiling(self) -> None:
        """np run has no Profiling phase (run.yaml lists nothing to profile): the index shows no run results."""
        with self._state() as (stored, state):
            self._write_index(stored, replace(state, profiling=ProfilingPhase()))

    def start_evaluation(self, listed: Sequence[str]) -> None:
        """np run's Evaluation phase begins: its results are the inline evaluations from now on."""
        with self._state() as (stored, state):
            phase = EvaluationPhase(enabled=True, listed=tuple(listed), started_at=utc_now())
            self._write_index(stored, replace(state, evaluation=phase))

    def write_job(self, record: JobRecord) -> None:
        with self._state() as (stored, state):
            path = self.job_file(record.name)
            found = read_job_file(path) if path.exists() else None
            if found is not None and found.record is None:  # damaged with no copy: kept beside
                set_aside(path, found.problem or "unreadable", "is replaced by this run's record")
            write_json(path, to_dict(record))
            self._after_job_write()
            self._write_index(stored, state)

    def add_profile_round(self, result: ProfileResult) -> None:
        """Append a profile round (np run's inline or np profile's post hoc) to its job's job.json; a round whose job
        has no job.json (its step never ran) is kept in the index only."""
        with self._state() as (stored, state):
            if not self._append(result.job, "profile", result):
                if result.trigger == "RUN_INLINE":
                    state = replace(state, inline_rounds=(*state.inline_rounds, result))
                else:
                    state = replace(state, post_hoc_rounds=(*state.post_hoc_rounds, result))
            self._write_index(stored, state)

    def add_evaluation(self, result: EvaluationResult) -> bool:
        """Append an evaluation (inline or post hoc) to its job's job.json; False when the job has no job.json."""
        with self._state() as (stored, state):
            added = self._append(result.job, "evaluation", result)
            if added:
                self._write_index(stored, state)
            return added

    @contextlib.contextmanager
    def _state(self) -> Iterator[tuple[dict[str, Any], IndexState]]:
        """Under the lock, after recover(): the stored report.json and the experiment's state in it."""
        with self.locked():
            self.recover()
            stored = stored_report(self.experiment)
            yield stored, state_of(self.experiment, stored)

    def _append(self, name: str, part: str, result: ProfileResult | EvaluationResult) -> bool:
        """Append `result` to job `name`'s `part` ("profile", "evaluation"); False when it has no readable job.json."""
        path = self.job_file(name)
        record = read_job_file(path).record if path.exists() else None
        if record is None:
            return False
        data = to_dict(record)
        data.setdefault(part, []).append(to_dict(result))
        write_json(path, data)
        self._after_job_write()
        return True

    def _after_job_write(self) -> None:
        if os.environ.get(_FAULT_ENV) == "after-job-write":
            os.kill(os.getpid(), signal.SIGKILL)

    def _write_index(self, stored: dict[str, Any], state: IndexState) -> None:
        """report.json from the job files (read now, after the caller's job write) and `state`."""
        write_json(self.experiment.report_file, to_dict(build_index(self.jobs(stored), state)))

    def _write_meta(self, stored: dict[str, Any], **fields: Any) -> None:
        """Set meta.json's `fields`; a damaged one is set aside and restored from report.json's copy first."""
        path = self.experiment.meta_file
        meta, problem = read_meta_file(path) if path.exists() else ({}, None)
        if problem:
            copy = meta_copy(state_of(self.experiment, stored).experiment)
            set_aside(path, problem, "restored from report.json's copy" if copy else "replaced")
            meta = copy
        write_json(path, with_fields(meta, **fields))
