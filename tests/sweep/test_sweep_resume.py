"""np sweep end to end on the MLP (raspberry_pi_5, MLIA's static figures, so every figure is deterministic): a
sweep killed with kill -9 at three moments and resumed each time ends with the same trials and figures as one that
ran through, every configuration counted once; a configuration the device refuses fails with its reason and the
sweep goes on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from np_optimizer.workspace.sweep_files import read_sweep_record
from tests.helpers import make_project, run_np_subprocess

# own_steps: a sweep killed at its n-th event needs steps that run
pytestmark = [pytest.mark.np_run, pytest.mark.own_steps]

SWEEP = """version: "1.0"
method: mlia
space:
  graph_optimize: [true, false]
  graph_quantize.scheme: [W8-A8, W8-A16]
objectives: [{pte_size: min}, {snr: max}]
constraints: ["snr >= 30"]
"""


def _project(tmp_path: Path, name: str) -> Path:
    from np_optimizer.workspace import Workspace

    Workspace.create(tmp_path / name)
    project = make_project(tmp_path / name, "mlp_sweep").parent
    (project / "sweep.yaml").write_text(SWEEP)
    return project


def _sweep_until(project: Path, stop: tuple[str, int] | None, *args: str) -> list[dict[str, Any]]:
    """np sweep --json, killed with SIGKILL at the n-th event of a kind (None: to its end); the events seen."""
    proc = subprocess.Popen([sys.executable, "-m", "np_optimizer", "sweep", "--json", "--workers", "2", *args],
                            cwd=project, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    events: list[dict[str, Any]] = []
    for raw in proc.stdout:
        if not raw.startswith("{\"kind\""):  # an error document (indented JSON): the whole of it, to say why
            raise AssertionError(raw + proc.stdout.read())
        events.append(json.loads(raw))
        if stop is not None and sum(1 for e in events if e["kind"] == stop[0]) == stop[1]:
            os.kill(proc.pid, signal.SIGKILL)
            break
    proc.wait(timeout=600)
    return events


def _figures(project: Path) -> dict[str, tuple[str, Any, Any]]:
    record = read_sweep_record(project)
    assert record is not None
    return {json.dumps(t.params, sort_keys=True): (t.state, t.values, t.reason) for t in record.trials}


def test_a_sweep_killed_three_times_and_resumed_matches_one_that_ran_through(tmp_path: Path) -> None:
    through = _project(tmp_path, "through")
    _sweep_until(through, None)
    expected = _figures(through)
    assert len(expected) == 4
    refused = {k: v for k, v in expected.items() if "W8-A16" in k}
    assert all(state == "failed" and "W8-A16" in str(reason) for state, _v, reason in refused.values()), refused
    assert sum(1 for state, _v, _r in expected.values() if state == "complete") == 2

    killed = _project(tmp_path, "killed")
    _sweep_until(killed, ("trial_start", 1))  # a trial just started
    _sweep_until(killed, ("trial_done", 1), "--resume")  # one finished, others running
    _sweep_until(killed, ("trial_start", 3), "--resume")  # mid-way again
    events = _sweep_until(killed, None, "--resume")
    assert events[-1]["kind"] == "end" and events[-1]["remaining"] == 0
    assert _figures(killed) == expected
    record = read_sweep_record(killed)
    assert record is not None
    experiments = [t.experiment for t in record.trials]
    assert len(experiments) == len(set(experiments)) == 4  # one experiment per configuration, none counted twice
    folders = sorted(p.parent.name for p in killed.glob("*/run.yaml"))
    assert folders == sorted(["experiment_01", *experiments])  # no stray experiment left by a kill

    again = run_np_subprocess("sweep", cwd=killed)
    assert again.exit_code == 2 and "NP-SWP-409" in again.stderr and "--resume" in again.stderr
