"""The compile cache: compiled programs reused across devices with the same backend, experiments and unchanged
steps; safe under concurrent writers and damaged entries. Real lowerings of a small MLP; `NP_FAULT=no-lowering`
makes any lowering attempt fail, so a command that succeeds under it compiled nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from np_optimizer.compile.cache import ENTRY_FILE, CompileCache
from tests.helpers import assert_unchanged, copy_workspace, make_project, tree_digest

pytestmark = pytest.mark.np_run  # every test here runs np run, itself or through a module fixture


@pytest.fixture(scope="module")
def compiled_run(tmp_path_factory: pytest.TempPathFactory, module_cache: Path) -> Iterator[Path]:
    """`np run` (GO + GQ, profiling every checkpoint by mlia) of an MLP on raspberry_pi_5, with the module's own
    compile cache. GO changes nothing on an MLP (no BatchNorm to fold), so its .pt2 equals INPUT_MODEL's."""
    from np_optimizer.cli.main import main

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NP_COMPILE_CACHE_DIR", str(module_cache / "compiled"))
        ws = tmp_path_factory.mktemp("cc") / "ws"
        from np_optimizer import api

        api.workspace_init(ws)
        exp = make_project(ws, "mlp_project", model="mlp", steps="go,gq")
        patch.chdir(exp)
        assert main(["run"]) == 0
    digest = tree_digest(exp.parent.parent)
    yield exp
    assert_unchanged(exp.parent.parent, digest)


def _job(exp: Path, name: str) -> dict:
    return json.loads((exp / name / "job.json").read_text())


def _use_cache_copy(module_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the fixture's compile cache, as this test's $NP_COMPILE_CACHE_DIR."""
    import shutil

    folder = tmp_path / "compiled"
    shutil.copytree(module_cache / "compiled", folder)
    monkeypatch.setenv("NP_COMPILE_CACHE_DIR", str(folder))
    return folder


def test_unchanged_go_step_reuses_its_inputs_compile(compiled_run: Path) -> None:
    input_model, go = _job(compiled_run, "00_input_model"), _job(compiled_run, "01_graph_optimize")
    assert go["output"]["sha256"] == input_model["output"]["sha256"]  # the pass changed nothing
    assert input_model["compile"]["cache"]["status"] == "miss"
    assert go["compile"]["cache"]["status"] == "hit"
    assert go["compile"]["cache"]["key"] == input_model["compile"]["compile_key"]
    assert go["compile"]["pte_sha256"] == input_model["compile"]["pte_sha256"]


def test_posthoc_profile_on_host_compiles_nothing(compiled_run: Path, module_cache: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch, run_np) -> None:
    exp = copy_workspace(compiled_run, tmp_path)
    _use_cache_copy(module_cache, tmp_path, monkeypatch)
    monkeypatch.setenv("NP_FAULT", "no-lowering")  # a lowering attempt would fail the round
    result = run_np("profile", "--method", "on-device", "-d", "host", "--profile-opt", "num_executions=3", cwd=exp)
    assert result.exit_code == 0, result.stdout + result.stderr
    report = json.loads((exp / "report.json").read_text())
    rounds = [r for r in report["post_hoc"] if r["device"] == "host"]
    assert len(rounds) == 3 and all(r["status"] == "SUCCESS" for r in rounds)
    assert {r["compile"]["reused"] for r in rounds} == {"hit"}
    assert all(r["compile"]["cache"]["compiled_for"] == "raspberry_pi_5" for r in rounds)
    compiled = json.loads((exp / "02_graph_quantize" / "artifacts" / "compiled_host" / "compile.json").read_text())
    assert compiled["device"] == "host" and compiled["cache"]["status"] == "hit"
    log = (exp / "logs" / "execution.log").read_text()
    assert "using the compiled checkpoint from the compile cache entry" in log and "s of lowering" in log


def test_second_experiment_reuses_input_models_compile(compiled_run: Path, module_cache: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch, run_np) -> None:
    exp = copy_workspace(compiled_run, tmp_path)
    _use_cache_copy(module_cache, tmp_path, monkeypatch)
    ws = exp.parent.parent
    made = run_np("experiments", "create", "--steps", "go", "-p", "mlp_project", cwd=ws)
    assert made.exit_code == 0, made.stderr
    second = exp.parent / "experiment_02"
    monkeypatch.setenv("NP_FAULT", "no-lowering")
    result = run_np("run", cwd=second)
    assert result.exit_code == 0, result.stdout + result.stderr
    for job in ("00_input_model", "01_graph_optimize"):
        assert _job(second, job)["compile"]["cache"]["status"] == "hit"


_WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from np_optimizer.compile import compile_checkpoint
    from np_optimizer.devices import get_device
    result = compile_checkpoint(Path(sys.argv[1]), get_device("raspberry_pi_5"), Path(sys.argv[2]))
    print(result.status, result.pte_sha256, result.cache.status if result.cache else None)
""")


def test_concurrent_writers_share_one_intact_entry(compiled_run: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "compiled"
    env = {**os.environ, "NP_COMPILE_CACHE_DIR": str(folder)}
    program = compiled_run / "02_graph_quantize" / "artifacts" / "model.pt2"
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(program), str(tmp_path / f"out{i}")], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    lines = [out.split() for out, _ in outputs]
    assert {line[0] for line in lines} == {"ok"} and len({line[1] for line in lines}) == 1
    entries = CompileCache(folder).entries()
    assert len(entries) == 1
    assert not [p for p in folder.iterdir() if p.name.startswith(".tmp-")]  # no staging folder left behind
    monkeypatch.setenv("NP_COMPILE_CACHE_DIR", str(folder))
    hit, warning = CompileCache().get(entries[0].key)
    assert hit is not None and warning is None


@pytest.mark.parametrize("damage", ["random-manifest", "changed-pte", "missing-pte", "list-manifest", "file-in-place"])
def test_damaged_entry_is_a_warned_miss_and_replaced(compiled_run: Path, module_cache: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch, damage: str,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    from np_optimizer.compile import compile_checkpoint
    from np_optimizer.devices import get_device

    folder = _use_cache_copy(module_cache, tmp_path, monkeypatch)
    key = _job(compiled_run, "02_graph_quantize")["compile"]["compile_key"]
    entry = CompileCache().folder(key)
    pte_sha = _job(compiled_run, "02_graph_quantize")["compile"]["pte_sha256"]
    if damage == "random-manifest":
        (entry / ENTRY_FILE).write_bytes(os.urandom(300))
    elif damage == "changed-pte":
        (entry / "model.pte").write_bytes((entry / "model.pte").read_bytes()[:-10] + b"0123456789")
    elif damage == "missing-pte":
        (entry / "model.pte").unlink()
    elif damage == "list-manifest":
        (entry / ENTRY_FILE).write_text("[1, 2, 3]")
    else:
        import shutil

        shutil.rmtree(entry)
        entry.write_text("not a folder")
    program = compiled_run / "02_graph_quantize" / "artifacts" / "model.pt2"
    with caplog.at_level("WARNING", logger="np"):
        result = compile_checkpoint(program, get_device("raspberry_pi_5"), tmp_path / "out")
    assert result.status == "ok" and result.cache and result.cache.status == "miss"
    assert result.pte_sha256 == pte_sha  # compiled again, to the same bytes
    assert any("damaged compile cache entry" in r.getMessage() for r in caplog.records)
    again = compile_checkpoint(program, get_device("raspberry_pi_5"), tmp_path / "out2")
    assert again.cache and again.cache.status == "hit"  # the damaged entry was replaced by a whole one
    assert folder.is_dir()


def test_cache_ls_and_prune(compiled_run: Path, module_cache: Path, tmp_path: Path,
                            monkeypatch: pytest.MonkeyPatch, run_np) -> None:
    _use_cache_copy(module_cache, tmp_path, monkeypatch)
    listing = run_np("cache", "ls", "--json")
    assert listing.exit_code == 0
    data = listing.json
    assert len(data["compiled"]) == 2  # INPUT_MODEL (= GRAPH_OPTIMIZE) and GRAPH_QUANTIZE
    assert all(e["size_bytes"] > 0 and e["backend"] == "xnnpack" for e in data["compiled"])
    table = run_np("cache", "ls")
    assert "Compiled programs (2" in table.stdout and "xnnpack" in table.stdout
    kept = run_np("cache", "prune", "--older-than", "30d", "--json")
    assert kept.exit_code == 0 and kept.json["removed_compiled"] == 0 and kept.json["kept_compiled"] == 2
    bad = run_np("cache", "prune", "--older-than", "soon")
    assert bad.exit_code == 2 and "NP-CCH-400" in bad.stderr and "30d" in bad.stderr
    pruned = run_np("cache", "prune", "--kind", "compiled", "--json")
    assert pruned.json["removed_compiled"] == 2 and pruned.json["freed_bytes"] > 0
    assert run_np("cache", "ls", "--json").json["compiled"] == []
