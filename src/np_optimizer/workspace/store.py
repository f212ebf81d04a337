"""The experiment's result files: report.json (the whole experiment) and NN_<step>/job.json (one job each).

Every write is a locked read-modify-write with an atomic rename, so a crash or two np processes at once never leave a
half-written file or lose a record. A corrupt file is set aside (renamed, never deleted) and reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from np_optimizer.errors import ConfigError
from np_optimizer.records import SCHEMA_VERSION, JobRecord, ProfileResult, from_dict, to_dict
from np_optimizer.workspace.files import CorruptFileError, file_lock, read_json, update_json, write_json
from np_optimizer.workspace import Experiment

__all__ = ["ExperimentStore", "empty_report"]


def empty_report(exp: Experiment) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "experiment": {"name": exp.name, "status": "created"},
        "pipeline": {"input_model": None, "steps": []},
        "profile": {"enabled": False, "listed": [], "results": []},
        "post_hoc": [],
    }


class ExperimentStore:
    def __init__(self, experiment: Experiment) -> None:
        self.experiment = experiment

    # -- report.json -------------------------------------------------------------------------------------------------

    def read_report(self) -> dict[str, Any]:
        path = self.experiment.report_file
        if not path.exists():
            return empty_report(self.experiment)
        try:
            data = read_json(path)
        except CorruptFileError as exc:
            raise ConfigError(f"{path} is corrupt: {exc}", hint="It was not changed. Restore it from a backup, or move "
                              "it away and run `np run --retry` to rebuild it.", code="NP-RPT-500") from exc
        if int(data.get("schema_version", 0)) > SCHEMA_VERSION:
            raise ConfigError(f"{path} was written by a newer np (schema {data['schema_version']}).",
                              hint="Upgrade np to read it.", code="NP-RPT-426")
        return dict(data)

    def update_report(self, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Apply `change` to report.json in place, under its lock; other keys (post-hoc rounds) are kept."""

        def apply(current: dict[str, Any]) -> dict[str, Any]:
            change(current)
            return current

        path = self.experiment.report_file
        with file_lock(path):
            current = self.read_report()
            apply(current)
            write_json(path, current)
            return current

    def add_post_hoc(self, result: ProfileResult) -> None:
        self.update_report(lambda r: r.setdefault("post_hoc", []).append(to_dict(result)))
        self.add_job_profile(result.job, result)

    def set_inline_result(self, result: ProfileResult) -> None:
        def change(report: dict[str, Any]) -> None:
            results = report.setdefault("profile", {}).setdefault("results", [])
            results[:] = [r for r in results if r.get("checkpoint") != result.checkpoint] + [to_dict(result)]

        self.update_report(change)
        self.add_job_profile(result.job, result)

    # -- job.json ----------------------------------------------------------------------------------------------------

    def job_dir(self, name: str) -> Path:
        return self.experiment.root / name

    def job_file(self, name: str) -> Path:
        return self.job_dir(name) / "job.json"

    def read_job(self, name: str) -> JobRecord | None:
        """The job's record; a record that cannot be read is set aside (renamed, never deleted) and None returned."""
        path = self.job_file(name)
        if not path.exists():
            return None
        try:
            return from_dict(JobRecord, read_json(path))
        except (CorruptFileError, TypeError, KeyError, AttributeError):
            path.rename(path.with_name(f"job.json.corrupt-{time.strftime('%Y%m%dT%H%M%S')}"))
            return None

    def write_job(self, record: JobRecord) -> None:
        path = self.job_file(record.name)
        with file_lock(path):
            write_json(path, to_dict(record))

    def add_job_profile(self, name: str, result: ProfileResult) -> None:
        path = self.job_file(name)
        if not path.exists():
            return

        def change(job: dict[str, Any]) -> dict[str, Any]:
            job.setdefault("profile", []).append(to_dict(result))
            return job

        update_json(path, change)

    def jobs(self) -> list[JobRecord]:
        out = []
        for path in sorted(self.experiment.root.glob("[0-9][0-9]_*/job.json")):
            record = self.read_job(path.parent.name)
            if record is not None:
                out.append(record)
        return out

    # -- meta.json ---------------------------------------------------------------------------------------------------

    def update_meta(self, **fields: Any) -> None:
        def change(meta: dict[str, Any]) -> dict[str, Any]:
            meta.update(fields)
            meta["updated_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            return meta

        update_json(self.experiment.meta_file, change)
