"""The measuring script as it is shipped: the zipapp of profiler/measure/measure_pte/, run for real by a fresh Python
on a tiny .pte, the way local.py and ssh.py run it. Also: it imports nothing of np (devices do not have np), and it
runs under the oldest Python it claims (3.8) when one is installed."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from np_optimizer.profiler.measure import ARCHIVE_NAME, script_archive
from tests.helpers import ET_VERSION


@pytest.fixture(scope="module")
def tiny_pte(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """relu(Linear(8, 4)) on a 2x8 input, lowered to XNNPACK by ExecuTorch directly (not by np's compiler)."""
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(8, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.linear(x))

    exported = torch.export.export(Tiny().eval(), (torch.randn(2, 8),))
    program = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch()
    path = tmp_path_factory.mktemp("tiny") / "tiny.pte"
    path.write_bytes(program.buffer)
    return path


def run_script(args: list[str], *, python: str = sys.executable) -> tuple[int, dict[str, Any]]:
    """Run `python <args>`; its exit code and the one JSON document it printed."""
    proc = subprocess.run([python, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1, (proc.stdout, proc.stderr[-2000:])
    return proc.returncode, dict(json.loads(lines[0]))


def test_the_archive_is_built_once_per_process() -> None:
    archive = script_archive()
    assert archive.name == ARCHIVE_NAME and script_archive() == archive
    archive.unlink()  # gone (a temp cleaner): built again
    assert script_archive().is_file()


@pytest.mark.heavy
@pytest.mark.parametrize("layout", ["archive", "archive --no-guard", "python -m"])
def test_the_script_measures_a_pte(tiny_pte: Path, layout: str) -> None:
    # the archive is what local.py and ssh.py run; -m runs the same package from np's own tree
    command = ["-m", "np_optimizer.profiler.measure.measure_pte"] if layout == "python -m" else [str(script_archive())]
    extra = ["--no-guard"] if layout.endswith("--no-guard") else []
    rc, doc = run_script([*command, str(tiny_pte), "--warmup", "2", "--runs", "5", *extra])
    assert rc == 0 and doc["ok"] is True and doc["exit_code"] == 0, doc.get("error")
    assert doc["schema"] == "np.measure_pte/1" and doc["config"]["guard"] is (not extra)
    assert len(doc["warmup_ms"]) == doc["warmup_done"] == 2 and len(doc["samples_ms"]) == doc["runs_done"] == 5
    assert doc["partial"] is False and doc["quick"]["min_ms"] == min(doc["samples_ms"])
    model = doc["model"]
    assert model["sha256"] == hashlib.sha256(tiny_pte.read_bytes()).hexdigest() and model["method"] == "forward"
    assert model["pte"]["execution_plans"][0]["delegates"] == ["XnnpackBackend"]
    assert doc["planned_memory"]["activation_arena_bytes"] >= 0
    assert doc["inputs"] == [{"shape": [2, 8], "dtype": "float32", "nbytes": 64, "source": "pte"}]
    assert doc["expected_inputs"] == [{"shape": [2, 8], "dtype": "float32"}]
    assert doc["outputs"] == [{"shape": [2, 4], "dtype": "float32", "nbytes": 32}]
    assert doc["memory"]["peak_delta_bytes"] > 0 and "peak_delta_bytes" in doc["memory"]["definitions"]
    assert doc["runtime"]["executorch_version"].startswith(ET_VERSION) and "XnnpackBackend" in doc["runtime"][
        "registered_backends"]
    assert doc["load"]["load_ms"] > 0 and doc["host"]["cpu_count"] >= 1
    assert doc["timestamps"]["measure_start"]["epoch"] <= doc["timestamps"]["measure_end"]["epoch"]


@pytest.mark.heavy
@pytest.mark.parametrize("args,kind,code", [
    (["--runs", "0"], "usage", 2),
    (["--bogus"], "usage", 2),
    (["--method", "nope"], "method_not_found", 5),
    (["--input-spec", "3x8:float32"], "input_error", 6),
])
def test_errors_keep_their_kind_and_exit_code(tiny_pte: Path, args: list[str], kind: str, code: int) -> None:
    rc, doc = run_script([str(script_archive()), str(tiny_pte), *args])
    assert rc == code and doc["exit_code"] == code and doc["ok"] is False
    assert doc["error"]["kind"] == kind and doc["error"]["message"]


def test_a_missing_file_is_file_not_found(tmp_path: Path) -> None:
    rc, doc = run_script([str(script_archive()), str(tmp_path / "missing.pte")])
    assert rc == 3 and doc["error"]["kind"] == "file_not_found" and "missing.pte" in doc["error"]["message"]


_IMPORT_ALL = """
import importlib, pkgutil, sys
import measure_pte
for m in pkgutil.iter_modules(measure_pte.__path__):
    importlib.import_module("measure_pte." + m.name)
assert measure_pte.__file__.startswith(sys.argv[1]), measure_pte.__file__
print(" ".join(sorted(sys.modules)))
"""


def test_the_script_imports_nothing_of_np_and_nothing_heavy() -> None:
    # np is installed in this venv: an import of it from the script would succeed, so look at sys.modules
    archive = str(script_archive())
    code = f"import sys; sys.path.insert(0, sys.argv[1]); {_IMPORT_ALL}"
    proc = subprocess.run([sys.executable, "-I", "-c", code, archive], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    loaded = proc.stdout.split()
    assert "measure_pte.supervisor" in loaded and "measure_pte.worker" in loaded
    assert not [m for m in loaded if m.split(".")[0] in ("np_optimizer", "torch", "executorch", "numpy")]


@pytest.mark.heavy
def test_the_runtime_comes_without_the_exporter() -> None:
    # the pybindings' `portable_lib` wrapper imports executorch.exir (3 s of CPU in every measuring process): the
    # script imports the extension itself, and the runtime it gets still has XNNPACK
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from measure_pte.load import import_runtime; "
            "r = import_runtime(None); print(r.info['api'], 'XnnpackBackend' in r.registered, "
            "'executorch.exir' in sys.modules)")
    proc = subprocess.run([sys.executable, "-I", "-c", code, str(script_archive())], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["executorch.extension.pybindings._C", "True", "False"]


def _old_python() -> str | None:
    """A Python older than 3.10 (the script claims 3.8), from $NP_TEST_OLD_PYTHON or pyenv."""
    candidates = [os.environ.get("NP_TEST_OLD_PYTHON", "")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.[89].*/bin/python")))
    candidates += [shutil.which(name) or "" for name in ("python3.8", "python3.9")]
    for python in filter(None, candidates):
        probe = subprocess.run([python, "-c", "import sys; assert sys.version_info < (3, 10)"], capture_output=True)
        if probe.returncode == 0:
            return python
    return None


def test_an_old_python_without_torch_runs_the_script(tiny_pte: Path) -> None:
    python = _old_python()
    if python is None:
        pytest.skip("no Python 3.8 or 3.9 here (set NP_TEST_OLD_PYTHON)")
    # supervisor, worker, document and the .pte reader all run; the worker stops at `import torch`
    rc, doc = run_script([str(script_archive()), str(tiny_pte)], python=python)
    assert rc == 4 and doc["error"]["kind"] == "runtime_missing" and python in doc["error"]["message"]
    assert doc["model"]["pte"]["execution_plans"][0]["delegates"] == ["XnnpackBackend"] and doc["host"]["hostname"]
    rc, doc = run_script([str(script_archive()), str(tiny_pte), "--no-guard"], python=python)
    assert rc == 4 and doc["error"]["kind"] == "runtime_missing"
