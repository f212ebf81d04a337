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
