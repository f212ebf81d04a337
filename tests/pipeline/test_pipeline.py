"""np run end to end on small models: real torch.export, PT2E, ExecuTorch lowering; records, logs, --retry, kills."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from np_optimizer.errors import EXIT_FAILED
from tests.helpers import FinishedRun, copy_workspace, make_project, run_np_subprocess

# own_steps: its runs' records, logs, retries and kills are of steps that ran, and a GO pass it patches must reach
# no other test
pytestmark = pytest.mark.own_steps

LOG_LINE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}\.\d{2} \[(INFO |WARN |ERROR|DEBUG|DONE )\] \[\w+\] ")


@pytest.fixture(scope="module")
def finished_run(mlp_pi_run: FinishedRun) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """One np run of the MLP on raspberry_pi_5 (GO + GQ W8-A8), in a subprocess like a user's (conftest's
    `mlp_pi_run`, shared with other modules). Tests only read it; a test that changes the experiment takes `own_run`,
    a copy."""
    return mlp_pi_run.experiment, mlp_pi_run.proc


@pytest.fixture
def own_run(mlp_pi_run: FinishedRun, tmp_path: Path) -> Path:
    """A copy of the finished run's workspace, and of its estimate cache as this test's own, for a test that changes
    them."""
    return copy_workspace(mlp_pi_run.experiment, tmp_path, cache=mlp_pi_run.cache)


@pytest.mark.np_run
def test_run_records_every_job(finished_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    exp, _ = finished_run
    jobs = {p.parent.name: json.loads(p.read_text()) for p in exp.glob("[0-9][0-9]_*/job.json")}
    assert set(jobs) == {"00_input_model", "01_graph_optimize", "02_graph_quantize"}
    for name, job in jobs.items():
        assert job["status"] == "success" and job["duration_s"] > 0 and job["started_at"] and job["ended_at"]
        assert len(job["output"]["sha256"]) == 64 and (exp / name / job["output"]["file"]).is_file()
        assert job["compile"]["status"] == "ok" and job["compile"]["delegated_ops"] > 0
    assert jobs["01_graph_optimize"]["input"]["sha256"] == jobs["00_input_model"]["output"]["sha256"]
    assert jobs["02_graph_quantize"]["input"]["sha256"] == jobs["01_graph_optimize"]["output"]["sha256"]
    go = jobs["01_graph_optimize"]["changes"]
    assert {p["pass"] for p in go["passes"]} >= {"fuse_conv_bn", "fold_constants", "remove_dead_code"}
    assert go["before"]["nodes"] >= go["after"]["nodes"] and go["after"]["ops"]
    gq = jobs["02_graph_quantize"]
    assert gq["parameters"]["scheme"] == "W8-A8" and gq["changes"]["quantized_layers"] == 3
    assert gq["fidelity"]["program"]["snr_db"] > 20 and gq["fidelity"]["pte"]["snr_db"] > 20
    assert gq["compile"]["pte_bytes"] < jobs["00_input_model"]["compile"]["pte_bytes"]


@pytest.mark.np_run
def test_report_json_and_meta(finished_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    exp, _ = finished_run
    report = json.loads((exp / "report.json").read_text())
    assert report["experiment"]["status"] == "success"
    assert report["pipeline"]["input_model"]["checkpoint"] == "INPUT_MODEL"
    assert [s["job"] for s in report["pipeline"]["steps"]] == ["01_graph_optimize", "02_graph_quantize"]
    snr = report["pipeline"]["steps"][1]["fidelity"]["program"]["snr_db"]
    assert snr > 20
    assert json.loads((exp / "meta.json").read_text())["status"] == "success"


@pytest.mark.np_run
def test_logs_follow_the_spec_format(finished_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    exp, proc = finished_run
    console = [line for line in proc.stderr.splitlines() if line.strip()]
    for line in console:  # every console line is np's own: a log line or a phase banner, no library noise
        assert LOG_LINE.match(line) or line.startswith("=" * 60) or line.startswith("[Phase "), line
    assert "[Phase 1] Graph extraction" in proc.stderr and "[Phase 4] Profiling" in proc.stderr
    assert "Profiling complete. Results saved to report.json" in proc.stderr
    log = (exp / "logs" / "execution.log").read_text()
    assert "[Profiler] Target: raspberry_pi_5 / executorch / xnnpack" in log
    assert "[Profiler] Compiling: input_model" in log and "[Profiler] Profiling: graph_quantize" in log


@pytest.mark.np_run
def test_the_workspace_stores_no_absolute_path(finished_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    """Tests that change a finished run work on a copy: np's files locate everything relative to the workspace."""
    exp, _ = finished_run
    root = exp.parents[1]
    needles = {str(root).encode(), str(root.resolve()).encode()}
    assert [str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and any(n in p.read_bytes() for n in needles)] == []


@pytest.mark.np_run
def test_retry_reuses_unchanged_steps(own_run: Path, run_np) -> None:
    exp = own_run
    before = {p.parent.name: json.loads(p.read_text())["output"]["sha256"] for p in exp.glob("*/job.json")}
    result = run_np("run", "--retry", "--json", cwd=exp)
    assert result.exit_code == 0, result.stderr
    assert {j["name"]: j["status"] for j in result.json["jobs"]} == {
        "00_input_model": "reused", "01_graph_optimize": "reused", "02_graph_quantize": "reused"}
    run_yaml = exp / "run.yaml"
    run_yaml.write_text(run_yaml.read_text().replace("scheme: W8-A8 ", "scheme: W8-A8_dynamic "))
    changed = run_np("run", "--retry", "--json", cwd=exp)
    statuses = {j["name"]: j["status"] for j in changed.json["jobs"]}
    assert statuses == {"00_input_model": "reused", "01_graph_optimize": "reused", "02_graph_quantize": "success"}
    after = {p.parent.name: json.loads(p.read_text())["output"]["sha256"] for p in exp.glob("*/job.json")}
    assert after["01_graph_optimize"] == before["01_graph_optimize"]
    assert after["02_graph_quantize"] != before["02_graph_quantize"]


@pytest.mark.np_run
def test_killed_run_leaves_readable_records_and_retry_completes(workspace: Path) -> None:
    exp = make_project(workspace, "killed", model="mlp")  # the smallest model: the kill and the retry are the test
    proc = subprocess.Popen([sys.executable, "-m", "np_optimizer", "run"], cwd=exp, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    job = exp / "02_graph_quantize" / "job.json"
    deadline = time.time() + 300
    while time.time() < deadline and not job.exists():
        time.sleep(0.05)
    assert job.exists(), "the run never reached graph_quantize"
    os.killpg(proc.pid, signal.SIGKILL)  # killed mid-step, like a power cut
    proc.wait()
    report = json.loads((exp / "report.json").read_text())  # still valid JSON
    finished = json.loads((exp / "01_graph_optimize" / "job.json").read_text())
    assert finished["status"] == "success"
    assert report["pipeline"]["steps"][0]["status"] == "success"
    status = run_np_subprocess("status", "--json", cwd=exp)
    assert json.loads(status.stdout)["status"] == "interrupted"
    resumed = run_np_subprocess("run", "--retry", "--json", cwd=exp)
    assert resumed.exit_code == 0, resumed.stderr
    jobs = {j["name"]: j["status"] for j in json.loads(resumed.stdout)["jobs"]}
    assert jobs == {"00_input_model": "reused", "01_graph_optimize": "reused", "02_graph_quantize": "success"}


UNTRACEABLE = '''import torch

class Branchy(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # data-dependent Python control flow
            return x * 2
        return x - 1

def build():
    return Branchy(), (torch.randn(1, 8),)
'''


@pytest.mark.np_run
def test_untraceable_model_is_a_clear_error(run_np, workspace: Path, tmp_path: Path) -> None:
    source = tmp_path / "branchy.py"
    source.write_text(UNTRACEABLE)
    exp = make_project(workspace, "branchy", model=f"{source}:build", device="host")
    result = run_np("run", "--json", cwd=exp)
    assert result.exit_code == EXIT_FAILED
    error = result.json["error"]
    assert error["code"] == "NP-MDL-500" and "line 5" in error["message"]
    assert "model/package/branchy.py" in error["message"]  # the project's copy of the file
    job = json.loads((exp / "00_input_model" / "job.json").read_text())
    assert job["status"] == "failed" and job["errors"][0]["code"] == "NP-MDL-500"


@pytest.mark.np_run
def test_wrong_calibration_shapes_are_a_clear_error(run_np, workspace: Path, tmp_path: Path) -> None:
    import numpy as np

    data = tmp_path / "calib"
    data.mkdir()
    np.save(data / "a.npy", np.zeros((1, 32), dtype=np.float32))  # the MLP takes [1, 64]
    refused = run_np("projects", "create", "--name", "badcal", "--model", "mlp", "--device", "raspberry_pi_5",
                     "--calibration-dataset", str(data), "--json", cwd=workspace)
    assert refused.exit_code == 3 and "a.npy" in refused.json["message"]  # a bad dataset is refused up front
    # a project's copy damaged later: the run names the file, and what was made before is kept
    np.save(data / "a.npy", np.zeros((1, 64), dtype=np.float32))
    exp = make_project(workspace, "badcal", calibration=data)
    (copied,) = (exp.parent / "data" / "calibration").glob("*.npy")
    np.save(copied, np.zeros((1, 32), dtype=np.float32))
    result = run_np("run", "--json", cwd=exp)
    assert result.exit_code == EXIT_FAILED
    assert f"{copied.name} has shape (1, 32), the model input is (1, 64)" in result.json["error"]["message"]
    assert json.loads((exp / "00_input_model" / "job.json").read_text())["status"] == "success"  # nothing lost


@pytest.mark.np_run
def test_go_drops_a_pass_that_changes_outputs(run_np, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from np_optimizer.graph import passes
    from np_optimizer.graph.passes import PassResult

    def relu_to_identity(program):  # a wrong "optimization": the outputs change
        changed = False
        program = torch.export.export(program.module(), program.example_inputs[0])
        for node in list(program.graph.nodes):
            if node.op == "call_function" and "relu" in str(node.target):
                node.replace_all_uses_with(node.args[0])
                program.graph.erase_node(node)
                changed = True
        program.graph_module.recompile()
        return PassResult(program, changed)

    monkeypatch.setattr(passes, "PASSES", (("relu_to_identity", relu_to_identity), *passes.PASSES))
    exp = make_project(workspace, "dropped", steps="go")
    result = run_np("run", "--json", cwd=exp)
    assert result.exit_code == 0, result.stderr
    job = json.loads((exp / "01_graph_optimize" / "job.json").read_text())
    outcome = {p["pass"]: p["outcome"] for p in job["changes"]["passes"]}
    assert outcome["relu_to_identity"] == "dropped"
    assert any("relu_to_identity was dropped" in w for w in job["warnings"])
    assert job["fidelity"]["program"]["max_abs_error"] < 1e-4


OUTLIERS = '''import torch

class Outliers(torch.nn.Module):
    """Input feature 0 is 1000x the others: one static int8 scale for the first layer's input wipes out the rest."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.scale = torch.ones(1, 16)
        self.scale[0, 0] = 1000.0
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 32)
        self.fc3 = torch.nn.Linear(32, 4)

    def forward(self, x):
        x = x * self.scale
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))

def build():
    return Outliers().eval(), (torch.randn(1, 16),)
'''


@pytest.mark.np_run
def test_greedy_keeps_the_costliest_layer_float(run_np, workspace: Path, tmp_path: Path) -> None:
    source = tmp_path / "outliers.py"
    source.write_text(OUTLIERS)
    run_yaml = ('version: "1.0"\nsteps:\n- graph_optimize: null\n- graph_quantize:\n  - scheme: W8-A8\n'
                '    automatic_mixed_precision: GREEDY\nprofile:\n- GRAPH_QUANTIZE\n')
    detail = "detail:\n  graph_quantize[0]:\n    amp:\n      target_snr: 40\n"
    exp = make_project(workspace, "greedy", model=f"{source}:build", device="host", steps="go,gq", run_yaml=run_yaml,
                       detail_yaml=detail)
    result = run_np("run", "--profile-method", "mlia", "--json", cwd=exp)
    assert result.exit_code == 0, result.stderr
    amp = json.loads((exp / "02_graph_quantize" / "job.json").read_text())["changes"]["amp"]
    assert amp["float_layers"], amp
    assert amp["float_layers"][0] == "fc1"  # the layer fed by the outlier input costs the most
    # each candidate's per-layer SNR in the fully quantized model (the numbers np report --layers shows) beside it
    layer_snr = {row["module"]: row["layer_snr_db"] for row in amp["sensitivity"]}
    assert set(layer_snr) == {"fc1", "fc2", "fc3"} and all(10 < v < 80 for v in layer_snr.values()), layer_snr
    assert amp["achieved_snr_db"] > amp["snr_all_quantized_db"]
    layers = json.loads((exp / "02_graph_quantize" / "job.json").read_text())["changes"]["layers"]
    assert {row["module"]: row["weight"] for row in layers}["fc1"] == "float"

    # GRAPH_OPTIMIZE is not listed under profile: np run does not lower it; np profile does, when asked
    go_job = json.loads((exp / "01_graph_optimize" / "job.json").read_text())
    assert go_job["compile"] == {} and not list((exp / "01_graph_optimize" / "artifacts").glob("compiled_*"))
    assert go_job["fidelity"]["program"]["snr_identical"] or go_job["fidelity"]["program"]["snr_db"] > 60
    assert "GRAPH_OPTIMIZE is not lowered for host now" in (exp / "logs" / "execution.log").read_text()
    assert "Lowered for host during the run: INPUT_MODEL, GRAPH_QUANTIZE" in run_np("run", "--dry-run", cwd=exp).stdout

    def lowering() -> str:
        return {j["name"]: j["lowering"] for j in run_np("status", "--json", cwd=exp).json["jobs"]}["01_graph_optimize"]

    assert lowering() == "not lowered"
    posthoc = run_np("profile", "GRAPH_OPTIMIZE", "--method", "mlia", "--json", cwd=exp)
    assert posthoc.exit_code == 0, posthoc.stdout + posthoc.stderr
    assert (exp / "01_graph_optimize" / "artifacts" / "compiled_host" / "compile.json").is_file()
    assert lowering() == "ok"


@pytest.mark.np_run
def test_steps_removed_from_run_yaml_are_set_aside(own_run: Path, run_np) -> None:
    exp = own_run
    (exp / "run.yaml").write_text('version: "1.0"\nsteps:\n- graph_quantize:\n  - scheme: W8-A8\n'
                                  'profile:\n- OUTPUT_MODEL\n')
    result = run_np("run", "--retry", "--json", cwd=exp)
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in exp.glob("[0-9][0-9]_*")) == ["00_input_model", "01_graph_quantize"]
    stale = sorted(p.name.rsplit("-", 1)[0] for p in (exp / ".stale").iterdir())
    assert stale == ["01_graph_optimize", "02_graph_quantize"]  # kept, not deleted
    report = json.loads((exp / "report.json").read_text())
    assert [s["job"] for s in report["pipeline"]["steps"]] == ["01_graph_quantize"]
    (exp / "01_graph_quantize" / "job.json").unlink()  # the last step is no longer finished
    output = run_np("profile", "OUTPUT_MODEL", "--json", cwd=exp)
    assert output.exit_code == 3 and "OUTPUT_MODEL is GRAPH_QUANTIZE here" in output.json["message"]
    assert run_np("export", cwd=exp).exit_code == 3  # never an earlier checkpoint in the final one's place
