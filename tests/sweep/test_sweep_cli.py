"""np sweep's command line: --dry-run checks every trial before anything runs, a bad sweep.yaml is one issue per
mistake with its line, and the layers strategy keeps the first trial's most damaging layers float, said in the
front."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import make_project, run_np_subprocess

pytestmark = pytest.mark.own_steps  # Ctrl+C mid-sweep needs steps that run

MLP_SWEEP = """version: "1.0"
method: mlia
space:
  graph_quantize.scheme: [W8-A8, W8-A16]
objectives: [{pte_size: min}, {snr: max}]
"""


def _project(tmp_path: Path) -> Path:
    from np_optimizer.workspace import Workspace

    Workspace.create(tmp_path / "ws")
    return make_project(tmp_path / "ws", "mlp", steps="gq").parent


def test_dry_run_lists_the_trials_and_the_one_the_device_refuses(tmp_path: Path, run_np) -> None:
    project = _project(tmp_path)
    (project / "sweep.yaml").write_text(MLP_SWEEP)
    result = run_np("sweep", "--dry-run", "--json", cwd=project)
    assert result.exit_code == 0, result.stderr
    plan = result.json
    assert (plan["strategy"], plan["budget"], plan["base"]) == ("grid", 2, "experiment_01")
    checks = {t["params"]["graph_quantize.scheme"]: t["problems"] for t in plan["trials"]}
    assert checks["W8-A8"] == [] and "W8-A16" in checks["W8-A16"][0]
    assert not (project / "sweep").exists() and sorted(p.name for p in project.iterdir() if p.is_dir()) == [
        "experiment_01"]  # nothing written


def test_a_bad_sweep_file_is_one_issue_per_mistake_with_its_line(tmp_path: Path, run_np) -> None:
    project = _project(tmp_path)
    (project / "sweep.yaml").write_text(MLP_SWEEP.replace("snr: max", "snrr: max").replace("W8-A16]", "W8-A16]\n"
                                                                                             "stratgy: grid"))
    result = run_np("sweep", cwd=project)
    assert result.exit_code == 5
    assert "S022" in result.stderr and "line 5" in result.stderr or ":5:" in result.stderr
    assert "S002" in result.stderr and "strategy" in result.stderr  # did you mean
    assert "np sweep --dry-run" in result.stderr
    (project / "sweep.yaml").unlink()
    missing = run_np("sweep", cwd=project)
    assert missing.exit_code == 3 and "NP-SWP-404" in missing.stderr


@pytest.mark.parametrize(("edit", "says"), [
    (("method: mlia", "method: magic"), ["S005", "Unknown profiling method 'magic'", "mlia, on-device"]),
    (("graph_quantize.scheme:", "graph_quantize.schem:"), ["S014", "Did you mean 'graph_quantize.scheme'"]),
], ids=["method", "parameter"])
def test_a_name_np_does_not_know_is_a_sweep_file_error_with_its_line(tmp_path: Path, run_np, edit: tuple[str, str],
                                                                       says: list[str]) -> None:
    project = _project(tmp_path)
    (project / "sweep.yaml").write_text(MLP_SWEEP.replace(*edit))
    for args in (["--dry-run"], []):
        result = run_np("sweep", *args, cwd=project)
        assert result.exit_code == 5, result.stderr
        assert all(s in result.stderr for s in says) and "sweep.yaml:" in result.stderr, result.stderr
    assert sorted(p.name for p in project.iterdir()) == ["experiment_01", "project.json", "sweep.yaml"]


@pytest.mark.parametrize("space", ["graph_quantize.scheme: [W9-A9]",
                                   "graph_quantize.calibration.num_samples: [-5, 0]"], ids=["scheme", "samples"])
def test_a_space_whose_every_configuration_is_refused_is_an_error(tmp_path: Path, run_np, space: str) -> None:
    project = _project(tmp_path)
    (project / "sweep.yaml").write_text(MLP_SWEEP.replace("graph_quantize.scheme: [W8-A8, W8-A16]", space))
    for args in (["--dry-run"], [], ["--json"]):
        result = run_np("sweep", *args, cwd=project)
        assert result.exit_code == 5, result.stdout + result.stderr
        said = result.json["message"] if "--json" in args else result.stderr
        assert "NP-SWP-422" in (result.stdout + result.stderr) and "breaks a rule" in said, said
        assert ("W9-A9" if "W9" in space else "at least 1 (got -5)") in said
    assert sorted(p.name for p in project.iterdir()) == ["experiment_01", "project.json", "sweep.yaml"]


@pytest.mark.parametrize("url", ["sqlite:////nonexistent/dir/x.db", "nosuchdb://x"])
def test_a_storage_that_cannot_be_opened_is_one_line_and_leaves_nothing(tmp_path: Path, run_np, url: str) -> None:
    project = _project(tmp_path)
    (project / "sweep.yaml").write_text(MLP_SWEEP)
    result = run_np("sweep", "--storage", url, cwd=project)
    assert result.exit_code == 3, result.stderr
    assert "NP-CFG-400" in result.stderr and url in result.stderr and "Hint:" in result.stderr
    assert "Traceback" not in result.stderr and "NP-GEN-500" not in result.stderr
    assert sorted(p.name for p in project.iterdir()) == ["experiment_01", "project.json", "sweep.yaml"]


def test_report_shows_the_project_even_from_inside_an_experiment(tmp_path: Path, run_np) -> None:
    project = _project(tmp_path)
    result = run_np("sweep", "--report", "--json", cwd=project / "experiment_01")
    assert result.exit_code == 0, result.stderr
    assert result.json["project"]["name"] == "mlp" and [e["name"] for e in result.json["experiments"]] == [
        "experiment_01"]


@pytest.mark.np_run
def test_the_layers_strategy_keeps_the_most_damaging_layers_float(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "sweep.yaml").write_text("""version: "1.0"
method: mlia
objectives: [{pte_size: min}, {snr: max}]
strategy: {layers: {scheme: W8-A8, keep_float: [1, 2]}}
""")
    result = run_np_subprocess("sweep", cwd=project)
    assert result.exit_code == 0, result.stderr
    assert "Most damaging layers of the first trial:" in result.stderr
    report = run_np_subprocess("report", "--json", cwd=project).json["sweep"]
    trials = {t["params"]["layers.keep_float"]: t for t in report["trials"]}
    assert sorted(trials) == [0, 1, 2] and all(t["state"] == "complete" for t in trials.values())
    assert trials[0]["kept_float"] == [] and len(trials[1]["kept_float"]) == 1
    assert trials[2]["kept_float"][:1] == trials[1]["kept_float"]  # the same ranking, one layer more
    for k in (1, 2):
        job = json.loads((project / trials[k]["experiment"] / "01_graph_quantize" / "job.json").read_text())
        assert job["parameters"].get("keep_float") or job["changes"]["keep_float"] == sorted(trials[k]["kept_float"])
        assert set(trials[k]["kept_float"]) <= set(job["changes"]["float_layers"])
        assert "lost" in trials[k]["note"]
    (project / "sweep.yaml").write_text((project / "sweep.yaml").read_text().replace("scheme: W8-A8,", "scheme: W8-A8_dynamic,"))
    changed = run_np_subprocess("sweep", "--resume", cwd=project)
    assert changed.exit_code == 3 and "NP-SWP-412" in changed.stderr


@pytest.mark.np_run
def test_ctrl_c_stops_the_sweep_with_the_trials_recorded_and_one_way_on(tmp_path: Path) -> None:
    """Ctrl+C while a trial runs: exit 130, one line saying how to continue, no traceback, and trials.json keeps the
    trial that was running (np sweep --resume runs it again)."""
    from np_optimizer.workspace.sweep_files import read_sweep_record

    project = _project(tmp_path)
    (project / "sweep.yaml").write_text(MLP_SWEEP)
    # SIGINT as a foreground np has it (a background job of a shell without job control ignores it: see
    # tests/cli/test_hostile_inputs.py)
    proc = subprocess.Popen([sys.executable, "-m", "np_optimizer", "sweep", "--json", "--workers", "1"], cwd=project,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            if json.loads(raw)["kind"] == "trial_start":
                proc.send_signal(signal.SIGINT)
                break
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert err.count("Interrupted.") == 1 and "np sweep --resume continues the sweep" in err, err
    assert "Traceback" not in err
    record = read_sweep_record(project)
    assert record is not None and [(t.number, t.state) for t in record.trials] == [(0, "running")]
