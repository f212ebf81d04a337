"""Files an earlier np wrote still read into the typed records and re-encode as they were.

tests/records/data holds the job.json and report.json files that np on main (before the records were typed, commit
0b05a2b) wrote for `np run` of the sample_cpu (raspberry_pi_5, XNNPACK; then `np profile INPUT_MODEL` and
`np evaluate`) and sample_npu (alif_e8, Ethos-U: an unsupported lowering, Vela's summary) projects; stored with the
whitespace removed, nothing else changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from np_optimizer.records import EvaluationResult, JobRecord, ProfileResult, from_dict, to_dict
from np_optimizer.records.index import pipeline_entry
from np_optimizer.records.parts import CompileSummary, ErrorRecord, Fidelity, JobOutput
from np_optimizer.records.status import CacheStatus, CompileStatus, JobStatus, RoundStatus

DATA = Path(__file__).parent / "data"
JOBS = sorted(DATA.glob("*/*/job.json"))
REPORTS = sorted(DATA.glob("*/report.json"))


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def _encoded(record: object) -> Any:
    return json.loads(json.dumps(to_dict(record)))


def test_the_stored_files_are_there() -> None:
    assert len(JOBS) == 6 and len(REPORTS) == 2


@pytest.mark.parametrize("path", JOBS, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_job_json_reads_typed_and_re_encodes_as_written(path: Path) -> None:
    data = _read(path)
    record = from_dict(JobRecord, data)
    assert _encoded(record) == data
    assert record.status is JobStatus.SUCCESS
    assert isinstance(record.output, JobOutput) and record.output.sha256 == data["output"]["sha256"]
    assert isinstance(record.compile, CompileSummary) and record.compile.status in set(CompileStatus)
    assert record.compile.cache is not None and record.compile.cache.status in (CacheStatus.MISS, CacheStatus.HIT)
    assert isinstance(record.fidelity, Fidelity)
    for result in record.profile:
        assert result.status is RoundStatus.SUCCESS and result.compile.reused == "job folder"
        assert set(to_dict(result.compile)) == set(CompileSummary.ROUND_KEYS)


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.parent.name)
def test_report_json_rounds_and_index_rows_re_encode_as_written(path: Path) -> None:
    """The rounds (inline, post hoc), the evaluations and the job copies read typed and re-encode as written; the
    index row this np builds from a job is the row the earlier np wrote (lowering: CompileSummary.INDEX_KEYS)."""
    report = _read(path)
    for data in report["profile"]["results"] + report["post_hoc"]:
        assert _encoded(from_dict(ProfileResult, data)) == data
    evaluations = report["evaluation"]["results"] + report["evaluation"]["post_hoc"]
    for data in evaluations:
        assert _encoded(from_dict(EvaluationResult, data)) == data
    assert evaluations or path.parent.name == "npu"  # sample_cpu was evaluated
    copies = report["job_records"]
    assert copies
    for name, data in copies.items():
        assert _encoded(from_dict(JobRecord, data)) == data, name
    for row in report["pipeline"]["steps"]:
        job = from_dict(JobRecord, copies[row["job"]])
        assert json.loads(json.dumps(to_dict(pipeline_entry(job)))) == row


def test_both_devices_and_every_kind_of_round_are_covered() -> None:
    """What the files hold, so the round trips above cover it: an unsupported lowering with Vela's summary, a
    post-hoc round, an evaluation, a job without fidelity ({}) and one with per-layer SNR."""
    jobs = {f"{p.parent.parent.name}/{p.parent.name}": from_dict(JobRecord, _read(p)) for p in JOBS}
    npu_input = jobs["npu/00_input_model"].compile
    assert npu_input.status is CompileStatus.UNSUPPORTED and npu_input.reason
    assert jobs["npu/02_graph_quantize"].compile.vela_summary
    assert any(r.trigger == "POSTHOC" for r in jobs["cpu/00_input_model"].profile)
    assert jobs["cpu/00_input_model"].evaluation
    assert to_dict(jobs["cpu/00_input_model"].fidelity) == {}
    layers = jobs["cpu/02_graph_quantize"].fidelity.layers
    assert layers is not None and layers.file and layers.lowest


def test_a_file_without_the_newer_keys_reads_with_defaults() -> None:
    """An older np's job.json may lack keys added since (timings, evaluation, output figures, a kind of error)."""
    data = _read(DATA / "cpu" / "01_graph_optimize" / "job.json")
    for key in ("timings", "evaluation", "pid"):
        data.pop(key)
    for key in ("nodes", "weight_bytes"):
        data["output"].pop(key)
    data["compile"] = {}
    data["errors"] = [{"code": "NP-CMP-500", "message": "lowering failed", "hint": None}]
    record = from_dict(JobRecord, data)
    assert record.timings == {} and record.evaluation == () and record.output is not None
    assert record.output.nodes is None and not record.compile.lowered
    assert record.errors == (ErrorRecord("NP-CMP-500", "lowering failed"),)
    assert _encoded(record) == {**data, "timings": {}, "evaluation": [], "pid": None}


def test_a_failed_round_writes_the_empty_parts_it_always_wrote() -> None:
    """A round that failed before compiling keeps {} for its cache and compile summary, None for its error's absence."""
    failed = ProfileResult("m1", "INPUT_MODEL", "00_input_model", "sha", "host", "executorch", "xnnpack", "mlia",
                           "estimated", "POSTHOC", RoundStatus.FAILED, "t0", error=ErrorRecord.with_message("gone"))
    data = to_dict(failed)
    assert data["cache"] == {} and data["compile"] == {} and data["error"] == {"message": "gone"}
    assert data["status"] == "FAILED" and from_dict(ProfileResult, data) == failed
