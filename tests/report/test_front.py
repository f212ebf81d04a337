"""The sweep's front (report/front.py), pure logic on hand-made records: dominance with min and max objectives, ties,
constraints (broken, and unknown when the value is missing), missing objective values, failed trials, the best trial
per objective; the table np report prints of it; and np report at the project level with a sweep record written by
the real writer (table, --json, --plain; a damaged trials.json is a one-line warning, the rest of the report stays)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from np_optimizer.records.sweep import (
    COMPLETE,
    FAILED,
    RUNNING,
    SweepConstraint,
    SweepObjective,
    SweepRecord,
    SweepTrial,
)
from np_optimizer.report.front import FRONT_MARK, best_line, dominates, front_table, front_view, trial_lines
from np_optimizer.workspace.sweep_files import TRIALS_FILE, sweep_dir, write_sweep_record

LATENCY = SweepObjective("latency", "LATENCY", "min", "ms")
SNR = SweepObjective("snr", "SNR", "max", "dB")
SIZE = SweepObjective("pte_size", "PTE_SIZE", "min", "B")
UNDER_20 = SweepConstraint("latency <= 20 ms", "LATENCY", "<=", 20.0)
SNR_25 = SweepConstraint("snr >= 25", "SNR", ">=", 25.0)


def _trial(number: int, latency: float | None, snr: float | None, size: float | None = 1_048_576.0, *,
           state: str = COMPLETE, reason: str | None = None, scheme: str = "W8-A8", go: bool = True) -> SweepTrial:
    return SweepTrial(number, f"experiment_{number + 2:02d}", {"graph_quantize.scheme": scheme, "graph_optimize": go,
                                                                "graph_quantize.calibration": 32},
                      state, "GRAPH_QUANTIZE", {"LATENCY": latency, "SNR": snr, "PTE_SIZE": size}, reason)


def _record(*trials: SweepTrial, objectives: tuple[SweepObjective, ...] = (LATENCY, SNR, SIZE),
            constraints: tuple[SweepConstraint, ...] = (UNDER_20,)) -> SweepRecord:
    return SweepRecord("sweep.yaml", "grid", objectives, constraints, trials, method="mlia", device="alif_e8")


def test_dominance_follows_each_objectives_direction() -> None:
    objectives = (LATENCY, SNR)
    assert dominates((10.0, 30.0), (12.0, 30.0), objectives)  # faster, as faithful
    assert dominates((10.0, 31.0), (10.0, 30.0), objectives)  # as fast, more faithful
    assert not dominates((10.0, 30.0), (10.0, 30.0), objectives)  # equal: neither dominates
    assert not dominates((10.0, 20.0), (12.0, 30.0), objectives)  # a trade-off
    assert not dominates((12.0, 30.0), (10.0, 30.0), objectives)


def test_three_objectives_a_constraint_a_missing_value_a_failure_and_ties() -> None:
    record = _record(
        _trial(0, 10.0, 30.0, 2_097_152.0),  # fastest
        _trial(1, 15.0, 35.0),  # most faithful and smallest (tied on size with 2 and 3)
        _trial(2, 15.0, 35.0, scheme="W8-A16"),  # equal to 1 on every objective: both on the front
        _trial(3, 16.0, 34.0),  # dominated by 1 on every objective
        _trial(4, 25.0, 40.0),  # the best SNR of all, but it breaks latency <= 20 ms
        _trial(5, None, 38.0, reason="profiling failed: MLIA gave no latency\nTraceback ..."),  # constraint unknown
        _trial(6, 12.0, None, reason="the evaluation inputs gave no SNR"),  # feasible, no SNR: not on the front
        _trial(7, None, None, None, state=FAILED, reason="NP-CMP-500 Vela refused the model\nsecond line"),
        _trial(8, None, None, None, state=RUNNING),
    )
    view = front_view(record)
    by = {p.number: p for p in view.trials}
    assert [p.number for p in view.trials] == list(range(9))
    assert view.front_numbers == (0, 1, 2)
    assert by[3].feasible and not by[3].pareto
    assert by[4].violations == ("latency <= 20 ms",) and not by[4].feasible and not by[4].pareto
    assert by[5].violations == ("latency <= 20 ms (unknown: no latency value)",) and not by[5].pareto
    assert by[5].missing == ("latency",) and by[5].reason == "profiling failed: MLIA gave no latency"
    assert by[6].feasible and by[6].missing == ("snr",) and not by[6].pareto
    # best among the feasible trials, each objective on its own (6 has the latency it is best at? no: 0 is faster)
    assert view.best == {"latency": (0,), "snr": (1, 2), "pte_size": (1, 2, 3, 6)}
    assert by[0].best_for == ("latency",) and by[1].best_for == ("snr", "pte_size") and by[4].best_for == ()
    assert view.failed_numbers == (7,) and by[7].reason == "NP-CMP-500 Vela refused the model"
    assert by[7].violations == () and by[8].violations == () and by[8].missing == ()  # only complete trials are judged
    # the params that vary between trials (the calibration is the same in every trial)
    assert view.varying == ("graph_quantize.scheme",)
    assert by[0].values == {"latency": 10.0, "snr": 30.0, "pte_size": 2_097_152.0}


def test_a_trial_with_a_constraint_on_a_metric_that_is_no_objective() -> None:
    record = _record(_trial(0, 10.0, 20.0), _trial(1, 11.0, 30.0), objectives=(LATENCY,), constraints=(SNR_25,))
    view = front_view(record)
    assert view.front_numbers == (1,) and view.best == {"latency": (1,)}  # 0 is faster but breaks snr >= 25
    assert view.trials[0].violations == ("snr >= 25",)


def test_no_feasible_trial_and_nan_values() -> None:
    view = front_view(_record(_trial(0, 30.0, math.nan), _trial(1, 21.0, 10.0)))
    assert view.front_numbers == () and view.best == {}
    assert view.trials[0].missing == ("snr",)  # NaN is no value
    assert "latency (min): no feasible trial gave it" in best_line(view)


def test_the_table_and_its_lines() -> None:
    view = front_view(_record(_trial(0, 10.0, 30.0), _trial(1, 15.0, 35.0, scheme="[bold]x[/bold]"),
                              _trial(2, 25.0, 40.0, scheme="W4-A8"),
                              _trial(3, None, None, None, state=FAILED, reason="Vela refused the model")))
    table = front_table(view)
    assert table.columns == ["Trial", "Experiment", "graph_quantize.scheme", "latency (ms, min)", "snr (dB, max)",
                             "pte_size (MB, min)", "Front", "Constraints broken", "State"]
    assert table.rows[0] == ["0", "experiment_02", "W8-A8", "10.00", "30.00", "1.000", FRONT_MARK, "none", "complete"]
    assert table.rows[1][2] == "[bold]x[/bold]"  # user text as written (the console never reads it as markup)
    assert table.rows[2][-3:] == ["", "latency <= 20 ms", "complete"]
    assert table.rows[3][-3:] == ["", "-", "failed"]
    assert table.plain_columns[:6] == ["trial", "experiment", "param:graph_quantize.scheme", "latency_ms", "snr_db",
                                       "pte_size_bytes"]
    assert table.plain_rows[0][3:6] == [10.0, 30.0, 1_048_576.0]  # stored units
    assert table.section == "sweep" and "latency <= 20 ms" in table.caption
    assert table.footnotes[0] == ("Best per objective: latency (min) 10.00 ms: trial 0 (experiment_02); snr (max) "
                                  "35.00 dB: trial 1 (experiment_03); pte_size (min) 1.000 MB: trial 0 "
                                  "(experiment_02) and trial 1 (experiment_03) (tie)")
    assert trial_lines(view) == ["Trial 3 (experiment_05) failed: Vela refused the model"]


def test_one_trial_shows_every_param_and_an_identical_snr() -> None:
    view = front_view(_record(_trial(0, 10.0, math.inf), objectives=(SNR,), constraints=()))
    table = front_table(view)
    assert view.varying == ("graph_quantize.scheme", "graph_optimize", "graph_quantize.calibration")
    assert table.rows[0] == ["0", "experiment_02", "W8-A8", "true", "32", "identical", FRONT_MARK, "complete"]


def test_a_partial_estimate_is_marked_on_the_front_with_the_rewrite_that_fixes_it() -> None:
    """A trial whose checkpoint left a layer on the CPU of an Ethos-U: its latency is of the NPU part only (the cell
    carries the mark, explained below), and its line names the layer, the reason and what to change."""
    from dataclasses import replace

    from np_optimizer.layers.coverage import PARTIAL_MARK

    left = ("partial estimate: 1 op left the NPU (none of the MACs np counts, not estimated); costliest: pool "
            "(AvgPool2d): Avgpool2d with padding needs kernel dims < 8, got [19, 5]. To do: write the pooling as a "
            "mean over the pooled dimensions")
    partial = replace(_trial(1, 8.0, 32.0, go=False), caveats=(
        "latency covers the NPU part only: layers left on the CPU are not estimated (np report --layers in its "
        "experiment)", left))
    view = front_view(_record(_trial(0, 10.0, 30.0), partial))
    point = view.point(1)
    assert point is not None and point.partial("LATENCY") and not point.partial("SNR")
    table = front_table(view)
    assert table.rows[1][3:5] == [f"8.00 {PARTIAL_MARK}", "32.00"] and table.rows[0][3] == "10.00"
    assert f"Trial 1 (experiment_03): {left}" in table.footnotes
    assert table.footnotes[-1].startswith(f"{PARTIAL_MARK}: a partial estimate, of the NPU part only")
    assert not any(PARTIAL_MARK in f for f in front_table(front_view(_record(_trial(0, 10.0, 30.0)))).footnotes)


# -- np report at the project level, with the real writer and reader ------------------------------------------------

@pytest.fixture
def swept(workspace: Path) -> Path:
    project = workspace / "sample_npu"
    write_sweep_record(project, _record(_trial(0, 10.0, 30.0), _trial(1, 15.0, 35.0, scheme="W8-A16"),
                                        _trial(2, 25.0, 40.0, scheme="W4-A8"),
                                        _trial(3, None, None, None, state=FAILED, reason="Vela refused the model")))
    return project


def test_project_report_shows_the_front(swept: Path, run_np) -> None:
    result = run_np("report", cwd=swept)
    assert result.exit_code == 0, result.stderr
    assert "Project: sample_npu" in result.stdout and "Sweep: trials and the Pareto front" in result.stdout
    assert result.stdout.count(FRONT_MARK) == 2 + 1  # two trials on it, and the caption's legend
    assert "Best per objective: latency (min) 10.00 ms: trial 0 (experiment_02)" in result.stdout
    assert "Trial 3 (experiment_05) failed: Vela refused the model" in result.stdout
    assert "Post-hoc" not in result.stdout
    doc = run_np("report", "--json", cwd=swept).json
    assert doc["sweep"]["front"] == [0, 1] and doc["sweep"]["failed"] == [3]
    assert doc["sweep"]["best"] == {"latency": [0], "snr": [1], "pte_size": [0, 1]}
    trial = doc["sweep"]["trials"][2]
    assert trial["values"] == {"latency": 25.0, "snr": 40.0, "pte_size": 1048576.0} and trial["pareto"] is False
    assert trial["violations"] == ["latency <= 20 ms"] and doc["sweep"]["objectives"][0]["unit"] == "ms"
    plain = run_np("report", "--plain", cwd=swept).stdout
    section = plain.split("section:sweep\n")[1].splitlines()
    assert section[0].split("\t")[:4] == ["trial", "experiment", "param:graph_quantize.scheme", "latency_ms"]
    assert section[1].split("\t")[:4] == ["0", "experiment_02", "W8-A8", "10.0"]


def test_project_report_without_a_sweep_is_unchanged(workspace: Path, run_np) -> None:
    result = run_np("report", cwd=workspace / "sample_npu")
    assert result.exit_code == 0 and "Sweep" not in result.stdout and "Sweep" not in result.stderr
    assert "sweep" not in run_np("report", "--json", cwd=workspace / "sample_npu").json
    assert "section:sweep" not in run_np("report", "--plain", cwd=workspace / "sample_npu").stdout


@pytest.mark.parametrize("damage", ["{not json", '{"sweep_file": "sweep.yaml"}', "[1, 2]",
                                    '{"sweep_file": "s", "strategy": "grid", "objectives": [], "trials": [{"a": 1}]}'])
def test_a_damaged_trials_file_is_a_warning_not_a_failure(workspace: Path, run_np, damage: str) -> None:
    project = workspace / "sample_npu"
    sweep_dir(project).mkdir()
    (sweep_dir(project) / TRIALS_FILE).write_text(damage)
    result = run_np("report", cwd=project)
    assert result.exit_code == 0 and "Project: sample_npu" in result.stdout
    warning = [line for line in result.stderr.splitlines() if "front is not shown" in line]
    assert len(warning) == 1 and "trials.json" in warning[0] and "Sweep:" not in result.stdout
    doc = run_np("report", "--json", cwd=project).json
    assert doc["experiments"] and list(doc["sweep"]) == ["warning"] and "trials.json" in doc["sweep"]["warning"]
    assert "section:sweep\nwarning\n" in run_np("report", "--plain", cwd=project).stdout
