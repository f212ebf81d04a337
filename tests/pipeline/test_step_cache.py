"""The step cache across experiments, on the MLP with real torch, PT2E and ExecuTorch: a second experiment with the
same run.yaml takes every job from the cache (the same bytes as computing them), np status / np report / np cache say
so, a damaged entry is a warned miss, and np run --force computes again, on both backends, with and without a
calibration dataset, and with advanced_quantize."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import make_project

pytestmark = pytest.mark.np_run

# No profile: section (profiling is not under test): INPUT_MODEL and the final checkpoint are still lowered.
_GO_GQ = "version: \"1.0\"\nsteps:\n- graph_optimize: null\n- graph_quantize:\n  - scheme: W8-A8\n"
_AQ_GO_GQ = ("version: \"1.0\"\nsteps:\n- advanced_quantize:\n  - algorithm: AWQ\n    scheme: W4-A8_dynamic\n"
             "- graph_optimize: null\n- graph_quantize:\n  - scheme: W8-A8\n")
_DETAIL = "detail:\n  evaluation:\n    num_samples: 2\n  graph_quantize[0]:\n    calibration:\n      num_samples: 4\n"
_AQ_DETAIL = _DETAIL + "  advanced_quantize[0]:\n    parameters:\n      calibration:\n        num_samples: 4\n"


@pytest.fixture
def step_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty step cache of the test's own: what it computes and reuses is its own."""
    folder = tmp_path / "steps"
    monkeypatch.setenv("NP_STEP_CACHE_DIR", str(folder))
    return folder


def _checkpoints(exp: Path) -> dict[str, str]:
    return {p.parent.parent.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(exp.glob("[0-9][0-9]_*/artifacts/model.pt2"))}


def _jobs(exp: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(exp.glob("[0-9][0-9]_*/job.json"))}


def _second(exp: Path, name: str) -> Path:
    """Another experiment of the same project with the first one's run.yaml and run.detail.yaml."""
    from np_optimizer import api

    other = Path(api.experiments_create(steps="go,gq", name=name, project=str(exp.parent)).path)
    for file in ("run.yaml", "run.detail.yaml"):
        if (exp / file).is_file():
            shutil.copy(exp / file, other / file)
    return other


def _reused_then_forced(run_np, exp: Path) -> tuple[Path, dict[str, str]]:
    """Run `exp`, then a second experiment with its files (every job from the cache), then that one with --force
    (every job computed again): the three give the same bytes for every checkpoint."""
    assert run_np("run", "--json", cwd=exp).exit_code == 0
    first = _checkpoints(exp)
    second = _second(exp, "experiment_02")
    result = run_np("run", "--json", cwd=second)
    assert result.exit_code == 0, result.stdout
    jobs = _jobs(second)
    assert {j["status"] for j in jobs.values()} == {"reused"}
    for name, job in jobs.items():
        assert job["reused_from"]["experiment"] == exp.name and job["reused_from"]["job"] == name
        assert job["output"]["sha256"] == first[name]
    assert _checkpoints(second) == first
    forced = run_np("run", "--force", "--json", cwd=second)
    assert forced.exit_code == 0, forced.stdout
    assert {j["status"] for j in _jobs(second).values()} == {"success"}
    assert not any("reused_from" in j for j in _jobs(second).values())
    assert _checkpoints(second) == first  # computing again gives the bytes the cache gave
    return second, first


def test_reused_steps_are_the_computed_bytes_on_xnnpack_with_calibration_data_and_aq(
        run_np, workspace: Path, tmp_path: Path, step_cache: Path) -> None:
    import numpy as np

    data = tmp_path / "calib"
    data.mkdir()
    for index in range(4):
        np.save(data / f"{index}.npy", np.random.default_rng(index).standard_normal((1, 64)).astype(np.float32))
    exp = make_project(workspace, "aq_pi", steps="aq,go,gq", run_yaml=_AQ_GO_GQ, detail_yaml=_AQ_DETAIL,
                       calibration=data)
    second, first = _reused_then_forced(run_np, exp)
    assert set(first) == {"00_input_model", "01_advanced_quantize", "02_graph_optimize", "03_graph_quantize"}
    # the calibration data is part of the key: changed in place, the steps that read it are computed again
    (copied, *_) = sorted((exp.parent / "data" / "calibration").glob("*.npy"))
    np.save(copied, np.ones((1, 64), dtype=np.float32))
    third = _second(exp, "experiment_03")
    assert run_np("run", "--json", cwd=third).exit_code == 0
    statuses = {name: job["status"] for name, job in _jobs(third).items()}
    assert statuses["00_input_model"] == "reused" and statuses["01_advanced_quantize"] == "success"


def test_reuse_on_ethos_u_without_calibration_data_status_report_and_a_damaged_entry(
        run_np, workspace: Path, step_cache: Path) -> None:
    exp = make_project(workspace, "mlp_npu", device="alif_e8", run_yaml=_GO_GQ, detail_yaml=_DETAIL)
    second, first = _reused_then_forced(run_np, exp)
    # np cache ls lists the three entries, each with the job that made it and its checkpoint's sha256
    listing = run_np("cache", "ls", "--json").json
    assert sorted(e["output_sha256"] for e in listing["steps"]) == sorted(first.values())
    assert {e["made_in"] for e in listing["steps"]} == {f"mlp_npu/experiment_01/{n}" for n in first}
    assert listing["references"] >= 1 and listing["references_bytes"] > 0  # INPUT_MODEL's outputs, beside the steps
    # a damaged entry (its checkpoint changed) is discarded with a warning naming it, and the step computed again
    quantize = next(e for e in listing["steps"] if e["step_type"] == "graph_quantize")
    (Path(quantize["folder"]) / "model.pt2").write_bytes(b"not a checkpoint")
    third = _second(exp, "experiment_03")
    result = run_np("run", cwd=third)
    assert result.exit_code == 0
    log = (third / "logs" / "execution.log").read_text()
    assert f"A damaged step cache entry ({quantize['folder']}) was discarded" in log
    statuses = {name: job["status"] for name, job in _jobs(third).items()}
    assert statuses == {"00_input_model": "reused", "01_graph_optimize": "reused", "02_graph_quantize": "success"}
    assert _checkpoints(third) == first
    # np status and np report name the entry each reused job came from
    status = run_np("status", "--json", cwd=third).json
    reused = {j["name"]: j["reused_from"]["key"] for j in status["jobs"] if j.get("reused_from")}
    assert set(reused) == {"00_input_model", "01_graph_optimize"}
    table = " ".join(run_np("status", cwd=third).stdout.replace("│", " ").split())  # cells may wrap
    assert f"reused from the step cache {reused['01_graph_optimize'][:12]}" in table
    notices = run_np("report", "--json", cwd=third).json
    text = json.dumps(notices)
    assert f"01_graph_optimize: reused from the step cache {reused['01_graph_optimize'][:12]}" in text
    # run.detail.yaml's reuse_steps: false computes every step, as --force does (and is not part of any key)
    fourth = _second(exp, "experiment_04")
    (fourth / "run.detail.yaml").write_text(_DETAIL + "  reuse_steps: false\n")
    assert run_np("run", "--json", cwd=fourth).exit_code == 0
    assert {j["status"] for j in _jobs(fourth).values()} == {"success"} and _checkpoints(fourth) == first
    # np cache prune --kind steps empties it; the next run computes and stores again
    pruned = run_np("cache", "prune", "--kind", "steps", "--json").json
    assert pruned["removed_steps"] == 3 and pruned["removed_compiled"] == 0
    assert not any((step_cache / "references").glob("??/*"))  # INPUT_MODEL's reference outputs went with them
    emptied = run_np("cache", "ls", "--json").json
    assert emptied["steps"] == [] and emptied["references"] == 0


def test_a_reused_graph_optimize_hands_its_layer_map_to_the_step_computed_after_it(run_np, cpu_experiment: Path) -> None:
    """sample_cpu's GO folds each BatchNorm into its conv (changes.module_map): taken from the cache (the session's:
    whichever test ran sample_cpu first computed it), its map still reaches a GQ that is computed (a calibration
    size no other test uses), whose per-layer SNR names the folded layers by their conv."""
    assert run_np("run", "--json", cwd=cpu_experiment).exit_code == 0
    second = _second(cpu_experiment, "experiment_02")
    (second / "run.detail.yaml").write_text("detail:\n  graph_quantize[0]:\n    calibration:\n      num_samples: 5\n")
    assert run_np("run", "--json", cwd=second).exit_code == 0
    jobs = _jobs(second)
    assert jobs["01_graph_optimize"]["status"] == "reused" and jobs["02_graph_quantize"]["status"] == "success"
    folded = jobs["01_graph_optimize"]["changes"]["module_map"]
    assert folded == _jobs(cpu_experiment)["01_graph_optimize"]["changes"]["module_map"]
    assert folded.get("block1.bn1") == "block1.conv1"
    numerics = json.loads((second / "02_graph_quantize" / "artifacts" / "layers_snr.json").read_text())
    assert numerics["module_map_from_input"] == folded
    # INPUT_MODEL's reference outputs were stored beside the steps (pipeline/reference_cache.py): a run that computes
    # a step after a reused INPUT_MODEL reads them instead of running INPUT_MODEL again
    import os

    references = Path(os.environ["NP_STEP_CACHE_DIR"]) / "references"
    assert any(references.glob("??/*/taps.pt")), references


def test_folder_digest_follows_content_not_bytecode(tmp_path: Path) -> None:
    """The calibration data's and a package model's digest: a file changed in place changes it, the bytecode cache
    that importing the package writes beside it does not (else a second run would never match the first)."""
    from np_optimizer.pipeline.step_cache import folder_digest

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "model.py").write_text("W = 1\n")
    before = folder_digest(tmp_path / "pkg")
    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"\x00bytecode")
    assert folder_digest(tmp_path / "pkg") == before
    (tmp_path / "pkg" / "model.py").write_text("W = 2\n")
    assert folder_digest(tmp_path / "pkg") != before
