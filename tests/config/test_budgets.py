"""Budgets: run.yaml's `budgets:` validated like the rest of the file (through the real loader), and --budget
overrides. The checks on the samples (pass, fail with exit 6, not checked, JUnit) are in test_report_html.py, which
shares their runs with the HTML report's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from np_optimizer.config import check_experiment_config
from np_optimizer.config.budgets import parse_budget_overrides
from np_optimizer.devices import get_device
from np_optimizer.errors import CODES, EXIT_BUDGET, UsageError
from tests.helpers import report_index

RUN = """version: "1.0"
steps:
- graph_quantize:
  - scheme: W8-A8
profile:
- INPUT_MODEL
- GRAPH_QUANTIZE
"""


@pytest.mark.parametrize("body, code, location, words", [
    ("  latency_s: 20\n", "R061", "budgets.latency_s", "Did you mean 'latency_ms'"),
    ("  latency_ms: 20 s\n", "R062", "budgets.latency_ms", "got the unit 's'"),
    ("  memory_mb: 1.5 GB\n", "R062", "budgets.memory_mb", "got the unit 'GB'"),
    ("  pte_size_mb: -2\n", "R062", "budgets.pte_size_mb", "cannot be negative"),
    ("  snr_db_min: .nan\n", "R062", "budgets.snr_db_min", "finite"),
    ("  latency_ms: .inf\n", "R062", "budgets.latency_ms", "finite"),
    ("  weight_memory_mb: true\n", "R062", "budgets.weight_memory_mb", "must be a number"),
    ("  latency_ms: fast\n", "R062", "budgets.latency_ms", "must be a number"),
    (" [20]\n", "R060", "budgets", "mapping"),
])
def test_bad_budgets_are_violations_with_location(tmp_path: Path, body: str, code: str, location: str,
                                                  words: str) -> None:
    (tmp_path / "run.yaml").write_text(RUN + "budgets:" + ("\n" if body.startswith("  ") else "") + body)
    config, issues = check_experiment_config(tmp_path / "run.yaml", get_device("raspberry_pi_5"))
    assert config is None
    found = [i for i in issues if not i.is_warning]
    assert [(i.code, i.location) for i in found] == [(code, location)]
    assert words in found[0].message + found[0].hint and found[0].hint
    assert found[0].file == "run.yaml" and found[0].line == RUN.count("\n") + (1 if code == "R060" else 2)


def test_good_budgets_parse_with_units(tmp_path: Path) -> None:
    (tmp_path / "run.yaml").write_text(RUN + "budgets:\n  latency_ms: 20\n  memory_mb: 1.5 MB\n  snr_db_min: 30 dB\n"
                                       "  pte_size_mb: 2\n  weight_memory_mb: 0\n")
    config, _issues = check_experiment_config(tmp_path / "run.yaml", get_device("raspberry_pi_5"))
    assert config is not None
    assert {b.key: b.limit for b in config.run.budgets} == {"latency_ms": 20.0, "memory_mb": 1.5, "snr_db_min": 30.0,
                                                            "pte_size_mb": 2.0, "weight_memory_mb": 0.0}


def test_budget_overrides() -> None:
    assert [(b.key, b.limit) for b in parse_budget_overrides(["latency_ms=20", "snr_db_min = 30dB"])] == [
        ("latency_ms", 20.0), ("snr_db_min", 30.0)]
    for bad in ("latency=20", "latency_ms", "latency_ms=-1", "latency_ms=nan", "memory_mb=3GB", "pte_size_mb=x"):
        with pytest.raises(UsageError) as caught:
            parse_budget_overrides([bad])
        assert caught.value.code == "NP-BDG-400" and caught.value.hint
    assert CODES["NP-BDG-412"].exit_code == EXIT_BUDGET == 6


def _report(rounds: list[dict], inline: dict | None) -> dict:
    """A report.json of one GQ step on alif_e8 (the shape the store writes), for the value-picking rules."""
    step = {"job": "01_graph_quantize", "checkpoint": "GRAPH_QUANTIZE", "step_type": "graph_quantize",
            "status": "success", "output": {"sha256": "abc"}, "lowering": {"status": "ok", "pte_bytes": 3 * 2**20},
            "fidelity": {"program": {"snr_db": 41.0}, "evaluated_on": "8 inputs"}}
    return {"experiment": {"name": "e", "device": "alif_e8", "runtime": "executorch", "backend": "ethos-u"},
            "pipeline": {"input_model": {"job": "00_input_model", "checkpoint": "INPUT_MODEL",
                                         "step_type": "input_model", "status": "success"}, "steps": [step]},
            "profile": {"enabled": True, "method": "mlia", "listed": ["GRAPH_QUANTIZE"],
                        "results": [inline] if inline else []},
            "post_hoc": rounds}


def _round(kind: str, latency: float, *, device: str = "alif_e8", trigger: str = "POSTHOC",
           started: str = "2026-12-03T10:00:00") -> dict:
    return {"measurement_id": f"{kind}-{latency}", "checkpoint": "GRAPH_QUANTIZE", "job": "01_graph_quantize",
            "checkpoint_sha256": "abc", "device": device, "method": "on-device" if kind == "measured" else "mlia",
            "result_kind": kind, "trigger": trigger, "status": "SUCCESS", "started_at": started,
            "metrics": [{"metric_type": "LATENCY", "value": latency, "unit": "ms", "source": f"{kind} source"}]}


def test_measured_values_win_and_other_devices_do_not_count() -> None:
    from np_optimizer.config.budgets import Budget
    from np_optimizer.report.budgets import check_budgets
    from np_optimizer.report.model import build_experiment_report

    inline = _round("estimated", 5.0, trigger="RUN_INLINE")
    budgets = [Budget("latency_ms", 10.0, "run.yaml"), Budget("pte_size_mb", 2.0, "run.yaml"),
               Budget("snr_db_min", 40.0, "run.yaml")]
    only_estimate = check_budgets(build_experiment_report(report_index(_report([], inline))), budgets)
    latency, size, snr = only_estimate.outcomes
    assert (latency.status, latency.value_kind, latency.value) == ("pass", "estimated", 5.0)
    assert (size.status, size.value) == ("fail", 3.0) and (snr.status, snr.value) == ("pass", 41.0)
    assert only_estimate.status == "fail" and "01_graph_quantize pte_size_mb 3.00 MB vs <= 2.00" in only_estimate.line
    measured = [_round("measured", 12.0, started="2026-12-03T11:00:00"), _round("measured", 9.0),
                _round("measured", 1.0, device="host")]  # the newest on alif_e8 counts; host is another device
    verdict = check_budgets(build_experiment_report(report_index(_report(measured, inline))), budgets[:1])
    (outcome,) = verdict.outcomes
    assert (outcome.status, outcome.value_kind, outcome.value) == ("fail", "measured", 12.0)
    nothing = check_budgets(build_experiment_report(report_index(_report([_round("measured", 1.0, device="host")], None))),
                            budgets[:1])
    (outcome,) = nothing.outcomes
    assert outcome.status == "not checked" and "rounds on host are of another device" in outcome.reason
    assert nothing.status == "not checked" and "NOT CHECKED" in nothing.line


def test_html_escapes_text_and_marks_the_pareto_front() -> None:
    from np_optimizer.records import ExperimentPage, ReportRecord
    from np_optimizer.report.html import render_html
    from np_optimizer.report.html.charts import Point, pareto_front
    from np_optimizer.report.model import build_experiment_report

    points = [Point("a", 1.0, 30.0, "", ""), Point("b", 2.0, 40.0, "", ""), Point("c", 3.0, 35.0, "", ""),
              Point("d", 1.0, 20.0, "", "")]
    assert [p.checkpoint for p in pareto_front(points)] == ["a", "b"]
    data = _report([], _round("estimated", 5.0, trigger="RUN_INLINE"))
    data["experiment"]["name"] = "<script>alert(1)</script>"
    built = build_experiment_report(report_index(data))
    built.warnings.append("a warning with <img src=x onerror=alert(1)> & [bold]markup[/bold]")
    record = ReportRecord("experiment", {}, experiment=built, rows=tuple(built.rows), folder="/nowhere")
    html = render_html(record, [ExperimentPage("<script>alert(1)</script>", built)])
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "[bold]markup[/bold]" in html


def test_accuracy_floors(tmp_path: Path) -> None:
    from np_optimizer.config.budgets import Budget
    from np_optimizer.report.budgets import check_budgets
    from np_optimizer.report.model import build_experiment_report

    (tmp_path / "run.yaml").write_text(RUN + "budgets:\n  top1_min: 95\n")
    config, issues = check_experiment_config(tmp_path / "run.yaml", get_device("raspberry_pi_5"))
    assert config is None and "Write 0.95 for 95%" in issues[0].hint
    assert [(b.key, b.limit) for b in parse_budget_overrides(["top1_min=0.9"])] == [("top1_min", 0.9)]
    report = _report([], None)
    budgets = [Budget("top1_min", 0.95, "run.yaml"), Budget("top5_min", 0.99, "run.yaml")]
    (top1, top5) = check_budgets(build_experiment_report(report_index(report)), budgets).outcomes
    assert top1.status == "not checked" and "labelled dataset" in top1.reason  # never a pass without a dataset
    report["evaluation"] = {"results": [{
        "checkpoint": "GRAPH_QUANTIZE", "checkpoint_sha256": "abc", "status": "SUCCESS", "samples": 360,
        "dataset": {"name": "digits_val"}, "metrics": [
            {"metric_type": "TOP1_ACCURACY", "value": 0.94, "unit": "fraction", "source": "the .pte on this machine"},
            {"metric_type": "TOP5_ACCURACY", "value": 1.0, "unit": "fraction", "source": "the .pte on this machine"}]}]}
    verdict = check_budgets(build_experiment_report(report_index(report)), budgets)
    top1, top5 = verdict.outcomes
    assert (top1.status, top1.value, top1.value_kind) == ("fail", 0.94, "evaluated") and "360 samples of digits_val" in \
        top1.source
    assert (top5.status, top5.value) == ("pass", 1.0) and verdict.status == "fail"
