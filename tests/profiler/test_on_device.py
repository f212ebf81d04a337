"""The on-device (measured) method on `host`, for real: np's compiler makes the .pte, the ExecuTorch runtime runs it in
a fresh subprocess. The MLP it measures is conftest's `models` (helpers.mlp_models), shared with the queue, SSH and
locks tests."""

from __future__ import annotations

import ast
import dataclasses
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from np_optimizer.compile.result import CompileResult, read_compile_record
from np_optimizer.devices import get_device
from np_optimizer.errors import NpError, error_record
from np_optimizer.profiler.methods import get_method
from np_optimizer.profiler.render import metric_lines
from np_optimizer.profiler.request import MethodOutput, ProfileRequest
from np_optimizer.records import ProfileResult
from tests.helpers import ET_VERSION, REPO, MlpModels, raw_document, request_for


def ethos_u_compiled(base: Path) -> tuple[Path, CompileResult]:
    """The MLP quantized for Ethos-U and compiled on alif_e8: a .pte with an EthosUBackend delegate; built once per
    worker, in a folder of its own (not the shared `models` folder, which its fixture checks is left unchanged)."""
    out = base / "compiled_alif_e8"
    record = read_compile_record(out)
    if record is None:
        from np_optimizer.compile import compile_checkpoint
        from np_optimizer.graph.program_io import export_model, save_program
        from np_optimizer.models.zoo import build_builtin
        from np_optimizer.quantize.pt2e import quantize_program

        base.mkdir(parents=True, exist_ok=True)
        model, example = build_builtin("mlp")
        quantized = quantize_program(export_model(model, example), backend="ethos-u", scheme="W8-A8",
                                     target="ethos-u85-256", calibration=[example])
        record = compile_checkpoint(save_program(quantized, base / "mlp_ethos_u_int8.pt2"), get_device("alif_e8"), out)
    assert record.status == "ok" and record.num_delegates == 1 and record.pte_file
    return out, record


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NP_QUEUE_DIR", str(tmp_path / "queue"))


def _profile(request: ProfileRequest) -> MethodOutput:
    return get_method("on-device").profile(request)


def _refused(request: ProfileRequest) -> tuple[dict[str, Any], NpError]:
    """The error record (as a failed round stores it) of a measurement the method refuses or that fails."""
    with pytest.raises(NpError) as caught:
        _profile(request)
    return error_record(caught.value), caught.value


def test_counts_honoured_and_every_figure_labelled(models: MlpModels, tmp_path: Path) -> None:
    request = request_for(models, tmp_path / "m1", {"num_executions": 9, "warmup": 2, "timeout": 60},
                          program_stats={"params": 83_786, "weight_bytes": 335_144})
    output = _profile(request)
    assert output.result_kind == "measured" and not output.partial
    doc = raw_document(request, output)
    assert len(doc["samples_ms"]) == 9 and len(doc["warmup_ms"]) == 2  # the raw sample counts
    assert doc["runs_done"] == doc["runs_asked"] == 9 and doc["warmup_done"] == 2

    by_type = {m.metric_type: m for m in output.metrics}
    assert set(by_type) == {"LATENCY", "MEMORY", "MODEL_WEIGHT_MEMORY", "PARAMS"}  # no MACs in program_stats
    assert any(w.startswith("MACS not given") for w in output.warnings)
    latency = by_type["LATENCY"]
    assert latency.unit == "ms" and latency.stat == "avg"
    assert latency.value == pytest.approx(statistics.mean(doc["samples_ms"]))
    assert "measured" in latency.source and "9 of 9" in latency.source and ET_VERSION in latency.source
    memory = by_type["MEMORY"]
    assert memory.unit == "MB" and memory.stat == "peak" and "above its baseline" in memory.source
    assert memory.value == pytest.approx(doc["memory"]["peak_delta_bytes"] / 2**20) and memory.value > 0
    assert by_type["MODEL_WEIGHT_MEMORY"].value == 335_144 and by_type["MODEL_WEIGHT_MEMORY"].unit == "B"
    assert "static count" in by_type["MODEL_WEIGHT_MEMORY"].source and "static" in by_type["PARAMS"].source

    latency_extras = output.extras["latency_ms"]
    for key in ("avg", "min", "max", "median", "p90", "p99", "stdev", "cov", "outliers"):
        assert key in latency_extras
    assert latency_extras["min"] <= latency_extras["median"] <= latency_extras["max"]
    mem = output.extras["memory"]
    assert mem["planned_activation_arena_bytes"] > 0 and "static" in mem["planned_activation_arena_source"]
    assert "after_execute_anon_delta_bytes" in mem and "peak_delta_bytes" in mem["definitions"]
    window = output.extras["measured_window"]
    assert set(window) == {"start", "end"} and window["start"] <= window["end"]

    prov = output.provenance
    assert prov["tool"] == "executorch runtime" and prov["tool_version"].startswith(ET_VERSION)
    assert prov["transport"] == "local subprocess" and prov["threads"] >= 1 and prov["cpu_model"]
    assert (prov["runs_done"], prov["runs_asked"], prov["warmup_done"], prov["timeout_s"]) == (9, 9, 2, 60.0)
    assert prov["hostname"] and prov["python"]
    assert output.timings["queue_wait_s"] == pytest.approx(0.0, abs=0.5)

    # the log lines the session prints from this output
    result = ProfileResult(measurement_id="m1", checkpoint="INPUT_MODEL", job="00_input_model", checkpoint_sha256="",
                           device="host", runtime="executorch", backend="xnnpack", method="on-device",
                           result_kind=output.result_kind, trigger="POSTHOC", status="SUCCESS", started_at="",
                           metrics=tuple(output.metrics), extras=output.extras, provenance=output.provenance)
    lines = metric_lines(result)
    assert lines[0].startswith("  Latency: ") and "(avg)" in lines[0] and "9 runs" in lines[0]
    assert lines[1].startswith("  Memory: ") and "peak" in lines[1]


def test_timeout_returns_the_runs_done_as_a_partial_result(models: MlpModels, tmp_path: Path) -> None:
    asked = 10**7  # the MLP runs in ~0.02 ms: ten million runs cannot finish in half a second
    request = request_for(models, tmp_path / "m2", {"num_executions": asked, "warmup": 1, "timeout": 0.5})
    output = _profile(request)
    assert output.partial is True
    doc = raw_document(request, output)
    assert doc["partial"] is True and "timeout" in doc["partial_reason"]
    assert 0 < doc["runs_done"] < asked and len(doc["samples_ms"]) == doc["runs_done"]
    assert output.provenance["runs_done"] == doc["runs_done"] and output.provenance["runs_asked"] == asked
    assert any(w.startswith("Partial result") and f"of {asked}" in w for w in output.warnings)
    assert output.extras["latency_ms"]["n"] == doc["runs_done"]
    assert doc["measure_ms"] < 5_000  # bounded by the timeout, not by the runs asked


@pytest.mark.heavy
def test_warm_start_forks_fresh_workers_with_the_same_memory_figures(models: MlpModels, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Local measurements fork their worker from np's warm process (torch imported once); the worker is still a
    process of its own, so its memory figures match a fresh process's; a warm process that dies is replaced."""
    import os
    import signal

    from np_optimizer.profiler.measure import warm

    options = {"num_executions": 5, "warmup": 1, "timeout": 60}
    forked = [_profile(request_for(models, tmp_path / f"w{i}", options)) for i in range(2)]
    assert {o.provenance["worker_start"].split(" ")[0] for o in forked} == {"forked"}
    process = warm._running[sys.executable].proc
    os.kill(process.pid, signal.SIGKILL)  # a warm process that died: the next measurement starts another
    process.wait()
    again = _profile(request_for(models, tmp_path / "w2", options))
    replacement = warm._running[sys.executable].proc
    assert again.provenance["worker_start"].startswith("forked") and replacement is not process
    monkeypatch.setenv("NP_MEASURE_WARM", "0")
    fresh = _profile(request_for(models, tmp_path / "f", options))
    assert fresh.provenance["worker_start"] == "a fresh process"
    peaks = [o.extras["memory"]["load_peak_delta_bytes"] for o in (*forked, again, fresh)]
    assert max(peaks) - min(peaks) <= 0.1 * max(peaks) + 2**20, peaks  # the same process, whatever its start
    warm.stop_warm_processes()  # what np does when it ends
    assert replacement.poll() is not None and not warm._running


def _bad_compiled(models: MlpModels, folder: Path, pte_bytes: bytes) -> tuple[Path, CompileResult]:
    """A host compile record whose model.pte holds other bytes: what a damaged or foreign .pte looks like."""
    folder.mkdir(parents=True)
    (folder / "model.pte").write_bytes(pte_bytes)
    return folder, dataclasses.replace(models.compiled, pte_sha256=None)


@pytest.mark.heavy
@pytest.mark.parametrize("case", ["ethos_u", "corrupt"])
def test_a_pte_the_runtime_cannot_load_gives_one_clear_error(models: MlpModels, tmp_path: Path,
                                                             tmp_path_factory: pytest.TempPathFactory,
                                                             case: str) -> None:
    if case == "ethos_u":
        ethos_dir, ethos = ethos_u_compiled(tmp_path_factory.getbasetemp() / "np-measure-ethos-u")
        data = (ethos_dir / str(ethos.pte_file)).read_bytes()
    else:
        data = bytearray((models.compiled_dir / str(models.compiled.pte_file)).read_bytes())
        data[4:8] = b"XXXX"  # the flatbuffer's file identifier (ET12)
        data = bytes(data)
    folder, compiled = _bad_compiled(models, tmp_path / "compiled", data)
    request = request_for(models, tmp_path / "m3", {"num_executions": 3}, compiled=compiled, compiled_dir=folder)
    error, exc = _refused(request)
    assert error["code"] == "NP-RUN-500"
    assert set(error) == {"code", "message", "hint", "kind"}
    for text in (error["message"], error["hint"]):
        assert text and "\n" not in text
    assert "cannot load model.pte" in error["message"]
    assert exc.context["artifacts"] == {"raw": "measurement.json"}  # the script's document is kept for the log lines
    doc = json.loads((request.work_dir / "measurement.json").read_text())
    assert doc["ok"] is False
    if case == "ethos_u":
        assert "EthosUBackend" in error["message"] and "mlia" in error["hint"]
        assert doc["error"]["kind"] == "backend_not_registered"
    else:
        assert doc["error"]["kind"] == "invalid_pte"


def test_an_ethos_u_device_is_refused_before_running(models: MlpModels, tmp_path: Path,
                                                     tmp_path_factory: pytest.TempPathFactory) -> None:
    ethos_dir, ethos = ethos_u_compiled(tmp_path_factory.getbasetemp() / "np-measure-ethos-u")
    request = request_for(models, tmp_path / "m4", {}, device="alif_e8", compiled=ethos, compiled_dir=ethos_dir)
    error, _exc = _refused(request)
    assert error["code"] == "NP-PRF-422"
    assert "ethos-u" in error["message"] and "mlia" in error["hint"]


def test_a_device_without_ssh_settings_is_refused(models: MlpModels, tmp_path: Path) -> None:
    error, _exc = _refused(request_for(models, tmp_path / "m5", {}, device="raspberry_pi_5"))
    assert error["code"] == "NP-PRF-424"
    assert "devices.yaml" in error["hint"]


def test_a_failed_compile_is_refused(models: MlpModels, tmp_path: Path) -> None:
    failed = dataclasses.replace(models.compiled, status="failed", reason="boom", pte_file=None)
    error, _exc = _refused(request_for(models, tmp_path / "m6", {}, compiled=failed))
    assert "boom" in error["message"]


def test_pte_reader_matches_executorch(models: MlpModels, tmp_path_factory: pytest.TempPathFactory) -> None:
    from executorch.exir._serialize._program import deserialize_pte_binary

    from np_optimizer.profiler.measure import measure_pte

    ethos_dir, ethos = ethos_u_compiled(tmp_path_factory.getbasetemp() / "np-measure-ethos-u")
    for path in (models.compiled_dir / str(models.compiled.pte_file), ethos_dir / str(ethos.pte_file)):
        ours = measure_pte.read_pte_info(str(path))["execution_plans"]
        theirs = deserialize_pte_binary(path.read_bytes()).program.execution_plan
        for mine, plan in zip(ours, theirs, strict=True):
            assert mine["name"] == plan.name and mine["delegates"] == [d.id for d in plan.delegates]
            assert mine["non_const_buffer_sizes"] == list(plan.non_const_buffer_sizes)
            assert len(mine["inputs"]) == len(plan.inputs)
    assert ours[0]["delegates"] == ["EthosUBackend"]
    assert models.compiled.planned_arena_bytes == sum(
        measure_pte.read_pte_info(str(models.compiled_dir / "model.pte"))["execution_plans"][0]
        ["non_const_buffer_sizes"])


def test_the_measuring_script_is_self_contained_and_shipped() -> None:
    import zipfile

    from np_optimizer.profiler.measure import measure_pte, script_archive

    package = Path(measure_pte.__file__).parent
    modules = sorted(package.glob("*.py"))
    assert len(modules) > 5
    for module in modules:
        tree = ast.parse(module.read_text(), feature_version=(3, 8))  # devices may have an old Python
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {str(node.module).split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.level == 0}
        assert "np_optimizer" not in imported, module.name
        assert imported <= set(sys.stdlib_module_names) | {"torch", "executorch", "numpy"}, module.name
    # shipped: a regular subpackage (in the wheel without package-data), packed whole into the zipapp
    assert "profiler/measure/measure_pte" not in REPO.joinpath("pyproject.toml").read_text()
    names = set(zipfile.ZipFile(script_archive()).namelist())
    assert names == {"__main__.py"} | {f"measure_pte/{m.name}" for m in modules}


def test_importing_the_method_stays_light() -> None:
    code = ("import sys; import np_optimizer.profiler.methods.on_device, np_optimizer.profiler.measure.device_queue, "
            "np_optimizer.profiler.measure.ssh, np_optimizer.profiler.measure.local, "
            "np_optimizer.profiler.measure.stats; "
            "heavy = [m for m in ('torch', 'executorch', 'numpy') if m in sys.modules]; assert not heavy, heavy")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_the_script_runs_from_any_folder(models: MlpModels, tmp_path: Path) -> None:
    # a copy alone in a folder, as on a remote device
    from np_optimizer.profiler.measure import ARCHIVE_NAME, script_archive

    shutil.copy(script_archive(), tmp_path / ARCHIVE_NAME)
    proc = subprocess.run([sys.executable, str(tmp_path / ARCHIVE_NAME), "--runs", "0",
                           str(models.compiled_dir / "model.pte")], capture_output=True, text=True, timeout=60)
    doc = json.loads(proc.stdout)
    assert proc.returncode == 2 and doc["error"]["kind"] == "usage"  # argument checks come before any import


@pytest.mark.heavy
def test_a_warm_process_started_ahead_is_the_one_measurements_fork_from(models: MlpModels, tmp_path: Path) -> None:
    """np run starts the warm process before its steps (start_warm, no waiting); the first measurement then uses
    that process instead of starting another."""
    from np_optimizer.profiler.measure import script_archive, warm

    warm.stop_warm_processes()
    warm.start_warm(sys.executable, script_archive())
    started = warm._running[sys.executable].proc
    output = _profile(request_for(models, tmp_path / "ahead", {"num_executions": 3, "warmup": 1, "timeout": 60}))
    assert output.provenance["worker_start"].startswith("forked")
    assert warm._running[sys.executable].proc is started
    warm.stop_warm_processes()
    assert started.poll() is not None


@pytest.mark.heavy
def test_a_removed_archive_starts_a_new_warm_process(models: MlpModels, tmp_path: Path) -> None:
    """A temp cleaner removes the script while the warm process runs: the next measurement (traced pass included)
    forks from a new warm process on the rebuilt archive, not from the old one that can no longer read it."""
    from np_optimizer.profiler.measure import script_archive, warm

    warm.stop_warm_processes()
    assert warm.warm_socket(sys.executable, script_archive()) is not None  # running, its imports done
    old = warm._running[sys.executable].proc
    script_archive().unlink()
    output = _profile(request_for(models, tmp_path / "gone", {"num_executions": 3, "warmup": 1, "timeout": 60,
                                                               "num_layer_executions": 2}))
    assert output.provenance["worker_start"].startswith("forked")
    assert "layer_times" in output.extras  # the traced pass ran in the forked worker
    assert warm._running[sys.executable].proc is not old and old.poll() is not None
    warm.stop_warm_processes()
