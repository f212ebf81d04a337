"""One handover from compile to profile: np run's Profiling phase profiles the program each job compiled, as the job
handed it over (the same compile key, the same .pte, the job's MACs and parameters), without looking the compilation
up on disk again; only a job reused under --retry, which compiled nothing in this run, is looked up."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from np_optimizer.compile import CompileResult
from np_optimizer.models.source import sha256_file
from tests.helpers import make_project

GO_PROFILED = 'version: "1.0"\nsteps:\n- graph_optimize: null\nprofile:\n- input_model\n- graph_optimize\n'


def _count_lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The checkpoints the profiler looks up on disk: the real find_compiled, wrapped to note each call."""
    from np_optimizer.profiler import session

    calls: list[str] = []
    real = session.find_compiled

    def counted(out_dir: Path, device: Any, program_sha256: str) -> CompileResult | None:
        calls.append(out_dir.parent.parent.name)
        return real(out_dir, device, program_sha256)

    monkeypatch.setattr(session, "find_compiled", counted)
    return calls


def _count_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each validation of run.yaml and each device lookup: the real functions, wrapped where np run reaches them."""
    import np_optimizer.devices
    from np_optimizer.config import loader
    from np_optimizer.devices import catalog
    from np_optimizer.runner import run

    calls: list[str] = []
    real_check, real_device = loader.check_experiment_config, catalog.get_device

    def check(*args: Any, **kwargs: Any) -> Any:
        calls.append("config")
        return real_check(*args, **kwargs)

    def device(name: str) -> Any:
        calls.append("device")
        return real_device(name)

    monkeypatch.setattr(loader, "check_experiment_config", check)
    for module in (catalog, np_optimizer.devices, run):
        monkeypatch.setattr(module, "get_device", device)
    return calls


def _rounds(exp: Path) -> list[dict[str, Any]]:
    return list(json.loads((exp / "report.json").read_text())["profile"]["results"])


def _assert_profiled_what_the_job_compiled(exp: Path, round_: dict[str, Any]) -> None:
    job = json.loads((exp / round_["job"] / "job.json").read_text())
    folder = exp / round_["compile"]["folder"]
    on_disk = json.loads((folder / "compile.json").read_text())
    assert round_["status"] == "SUCCESS", round_.get("error")
    assert round_["compile"]["reused"] == "job folder"  # made before the round, not lowered again
    assert round_["timings"]["compile_s"] == 0.0
    assert folder == exp / round_["job"] / "artifacts" / f"compiled_{round_['device']}"
    assert round_["compile"]["cache"]["key"] == job["compile"]["compile_key"] == on_disk["compile_key"]
    assert round_["compile"]["pte_bytes"] == job["compile"]["pte_bytes"]
    assert sha256_file(folder / round_["compile"]["pte_file"]) == job["compile"]["pte_sha256"] == on_disk["pte_sha256"]
    metrics = {m["metric_type"]: m["value"] for m in round_["metrics"]}  # mlia on a CPU: the job's own counts
    assert metrics["MACS"] == job["output"]["macs"] and metrics["PARAMS"] == job["output"]["params"]


@pytest.mark.np_run
def test_np_run_profiles_the_compiled_program_its_jobs_handed_over(workspace: Path, run_np,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    exp = make_project(workspace, "handover", run_yaml=GO_PROFILED)
    lookups, loads = _count_lookups(monkeypatch), _count_loads(monkeypatch)
    result = run_np("run", "--json", cwd=exp)
    assert result.exit_code == 0, result.stderr
    assert lookups == []  # every listed checkpoint was compiled by its job in this run and handed over
    assert sorted(loads) == ["config", "device"]  # run.yaml validated once, the device looked up once
    rounds = _rounds(exp)
    assert [r["checkpoint"] for r in rounds] == ["INPUT_MODEL", "GRAPH_OPTIMIZE"]
    for round_ in rounds:
        _assert_profiled_what_the_job_compiled(exp, round_)

    again = run_np("run", "--retry", "--json", cwd=exp)  # nothing compiled now: the jobs' compilations are found
    assert again.exit_code == 0, again.stderr
    assert {j["status"] for j in again.json["jobs"]} == {"reused"}
    assert lookups == ["00_input_model", "01_graph_optimize"]
    for round_ in _rounds(exp):
        _assert_profiled_what_the_job_compiled(exp, round_)
