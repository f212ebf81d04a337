"""The Profiler inside np run and np profile: selection, MLIA numbers, reuse, concurrency, bad checkpoints."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from np_optimizer.errors import EXIT_FAILED, EXIT_USAGE
from tests.helpers import (
    FinishedRun,
    assert_unchanged,
    copy_workspace,
    make_project,
    run_here,
    run_np_subprocess,
    tree_digest,
)

GO_GQ = 'version: "1.0"\nsteps:\n- graph_optimize: null\n- graph_quantize:\n  - scheme: W8-A8\n'


@pytest.fixture(scope="module")
def npu_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The MLP on alif_e8 (Ethos-U85-256), GO + GQ W8-A8, profiled with mlia; run once for the module. Tests only read
    it; a test that profiles or reruns takes a copy (`copy_workspace`)."""
    from np_optimizer import api

    root = tmp_path_factory.mktemp("npu") / "ws"
    api.workspace_init(root)
    exp = make_project(root, "mlp_npu", device="alif_e8")
    run_here(exp)
    before = tree_digest(root)
    yield exp
    assert_unchanged(root, before)


def _report(exp: Path) -> dict:
    return json.loads((exp / "report.json").read_text())


@pytest.mark.np_run
def test_npu_profile_gives_full_mlia_set(npu_run: Path) -> None:
    results = {r["checkpoint"]: r for r in _report(npu_run)["profile"]["results"]}
    assert list(results) == ["INPUT_MODEL", "GRAPH_OPTIMIZE", "GRAPH_QUANTIZE"]
    for result in results.values():
        metrics = {m["metric_type"]: m for m in result["metrics"]}
        assert {"LATENCY", "MEMORY", "MODEL_WEIGHT_MEMORY", "MACS", "PARAMS"} <= set(metrics)
        assert metrics["LATENCY"]["value"] > 0 and metrics["LATENCY"]["unit"] == "ms"
        provenance = result["provenance"]
        assert provenance["tool"] == "mlia" and provenance["target_profile"] == "ethos-u85-256"
        assert provenance["core_clock_hz"] == 1e9 and provenance["tool_version"] == "0.12.2"
        assert result["artifacts"]["per_layer"] and (npu_run / result["artifacts"]["per_layer"]).is_file()
    assert "quantized by MLIA" in results["INPUT_MODEL"]["provenance"]["estimated_input"]
    assert any("float" in n for n in results["INPUT_MODEL"]["notices"])
    # its Vela rows keep TOSA names, and the warning says why: MLIA compiled it, not np
    assert any("MLIA quantized and compiled this float checkpoint itself" in w
               for w in results["INPUT_MODEL"]["warnings"]), results["INPUT_MODEL"]["warnings"]
    assert results["GRAPH_QUANTIZE"]["provenance"]["estimated_input"].startswith("compiled .tosa")
    assert not results["GRAPH_QUANTIZE"]["notices"]


@pytest.mark.np_run
def test_mlia_numbers_equal_the_mlia_cli(npu_run: Path, tmp_path: Path) -> None:
    result = next(r for r in _report(npu_run)["profile"]["results"] if r["checkpoint"] == "GRAPH_QUANTIZE")
    tosa = sorted((npu_run / result["compile"]["folder"] / "ethos_u").glob("output_tag*.tosa"))
    assert len(tosa) == 1
    mlia = Path(sys.executable).with_name("mlia")
    proc = subprocess.run([str(mlia), "check", str(tosa[0]), "--target-profile", "ethos-u85-256", "--backend", "vela",
                           "--performance", "--json", "--output-dir", str(tmp_path)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    cli = {m["name"]: m.get("value") for m in json.loads(proc.stdout)["results"][0]["metrics"]}
    ours = {m["metric_type"]: m["value"] for m in result["metrics"]}
    assert ours["LATENCY"] == pytest.approx(cli["inference_time"], rel=1e-12)
    memory_bytes = sum(cli[k] for k in ("sram_memory_used", "dram_memory_used", "on_chip_flash_memory_used",
                                        "off_chip_flash_memory_used"))
    assert ours["MEMORY"] == pytest.approx(memory_bytes / 2**20, rel=1e-12)
    assert ours["MACS"] == cli["nn_macs"]
    assert ours["MODEL_WEIGHT_MEMORY"] == cli["model_weight_memory"]


@pytest.mark.np_run
def test_reuse_force_and_corrupt_cache(npu_run: Path, run_np, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exp = copy_workspace(npu_run, tmp_path)
    monkeypatch.setenv("NP_CACHE_DIR", str(tmp_path / "cache"))  # shared by the commands below, empty at first
    first = run_np("profile", "graph_quantize", "--json", cwd=exp)
    assert first.exit_code == 0 and first.json["reused"] is False
    key = first.json["results"][0]["cache"]["key"]
    second = run_np("profile", "GRAPH_QUANTIZE", "--json", cwd=exp)
    assert second.json["reused"] is True and second.json["results"][0]["cache"]["key"] == key
    assert second.json["results"][0]["metrics"] == first.json["results"][0]["metrics"]
    assert "Reused an earlier mlia estimate" in second.json["results"][0]["notices"][0]
    forced = run_np("profile", "graph_quantize", "--force", "--json", cwd=exp)
    assert forced.json["reused"] is False and forced.json["results"][0]["cache"]["forced"] is True
    entry = next((tmp_path / "cache" / "estimates").rglob(f"{key}.json"))
    entry.write_text("{ not json")
    healed = run_np("profile", "graph_quantize", "--json", cwd=exp)
    assert healed.exit_code == 0 and healed.json["reused"] is False
    assert json.loads(entry.read_text())["key"] == key  # recomputed and stored again
    assert any("corrupt cached estimate" in w for w in healed.json["results"][0]["warnings"])
    rounds = [r for r in _report(exp)["post_hoc"] if r["checkpoint"] == "GRAPH_QUANTIZE"]
    assert len(rounds) == 4 and all(r["trigger"] == "POSTHOC" for r in rounds)
    assert run_np("run", "--retry", cwd=exp).exit_code == 0  # inline: the estimates above are reused
    assert all(r["cache"]["reused"] for r in _report(exp)["profile"]["results"] if r["checkpoint"] == "GRAPH_QUANTIZE")
    assert run_np("run", "--retry", "--force", cwd=exp).exit_code == 0
    inline = _report(exp)["profile"]["results"]
    assert inline and all(r["cache"]["forced"] and not r["cache"]["reused"] for r in inline)


@pytest.mark.np_run
def test_cached_profile_and_report_do_not_import_torch(npu_run: Path, tmp_path: Path, module_cache: Path) -> None:
    exp = copy_workspace(npu_run, tmp_path, cache=module_cache)  # the run's estimates, in this test's own cache
    run_np_subprocess("profile", "graph_quantize", cwd=exp)  # make sure an estimate is cached
    code = (
        "import sys\n"
        "from np_optimizer.cli.main import main\n"
        "rc = main(['profile', 'graph_quantize', '--json'])\n"
        "rc2 = main(['report', '--json'])\n"
        "print('HEAVY', [m for m in ('torch', 'executorch', 'torchao') if m in sys.modules], rc, rc2)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=exp, capture_output=True, text=True, timeout=120)
    assert "HEAVY [] 0 0" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert '"reused": true' in proc.stdout


@pytest.mark.np_run
def test_selective_profiling_and_case_insensitive_names(workspace: Path, run_np) -> None:
    exp = make_project(workspace, "selective", run_yaml=GO_GQ + "profile:\n- input_model\n- Output_Model\n")
    result = run_np("run", "--json", cwd=exp)
    assert result.exit_code == 0, result.stderr
    assert [p["checkpoint"] for p in result.json["profile"]] == ["INPUT_MODEL", "GRAPH_QUANTIZE"]
    report = _report(exp)
    assert [r["checkpoint"] for r in report["profile"]["results"]] == ["INPUT_MODEL", "GRAPH_QUANTIZE"]
    assert report["profile"]["listed"] == ["INPUT_MODEL", "OUTPUT_MODEL"]
    go_job = json.loads((exp / "01_graph_optimize" / "job.json").read_text())
    assert go_job["profile"] == []  # omitted from the list: not profiled
    gq_job = json.loads((exp / "02_graph_quantize" / "job.json").read_text())
    assert [p["trigger"] for p in gq_job["profile"]] == ["RUN_INLINE"]
    input_job = json.loads((exp / "00_input_model" / "job.json").read_text())
    assert input_job["profile"][0]["checkpoint"] == "INPUT_MODEL"  # INPUT_MODEL's result in its own record
    log = (exp / "logs" / "execution.log").read_text()
    assert "Compiling: graph_optimize" not in log and "Profiling: graph_quantize" in log


@pytest.mark.np_run
def test_no_profile_section_skips_profiling(workspace: Path, run_np) -> None:
    exp = make_project(workspace, "noprofile", run_yaml=GO_GQ)
    result = run_np("run", "--json", cwd=exp)
    assert result.exit_code == 0 and result.json["profile"] == []
    assert _report(exp)["profile"] == {"enabled": False, "listed": [], "results": []}
    report = run_np("report", cwd=exp)
    assert "no profile section" in report.stderr
    assert "Profiling" not in (exp / "logs" / "execution.log").read_text().split("[Phase")[-1].split("\n")[0]


def test_profile_n_options_reach_the_nth_checkpoint_in_the_plan(workspace: Path, run_np) -> None:
    detail = "detail:\n  profile[1]:\n    num_executions: 7\n    timeout: 12\n"
    exp = make_project(workspace, "opts", device="host", detail_yaml=detail)
    plan = run_np("run", "--dry-run", "--json", cwd=exp).json["plan"]["profile"]
    assert [p["method"] for p in plan] == ["on-device"] * 3
    assert plan[0]["options"]["num_executions"] == 30
    assert plan[1]["options"] == {"num_executions": 7, "timeout": 12, "warmup": 3,
                                    "num_layer_executions": 10, "time_limit": 600}
    assert plan[2]["options"]["num_executions"] == 30


@pytest.mark.np_run
def test_concurrent_np_profile_loses_no_round(mlp_pi_run: FinishedRun, tmp_path: Path) -> None:
    exp = copy_workspace(mlp_pi_run.experiment, tmp_path, cache=mlp_pi_run.cache)  # np run's finished experiment
    procs = [subprocess.Popen([sys.executable, "-m", "np_optimizer", "profile", "--force", "--json"], cwd=exp,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-500:] for o in outputs]
    ids = {r["measurement_id"] for out, _ in outputs for r in json.loads(out)["results"]}
    rounds = _report(exp)["post_hoc"]
    assert len(ids) == 6 and ids == {r["measurement_id"] for r in rounds}


@pytest.mark.np_run
def test_missing_or_corrupt_checkpoint_is_a_clear_error(mlp_pi_run: FinishedRun, tmp_path: Path, run_np) -> None:
    exp = copy_workspace(mlp_pi_run.experiment, tmp_path, cache=mlp_pi_run.cache)  # np run's finished experiment
    before = _report(exp)
    checkpoint = exp / "02_graph_quantize" / "artifacts" / "model.pt2"
    checkpoint.write_bytes(checkpoint.read_bytes()[:100])  # truncated
    corrupt = run_np("profile", "graph_quantize", "--json", cwd=exp)
    assert corrupt.exit_code == EXIT_FAILED
    assert "does not match the sha256" in corrupt.json["results"][0]["error"]["message"]
    checkpoint.unlink()
    missing = run_np("profile", "graph_quantize", "--json", cwd=exp)
    assert missing.exit_code == EXIT_FAILED and "is missing" in missing.json["results"][0]["error"]["message"]
    after = _report(exp)
    assert after["pipeline"] == before["pipeline"] and after["profile"] == before["profile"]
    assert [r["status"] for r in after["post_hoc"]] == ["FAILED", "FAILED"]
    table = run_np("report", cwd=exp)
    assert "hidden: failed 2" in table.stdout


@pytest.mark.np_run
def test_profile_ids_and_options_are_checked(mlp_pi_run: FinishedRun, tmp_path: Path, run_np) -> None:
    exp = copy_workspace(mlp_pi_run.experiment, tmp_path, cache=mlp_pi_run.cache)  # np run's finished experiment
    assert run_np("profile", "NOPE", cwd=exp).exit_code == 3
    by_job = run_np("profile", "01_graph_optimize", "--json", cwd=exp)
    assert by_job.exit_code == 0 and by_job.json["results"][0]["checkpoint"] == "GRAPH_OPTIMIZE"
    assert run_np("profile", "--profile-opt", "num_executions", cwd=exp).exit_code == EXIT_USAGE
    assert run_np("profile", "--profile-opt", "num_executions=2.5", cwd=exp).exit_code == EXIT_USAGE
    assert run_np("profile", "--profile-opt", "num_executions=5", cwd=exp).exit_code == EXIT_USAGE  # mlia: static
    unsupported = run_np("profile", "-d", "alif_e8", "--method", "on-device", "--json", cwd=exp)
    assert unsupported.exit_code == 3 and unsupported.json["code"] == "NP-PRF-422"
    other = run_np("profile", "graph_optimize", "-d", "alif_e8", "--json", cwd=exp)
    assert other.exit_code == 0 and other.json["results"][0]["device"] == "alif_e8"
    assert other.json["results"][0]["provenance"]["target_profile"] == "ethos-u85-256"
    # Quantized for XNNPACK, the checkpoint has no Ethos-U program: a failed round that says why, not a made-up estimate
    foreign = run_np("profile", "graph_quantize", "-d", "alif_e8", "--json", cwd=exp)
    failed = foreign.json["results"][0]
    assert foreign.exit_code == 1 and failed["status"] == "FAILED"
    assert failed["error"]["code"] == "NP-PRF-422" and "delegated none" in failed["error"]["message"]
    assert not any(m["metric_type"] == "LATENCY" for m in failed["metrics"])
