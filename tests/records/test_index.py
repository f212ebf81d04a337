"""report.json's index: `build_index` is pure (same jobs and state, same index; no file touched) and keeps the
spelling older np wrote; the latest run's results, the post-hoc rounds and the rounds of jobs without a file."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from np_optimizer.records import EvaluationResult, JobRecord, ProfileResult, from_dict, to_dict
from np_optimizer.records.index import (
    DAMAGED,
    EvaluationPhase,
    ExperimentPart,
    IndexState,
    ProfilingPhase,
    build_index,
)
from np_optimizer.records.parts import CompileSummary, JobOutput
from np_optimizer.records.status import JobStatus

_touched: list[str] | None = None  # file events seen while `no_file_access` is on (None: off)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _touched is not None and event.split(".")[0] in ("open", "os", "glob", "shutil", "pathlib"):
        _touched.append(f"{event} {args[:1]}")


sys.addaudithook(_audit)  # hooks cannot be removed: this one records only inside `no_file_access`


@contextlib.contextmanager
def no_file_access() -> Iterator[list[str]]:
    global _touched
    _touched = []
    try:
        yield _touched
    finally:
        _touched = None


def _round(job: str, checkpoint: str, started_at: str, trigger: str = "RUN_INLINE", mid: str = "") -> ProfileResult:
    return ProfileResult(measurement_id=mid or f"{job}-{started_at}", checkpoint=checkpoint, job=job,
                         checkpoint_sha256="ab" * 32, device="raspberry_pi_5", runtime="executorch", backend="xnnpack",
                         method="mlia", result_kind="estimated", trigger=trigger, status="SUCCESS",
                         started_at=started_at)


def _evaluation(job: str, checkpoint: str, started_at: str, trigger: str = "RUN_INLINE") -> EvaluationResult:
    return EvaluationResult(measurement_id=f"e-{job}-{started_at}", checkpoint=checkpoint, job=job,
                            checkpoint_sha256="cd" * 32, device="raspberry_pi_5", backend="xnnpack", trigger=trigger,
                            status="SUCCESS", started_at=started_at)


def _job(name: str, index: int, step_type: str, **fields: Any) -> JobRecord:
    if "compile" in fields:  # job.json's compile block, as a file holds it
        fields["compile"] = from_dict(CompileSummary, fields["compile"])
    if "output" in fields:
        fields["output"] = from_dict(JobOutput, {"checkpoint": step_type.upper(), "file": "artifacts/model.pt2",
                                                 **fields["output"]})
    return JobRecord(name=name, step_type=step_type, step_index=index, checkpoint=step_type.upper(),
                     **{"status": JobStatus.SUCCESS, "created_at": "2026-01-01T00:00:00", **fields})


RUN = "2026-01-02T00:00:00"  # the latest run's Profiling and Evaluation phases began here
JOBS = [
    _job("00_input_model", 0, "input_model", output={"sha256": "ab" * 32, "macs": 10},
         compile={"device": "raspberry_pi_5", "status": "ok", "pte_bytes": 100, "num_delegates": 1, "extra": 5},
         profile=(_round("00_input_model", "INPUT_MODEL", "2026-01-01T10:00:00"),  # an earlier run's
                  _round("00_input_model", "INPUT_MODEL", "2026-01-02T01:00:00"),
                  _round("00_input_model", "INPUT_MODEL", "2026-01-03T00:00:00", trigger="POSTHOC")),
         evaluation=(_evaluation("00_input_model", "INPUT_MODEL", "2026-01-02T02:00:00"),)),
    _job("02_graph_quantize", 2, "graph_quantize", compile={"status": "failed", "reason": "no"},
         profile=(_round("02_graph_quantize", "GRAPH_QUANTIZE", "2026-01-02T00:30:00"),),
         evaluation=(_evaluation("02_graph_quantize", "GRAPH_QUANTIZE", "2026-01-02T03:00:00", "POSTHOC"),)),
    _job("01_graph_optimize", 1, "graph_optimize", status=DAMAGED),
]
STATE = IndexState(
    experiment=ExperimentPart(name="experiment_01", project="p", device="raspberry_pi_5", runtime="executorch",
                              backend="xnnpack", status="success", started_at=RUN, ended_at="2026-01-02T05:00:00"),
    profiling=ProfilingPhase(enabled=True, listed=("INPUT_MODEL", "GRAPH_OPTIMIZE", "GRAPH_QUANTIZE"), method="mlia",
                             started_at=RUN),
    evaluation=EvaluationPhase(enabled=True, listed=("INPUT_MODEL",), started_at=RUN),
    # the stored index's rounds: one of a damaged job (kept), one of a job whose file holds it (taken from the file)
    inline_rounds=(_round("01_graph_optimize", "GRAPH_OPTIMIZE", "2026-01-02T00:10:00"),
                   _round("00_input_model", "INPUT_MODEL", "2026-01-02T01:00:00")),
    post_hoc_rounds=(_round("03_export", "EXPORT", "2026-01-01T12:00:00", trigger="POSTHOC"),))


def test_build_index_is_pure() -> None:
    with no_file_access() as touched:
        first = build_index(JOBS, STATE)
        second = build_index(list(JOBS), replace(STATE))
        assert touched == []  # no file opened, listed, renamed or removed
    assert first == second and to_dict(first) == to_dict(second)
    assert build_index(JOBS, replace(STATE, profiling=replace(STATE.profiling, enabled=False))) != first  # it reads
    assert to_dict(build_index(JOBS, STATE)) == to_dict(first)  # the inputs were not changed by the first call


def test_index_holds_the_latest_run_the_post_hoc_rounds_and_rounds_without_a_job_file() -> None:
    index = build_index(JOBS, STATE)
    assert index.pipeline.input_model is not None and index.pipeline.input_model.job == "00_input_model"
    assert [s.job for s in index.pipeline.steps] == ["01_graph_optimize", "02_graph_quantize"]  # step order
    assert index.pipeline.input_model.lowering is not None
    assert to_dict(index.pipeline.input_model.lowering) == {"device": "raspberry_pi_5", "status": "ok", "reason": None,
                                                   "pte_bytes": 100, "num_delegates": 1, "delegated_ops": None,
                                                   "non_delegated_ops": None, "planned_arena_bytes": None}
    assert index.pipeline.steps[1].lowering_failed and not index.pipeline.steps[1].lowering_unsupported
    assert [(r.job, r.started_at) for r in index.profile.results] == [  # since the run began, by time
        ("01_graph_optimize", "2026-01-02T00:10:00"), ("02_graph_quantize", "2026-01-02T00:30:00"),
        ("00_input_model", "2026-01-02T01:00:00")]
    assert [r.job for r in index.post_hoc] == ["03_export", "00_input_model"]
    assert [r.job for r in index.evaluation.results] == ["00_input_model"]
    assert [r.job for r in index.evaluation.post_hoc] == ["02_graph_quantize"]
    assert set(index.job_records) == {"00_input_model", "02_graph_quantize"}  # no copy of a damaged job
    assert build_index(JOBS, replace(STATE, profiling=ProfilingPhase())).profile.results == ()


def test_new_and_profile_less_experiments_keep_the_older_spelling() -> None:
    assert to_dict(build_index([], IndexState(ExperimentPart(name="experiment_01")))) == {
        "schema_version": 1, "experiment": {"name": "experiment_01", "status": "created"},
        "pipeline": {"input_model": None, "steps": []}, "profile": {"enabled": False, "listed": [], "results": []},
        "post_hoc": [], "evaluation": {"enabled": False, "listed": [], "started_at": None, "results": [],
                                       "post_hoc": []},
        "job_records": {}}
    written = to_dict(build_index(JOBS, STATE))
    assert list(written) == ["schema_version", "experiment", "pipeline", "profile", "post_hoc", "evaluation",
                             "job_records"]
    assert list(written["experiment"]) == ["name", "project", "device", "runtime", "backend", "status", "started_at",
                                           "ended_at"]
    assert list(written["profile"]) == ["enabled", "listed", "method", "started_at", "results"]
    assert list(written["pipeline"]["steps"][0]) == [
        "job", "step_type", "step_index", "checkpoint", "status", "started_at", "ended_at", "duration_s", "output",
        "lowering", "lowering_failed", "lowering_unsupported", "fidelity", "warnings", "errors"]
