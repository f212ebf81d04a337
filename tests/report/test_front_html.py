"""The sweep's front on the project HTML page (report/html/front_section.py), in a real headless Chromium.

A fresh workspace's sample project gets three more experiments (np experiments create: run.yaml files, nothing run)
and a trials.json written by the real writer, whose trials name those experiments. The page is rendered by `np report
--html` and read back as Chromium built it: one point per complete trial that has both values, the front's points
marked, every point a link to its experiment's article on the page, and user text escaped.
"""

from __future__ import annotations

import math
from pathlib import Path

from np_optimizer import api
from np_optimizer.records.sweep import COMPLETE, FAILED, SweepConstraint, SweepObjective, SweepRecord, SweepTrial
from np_optimizer.report.front import front_view
from np_optimizer.report.html.front_section import front_scatter
from np_optimizer.workspace.sweep_files import write_sweep_record
from tests.report.test_report_html import _browser, _console, _Dom, needs_chromium

LATENCY = SweepObjective("latency", "LATENCY", "min", "ms")
SNR = SweepObjective("snr", "SNR", "max", "dB")


def _trial(number: int, experiment: str, latency: float | None, snr: float | None, *, state: str = COMPLETE,
           scheme: str = "W8-A8", reason: str | None = None) -> SweepTrial:
    return SweepTrial(number, experiment, {"graph_quantize.scheme": scheme}, state, "GRAPH_QUANTIZE",
                      {"LATENCY": latency, "SNR": snr}, reason)


def _record(*trials: SweepTrial) -> SweepRecord:
    return SweepRecord("sweep.yaml", "grid", (LATENCY, SNR), (SweepConstraint("latency <= 20 ms", "LATENCY", "<=", 20.0),),
                       trials, method="mlia", device="alif_e8")


@needs_chromium
def test_front_scatter_in_a_real_browser(workspace: Path, run_np, tmp_path: Path) -> None:
    project = workspace / "sample_npu"  # the workspace fixture is this test's own
    for name in ("experiment_02", "experiment_03", "experiment_04"):
        api.experiments_create(steps="GO,GQ", name=name, project=str(project))
    write_sweep_record(project, _record(
        _trial(0, "experiment_01", 10.0, 30.0),
        _trial(1, "experiment_02", 15.0, 35.0, scheme="<b>W8</b>-A16 & co"),  # user text: escaped, never markup
        _trial(2, "experiment_03", 16.0, 34.0),  # dominated by 1
        _trial(3, "experiment_04", 25.0, 40.0),  # breaks latency <= 20 ms
        _trial(4, "experiment_02", 12.0, None, reason="no SNR: the evaluation inputs were missing"),  # not drawn
        _trial(5, "experiment_03", None, None, state=FAILED, reason="Vela refused the model")))
    page = tmp_path / "report.html"
    assert run_np("report", "--html", str(page), cwd=project).exit_code == 0
    html = page.read_text()
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")

    dom_run = _browser(page, tmp_path, "--dump-dom")
    assert dom_run.returncode == 0, dom_run.stderr[-2000:]
    assert _console(dom_run.stderr) == [], _console(dom_run.stderr)
    dom = _Dom()
    dom.feed(dom_run.stdout)  # the DOM as Chromium built it
    points = [a for a, svg, _row in dom.find("a") if svg == "sweep" and a.get("class") == "trial"]
    assert sorted(int(p["data-trial"]) for p in points) == [0, 1, 2, 3]  # the complete trials with both values
    assert {int(p["data-trial"]) for p in points if p["data-pareto"] == "true"} == {0, 1}
    assert [p["data-violations"] for p in points if p["data-trial"] == "3"] == ["latency <= 20 ms"]
    shapes = [(a["class"], svg) for a, svg, _row in dom.find("path") if svg == "sweep"]
    assert shapes.count(("pt front-pt", "sweep")) == 2 + 1 and shapes.count(("pt broken", "sweep")) == 1 + 1  # + legend
    assert len([a for a, svg, _row in dom.find("polyline") if svg == "sweep" and a.get("class") == "front"]) == 1
    # every point links to its experiment's article on the page
    ids = {a["id"]: a for t, a, _svg, _row in dom.elements if "id" in a}
    for point in points:
        target = ids[point["href"].removeprefix("#")]
        assert target["data-experiment"] == point["data-experiment"], point
    # the axes name their objective and unit; the trial left out says why; the failed trial its reason
    text = " ".join(" ".join(dom.text).split())
    assert "latency (ms; lower is better)" in text and "snr (dB; higher is better)" in text
    assert "trial 4 (experiment_02): no SNR: the evaluation inputs were missing" in text
    assert "Trial 5 (experiment_03) failed: Vela refused the model" in text
    assert "<b>W8</b>-A16 & co" in text and not dom.find("b")  # shown as text, not parsed as an element
    rows = [a for a, _svg, _row in dom.find("tr") if "data-trial" in a]
    assert [a["data-pareto"] for a in rows] == ["true", "true", "false", "false", "false", "false"]


@needs_chromium
def test_a_damaged_trials_file_keeps_the_page(workspace: Path, run_np, tmp_path: Path) -> None:
    project = workspace / "sample_npu"
    (project / "sweep").mkdir()
    (project / "sweep" / "trials.json").write_text("{not json")
    page = tmp_path / "report.html"
    assert run_np("report", "--html", str(page), cwd=project).exit_code == 0
    dom_run = _browser(page, tmp_path, "--dump-dom")
    assert _console(dom_run.stderr) == [], _console(dom_run.stderr)
    dom = _Dom()
    dom.feed(dom_run.stdout)
    text = " ".join(" ".join(dom.text).split())
    assert "Project: sample_npu" in text and "The sweep's front is not shown" in text and "trials.json" in text
    assert dom.find("article") and not [a for a, svg, _row in dom.find("a") if svg == "sweep"]


def test_one_objective_is_drawn_against_the_trial_number() -> None:
    trials = (_trial(0, "experiment_01", None, 30.0), _trial(1, "experiment_02", None, 35.0))
    svg, caption = front_scatter(front_view(SweepRecord("sweep.yaml", "grid", (SNR,), (), trials)),
                                 {"experiment_01": "exp-1"})
    assert svg is not None and "trial number" in svg and "snr (dB; higher is better)" in svg
    assert svg.count('class="trial"') == 2 and svg.count('<a class="trial" href="#exp-1"') == 1  # no anchor: no link
    assert svg.count('data-pareto="true"') == 1 and '<line class="front"' in svg  # the best value's line
    identical = _trial(2, "experiment_03", None, math.inf)  # SNR identical to the input's: best, but not placeable
    svg, caption = front_scatter(front_view(SweepRecord("sweep.yaml", "grid", (SNR,), (), (*trials, identical))), {})
    assert svg is not None and 'data-pareto="true"' not in svg and '<line class="front"' not in svg
    assert "Not drawn (no value to place): trial 2 (experiment_03)" in caption


def test_a_partial_estimate_is_marked_on_its_point() -> None:
    """A trial whose latency covers the NPU part only: its point says so (data-partial, the mark in its tooltip) and
    the tooltip names what left the NPU and the rewrite that fixes it."""
    from dataclasses import replace

    left = "partial estimate: 1 op left the NPU; costliest: pool (AvgPool2d): kernel too large. To do: use a mean"
    partial = replace(_trial(1, "experiment_02", 8.0, 32.0),
                      caveats=("latency covers the NPU part only: layers left on the CPU are not estimated", left))
    svg, _caption = front_scatter(front_view(_record(_trial(0, "experiment_01", 10.0, 30.0), partial)), {})
    assert svg is not None and svg.count('data-partial="true"') == 1 and svg.count('data-partial="false"') == 1
    assert "latency 8.00 ms (NPU part)" in svg and "To do: use a mean" in svg


def test_mixed_points_are_ringed_and_labelled_beside_the_uniform_ones() -> None:
    """The mixed strategy's trials: uniform ones labelled with their format, mixed ones ringed, labelled with their
    count of moves and naming each layer's format; the table's lines say the same."""
    from dataclasses import replace

    from np_optimizer.report.front import trial_lines

    def point(number: int, scheme: str, moves: int, latency: float, snr: float, formats: dict[str, str]) -> SweepTrial:
        return replace(_trial(number, f"experiment_0{number + 1}", latency, snr),
                       params={"mixed.scheme": scheme, "mixed.moves": moves}, formats=formats,
                       note="mixed, 1 move(s): W8-A8, but conv1 W8-A16" if formats else f"uniform {scheme}")

    record = replace(_record(point(0, "W8-A8", 0, 10.0, 20.0, {}), point(1, "W8-A16", 0, 16.0, 40.0, {}),
                             point(2, "mixed", 1, 11.0, 39.0, {"conv1": "W8-A16"}),
                             point(3, "mixed widest", 2, 15.0, 41.0, {"fc": "W8-A8"})), strategy="mixed")
    view = front_view(record)
    assert view.point(2) is not None and view.point(2).formats == {"conv1": "W8-A16"}  # type: ignore[union-attr]
    svg, caption = front_scatter(view, {})
    assert svg is not None and svg.count('class="mixed-ring"') == 2
    assert svg.count('data-kind="uniform"') == 2 and svg.count('data-kind="mixed"') == 2
    assert 'data-formats="conv1: W8-A16"' in svg and "#2 mixed (1 moves)" in svg and "#0 uniform W8-A8" in svg
    assert "#3 mixed widest (2 moves)" in svg  # `rest: both` labels a point by its scheme
    assert "Ringed points are mixed" in caption
    assert "Trial 2 (experiment_03): mixed, 1 move(s): W8-A8, but conv1 W8-A16" in trial_lines(view)
