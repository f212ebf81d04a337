"""The time limit of a long Ethos-U lowering, for real: np run on alif_e8 with run.detail.yaml's
profile[1].time_limit at 1 s, so GRAPH_QUANTIZE's TOSA lowering (seconds, for a small CNN of fifteen convolutions) is
stopped.
What finished before stays (INPUT_MODEL's job and its MLIA estimate in job.json and report.json); the stopped lowering
is recorded failed with its reason (compile.json, the job's warning, the profile round's NP-CMP-504), the Profiling
phase does not wait for the same limit twice, and np profile with a higher --profile-opt time_limit lowers it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import make_project

pytestmark = [pytest.mark.np_run, pytest.mark.own_steps]  # own_steps: its jobs' statuses are of steps that ran

MODEL = '''
import torch
from torch import nn


def tiny():
    torch.manual_seed(0)
    blocks = [layer for _ in range(14) for layer in (nn.Conv2d(4, 4, 3, padding=1), nn.ReLU())]  # a lowering of seconds
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), *blocks, nn.Flatten(), nn.Linear(4 * 6 * 6, 3))
    return model.eval(), (torch.randn(1, 1, 6, 6),)
'''


def test_a_lowering_past_its_time_limit_is_stopped_and_what_finished_before_is_kept(
        workspace: Path, tmp_path: Path, run_np, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NP_COMPILE_CACHE_DIR", str(tmp_path / "compiled"))  # lowered here, never copied
    (tmp_path / "tiny.py").write_text(MODEL)
    exp = make_project(workspace, "limited", model=f"{tmp_path / 'tiny.py'}:tiny", device="alif_e8", steps="gq",
                       detail_yaml="detail:\n  profile[1]:\n    time_limit: 1\n")
    run = run_np("run", cwd=exp)
    said = run.stdout + run.stderr
    assert run.exit_code == 1, said
    stopped = "01_graph_quantize: lowering for alif_e8 was stopped after 1 s, during "
    assert stopped in said and "its time limit is 1 s (run.detail.yaml profile[1].time_limit)" in said
    assert "Raise the time limit (run.detail.yaml profile[1].time_limit)" in said

    report = json.loads((exp / "report.json").read_text())
    rounds = {r["checkpoint"]: r for r in report["profile"]["results"]}
    assert rounds["INPUT_MODEL"]["status"] == "SUCCESS" and rounds["INPUT_MODEL"]["metrics"]  # kept
    failed = rounds["GRAPH_QUANTIZE"]
    assert failed["status"] == "FAILED" and failed["error"]["code"] == "NP-CMP-504"
    assert failed["error"]["message"].startswith(stopped)
    assert "not lowered again" in failed["error"]["message"]  # the Profiling phase did not wait a second time
    job = json.loads((exp / "01_graph_quantize" / "job.json").read_text())
    assert job["status"] == "success" and job["output"]["sha256"]  # the checkpoint itself is fine
    assert job["compile"]["status"] == "failed" and job["compile"]["stopped"]["limit_s"] == 1
    assert job["compile"]["stopped"]["stage"] and job["compile"]["stopped"]["after_s"] >= 1
    assert any(w.startswith(f"Lowering failed for alif_e8: {stopped}") for w in job["warnings"])
    assert json.loads((exp / "00_input_model" / "job.json").read_text())["status"] == "success"

    again = run_np("profile", "GRAPH_QUANTIZE", "--profile-opt", "time_limit=300", "--json", cwd=exp)
    assert again.exit_code == 0, again.stdout
    (result,) = again.json["results"]
    assert result["status"] == "SUCCESS" and result["compile"]["status"] == "ok"

    # MLIA's estimate of the float INPUT_MODEL (it quantizes, lowers and runs Vela itself: seconds) is stopped too
    estimate = run_np("profile", "INPUT_MODEL", "--force", "--profile-opt", "time_limit=1", "--json", cwd=exp)
    assert estimate.exit_code == 1
    (result,) = estimate.json["results"]
    assert result["error"]["code"] == "NP-PRF-504", result["error"]
    assert result["error"]["message"].startswith("estimating input_model on alif_e8 was stopped after 1 s, during MLIA")
    assert "(--profile-opt time_limit)" in result["error"]["message"]
    kept = json.loads((exp / "report.json").read_text())["profile"]["results"]
    assert [r["status"] for r in kept if r["checkpoint"] == "INPUT_MODEL"] == ["SUCCESS"]
