"""Measured profiling through np run and np profile on `host`: options per checkpoint, the device queue, the report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import make_project

pytestmark = pytest.mark.np_run  # every test here runs np run, itself or through a module fixture


def _raw(exp: Path, result: dict) -> dict:
    return json.loads((exp / result["artifacts"]["raw"]).read_text())


def test_profile_n_options_reach_the_nth_checkpoint(workspace: Path, run_np) -> None:
    detail = ("detail:\n  profile[0]:\n    num_executions: 4\n    warmup: 1\n  profile[1]:\n    num_executions: 7\n"
              "    warmup: 2\n  profile[2]:\n    num_executions: 5\n    warmup: 0\n")
    exp = make_project(workspace, "measured", device="host", detail_yaml=detail)
    result = run_np("run", "--json", cwd=exp)
    assert result.exit_code == 0, result.stderr
    results = {r["checkpoint"]: r for r in result.json["profile"]}
    expected = {"INPUT_MODEL": (4, 1), "GRAPH_OPTIMIZE": (7, 2), "GRAPH_QUANTIZE": (5, 0)}
    for checkpoint, (runs, warmup) in expected.items():
        raw = _raw(exp, results[checkpoint])
        assert len(raw["samples_ms"]) == runs and len(raw["warmup_ms"]) == warmup  # the raw samples are kept
        assert results[checkpoint]["provenance"]["runs_done"] == runs
        metrics = {m["metric_type"]: m for m in results[checkpoint]["metrics"]}
        assert metrics["LATENCY"]["stat"] == "avg" and metrics["LATENCY"]["value"] > 0
        assert metrics["MEMORY"]["unit"] == "MB" and "above" in metrics["MEMORY"]["source"]
        assert results[checkpoint]["result_kind"] == "measured"
    log = (exp / "logs" / "execution.log").read_text()
    assert "Profiling: graph_optimize (7 runs)" in log and "ms (avg)" in log
    table = run_np("report", cwd=exp).stdout
    header = next(line for line in table.splitlines() if "Model" in line)
    assert "Latency(ms)" in header and "Memory(MB)" in header
    compare = run_np("compare", "--json", cwd=exp).json
    # measured rounds carry per-layer times from their traced runs: no checkpoint lacks per-layer costs
    assert not [w for w in compare["warnings"] if w.startswith("No per-layer costs")], compare["warnings"]
    snr = next(t for t in compare["totals"] if t["metric"] == "SNR")
    assert snr["cells"][0] is None and snr["cells"][1] is not None  # GO's SNR is shown, "identical" or a value
    assert "NPU part" not in run_np("compare", cwd=exp).stdout  # no partial total here: no legend for one


def test_concurrent_profiles_on_host_do_not_overlap(workspace: Path, run_np) -> None:
    exp = make_project(workspace, "queued", device="host", run_yaml=(
        'version: "1.0"\nsteps:\n- graph_quantize:\n  - scheme: W8-A8\nprofile: []\n'))
    assert run_np("run", cwd=exp).exit_code == 0  # here: the two np profile processes below are what is under test
    command = [sys.executable, "-m", "np_optimizer", "profile", "graph_quantize", "--method", "on-device",
               "--profile-opt", "num_executions=300,warmup=5", "--json"]
    procs = [subprocess.Popen(command, cwd=exp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-800:] for o in outputs]
    results = [json.loads(out)["results"][0] for out, _ in outputs]
    windows = sorted((r["extras"]["measured_window"]["start"], r["extras"]["measured_window"]["end"]) for r in results)
    assert windows[0][1] <= windows[1][0], windows  # one measurement ended before the other began
    waited = max(results, key=lambda r: r["timings"].get("queue_wait_s", 0))
    assert waited["timings"]["queue_wait_s"] > 0
    log = (exp / "logs" / "execution.log").read_text()
    assert "number 1 in the queue, estimated wait" in log and "in the queue; measuring now" in log


def test_unreachable_remote_device_exits_4(workspace: Path, run_np, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("NP_SSH_KNOWN_HOSTS", str(tmp_path / "known_hosts"))
    exp = make_project(workspace, "remote_pi", run_yaml='version: "1.0"\nsteps:\n- graph_optimize: null\n')
    assert run_np("run", cwd=exp).exit_code == 0
    (workspace / "devices.yaml").write_text(
        "devices:\n  raspberry_pi_5:\n    ssh: pi@127.0.0.1\n    port: 1\n    connect_timeout: 5\n")
    plan = run_np("run", "--dry-run", "--json", cwd=exp).json["plan"]
    assert plan["profile"] is None  # no profile section; the default method is now on-device:
    result = run_np("profile", "graph_optimize", "--json", cwd=exp)
    assert result.exit_code == 4, result.stdout
    error = result.json["results"][0]["error"]
    assert error["code"] == "NP-DEV-503" and "127.0.0.1" in error["message"] and error["hint"]
    assert result.json["method"] == "on-device"
