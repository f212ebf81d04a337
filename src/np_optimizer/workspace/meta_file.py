"""meta.json of an experiment: its state (status, pid, when it ran, on which device), read without writing.

Only ExperimentStore writes it (create_experiment, start_run, end_run), under the experiment lock; this module reads
it and says what a write puts in it. report.json's `experiment` part keeps a copy, which restores a damaged one.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Union

from np_optimizer.files import CorruptFileError, read_json
from np_optimizer.records import SCHEMA_VERSION
from np_optimizer.records.index import ExperimentPart
from np_optimizer.records.status import ExperimentStatus
from np_optimizer.workspace.damaged import check_version
from np_optimizer.workspace.shapes import shape_problem

__all__ = ["META_SHAPE", "fields_problem", "read_meta_file", "meta_copy", "new_meta", "with_fields"]

# meta.json's fields that np reads
META_SHAPE: dict[str, Any] = {"status": str, "pid": Union[int, None], "name": str, "project": str,
                              "created_at": Union[str, None], "updated_at": Union[str, None],
                              "started_at": Union[str, None], "ended_at": Union[str, None],
                              "duration_s": Union[float, None], "device": Union[str, None]}


def fields_problem(data: dict[str, Any], shape: dict[str, Any], where: str = "") -> str | None:
    """The first of `shape`'s keys present in `data` whose value does not fit its type (absent keys are fine)."""
    for key, hint in shape.items():
        if key in data:
            problem = shape_problem(hint, data[key], f"{where}{key}")
            if problem:
                return problem
    return None


def read_meta_file(path: Path) -> tuple[dict[str, Any], str | None]:
    """meta.json's fields, or ({}, why it cannot be used); a file from a newer np raises StoreError."""
    try:
        meta = read_json(path)
        check_version(path, meta)
        return meta, fields_problem(meta, META_SHAPE)
    except CorruptFileError as exc:
        return {}, exc.reason
    except OSError as exc:
        return {}, f"cannot be read: {exc.strerror or exc}"


def meta_copy(experiment: ExperimentPart) -> dict[str, Any]:
    """meta.json's fields as report.json's experiment part holds them ({} when it holds none: never run)."""
    if not experiment.status or experiment.status == ExperimentStatus.CREATED:
        return {}
    fields = {"name": experiment.name, "project": experiment.project, "device": experiment.device,
              "status": experiment.status, "started_at": experiment.started_at, "ended_at": experiment.ended_at}
    copy = {"schema_version": SCHEMA_VERSION, **{k: v for k, v in fields.items() if v is not None}}
    return copy if not fields_problem(copy, META_SHAPE) else {}


def new_meta(*, name: str, project: str, device: str, created_at: str, sweep_trial: int | None) -> dict[str, Any]:
    """A new experiment's meta.json (status "created"); a sweep's trial also names its trial number."""
    meta: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "name": name, "project": project, "device": device,
                            "status": "created", "created_at": created_at, "updated_at": created_at}
    if sweep_trial is not None:
        meta["sweep_trial"] = sweep_trial
    return meta


def with_fields(meta: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """meta.json with `fields` set and `updated_at` now; keys np does not know are kept."""
    return {**meta, **fields, "updated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
