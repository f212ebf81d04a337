"""report.json of an experiment, read without writing: its stored parts checked, and the index's state taken from them.

The index is built by records.index.build_index from the jobs and this state; only ExperimentStore writes report.json.
A damaged report.json reads as empty, with a warning (a writer sets it aside first: `stored_report(repair=True)`).
"""

from __future__ import annotations

from typing import Any, Union

from np_optimizer.files import CorruptFileError, read_json
from np_optimizer.records import SCHEMA_VERSION, ProfileResult, from_dict
from np_optimizer.records.codec import field_types
from np_optimizer.records.index import EvaluationPhase, ExperimentPart, IndexState, ProfilingPhase
from np_optimizer.workspace.damaged import check_version, set_aside, warn_once
from np_optimizer.workspace.layout import Experiment
from np_optimizer.workspace.meta_file import fields_problem

__all__ = ["stored_report", "state_of", "report_problem"]

# report.json's own parts that the index's state is read from (the rest is rebuilt from the job files)
_REPORT_SHAPE: dict[str, Any] = {"experiment": dict[str, Any], "profile": dict[str, Any],
                                 "post_hoc": list[ProfileResult], "evaluation": dict[str, Any]}
_PART_SHAPES: dict[str, dict[str, Any]] = {
    "experiment": field_types(ExperimentPart),
    "profile": {"results": list[ProfileResult], "listed": list[str], "enabled": bool, "method": Union[str, None],
                "started_at": Union[str, None]},
    "evaluation": field_types(EvaluationPhase),
}


def report_problem(data: dict[str, Any]) -> str | None:
    """Why report.json's own parts cannot be used (a part of the wrong type), or None."""
    problem = fields_problem(data, _REPORT_SHAPE)
    for part, shape in _PART_SHAPES.items():
        if problem is None and isinstance(data.get(part), dict):
            problem = fields_problem(data[part], shape, f"{part}.")
    return problem


def _empty(exp: Experiment) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "experiment": {"name": exp.name, "status": "created"}}


def stored_report(exp: Experiment, *, repair: bool = False) -> dict[str, Any]:
    """report.json as stored (its job copies are what a damaged job.json reads from); a missing one reads as empty,
    a damaged one too, with a warning (set aside when `repair`: the writer's)."""
    path = exp.report_file
    if not path.exists():
        return _empty(exp)
    try:
        data = read_json(path)
        check_version(path, data)
        problem = report_problem(data)
    except CorruptFileError as exc:
        problem = exc.reason
    if problem is None:
        return data
    if repair:
        set_aside(path, problem, "is rebuilt from the job files")  # it is an index: the job files rebuild it
    else:
        warn_once(f"{path} could not be read ({problem}); the views are rebuilt from the job files. The next "
                  "command that writes results sets it aside and writes a new one.")
    rebuilt = _empty(exp)
    rebuilt["profile"] = {"enabled": True}  # unknown: the jobs' inline rounds show (the latest per checkpoint)
    return rebuilt


def state_of(exp: Experiment, stored: dict[str, Any]) -> IndexState:
    """The experiment's own state in a stored report.json (checked by report_problem)."""
    profile = stored.get("profile") or {}
    return IndexState(
        experiment=from_dict(ExperimentPart, {"name": exp.name, **(stored.get("experiment") or {})}),
        profiling=from_dict(ProfilingPhase, profile),
        evaluation=from_dict(EvaluationPhase, stored.get("evaluation") or {}),
        inline_rounds=tuple(from_dict(ProfileResult, r) for r in profile.get("results") or ()),
        post_hoc_rounds=tuple(from_dict(ProfileResult, r) for r in stored.get("post_hoc") or ()))
