"""np report: tables, placeholders, --json shape, --plain sections, --sort/--filter grammar, post-hoc and project views.

The pure parsing and formatting parts are unit-tested; the views are built from a real run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from np_optimizer.errors import EXIT_USAGE, UsageError
from np_optimizer.formats import humanize_count
from np_optimizer.report.sortfilter import apply_filter, apply_sort, parse_filter, parse_sort
from tests.helpers import FinishedRun, copy_workspace, make_project, report_index


def test_humanized_counts() -> None:
    assert [humanize_count(v) for v in (1_800_000_000, 11_700_000, 3_100, 512)] == ["1.8G", "11.7M", "3.1K", "512"]
    # a value that rounds up to 1000 of one suffix is shown with the next one
    assert [humanize_count(v) for v in (999_950, 999_940, 999.6, 950)] == ["1.0M", "999.9K", "1.0K", "950"]


def test_sort_grammar() -> None:
    keys = parse_sort("snr,latency:desc")
    assert [(k.metric_type, k.descending) for k in keys] == [("SNR", True), ("LATENCY", True)]
    assert parse_sort("latency")[0].descending is False  # lower is better: ascending by default
    for bad in ("latency,latency", "accuracyy", "latency:up"):
        with pytest.raises(UsageError):
            parse_sort(bad)


def test_filter_grammar_and_missing_values() -> None:
    conditions = parse_filter("latency<5, snr>=30")
    rows = [{"LATENCY": 4.0, "SNR": 35.0}, {"LATENCY": 6.0, "SNR": 40.0}, {"LATENCY": None, "SNR": 50.0}]
    kept = apply_filter(rows, conditions, lambda r, t: r[t])
    assert kept == [rows[0]]  # a missing value never matches
    ordered = apply_sort(rows, parse_sort("latency"), lambda r, t: r[t])
    assert [r["LATENCY"] for r in ordered] == [4.0, 6.0, None]  # missing values go last
    weights = parse_filter("model_weight_memory<2")[0]  # MB, as the table shows it; stored in bytes
    assert weights.matches(1.5 * 1024 * 1024) and not weights.matches(3 * 1024 * 1024)
    for bad in ("latency", "latency<<5", "speed>1", "latency<abc"):
        with pytest.raises(UsageError):
            parse_filter(bad)


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory, mlp_pi_run: FinishedRun) -> Path:
    """A copy of conftest's finished MLP run (raspberry_pi_5, default run.yaml), with a post-hoc alif_e8 round."""
    from np_optimizer import api

    exp = copy_workspace(mlp_pi_run.experiment, tmp_path_factory.mktemp("report"), cache=mlp_pi_run.cache)
    api.profile(["graph_optimize"], experiment=str(exp), device="alif_e8")  # float: MLIA quantizes it
    return exp


@pytest.mark.np_run
def test_xnnpack_table_omits_latency_and_memory_with_a_warning(reported: Path, run_np) -> None:
    result = run_np("report", cwd=reported)
    assert result.exit_code == 0
    header = next(line for line in result.stdout.splitlines() if "Model" in line and "Type" in line)
    assert "Latency" not in header and "Memory(MB)" not in header
    assert "MACs" in header and "Params" in header and "SNR (vs input)" in header and "PTE Size(MB)" in header
    assert "Delegated (XNNPACK)" in header
    assert "Not given by mlia on raspberry_pi_5" in result.stderr and "LATENCY, MEMORY" in result.stderr
    assert "(ref)" in result.stdout  # INPUT_MODEL is the SNR reference


@pytest.mark.np_run
def test_post_hoc_section(reported: Path, run_np) -> None:
    result = run_np("report", cwd=reported)
    assert "Post-hoc Measurements (1)" in result.stdout
    assert "[ np profile (post-hoc) — Target: graph_optimize ]" in result.stdout
    row = next(line for line in result.stdout.splitlines() if "alif_e8" in line)
    assert "ethos-u" in row and "mlia" in row


@pytest.mark.np_run
def test_json_shape(reported: Path, run_np) -> None:
    data = run_np("report", "--json", cwd=reported).json
    assert set(data) >= {"experiment", "pipeline", "post_hoc"}
    assert data["experiment"]["device_backend"] == "raspberry_pi_5 / executorch / xnnpack"
    steps = data["pipeline"]["steps"]
    assert [s["name"] for s in steps] == ["01_graph_optimize", "02_graph_quantize"]
    metric_types = {m["metric_type"] for m in steps[1]["metrics"]}
    assert {"MACS", "PARAMS", "SNR", "PTE_SIZE"} <= metric_types
    snr = next(m for m in steps[1]["metrics"] if m["metric_type"] == "SNR")
    assert snr["unit"] == "dB" and snr["comparison_model"] == "INPUT_MODEL"
    assert steps[1]["profile"]["provenance"]["macs_convention"]
    post = data["post_hoc"][0]
    assert post["kind"] == "PROFILE" and post["trigger_source"] == "POSTHOC" and post["result_kind"] == "estimated"
    assert post["device"] == {"ref_id": "alif_e8", "name": "alif_e8", "runtime": "executorch", "backend": "ethos-u"}
    latency = next(m for m in post["metrics"] if m["metric_type"] == "LATENCY")
    assert latency["unit"] == "ms" and latency["value"] > 0


@pytest.mark.np_run
def test_plain_sections(reported: Path, run_np) -> None:
    lines = run_np("report", "--plain", cwd=reported).stdout.splitlines()
    sections = [line for line in lines if line.startswith("section:")]
    assert sections == ["section:experiment", "section:pipeline", "section:posthoc_profile:graph_optimize"]
    header = lines[lines.index("section:pipeline") + 1].split("\t")
    assert header[:3] == ["model", "type", "status"] and "macs" in header


@pytest.mark.np_run
def test_sort_and_filter_apply_to_the_pipeline(reported: Path, run_np) -> None:
    sorted_rows = run_np("report", "--plain", "--sort", "pte_size", cwd=reported).stdout.splitlines()
    start = sorted_rows.index("section:pipeline") + 2
    assert sorted_rows[start].startswith("02_graph_quantize")  # the smallest .pte first
    filtered = run_np("report", "--plain", "--filter", "snr>=100", cwd=reported).stdout.splitlines()
    start = filtered.index("section:pipeline") + 2
    assert [line.split("\t")[0] for line in filtered[start:] if line and not line.startswith("section")][:1] == [
        "01_graph_optimize"]
    assert run_np("report", "--sort", "speed", cwd=reported).exit_code == EXIT_USAGE
    assert run_np("report", "--project", "x", "--experiment", "y", cwd=reported).exit_code == EXIT_USAGE


@pytest.mark.np_run
def test_project_report(reported: Path, run_np) -> None:
    result = run_np("report", cwd=reported.parent)
    assert result.exit_code == 0 and "Project: mlp_pi" in result.stdout
    data = run_np("report", "--json", cwd=reported.parent).json
    assert data["project"]["name"] == "mlp_pi"
    assert data["experiments"][0]["name"] == "experiment_01" and data["experiments"][0]["status"] == "success"


def test_unfinished_rows_show_double_dash(workspace: Path, run_np) -> None:
    import json

    exp = make_project(workspace, "unfinished")
    report = {"schema_version": 1, "experiment": {"name": "experiment_01", "device": "raspberry_pi_5",
                                                  "runtime": "executorch", "backend": "xnnpack", "status": "running"},
              "profile": {"enabled": True, "listed": ["INPUT_MODEL"], "method": "mlia", "results": []},
              "post_hoc": []}
    (exp / "report.json").write_text(json.dumps(report))
    # the pipeline rows come from the job files, the truth: a job still running
    job = {"schema_version": 1, "name": "00_input_model", "step_type": "input_model", "step_index": 0,
           "checkpoint": "INPUT_MODEL", "status": "in_progress", "created_at": "2026-12-03T10:00:00.000+00:00"}
    (exp / "00_input_model").mkdir()
    (exp / "00_input_model" / "job.json").write_text(json.dumps(job))
    result = run_np("report", cwd=exp)
    assert result.exit_code == 0 and "the row is not finished yet" in result.stdout
    row = next(line for line in result.stdout.splitlines() if "input_model" in line)
    assert row.count("--") == 2  # MACs and Params will come: shown as not finished yet


def test_inline_result_of_an_older_checkpoint_is_not_shown() -> None:
    from np_optimizer.report.model import build_experiment_report

    # an interrupted run can leave the profile result of the checkpoint its step has since replaced
    entry = {"job": "01_graph_optimize", "step_type": "graph_optimize", "checkpoint": "GRAPH_OPTIMIZE",
             "status": "success", "output": {"sha256": "new"}}
    result = {"checkpoint": "GRAPH_OPTIMIZE", "checkpoint_sha256": "old", "status": "SUCCESS", "method": "mlia",
              "result_kind": "estimated", "metrics": [{"metric_type": "LATENCY", "value": 1.5, "unit": "ms"}]}
    report = {"experiment": {"name": "e", "device": "alif_e8"}, "pipeline": {"steps": [entry]},
              "profile": {"enabled": True, "listed": ["GRAPH_OPTIMIZE"], "method": "mlia", "results": [result]}}
    built = build_experiment_report(report_index(report))
    assert built.rows[0].value("LATENCY") is None
    assert any("older checkpoint" in w for w in built.warnings)
    fresh = build_experiment_report(report_index({**report, "profile": {**report["profile"],
                                                           "results": [{**result, "checkpoint_sha256": "new"}]}}))
    assert fresh.rows[0].value("LATENCY") == 1.5
